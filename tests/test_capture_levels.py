"""workbench/engine/capture.level_of: how a child's log line is classed (the replay prints
warnings and errors, and info lines only with -v)."""

from __future__ import annotations

import pytest

from workbench.engine.measure.capture import level_of


@pytest.mark.parametrize("line, level", [
    ("Current thread 0x00007fd9edbf5b80 (most recent call first):", "warning"),
    ("Thread 0x00007f3c1a7fc640 (most recent call first):", "warning"),
    ('  File "/x/kernels/sleep.py", line 81 in run', "warning"),
    ("Fatal Python error: Segmentation fault", "error"),
    ("UserWarning: TF32 is off", "warning"),
    ("compiled 3 kernels", "info"),
    ('File "/x/y.py", line 3 in f', "info"),  # not faulthandler's indented frame line
])
def test_faulthandler_dumps_are_warnings_so_a_headless_replay_prints_them(line, level):
    assert level_of(line) == level
