"""The command palette (ctrl+p): every action of the app (`action_commands`, shown through
Textual's system commands), ops, implementations of the current op, and sessions by name.

Each provider reads the app's plain data (`palette_items(kind)`) and answers a choice by
posting a `Choice` message to the app, like any widget would; an action command runs the
app's action, as its key does.
"""

from __future__ import annotations

from functools import partial

from textual.app import SystemCommand
from textual.command import DiscoveryHit, Hit, Hits, Provider

from . import sessions_io
from .catalog import ACTIONS
from .messages import Choice
from .panes import PANES


class _ListProvider(Provider):
    """Items are (text, help, kind, value) from the app; a pick posts Choice(kind, value)."""

    KIND = ""

    def _items(self) -> list[tuple[str, str, str, object]]:
        return list(self.app.palette_items(self.KIND))

    def _command(self, kind: str, value: object):
        return partial(self.app.post_message, Choice(kind, value))

    async def discover(self) -> Hits:
        for text, help_text, kind, value in self._items():
            yield DiscoveryHit(text, self._command(kind, value), help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for text, help_text, kind, value in self._items():
            score = matcher.match(text)
            if score > 0:
                yield Hit(score, matcher.highlight(text), self._command(kind, value), help=help_text)


class OpsProvider(_ListProvider):
    KIND = "op"


class ImplsProvider(_ListProvider):
    KIND = "impl"


class SessionsProvider(_ListProvider):
    KIND = "session"


def action_commands(app) -> list[SystemCommand]:
    """Every action of the app as a palette command (title with its key, help line), from the
    app's public state: `ws` (the Workspace), `running`, `data_dir` and its action_* methods."""
    ws = app.ws
    run = (lambda action: partial(app.run_action, action))
    # run or cancel, whichever can be done now (the footer dims the other; the palette never
    # offers cancel with no run in progress)
    commands = [SystemCommand("Cancel the run (escape)", "stop the run in progress within 3 s", run("cancel"))] \
        if getattr(app, "running", False) else [
        SystemCommand("Run the run on screen (r)", "check and time its implementations", run("run")),
        SystemCommand("Run anyway (F)", "run this run, rows estimated too large included", run("force_run")),
        SystemCommand("Run every run of the session (R)", "one after another, in order; escape cancels the rest",
                      run("run_all"))]
    commands += [
        SystemCommand("Save the session (ctrl+s)", "a shipped one is saved as your copy", run("save")),
        SystemCommand("Open a session (ctrl+o)", "a file, or a shipped or saved session", run("open")),
        SystemCommand("Edit the spec: shape, dtype, actions (e)", "shape, dtype, actions and sweep of the run", run("edit_spec")),
        SystemCommand("Edit the sweep", "the swept parameters and their values", run("edit_spec('sweep')")),
        SystemCommand("Toggle the sidebar (b)", "give the panes the whole width", run("toggle_sidebar")),
        SystemCommand("Next chart metric (m)", "time, GB/s, TFLOP/s", run("next_metric")),
        SystemCommand("Help: keys and marks (?)", "every key, and what each mark on screen means", run("help")),
    ]
    commands += [SystemCommand(f"Pane: {pane.title} ({pane.key})", f"show the {pane.title} pane",
                               run(f"pane('{pane.id}')")) for pane in PANES]
    commands += _run_commands(ws, run)
    commands += _spec_commands(ws, run)
    original = sessions_io.shipped_original(ws.path, app.data_dir)
    if original is not None:
        commands.append(SystemCommand(f"Open shipped original: {original.stem}",
                                      f"{original} (your copy stays as it is)", run("open_original")))
    return commands


def _run_commands(ws, run) -> list[SystemCommand]:
    commands = []
    if ws.index is not None:
        title = f"run {ws.index}: {dict(ws.run_titles()).get(ws.index, '')}"
        commands += [
            SystemCommand(f"Delete {title} (d)", "u brings it back", run(f"delete_run({ws.index})")),
            SystemCommand(f"Duplicate {title} (c)", "a copy right after it, without results",
                          run(f"duplicate_run({ws.index})")),
            SystemCommand(f"Move {title} up (K)", "reorder the session's runs", run(f"move_run(-1, {ws.index})")),
            SystemCommand(f"Move {title} down (J)", "reorder the session's runs", run(f"move_run(1, {ws.index})")),
        ]
    if ws.removed:
        last = ws.removed[-1]
        commands.append(SystemCommand(f"Undo delete of run {last.index}: {last.run.op} (u)",
                                      "put the deleted run back, with its results", run("undo_delete")))
    return commands


def _spec_commands(ws, run) -> list[SystemCommand]:
    op = ws.op
    if op is None:
        return []
    commands = [SystemCommand(f"dtype: {dtype}", f"run {op.name} in {dtype}", run(f"set_dtype('{dtype}')"))
                for dtype in op.dtypes if dtype != (ws.run.dtype or op.default_dtype)]
    commands += [SystemCommand(f"action: {'untick' if a in ws.run.actions else 'tick'} {a}",
                               f"{a} in this run's actions", run(f"toggle_action('{a}')")) for a in ACTIONS]
    return commands
