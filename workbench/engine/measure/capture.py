"""A child's stdout and stderr become Log events: nothing a library prints reaches the terminal.

The child points file descriptors 1 and 2 at a log file the parent gave it (so C libraries,
ninja, the profiler's USDT lines and faulthandler's dump after a segfault are caught too); the
parent tails that file and turns complete lines into Log events. A file, unlike a pipe read by
a thread in the child, keeps the last lines of a child that crashed.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

MAX_LINE_CHARS = 2000
ROW_MARK = "\x1ewb-row "  # a line the child writes before each row: later lines belong to that row
# Kineto (torch.profiler) prints a USDT probe line at every profiler start and stop; it says
# nothing about the kernel, so it is dropped rather than shown as a Log line on every row.
NOISE = re.compile(r"^USDT:.*\] profiler_(start|stop)\s*$")


def redirect_output(log_path: str) -> None:
    """Child side: fds 1 and 2 (and sys.stdout/sys.stderr) append to `log_path`, line-buffered."""
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(line_buffering=True)  # type: ignore[union-attr]
        except (AttributeError, ValueError):
            pass


def mark_row(index: int) -> None:
    """Child side: say in the log that the lines after this one belong to row `index` of the job.

    The parent reads the log on its own schedule, so only an in-band mark attributes lines
    exactly (a crash dump must land on the row that crashed, not on the one before).
    """
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (AttributeError, ValueError):
            pass
    os.write(1, f"{ROW_MARK}{index}\n".encode())


def row_mark(line: str) -> int | None:
    """The row index of a mark line, or None for an ordinary line."""
    if line.startswith(ROW_MARK):
        try:
            return int(line[len(ROW_MARK):])
        except ValueError:
            return None
    return None


# faulthandler's dump (a timed-out row's stacks, engine/supervisor.py; a crash's): a thread's
# header and its frames, shown as warnings so that a headless replay prints them too
FAULTHANDLER_LINE = re.compile(r'^(?:(?:Current thread|Thread) 0x[0-9a-f]+(?: \(most recent call first\))?:'
                               r'|  File ".*", line \d+ in \S+)')


def level_of(line: str) -> str:
    """info | warning | error, guessed from the text (libraries do not tag their lines)."""
    if FAULTHANDLER_LINE.match(line):
        return "warning"
    lowered = line.lower()
    if any(w in lowered for w in ("error", "fatal", "traceback", "segmentation fault", "aborted")):
        return "error"
    if "warn" in lowered:
        return "warning"
    return "info"


class LogTail:
    """Parent side: read the complete lines appended to a child's log file since the last read."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._offset = 0
        self._partial = b""

    def read_lines(self, final: bool = False) -> list[str]:
        """New complete lines (and, when `final`, the unterminated last one); empty lines dropped."""
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self._offset)
                chunk = fh.read()
        except FileNotFoundError:
            return []
        self._offset += len(chunk)
        data = self._partial + chunk
        *lines, self._partial = data.split(b"\n")
        if final and self._partial:
            lines.append(self._partial)
            self._partial = b""
        text = (raw.decode("utf-8", "replace").rstrip("\r") for raw in lines)
        return [line[:MAX_LINE_CHARS] for line in text if line.strip() and not NOISE.match(line)]
