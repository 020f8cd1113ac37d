"""Phase marks for finding where wall time goes, across the front end and its workers.

With `WORKBENCH_TRACE=PATH` in the environment (workers inherit it), each process appends one
line per mark to PATH: `<time.monotonic() s> <pid> <phase>`. CLOCK_MONOTONIC is one clock for
every process of a Linux host, so the lines of the TUI, the zygote, the timing worker and the
build worker sort into one timeline (benchmarks/stages/_overhead_tui.py collects it). Unset (the
default), a mark costs one environment lookup and writes nothing. Each line is one `write` to
an O_APPEND file, so lines of processes writing at once never interleave within a line.
"""

from __future__ import annotations

import os
import time

ENV = "WORKBENCH_TRACE"


def mark(phase: str) -> None:
    """Append `phase` with the time and this process's pid to $WORKBENCH_TRACE (if set)."""
    path = os.environ.get(ENV)
    if not path:
        return
    line = f"{time.monotonic():.6f} {os.getpid()} {phase}\n".encode()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)
    except OSError:  # a trace must never fail what it traces
        pass


def read(path: str) -> list[tuple[float, int, str]]:
    """The marks of a trace file, in time order: (monotonic s, pid, phase).

    Sorted on the time alone and stably: two marks of one process in the same microsecond keep
    the order they were written in (sorting the whole tuple put "built" before "start")."""
    marks = []
    try:
        text = open(path, encoding="utf-8", errors="replace").read()
    except OSError:
        return []
    for line in text.splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3:
            try:
                marks.append((float(parts[0]), int(parts[1]), parts[2]))
            except ValueError:
                continue
    return sorted(marks, key=lambda m: m[0])
