"""The workbench app: ops, implementations and spec on the left, result panes on the right.

Start it with `run(session_path, options)` (the CLI does). The first frame comes before torch,
Triton or the kernels are imported: a worker discovers the ops and probes the machine after it.
Runs go through the engine's `run_plan` in a thread worker; its events come back as messages.
"""

from __future__ import annotations

import os
import select
import signal
import threading
from pathlib import Path
from typing import Any, Callable

from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Footer, Label, Static, TabbedContent, TabPane

from . import sessions_io
from .commands import ImplsProvider, OpsProvider, SessionsProvider
from .dialogs import ConfirmScreen, HelpScreen, OpenScreen
from .editor import EditorMixin
from .keys import LIST_KEYS
from .messages import LoadFailed, Loaded, SessionOpened
from .pane_log import LogPane
from .pane_profile import ProfilePane
from .pane_ptx import PtxPane
from .pane_timing import TimingPane
from .pane_traffic import TrafficPane
from .run_bar import RunBar
from .runner import REFRESH_S, RunnerMixin
from .sidebar import ImplPanel, OpList
from .spec_editor import SpecEditor
from .workspace import Workspace

MIN_SIZE = (60, 20)
HANGUP_SIGNALS = (signal.SIGHUP, signal.SIGTERM)
TTY_CHECK_S = 1.0    # how often the terminal is checked for a hang-up (tmux kill-session)
EXIT_GRACE_S = 5.0   # after a hang-up, the process ends by force if a clean exit takes longer
GENERAL_KEYS = [Binding("ctrl+p", "palette", "Command palette: ops, implementations, sessions"),
                Binding("tab", "focus_next", "Next field (shift+tab: previous)"),
                Binding("space", "toggle", "Tick or untick an implementation or action"),
                Binding("enter", "select", "Pick the highlighted run or op"),
                Binding("ctrl+q", "quit_now", "Quit (asks if a run is active)")]
WIDE = 140
PANES = ("timing", "profile", "ptx", "traffic", "log")
PANE_TITLES = {"timing": "Timing", "profile": "Profile", "ptx": "PTX", "traffic": "Traffic", "log": "Log"}
PANE_FOCUS = {"timing": "#results-table", "profile": "#profile-table", "ptx": "#ptx-scroll",
              "traffic": "#traffic-table", "log": "LogPane"}


class WorkbenchApp(EditorMixin, RunnerMixin, App):
    CSS_PATH = "app.tcss"
    TITLE = "workbench"
    COMMANDS = App.COMMANDS | {OpsProvider, ImplsProvider, SessionsProvider}
    BINDINGS = [
        Binding("r", "run", "Run"),
        Binding("F", "force_run", "Run anyway (rows too large too)", show=False),
        Binding("escape", "cancel", "Cancel"),
        Binding("ctrl+s", "save", "Save"),
        Binding("ctrl+o", "open", "Open"),
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("b", "toggle_sidebar", "Sidebar"),
        Binding("q", "quit", "Quit"),
        *(Binding(str(i), f"pane('{p}')", PANE_TITLES[p], show=False)
          for i, p in enumerate(PANES, start=1)),
    ]

    def __init__(self, session_path: Path | None = None, options: Any = None, *,
                 engine: Callable[..., dict] | None = None,
                 catalog_loader: Callable[..., Any] | None = None,
                 opener: Callable[..., sessions_io.Opened] | None = None,
                 data_dir: Path | None = None) -> None:
        super().__init__()
        _start_resource_tracker()
        self.ws = Workspace()
        self._session_arg, self._options = session_path, options
        self._engine, self._catalog_loader, self._opener = engine, catalog_loader, opener
        self.data_dir = data_dir or sessions_io.data_dir()
        self._init_runner()

    # -- layout -----------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Static("workbench · loading ops…", id="title-bar")
        with Horizontal(id="main"):
            with VerticalScroll(id="sidebar"):
                yield Label("Op", classes="section")
                yield OpList("loading ops…", id="op-list", compact=True)
                yield Label("Implementations", classes="section")
                yield ImplPanel(id="impls")
                yield Label("Spec", classes="section")
                yield SpecEditor(id="spec")
            with TabbedContent(id="panes", initial="timing"):
                for number, (pane_id, pane) in enumerate(self._panes(), start=1):
                    with TabPane(f"{number} {PANE_TITLES[pane_id]}", id=pane_id):
                        yield pane
        yield RunBar(id="run-bar")
        yield Static("", id="too-small")
        yield Footer(compact=True)

    @staticmethod
    def _panes():
        return (("timing", TimingPane()), ("profile", ProfilePane()), ("ptx", PtxPane()),
                ("traffic", TrafficPane()), ("log", LogPane()))

    def on_mount(self) -> None:
        self._fit(self.size.width, self.size.height)
        self.set_interval(REFRESH_S, self.flush_results)
        self.call_after_refresh(self._load)
        if not self.is_headless:
            self._watch_terminal()

    def on_unmount(self) -> None:
        self.stop_run()
        if self._autosave_timer is not None:
            self.autosave_now()
        self._unwatch_terminal()

    # -- a lost terminal: SIGHUP, SIGTERM, or the tty hung up under us ---------------------
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
        if terminal_lost(_terminal_fd(self)):
            self.hang_up("terminal lost")

    def hang_up(self, why: str = "SIGHUP") -> None:
        """The terminal is gone: cancel the run, save the edits, exit (by force if it hangs)."""
        if getattr(self, "_hung_up", False):
            return
        self._hung_up = True
        self.stop_run()
        if self.ws.session.runs:
            self.autosave_now()
        if not self.is_headless:
            _exit_later(EXIT_GRACE_S)
        self.exit(129 if why == "SIGHUP" else 143 if why == "SIGTERM" else 1)

    def on_resize(self, event) -> None:
        self._fit(event.size.width, event.size.height)

    def _fit(self, width: int, height: int) -> None:
        small = width < MIN_SIZE[0] or height < MIN_SIZE[1]
        self.set_class(small, "-too-small")
        self.set_class(width >= WIDE, "-wide")
        self.query_one("#too-small", Static).update(
            f"Terminal too small ({width}×{height}).\n"
            f"workbench needs at least {MIN_SIZE[0]}×{MIN_SIZE[1]}: enlarge the window.")

    # -- loading ----------------------------------------------------------------------------
    @work(thread=True, exit_on_error=False, group="load")
    def _load(self) -> None:
        """Import the ops, probe the machine, read the session: all after the first frame."""
        try:
            catalog = (self._catalog_loader or _load_catalog)(self._kernels(), self._device())
        except Exception as exc:  # shown as a notification and a Log line, never a traceback
            self.post_message(LoadFailed(f"{type(exc).__name__}: {exc}"))
            return
        self.post_message(Loaded(catalog))
        try:
            opened = self._open(self._session_arg, catalog.gpu)
        except Exception as exc:
            # The file is left as it is (a save goes elsewhere); the ops are there to start afresh.
            text, where = str(exc), self._session_arg
            self.post_message(LoadFailed(f"{where}: {text}" if where and str(where) not in text else text))
            self.post_message(SessionOpened(sessions_io.BLANK, None, None,
                                            ("starting an empty session: pick an op (+ ...) to add a run",)))
            return
        self.post_message(SessionOpened(opened.session, opened.path, opened.results, opened.notes))

    def _open(self, path: Path | None, gpu: bool) -> sessions_io.Opened:
        if self._opener is not None:
            return self._opener(path, gpu)
        return sessions_io.open_session(path, kernels=self._kernels(), has_cuda=gpu,
                                        data=self.data_dir)

    def _kernels(self) -> list[str]:
        return [str(p) for p in getattr(self._options, "kernels", None) or ()]

    def _device(self) -> str:
        return getattr(self._options, "device", None) or "auto"

    def on_loaded(self, message: Loaded) -> None:
        self.ws.catalog = message.catalog
        self.run_bar.status = "ready"
        self.log_pane.add(f"machine: {message.catalog.machine}")

    def on_load_failed(self, message: LoadFailed) -> None:
        self.run_bar.status = "could not load"
        self._run_pending, self._session_shown = False, True
        self.report(message.error)

    async def on_session_opened(self, message: SessionOpened) -> None:
        self.ws.open(message.session, message.path, message.results)
        if not self.running:
            self.run_bar.status = "ready"
        for note in message.notes:
            self.report(note, "warning" if "not restored" in note else "information")
        await self.show_run()
        if self.focused is None or self.focused.id == "sidebar":
            self.query_one(OpList).focus()
        self.run_if_pending()

    def report(self, text: str, severity: str = "error") -> None:
        """A notification and a Log line (never a traceback on screen)."""
        self.notify(text, severity=severity, timeout=6 if severity == "error" else 3)
        self.log_pane.add(text, {"information": "info"}.get(severity, severity))

    # -- widgets ----------------------------------------------------------------------------
    @property
    def run_bar(self) -> RunBar:
        return self.query_one(RunBar)

    @property
    def log_pane(self) -> LogPane:
        return self.query_one(LogPane)

    def title_text(self) -> str:
        where = str(self.ws.path) if self.ws.path else "unsaved"
        machine = self.ws.catalog.machine if self.ws.catalog else "loading ops…"
        return f"workbench · {self.ws.session.name} ({where}) · {machine}"

    # -- actions ----------------------------------------------------------------------------
    def action_pane(self, pane: str) -> None:
        self.query_one(TabbedContent).active = pane
        self.query_one(f"#{pane}").query_one(PANE_FOCUS[pane]).focus()

    def leave_field(self) -> None:
        """Escape in a sidebar field: back to the op list, where single keys work again."""
        self.query_one(OpList).focus()

    def action_toggle_sidebar(self) -> None:
        """Hide the left column to give the panes the whole width (80-column terminals)."""
        self.toggle_class("-no-sidebar")
        if self.has_class("-no-sidebar") and self.focused and self.query_one("#sidebar") in self.focused.ancestors:
            self.action_pane(self.query_one(TabbedContent).active)

    def action_help(self) -> None:
        groups = [("Everywhere", self.BINDINGS + GENERAL_KEYS), ("Timing pane", TimingPane.BINDINGS),
                  ("Profile pane", ProfilePane.BINDINGS), ("PTX pane", PtxPane.BINDINGS),
                  ("Lists and tables", LIST_KEYS)]
        on_show = {"timing": "Timing pane", "profile": "Profile pane", "ptx": "PTX pane"}.get(
            self.query_one(TabbedContent).active)
        # the pane on show first (a few lines), then the keys that work everywhere: both are in
        # view without scrolling at 80x24
        groups.sort(key=lambda group: group[0] != on_show)
        self.push_screen(HelpScreen(groups, on_show))

    def action_save(self) -> None:
        if self.ws.catalog is None:
            return
        if not self.ws.session.runs:
            self.report("nothing to save yet: a session needs at least one run (press r)", "warning")
            return
        problem = self.query_one(SpecEditor).problem
        if problem:  # the session still holds the last valid value: saving it would hide the error
            self.report(f"not saved: {problem} (fix the field first)")
            return
        try:
            target = sessions_io.save(self.ws.session, self.ws.path, self.data_dir)
        except (OSError, ValueError, TypeError) as exc:
            self.report(f"not saved: {exc}")
            return
        self.ws.path = target
        self.query_one("#title-bar", Static).update(self.title_text())
        self.report(f"saved {target}", "information")

    def action_open(self) -> None:
        if self.running:
            self.notify("a run is in progress: cancel it (escape) before opening another session",
                        severity="warning")
        elif self.ws.catalog is not None:
            known = sessions_io.known_sessions(self.data_dir)
            self.push_screen(OpenScreen(known), self.open_path)

    @work(thread=True, exit_on_error=False, group="open")
    def open_path(self, path: Path | None) -> None:
        if path is None or self.running:
            return
        try:
            opened = self._open(path, self.ws.catalog.gpu)
        except Exception as exc:
            text = str(exc)  # a SessionError already starts with its file
            self.post_message(LoadFailed(text if str(path) in text else f"{path}: {text}"))
            return
        self.post_message(SessionOpened(opened.session, opened.path, opened.results, opened.notes))

    async def action_quit(self) -> None:
        if not self.running:
            self.exit(0)
            return
        self.push_screen(ConfirmScreen("A run is in progress. Stop it and quit?"), self._quit_answer)

    def _quit_answer(self, yes: bool | None) -> None:
        if yes:
            self.stop_run()
            self.exit(0)


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


def _terminal_fd(app: App) -> int | None:
    fd = getattr(app._driver, "fileno", None)
    return fd if isinstance(fd, int) else None


def _exit_later(seconds: float) -> None:
    """End the process after `seconds` unless it ended by itself (a write to a dead tty can block)."""
    def watchdog() -> None:
        threading.Event().wait(seconds)
        os._exit(1)
    threading.Thread(target=watchdog, name="hangup-watchdog", daemon=True).start()


def _start_resource_tracker() -> None:
    """Start multiprocessing's resource tracker now: once Textual has replaced sys.stderr (its
    fileno() is -1), the engine's first spawn would fail with 'bad value(s) in fds_to_keep'."""
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()


def _load_catalog(kernels: list[str], device: str):
    from .catalog import load_catalog

    return load_catalog(kernels, device)


def run(session_path: Path | None, options: Any) -> int:
    """Start the TUI on `session_path` (None: the shipped default); the exit code."""
    app = WorkbenchApp(session_path, options)
    app.run()
    return app.return_code or 0
