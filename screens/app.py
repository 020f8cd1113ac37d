"""The workbench app: runs, implementations and spec on the left, result panes on the right.

Start it with `run(session_path, options)` (the CLI does). The app never imports torch: after
the first frame a thread reads the ops' declarations (the manifest cache) and probes the machine
(NVML); rows run in the app's warm workers (runner.py).
Runs go through the engine's `run_plan` in a thread worker; its events come back as messages.

The concerns live in mixins: editing (editor.py), running (runner.py), sessions on disk
(session_actions.py), managing runs (run_actions.py), a lost terminal (terminal.py); this file
is the layout, the keys and the notices.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Callable, Iterable

from textual import events
from textual._compositor import Compositor, ReflowResult
from textual._dispatch_key import dispatch_key  # App._on_key's own (WorkbenchApp._on_key)
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.css.query import NoMatches
from textual.geometry import Size
from textual.reactive import Reactive
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Input, Select, Static, TabbedContent

from . import fmt, heap, sessions_io
from . import messages as msg
from .ab_action import ABMixin
from .commands import ImplsProvider, OpsProvider, SessionsProvider, action_commands
from .css_cache import CachedStylesheet, MemoStylesheet, ParseStore
from .dialogs import ConfirmScreen, HelpScreen
from .editor import EditorMixin, LazyPane
from .keys import RUN_LIST_KEYS, KeyDataTable
from .fitting import FittedFooter, PaneBox, PaneTabs
from .panes import BY_ID, PANES, help_groups
from .panes.log import LogPane
from .panes.timing import TimingPane
from .run_actions import UNDO_KEY, RunsMixin
from .run_bar import RunBar
from .runner import REFRESH_S, RunnerMixin
from .session_actions import SessionMixin
from .sidebar import ImplPanel, OpList
from .spec_editor import SpecEditor
from .terminal import TerminalMixin
from .watching import WatchMixin
from .workspace import Workspace

MIN_SIZE = (60, 20)
NARROW = 100  # below this width the sidebar is a narrow run/implementation list; e shows the spec
WIDE = 140
SHORT = 30  # below this height the panes drop their top and bottom border lines
TALL = 36   # below this height (or NARROW width) the spec editor takes the lists' place on e
MAX_NOTICES = 3  # notices on screen at once; the oldest goes first (every one is in the Log too)
GENERAL_KEYS = [Binding("ctrl+p", "palette", "Command palette: every action, ops, implementations, sessions"),
                Binding("tab", "focus_next", "Next field (shift+tab: previous)"),
                Binding("space", "toggle", "Tick or untick an implementation or action (enter too)"),
                Binding("enter", "select", "Pick the highlighted run or op"),
                Binding("ctrl+q", "quit_now", "Quit (asks if a run is active)")]
# mounted for the first frame; the other panes (hidden behind their tabs) right after it (LazyPane)
FIRST_FRAME_PANES = ("timing", "log")


def _takes_text(widget: Widget | None) -> bool:
    """Whether a key typed now is text for `widget`: an Input, or an open Select's list (it
    jumps to what is typed)."""
    if isinstance(widget, Input):
        return True
    return widget is not None and any(isinstance(node, Select) and node.expanded for node in widget.ancestors_with_self)


class LaidOutCompositor(Compositor):
    """Textual's Compositor whose `reflow` leaves its full map valid. `reflow` arranges every
    widget (`_arrange_root(visible_only=False)`, what `full_map` builds) and keeps that map, but
    leaves `_full_map_invalidated` as a scroll or an update of a widget off screen set it; the
    first `find_widget` after the layout (a widget's `region`, asked by each ScrollView's resize
    and by the frame's first render) then arranged the whole screen again: one arrange of two at
    each pane key (~2.5 ms of the 2-core box's ~28 ms key frame)."""

    def reflow(self, parent: Widget, size: Size) -> ReflowResult:
        result = super().reflow(parent, size)
        self._full_map_invalidated = False  # _full_map is the arrangement just made
        return result


class MainScreen(Screen):
    """The app's screen. Its first ScreenResume (right after the layout is composed, before the
    first frame) does not restyle the whole tree: every widget was styled as it was mounted, with
    the size classes already set (compose), and each later change (a class, focus) restyles its
    own nodes. That second pass was ~1/8 of the first frame's CPU on the 2-core box. Its layout
    is kept by a LaidOutCompositor."""

    _resumed = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._compositor = LaidOutCompositor()
    # Textual's Screen.focused repaints the whole screen on every focus change (its default
    # repaint=True): a pane key moves focus, so every one redrew all 200x50 cells, the sidebar's
    # and footer's included. The focused and blurred widgets restyle and repaint themselves.
    focused: Reactive[Widget | None] = Reactive(None, repaint=False)

    def _on_screen_resume(self, event) -> None:
        if not self._resumed:
            self._resumed = True
            event.refresh_styles = False

    def _reset_focus(self, widget: Widget, avoiding: list[Widget] | None = None) -> None:
        """Textual moves the focus off a widget that is hidden (its Hide) or blurred. A pane key
        hides the focused pane and moves the keyboard into the pane shown only after that
        pane's frame (WorkbenchApp.action_pane): meanwhile the focus stays where it is, or the
        Hide would move it into the sidebar and back (both boxes restyled and redrawn)."""
        if getattr(self.app, "_pane_focus", None) is not None and any(node.id == "panes" for node in widget.ancestors):
            return  # (no query: this runs while a screen's widgets are removed too)
        super()._reset_focus(widget, avoiding)


class WorkbenchApp(EditorMixin, RunnerMixin, SessionMixin, RunsMixin, TerminalMixin, WatchMixin, ABMixin, App):
    CSS_PATH = "app.tcss"
    TITLE = "workbench"
    COMMANDS = App.COMMANDS | {OpsProvider, ImplsProvider, SessionsProvider}
    BINDINGS = [
        Binding("r", "run", "Run"),
        Binding("F", "force_run", "Run anyway (rows too large too)", show=False),
        Binding("R", "run_all", "Run every run of the session in turn", show=False),
        Binding("escape", "cancel", "Cancel"),
        # priority, as the pane keys: answered as it comes in, its field given the keyboard before
        # the next key is routed (`e q` typed at once quit the app, `e 1 2 8` switched panes)
        Binding("e", "edit_spec", "Edit spec", priority=True),
        # and tab: on a list or checklist it acted on its way back up, after the keys typed with it
        # had been routed from there (`tab 4 2` switched panes); a text field's own tab keeps its
        # place among the keys typed into it (keys.FieldInput), so there it is passed on
        Binding("tab", "next_field(1)", "Next field", show=False, priority=True),
        Binding("shift+tab", "next_field(-1)", "Previous field", show=False, priority=True),
        Binding("ctrl+s", "save", "Save"),
        Binding("ctrl+o", "open", "Open"),
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("b", "toggle_sidebar", "Sidebar"),
        UNDO_KEY,
        Binding("q", "quit", "Quit"),
        # m wherever the Timing pane is on screen (its caption offers it), not only with focus in it
        Binding("m", "next_metric", "Metric", show=False),
        # priority: the app answers a pane key before the focused widget sees it (otherwise the key
        # bubbles from the focused table up through every container, a message each: ~20 ms of a
        # pane key on the 2-core CPU box); check_action passes it on where a digit is text
        *(Binding(pane.key, f"pane('{pane.id}')", pane.title, show=False, priority=True) for pane in PANES),
    ]

    def __init__(self, session_path: Path | None = None, options: Any = None, *,
                 engine: Callable[..., dict] | None = None,
                 catalog_loader: Callable[..., Any] | None = None,
                 opener: Callable[..., sessions_io.Opened] | None = None,
                 data_dir: Path | None = None, watch: bool = False, css_cache: Path | None = None) -> None:
        super().__init__()
        self.data_dir = data_dir or sessions_io.data_dir()
        self._theme_problem = self._start_theme()  # before the stylesheet takes the theme's variables
        self._css_store = None
        if css_cache is not None:  # the parsed CSS of the last start (css_cache.py)
            self._css_store = ParseStore(css_cache)
            self.stylesheet = CachedStylesheet(variables=self.get_css_variables(), store=self._css_store)
        else:  # matched rules kept between restyles all the same (css_cache.MemoStylesheet)
            self.stylesheet = MemoStylesheet(variables=self.get_css_variables())
        if "TEXTUAL_ANIMATIONS" not in os.environ:
            # No tab-underline glide: its 0.3 s of 60 fps frames were drawn while the next pane key
            # waited (a keyboard tool over SSH wants the answer, not the motion);
            # TEXTUAL_ANIMATIONS=basic|full brings it back.
            self.animation_level = "none"
        self.ws = Workspace()
        self._notice_sources: dict[str, str] = {}  # notify(source=...): the message on screen per source
        self._owed: dict[str, Callable[[], Any]] = {}  # owe(): work due after the next frame or before the next key
        self._session_arg, self._options = session_path, options
        self._engine, self._catalog_loader, self._opener = engine, catalog_loader, opener
        self._init_runner()
        self._init_watch(watch)

    # -- layout -----------------------------------------------------------------------------
    def get_default_screen(self) -> Screen:
        return MainScreen(id="_default")

    def compose(self) -> ComposeResult:
        # the size classes before any widget is styled: set in on_mount they restyled the whole
        # tree once more before the first frame (~0.15-0.3 s on the loaded 2-core CPU)
        self._size_classes(self.size.width, self.size.height, update=False)
        yield Static("workbench · loading ops…", id="title-bar")
        with Horizontal(id="main"):
            with VerticalScroll(id="sidebar", can_focus=False):
                yield _titled(OpList("loading ops…", id="op-list", compact=True), "Runs · + new")
                yield _titled(ImplPanel(id="impls"), "Implementations")
                yield _titled(SpecEditor(id="spec"), "Spec (e)")
            with PaneTabs(id="panes", initial="timing", classes="box"):
                for pane in PANES:
                    with PaneBox(f"{pane.key} {pane.title}", id=pane.id):
                        widget = pane.widget_class()()
                        yield widget if pane.id in FIRST_FRAME_PANES else LazyPane(widget)
        yield RunBar(id="run-bar")
        yield Static("", id="too-small")
        yield FittedFooter(compact=True)

    def _start_theme(self) -> str | None:
        """The theme the user last picked (sessions_io.read_theme), set before the first frame;
        returns why it was not (None when it was, or none was kept)."""
        theme, problem = sessions_io.read_theme(self.data_dir)
        if theme is None or theme == self.theme:
            return problem
        if theme not in self.available_themes:
            return f"the kept theme {theme!r} is not one of this Textual's; the default theme is used"
        # without the watcher (it queues a CSS refresh on a message pump not yet running); what
        # it sets, set here: the dark/light classes and the ANSI colours' filter
        self.set_reactive(App.theme, theme)
        self.set_class(self.current_theme.dark, "-dark-mode", update=False)
        self.set_class(not self.current_theme.dark, "-light-mode", update=False)
        refresh_filter = getattr(self, "_refresh_truecolor_filter", None)
        if refresh_filter is not None:
            refresh_filter(self.ansi_theme)
        return None

    def _theme_picked(self, theme) -> None:
        """A theme picked (ctrl+p, theme) is kept for the next start; a failed write is said once."""
        if theme.name == self._kept_theme:  # the start's own (the watcher's first call), or no change
            return
        try:
            sessions_io.write_theme(self.data_dir, theme.name)
        except OSError as exc:
            self.log_pane.add(f"the theme is not kept for the next start: {exc}", "warning")
        self._kept_theme = theme.name

    def on_mount(self) -> None:
        heap.pause()  # collections only between frames (heap.tick on the redraw timer)
        self._kept_theme = self.theme
        self.theme_changed_signal.subscribe(self, self._theme_picked)
        if self._theme_problem:
            self.call_after_refresh(self.log_pane.add, self._theme_problem, "warning")
        self._fit(self.size.width, self.size.height)
        self._focus_box = None
        self.watch(self.screen, "focused", self._focus_moved)
        self.set_interval(REFRESH_S, self.flush_results)
        self.call_after_refresh(self._after_first_frame)
        if not self.is_headless:
            self._watch_terminal()

    def _after_first_frame(self) -> None:
        # the tracker (a child python) started here, not in __init__: its start competed with the
        # first frame for the CPU; before _load, whose thread may start the workers' zygote
        _start_resource_tracker()
        self._load()

    _css_problem_told = False

    def save_parsed_css(self) -> None:
        """The CSS parsed so far into the store the next start reads (css_cache.py); nothing
        without a store or when nothing new was parsed. Why a store was not used or not written
        goes to the Log once (a folder others may enter is never written: the speed-up would be
        lost without a word)."""
        store = self._css_store
        if store is None:
            return
        store.save()
        if store.problem and not self._css_problem_told and self.is_running:
            self._css_problem_told = True
            self.log_pane.add(f"the parsed CSS is not kept between starts: {store.problem}", "warning")

    def unsaved_note(self) -> str | None:
        """After the app ended: a line saying where a new session's runs are when its file was
        never written (ctrl+s), and how to get them back; None otherwise. Quitting said nothing,
        and the runs looked lost (a new user's try)."""
        path = self.ws.path
        if path is None or path.exists() or not self.ws.session.runs:
            return None
        saved = sessions_io.autosave_path(path, self.data_dir)
        if not saved.is_file():
            return None
        return (f"{path} was never saved; its {len(self.ws.session.runs)} run(s) are in the autosave {saved}: "
                f"`workbench {path}` opens them again (ctrl+s there writes the file)")

    def on_unmount(self) -> None:
        heap.resume()
        self.stop_watch()
        self.stop_run()
        self.restore_switch_interval()
        self.close_workers()
        if self._autosave_timer is not None:
            self.autosave_now()
        self._unwatch_terminal()

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, events.Key):
            if not event.is_forwarded:  # its frame before the redraw timer's work
                self.key_arrived()
            # What an earlier key left for after its frame, paid before this key is routed: on
            # its way in (priority bindings, then the focused widget) and again when it comes
            # back up unhandled (the other bindings, resolved from the focus then): in `b b j`
            # the j came in before either b had been acted on, and back up after them.
            if self._owed:  # a pane brought up to date, the keyboard given back to the sidebar
                self.pay()
            if self._pane_focus is not None:  # a pane key's focus, not yet moved
                self._move_to_pane()
            if not event.is_forwarded:
                self._keys_in += 1
                event.number = self._keys_in  # which keys overtook it (_on_key)
        await super().on_event(event)

    _keys_in = 0  # keys come in so far
    _overtaking: list = []  # (the number of the last key in, the focus it found) of the last pane keys, e and tab

    def action_next_field(self, step: int) -> None:
        """tab (1) / shift+tab (-1) answered as they come in, where no text field has the
        keyboard (check_action): the keys typed with them go to the widget they move to."""
        self._overtook()
        (self.screen.focus_next if step > 0 else self.screen.focus_previous)()

    def _overtook(self) -> None:
        """A key answered as it comes in (a pane key, e, tab) that moves the keyboard: the focus it
        found is kept for the keys sent before it and not back yet (_on_key)."""
        self._overtaking = [*self._overtaking[-7:], (self._keys_in, self.focused)]

    # what a key or a click asked for; still queued when the app is closing (App._shutdown: the
    # screens went first), it is dropped: its handler queried widgets no longer there (`j q`
    # typed at once on a loaded box: NoMatches '#title-bar' came out of the app's exit)
    _INTENTS = (msg.Choice, msg.ImplsPicked, msg.ParamsEdited, msg.SpecEdited, msg.RunRequested, msg.OpenRequested)

    async def _on_message(self, message) -> None:
        if not isinstance(message, self._INTENTS):
            await super()._on_message(message)
            return
        if self._closing_down():
            return
        try:
            await super()._on_message(message)
        except NoMatches:
            # begun before the app closed, its widgets went while it awaited (`b b j` typed at
            # once, the app's exit under CI's load: NoMatches '#actions' in show_run): no error
            if not self._closing_down():
                raise

    async def _on_key(self, event: events.Key) -> None:
        """A key back up unhandled from the widget it was sent to: Textual resolves its other
        bindings from the focus now (App._on_key, after this). A pane key typed after it is a
        priority binding, answered as it comes in, which can be before this key is back: in
        `1 j 2` the 2 had moved the keyboard into the Profile table, whose cursor the j moved,
        not the Timing table's (in `j e`, the spec field's, which takes j as text). So where a
        later pane key or e moved the focus, the key's bindings are resolved from the focus it
        found (that of the keys before it, `b b j` included: those act on their way back up,
        before this key)."""
        self._say_busy(event.key)
        number = getattr(event, "number", None)
        before = next((widget for last, widget in self._overtaking if number is not None and last > number), None)
        if before is None or before is self.focused or not before.is_attached or before.screen is not self.screen:
            return
        event.prevent_default()  # not App._on_key: it resolves from the focus now
        consumed = False  # a widget of the chain that takes the key as text hides it from those above
        for node in before.ancestors_with_self:
            if not consumed:
                for binding in node._bindings.key_to_bindings.get(event.key, ()):
                    if not binding.priority and await self.run_action(binding.action, node):
                        return
            consumed = consumed or node.check_consume_key(event.key, event.character)
            if node.is_modal:
                break
        await dispatch_key(self, event)

    def _say_busy(self, key: str) -> None:
        """r or F while a run or an A/B is in flight: their binding is off (the footer dims Run),
        so Textual drops the key without a word; say why instead (only the app binds them)."""
        if key not in ("r", "F") or not self.running or not isinstance(self.screen, MainScreen) \
                or _takes_text(self.focused):
            return
        if self.ab_pair is not None:
            text = f"the A/B {self.ab_pair[0]} vs {self.ab_pair[1]} is timing: r runs once it ends (escape cancels it)"
        else:
            text = "a run is in progress (escape cancels it)"
        self.notify(text, severity="warning", timeout=3)

    def _focus_moved(self, widget) -> None:
        """The `.box` holding focus gets `-focus-box` (its bright border); restyled only when
        focus moves into another box, so a pane key (within #panes) restyles nothing."""
        box = next((node for node in widget.ancestors_with_self if node.has_class("box")), None) if widget else None
        self._light_field(widget)
        if box is None and self.is_running:  # never no section: the keys would be dead without a word
            self.call_after_refresh(self._refocus)
        if box is self._focus_box:
            return
        moved = [node for node in (self._focus_box, box) if node is not None]
        for node in moved:
            node.set_class(node is box, "-focus-box", update=False)
        # the two boxes restyled, not their insides: add_class restyles the node's whole subtree,
        # and the panes' box holds every pane (~80 widgets): the first pane key from the run list
        # (each key into the panes from the sidebar) took ~0.4 s on the 2-core CPU. No rule
        # styles a box's insides by -focus-box (app.tcss; tests/test_tui_repaint.py checks it).
        if moved and self.is_running:
            self.stylesheet.update_nodes(moved, animate=True)
        self._focus_box = box

    _focus_field = None  # the sidebar's `.field` holding focus

    def _light_field(self, widget) -> None:
        """`.field:focus-within .field-name` (app.tcss): the name of the field being edited is
        lit. Textual restyles on a focus change only below an ancestor whose own rules use
        :focus-within, which .field's are not, so the fields the focus left and entered (a name
        and its input each) are restyled here; the restyle of the whole box on entering it did
        it before, by the way, and a tab to the next field left both names as they were."""
        field = next((node for node in widget.ancestors_with_self if node.has_class("field")), None) \
            if widget else None
        if field is self._focus_field:
            return
        fields = [node for node in (self._focus_field, field) if node is not None and node.is_attached]
        self._focus_field = field
        if fields and self.is_running:
            self.stylesheet.update_nodes([n for node in fields for n in node.walk_children(with_self=True)],
                                         animate=True)

    def _refocus(self) -> None:
        """Focus left every section (shift+tab off the end of a hidden one, a widget removed):
        the run list gets it back, or the pane on show when the sidebar is hidden."""
        focused = self.screen.focused if self.screen is not None else None
        if self.screen is not self.screen_stack[0] or (
                focused is not None and any(n.has_class("box") for n in focused.ancestors_with_self)):
            return  # a dialog is open (it has the keys), or focus found a section meanwhile
        try:
            if self.has_class("-no-sidebar"):
                self.action_pane(self.query_one(TabbedContent).active, now=True)
            else:
                self.query_one(OpList).focus()
        except NoMatches:
            pass

    def on_resize(self, event) -> None:
        self._fit(event.size.width, event.size.height)

    _focus_before_small = None  # the widget with the keyboard when the window became too small

    def _fit(self, width: int, height: int) -> None:
        was_small, focused = self.has_class("-too-small"), self.focused
        small = self._size_classes(width, height)
        if small and not was_small:  # the screen's widgets hidden: the focus goes, kept here
            self._focus_before_small = focused
        elif was_small and not small and self._focus_before_small is not None:
            widget, self._focus_before_small = self._focus_before_small, None
            if widget.is_attached:  # back where it was (the run list took it before)
                self.call_after_refresh(self.screen.set_focus, widget)
        if small:
            self.clear_notifications()  # nothing may cover the notice
        self.query_one("#too-small", Static).update(
            f"Terminal too small ({width}×{height}).\n"
            f"workbench needs at least {MIN_SIZE[0]}×{MIN_SIZE[1]}: enlarge the window.")

    def _size_classes(self, width: int, height: int, update: bool = True) -> bool:
        """The app's classes for this size (-narrow, -short, ...); whether it is too small."""
        small = width < MIN_SIZE[0] or height < MIN_SIZE[1]
        wanted = {"-too-small": small, "-narrow": width < NARROW, "-spec-apart": width < NARROW or height < TALL,
                  "-wide": width >= WIDE, "-short": height < SHORT,
                  "-tall": height >= TALL}  # -tall: room for longer pane summaries (the PTX notes)
        # one restyle of the tree for all of them: each set_class restyled every widget (six
        # passes, 0.6 s of the first frame on the loaded 2-core CPU)
        changed = [name for name, on in wanted.items() if on != self.has_class(name)]
        for name in changed:
            self.set_class(wanted[name], name, update=False)
        if changed and update:
            self.update_node_styles()
        return small

    # -- notices ----------------------------------------------------------------------------
    def action_help_quit(self) -> None:
        """ctrl+c (Textual's: it no longer quits); its notice in plain text, as every notice here
        is: Textual's own showed its markup ("Press [b]ctrl+q[/b]")."""
        self.notify("ctrl+c does not quit: press q (it asks while a run is active) or ctrl+q",
                    title="Do you want to quit?")

    def notify(self, message: str, *, title: str = "", severity="information",
               timeout: float | None = None, markup: bool = False, source: str | None = None) -> None:
        """Textual's notification, once: a notice already on screen is not repeated, and at
        most MAX_NOTICES stay (the oldest goes first). Markup is off: engine text has brackets.
        source: a notice replaces the one on screen from the same source (a field typed into
        gave one per key: '1000' stacked four notices over the panes)."""
        shown = list(self._notifications)
        if any(n.message == message and n.severity == severity for n in shown):
            return
        if source is not None:
            before = self._notice_sources.pop(source, None)
            for old in [n for n in shown if n.message == before]:
                self._unnotify(old, refresh=False)
                shown.remove(old)
            self._notice_sources[source] = message
        for old in shown[:max(0, len(shown) - MAX_NOTICES + 1)]:
            self._unnotify(old, refresh=False)
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=markup)

    def report(self, text: str, severity: str = "error") -> None:
        """A notification and a Log line (never a traceback on screen). A long text (a session
        file's every problem) is cut in the notification to what fits a third of the screen,
        its first lines kept (at 80x24 a toast of 12 lines runs off the top, losing the file
        name and the first problem); the Log has all of it."""
        lines, room = text.splitlines(), max(4, self.size.height // 2 - 2)
        width = max(20, min(self.size.width // 2, 60) - 4)  # a toast's text: half the screen, at most 60
        rows = [max(1, -(-len(line) // width)) for line in lines]  # each line as it wraps
        shown = text
        if sum(rows) > room:
            keep = 0
            while keep < len(lines) and sum(rows[:keep + 1]) <= room - 1:
                keep += 1
            keep = max(1, keep)
            shown = "\n".join([*lines[:keep], f"… {len(lines) - keep} more line(s) in the Log (5)"])
        self.notify(shown, severity=severity, timeout=8 if severity == "error" else 4)
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
        if sessions_io.shipped_original(self.ws.path, self.data_dir) is not None:
            where = f"your copy: {where}"
        machine = self.ws.catalog.machine if self.ws.catalog else "loading ops…"
        text = f"workbench · {fmt.printable(self.ws.session.name)} ({where}) · {machine}"
        if getattr(self, "open_error", None):  # a bad session file opened an empty session: a new
            text = f"⚠ {fmt.printable(self.open_error)} not opened (Log 5) · {text}"  # user missed the toast
        if getattr(self, "autosave_error", None):  # first, so 80 columns show it (a fresh-clone try
            text = f"⚠ autosave failing (Log 5) · {text}"  # missed a 4 s notice on a read-only data dir)
        return text

    # -- actions ----------------------------------------------------------------------------
    def owe(self, name: str, work: Callable[[], Any]) -> None:
        """`work` runs after the next frame, or before the next key is routed if that comes
        first: what a key pressed at once must find done (a pane brought up to date, the
        keyboard given back), without holding up the frame. A later `owe` of the same name
        replaces it."""
        self._owed[name] = work
        self.call_after_refresh(self.pay, name)

    def pay(self, name: str | None = None) -> None:
        """Run what is owed under `name` (every name: None) now, once."""
        for key in [name] if name is not None else list(self._owed):
            work = self._owed.pop(key, None)
            if work is not None:
                work()

    _pane_focus: str | None = None  # the pane a pane key showed, whose widget gets the keyboard after its frame

    def action_pane(self, pane: str, now: bool = False) -> None:
        """Show `pane` (a tab id); its widget gets the keyboard after the frame that shows the
        pane, or at once with `now`. Moving focus restyles the widget gaining it (a DataTable's
        every component class), the boxes' borders and the footer's keys: done before the
        pane's frame, a fifth of a pane key's CPU (the app's CPU to the first frame, headless at
        200x50 on the 2-core CPU: 20.1-20.5 ms against 24.5-24.8 ms), now a frame after it. A
        key that arrives before then moves the focus first (on_event), so every key after a
        pane key reaches the pane shown."""
        self._overtook()
        if self.has_class("-spec"):  # the editor in the sidebar's place (80x24) goes with the keyboard
            self.remove_class("-spec")
        self.query_one(TabbedContent).active = pane
        self.pane_shown(pane)  # now: TabbedContent's TabActivated comes after keys already typed
        self._pane_focus = pane
        if now:
            self._move_to_pane()
        else:
            self.call_after_refresh(self._move_to_pane, True)

    def _move_to_pane(self, after_frame: bool = False, tries: int = 20) -> None:
        """The keyboard into the pane a pane key showed (_pane_focus); with after_frame, only
        once a frame has laid the pane out (a refresh callback can run in a tick before the
        key's layout pass: it is asked again, `tries` times at most)."""
        pane = self._pane_focus
        if pane is None:
            return
        if after_frame and tries > 1:
            try:
                shown = bool(self.query_one(f"TabPane#{pane}").region)
            except NoMatches:
                shown = True
            if not shown:
                self.call_after_refresh(self._move_to_pane, True, tries - 1)
                return
        try:
            widget = self.query_one(f"#{pane}").query_one(BY_ID[pane].focus)
        except NoMatches:
            self._pane_focus = None  # a pane pressed for in the frames before it is mounted (LazyPane): focused then
            self.call_after_refresh(self._focus_pane, pane)
            return
        # now, not widget.focus() (a message later, after the hidden pane's Hide, which would
        # move the focus into the sidebar first: MainScreen._reset_focus lets it be while
        # _pane_focus is set)
        self.screen.set_focus(widget)
        self._pane_focus = None

    def _focus_pane(self, pane: str, tries: int = 20) -> None:
        if self.query_one(TabbedContent).active != pane:
            return
        for widget in self.query_one(f"#{pane}").query(BY_ID[pane].focus):
            widget.focus()
            return
        if tries > 1:
            self.call_after_refresh(self._focus_pane, pane, tries - 1)

    async def action_edit_spec(self, field: str = "shape") -> None:
        """Focus the spec editor (at 80 columns it takes the sidebar's place until escape). From
        the Runs list with `+ op` highlighted, that new run is put on screen first, as Enter does:
        `e` there edits the new run, never the run shown before."""
        self._overtook()
        await self._highlighted_op_to_screen()
        self.remove_class("-no-sidebar")
        self.add_class("-spec")
        target = "#sweep-params" if field == "sweep" else ".shape"
        fields = self.query_one(SpecEditor).query(target).results(Input)
        # owed, not call_after_refresh(field.focus): the keys typed with the e go into the field
        self.owe("spec focus", lambda: self.screen.set_focus(next(fields, self.query_one("#dtype"))))

    async def _highlighted_op_to_screen(self) -> None:
        from .sidebar import OpList

        try:
            runs = self.query_one("#op-list", OpList)
        except NoMatches:
            return
        if self.focused is not runs or runs.highlighted is None or self.ws.catalog is None:
            return
        kind, _, op = (runs.get_option_at_index(runs.highlighted).id or "").partition(":")
        if kind == "op" and not (self.ws.index is None and self.ws.run is not None and self.ws.run.op == op):
            await self.pick("op", op)

    def on_descendant_focus(self, event) -> None:
        """A spec field got the keyboard (e, tab, a click): the spec editor is shown."""
        # by type, not query_one(SpecEditor): a focus message handled while the screen's widgets
        # were being removed (the app closing after a burst of keys, on a loaded box) found no
        # editor, and NoMatches came out of the handler
        if any(isinstance(node, SpecEditor) for node in event.widget.ancestors_with_self):
            self.add_class("-spec")

    def leave_field(self) -> None:
        """Escape in a sidebar field: back to the run list, where single keys work again."""
        self.remove_class("-spec")
        self.query_one(OpList).focus()

    _sidebar_focus = None  # the sidebar widget that had the keyboard when the sidebar was hidden

    def action_toggle_sidebar(self) -> None:
        """Hide the left column to give the panes the whole width (80-column terminals); shown
        again, the sidebar widget that had the keyboard gets it back (the run list if that one
        is gone), so that after `b b` d, j and k work on the run list again."""
        self.toggle_class("-no-sidebar")
        if self.has_class("-no-sidebar"):
            focused = self.focused
            if focused is None or self.query_one("#sidebar") in focused.ancestors:
                self._sidebar_focus = focused or self.query_one(OpList)
                self.action_pane(self.query_one(TabbedContent).active, now=True)
            return
        widget, self._sidebar_focus = self._sidebar_focus, None
        if widget is not None:
            target = widget if widget.is_attached else self.query_one(OpList)
            # owed, not call_after_refresh(target.focus): `b b j` typed at once moved the
            # Timing table's cursor (the j came before the focus)
            self.owe("sidebar focus", lambda: self.screen.set_focus(target))

    def action_next_metric(self) -> None:
        self.query_one(TimingPane).action_next_metric()

    def check_action(self, action: str, parameters: tuple) -> bool | None:
        """m only while the Timing pane is shown (elsewhere it would change a chart out of view).
        A pane key, e and tab (priority bindings) are passed on to a text field with the
        keyboard (a digit typed in a shape) and to a dialog or the palette over the main screen."""
        if action in ("pane", "edit_spec", "next_field") and (
                not isinstance(self.screen, MainScreen) or _takes_text(self.focused)):
            return False
        if action == "next_metric":
            try:
                return self.query_one(TabbedContent).active == "timing"
            except NoMatches:
                return False
        return super().check_action(action, parameters)

    def action_help(self) -> None:
        # m (the Timing chart's metric) is the Timing pane's group's, not Everywhere's: listed
        # there on every other pane, it did nothing there
        everywhere = [b for b in self.BINDINGS  # tab: listed once, in GENERAL_KEYS
                      if not (isinstance(b, Binding) and b.action.startswith(("next_metric", "next_field")))]
        groups = [("Everywhere", everywhere + GENERAL_KEYS), ("Run list", RUN_LIST_KEYS),
                  *help_groups(), ("Lists and tables", KeyDataTable.BINDINGS)]
        shown = BY_ID.get(self.query_one(TabbedContent).active)
        on_show = shown.help if shown is not None and shown.help else None
        # the pane on show first (a few lines), then the keys that work everywhere: both are in
        # view without scrolling at 80x24
        groups.sort(key=lambda group: group[0] != on_show)
        self.push_screen(HelpScreen(groups, on_show))

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield from action_commands(self)

    async def action_quit(self) -> None:
        if not self.running or self.quitting:  # q again while the run is cancelled for a quit: now
            self.exit(0)
            return
        self._quit_confirm = ConfirmScreen("A run is in progress. Stop it and quit?")
        self.push_screen(self._quit_confirm, self._quit_answer)

    def run_ended_while_asked(self) -> None:
        """The run the quit question was about has ended: the question says so (it never
        stays 'A run is in progress' once the status bar says done)."""
        if self.quit_asked():
            queued = self.queued_runs()  # R holds its next run while the question is open
            self._quit_confirm.ask(f"The run has ended; {queued} more run(s) queued by R will not start. Quit?"
                                   if queued else "The run has ended. Quit?")

    def quit_asked(self) -> bool:
        """Whether the quit question is on screen."""
        confirm = getattr(self, "_quit_confirm", None)
        return confirm is not None and confirm.is_attached

    def _quit_answer(self, yes: bool | None) -> None:
        self._quit_confirm = None
        if not yes:
            self.resume_queue()  # R's next run, held while the question was open
        elif self.running:
            self.quit_after_run()  # its results file written before the app exits (QUIT_WAIT_S at most)
        else:
            self.drop_queue()
            self.exit(0)


def _titled(widget, title: str):
    """A sidebar section: bordered, titled; the border is bright while focus is inside."""
    widget.add_class("box")
    widget.border_title = title
    return widget


def _start_resource_tracker() -> None:
    """Start multiprocessing's resource tracker now, before the engine's first spawn: it passes
    sys.stderr's fd to the tracker, and Textual's replacement has none (fileno() -1: 'bad value(s)
    in fds_to_keep'), so the real stderr stands in for the call (Textual's own output goes to
    sys.__stderr__ too); on the app's thread, between two of its messages."""
    import sys
    from multiprocessing import resource_tracker

    captured, sys.stderr = sys.stderr, sys.__stderr__ or sys.stderr
    try:
        resource_tracker.ensure_running()
    finally:
        sys.stderr = captured


def run(session_path: Path | None, options: Any, *, watch: bool = False) -> int:
    """Start the TUI on `session_path` (None: the shipped default); the exit code. watch:
    re-run what each save of the session or a plugin file changes (screens/watching.py)."""
    cache_dir = getattr(options, "cache_dir", None)
    app = WorkbenchApp(session_path, options, watch=watch, css_cache=Path(cache_dir) / "tui" if cache_dir else None)
    app.run()
    if not app.return_code:  # (an app that failed keeps nothing of its start for the next)
        app.save_parsed_css()  # what was parsed after the catalog's load (dialogs, the palette)
    note = app.unsaved_note()
    if note:
        print(f"workbench: {note}", file=sys.stderr)
    return app.return_code or 0
