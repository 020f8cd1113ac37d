"""Run controls: Run and Cancel buttons, a progress bar and what is running now.

Attributes down: `running`, `status`, and `progress(done, total)`. Messages up: RunRequested,
CancelRequested (the same as the `r` and `escape` keys).
"""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.reactive import reactive
from textual.widgets import Button, ProgressBar, Static

from .messages import CancelRequested, RunRequested


class KeyButton(Button):
    """A button for the mouse; the keyboard has its key (r, escape), so tab passes it by: as a
    tab stop it showed no heavy border and j, k and the arrows did nothing there."""

    can_focus = False


class RunBar(Horizontal):
    """One line: [Run] [Cancel] progress  status."""

    running: reactive[bool] = reactive(False, init=False)
    status: reactive[str] = reactive("loading ops…", init=False)

    def compose(self) -> ComposeResult:
        yield KeyButton("Run r", id="run", compact=True, variant="primary")
        yield KeyButton("Cancel esc", id="cancel", compact=True, variant="error", disabled=True)
        yield ProgressBar(total=1, id="progress", show_eta=False, show_percentage=False)
        yield Static(self.status, id="run-status")

    def progress(self, done: int, total: int | None) -> None:
        self.query_one(ProgressBar).update(total=total, progress=done)

    def watch_running(self, running: bool) -> None:
        self.query_one("#run", Button).disabled = running
        self.query_one("#cancel", Button).disabled = not running
        self.set_class(running, "-running")

    def watch_status(self, status: str) -> None:
        self.query_one("#run-status", Static).update(status)

    @on(Button.Pressed, "#run")
    def _run(self, event: Button.Pressed) -> None:
        event.stop()
        self.post_message(RunRequested())

    @on(Button.Pressed, "#cancel")
    def _cancel(self, event: Button.Pressed) -> None:
        event.stop()
        self.post_message(CancelRequested())
