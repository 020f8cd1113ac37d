"""A lost terminal: SIGHUP, SIGTERM, or the tty hung up under the app (tmux kill-session).
The run is cancelled, the edits autosaved, and the process exits (by force if a clean exit
hangs on a dead tty)."""

from __future__ import annotations

import os
import select
import signal
import threading

HANGUP_SIGNALS = (signal.SIGHUP, signal.SIGTERM)
TTY_CHECK_S = 1.0    # how often the terminal is checked for a hang-up (tmux kill-session)
EXIT_GRACE_S = 5.0   # after a hang-up, the process ends by force if a clean exit takes longer


class TerminalMixin:
    """Mixed into WorkbenchApp: uses its `stop_run`, `autosave_now`, `ws` and `exit`."""

    _hung_up = False

    def _watch_terminal(self) -> None:
        import asyncio

        loop = asyncio.get_running_loop()
        for sig in HANGUP_SIGNALS:
            try:
                loop.add_signal_handler(sig, self.hang_up, sig.name)
            except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, Windows
                pass
        self.set_interval(TTY_CHECK_S, self._check_terminal)

    def _unwatch_terminal(self) -> None:
        import asyncio

        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        for sig in HANGUP_SIGNALS:
            try:
                loop.remove_signal_handler(sig)
            except (NotImplementedError, RuntimeError, ValueError):
                pass

    def _check_terminal(self) -> None:
        fd = getattr(self._driver, "fileno", None)
        if terminal_lost(fd if isinstance(fd, int) else None):
            self.hang_up("terminal lost")

    def hang_up(self, why: str = "SIGHUP") -> None:
        """The terminal is gone: cancel the run, save the edits, exit (by force if it hangs)."""
        if self._hung_up:
            return
        self._hung_up = True
        self.stop_run()
        if self.ws.session.runs:
            self.autosave_now()
        if not self.is_headless:
            _exit_later(EXIT_GRACE_S)
        self.exit(129 if why == "SIGHUP" else 143 if why == "SIGTERM" else 1)


def terminal_lost(fd: int | None) -> bool:
    """True when `fd` (the terminal's input) has hung up: a pty whose master closed, EOF."""
    if fd is None:
        return False
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        events = poller.poll(0)
    except (OSError, ValueError):
        return True
    return any(mask & (select.POLLHUP | select.POLLERR | select.POLLNVAL) for _, mask in events)


def _exit_later(seconds: float) -> None:
    """End the process after `seconds` unless it ended by itself (a write to a dead tty can block)."""
    def watchdog() -> None:
        threading.Event().wait(seconds)
        os._exit(1)
    threading.Thread(target=watchdog, name="hangup-watchdog", daemon=True).start()
