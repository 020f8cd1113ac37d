"""The innermost frame of a hung worker's stack dump (engine/supervisor.innermost_frame): what a
timed-out row's error names. The dump is faulthandler's format; no process is started here."""

from workbench.engine.supervisor import innermost_frame

DUMP = '''Thread 0x00007f2ba9f526c0 (most recent call first):
  File "/usr/lib/python3.12/threading.py", line 331 in wait
  File "/usr/lib/python3.12/threading.py", line 1010 in _bootstrap

Current thread 0x00007f2baebe7b80 (most recent call first):
  File "/opt/site/torch/utils/file_baton.py", line 43 in wait
  File "/opt/site/torch/utils/cpp_extension.py", line 2201 in _jit_compile
  File "/work/kernels/softmax.py", line 312 in _build
'''


def test_the_frame_is_the_signalled_threads_innermost():
    assert innermost_frame(DUMP) == "/opt/site/torch/utils/file_baton.py:43 in wait"


def test_without_a_current_thread_the_main_thread_listed_last_is_taken():
    """The signal landed on a native (CUDA) thread: no "Current thread" block."""
    dump = DUMP.replace("Current thread", "Thread")
    assert innermost_frame(dump) == "/opt/site/torch/utils/file_baton.py:43 in wait"


def test_no_dump_no_frame():
    assert innermost_frame("") is None
    assert innermost_frame("Thread 0x1 (most recent call first):\n") is None


def test_a_block_without_a_python_frame_is_passed_over():
    """A thread in C is listed with no frame; the next block in the order of preference is taken."""
    dump = DUMP.replace("Current thread", "Thread") + "\nThread 0x00007f2b00000001 (most recent call first):\n  <no Python frame>\n"
    assert innermost_frame(dump) == "/opt/site/torch/utils/file_baton.py:43 in wait"
    signalled_in_c = DUMP + "\nCurrent thread 0x00007f2b00000002 (most recent call first):\n  <no Python frame>\n"
    assert innermost_frame(signalled_in_c.replace("Current thread 0x00007f2baebe7b80", "Thread 0x00007f2baebe7b80")) \
        == "/opt/site/torch/utils/file_baton.py:43 in wait"
