"""How a replay is stopped: SIGINT (Ctrl-C), SIGTERM (`timeout`, `kill`, a batch scheduler) and
SIGHUP (a closed SSH session) all do the same thing.

The first signal sets the engine's stop flag (run_plan cancels within 3 s and returns the partial
document) and is remembered, so the command can write that document with `cancel_signal` and exit
128 + the signal number (130, 143, 129: the shell's convention). A second signal raises `Aborted`
at once: the caller writes what finished so far and exits the same way.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from dataclasses import dataclass
from typing import Iterator

from workbench.cli.common import EXIT_SIGNAL_BASE

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Aborted(BaseException):
    """A second stop signal arrived while the run was already stopping. A BaseException, as
    KeyboardInterrupt is, so that no `except Exception` on the way up swallows it."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@dataclass
class Stopped:
    """The signal that stopped the run (None while none has)."""

    signum: int | None = None

    @property
    def name(self) -> str | None:
        return signal.Signals(self.signum).name if self.signum is not None else None

    @property
    def exit_code(self) -> int | None:
        """128 + the signal number, as a shell reports a process a signal ended."""
        return EXIT_SIGNAL_BASE + self.signum if self.signum is not None else None


@contextlib.contextmanager
def stop_on_signals(stop: threading.Event) -> Iterator[Stopped]:
    """While inside: the first of SIGINT/SIGTERM/SIGHUP sets `stop`, a second raises Aborted.
    The previous handlers come back on the way out. Outside the main thread (where Python
    cannot install handlers) nothing is installed."""
    stopped = Stopped()
    if threading.current_thread() is not threading.main_thread():
        yield stopped
        return

    def handler(signum, frame):
        if stop.is_set():
            raise Aborted(signum)
        stopped.signum = signum
        stop.set()

    previous = {signum: signal.signal(signum, handler) for signum in STOP_SIGNALS}
    try:
        yield stopped
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)
