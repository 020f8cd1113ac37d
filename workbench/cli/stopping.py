"""How a replay is stopped: SIGINT (Ctrl-C), SIGTERM (`timeout`, `kill`, a batch scheduler) and
SIGHUP (a closed SSH session) all do the same thing.

The first signal sets the engine's stop flag (run_plan cancels within 3 s and returns the partial
document) and is remembered, so the command can write that document with `cancel_signal` and exit
128 + the signal number (130, 143, 129: the shell's convention). A second signal raises `Aborted`
at once: the caller writes what finished so far and exits the same way. The same signal again
within DUPLICATE_S of the first is the same request, not a second one: GNU `timeout` sends its
SIGTERM to the command and then to its own process group, which the command is in, so one
timeout arrives as two (`timeout 300 workbench --replay lecture06-gelu`), which would abort the
run and leave the row being timed out of the document.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from dataclasses import dataclass
from typing import Iterator

from workbench.cli.common import EXIT_SIGNAL_BASE
from workbench.trace import mark

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
DUPLICATE_S = 0.1  # GNU timeout's two kill() calls come microseconds apart; a person's two Ctrl-C do not


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
    at: float | None = None  # time.monotonic() of the first signal

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
        now = time.monotonic()
        if stop.is_set():
            if signum == stopped.signum and stopped.at is not None and now - stopped.at < DUPLICATE_S:
                return  # the first one again (timeout's signal to the process group)
            raise Aborted(signum)
        stopped.signum, stopped.at = signum, now
        stop.set()
        mark(f"stop: {signal.Signals(signum).name} handled, the run is stopping")  # WORKBENCH_TRACE only

    previous = {signum: signal.signal(signum, handler) for signum in STOP_SIGNALS}
    try:
        yield stopped
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)
