"""The spawn target of every child. It imports only the standard library and engine/capture.py,
so that fds 1 and 2 are redirected, TRITON_INTERPRET is decided and the child is tied to its
parent's life before torch, Triton or any kernel module is imported. Then the child warms up
(torch, CUDA, the registry) and waits for its job, which arrives pickled as bytes over a pipe:
a cold child gets it at once, a spare (engine/supervisor.py) when the next (run, impl) needs it.
"""

from __future__ import annotations

import faulthandler
import os
import pickle
import signal
import warnings
from typing import Any

from workbench.engine.capture import redirect_output

PR_SET_PDEATHSIG = 1
SIGKILL = 9


def die_with_parent() -> None:
    """Linux: the kernel kills this child if the thread that started it goes (a killed TUI)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, SIGKILL)
    except (OSError, AttributeError):  # not Linux: the parent's cleanup still kills children
        pass


def child_entry(log_path: str, interpret: bool, plugin_paths: tuple[str, ...], device: str, conn: Any,
                job_conn: Any, stop: Any) -> None:
    """Redirect output, set or clear TRITON_INTERPRET, warm up (import torch, discover the
    registry, initialise CUDA when `device` is cuda), say ("warm", None), then wait for the job
    (pickled bytes on `job_conn`) and run it (engine/child.py). A child started ahead of need
    (the supervisor's spare) waits here; a closed `job_conn` means no job: it just leaves."""
    # Ctrl+C in a terminal reaches the whole process group: the parent cancels (stop flag, then
    # kill at 2 s); a child that also took the SIGINT printed a half traceback into the log.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    redirect_output(log_path)
    faulthandler.enable()  # a segfault prints the Python stack into the log before dying
    die_with_parent()
    if interpret:
        os.environ["TRITON_INTERPRET"] = "1"  # before any kernel module is imported
        # numpy warns when exp overflows to inf; the kernels rely on it (GeLU's tanh through exp,
        # kernels/gelu.py), so the warning on every interpreted row is noise, not a finding.
        warnings.filterwarnings("ignore", message="overflow encountered in exp", category=RuntimeWarning,
                                module="triton.runtime.interpreter")
    else:  # compiled Triton (GPU, PTX) even when the caller's environment had it set
        os.environ.pop("TRITON_INTERPRET", None)
    from workbench.engine.child import child_main, prepare

    prepared = prepare(plugin_paths, device)
    try:
        conn.send(("warm", None))
        job_bytes = job_conn.recv_bytes()
    except (EOFError, OSError):  # the parent closed the pipes: no job for this child
        return
    job = pickle.loads(job_bytes)
    child_main(job, conn, stop, prepared)
