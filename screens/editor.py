"""The app's side of editing: messages from the sidebar and the palette change the workspace,
then attributes go down to the widgets. Autosave follows every change of the session."""

from __future__ import annotations

import dataclasses

from textual.lazy import Lazy
from textual.widgets import Static, TabbedContent

from . import editing, sessions_io
from .messages import Choice, ImplsPicked, ParamsEdited, SpecEdited
from .panes import result_panes
from .panes.timing import TimingPane
from .panes.traffic import TrafficPane
from .sidebar import ImplPanel, OpList
from .spec_editor import SpecEditor

AUTOSAVE_DELAY_S = 0.3
PANE_IDS = {cls: pane_id for pane_id, cls in result_panes()}  # each result pane's class -> its tab (panes.PANES)
RESULT_PANES = tuple(PANE_IDS)


class LazyPane(Lazy):
    """A pane hidden behind its tab, mounted right after the first frame instead of before it
    (issue #39: its widgets' styling was a fifth of the first frame's CPU time); once mounted,
    the app brings it up to date (EditorMixin.pane_mounted)."""

    async def mount_composed_widgets(self, widgets) -> None:
        parent, pane = self.parent, self._replace_widget
        if parent is None:
            return

        async def mount() -> None:
            await parent.mount(pane, after=self)
            await self.remove()
            self.app.pane_mounted(pane)
        self.call_after_refresh(mount)


class EditorMixin:
    """Mixed into WorkbenchApp: `self.ws` is the Workspace."""

    _autosave_timer = None
    _behind: frozenset = frozenset()  # result panes not redrawn while hidden during a run (show_results)
    _mounted_panes: dict | None = None  # result pane class -> its widget, once found (_result_pane)
    autosave_error: str | None = None  # the last autosave's failure, shown in the title bar until one succeeds
    open_error: str | None = None  # the session file that could not be opened (title bar), until another is

    # -- attributes down --------------------------------------------------------------------
    async def show_run(self) -> None:
        """Every sidebar widget and pane from the run on screen."""
        ws = self.ws
        self.query_one("#title-bar", Static).update(self.title_text())
        if ws.run is None or ws.op is None:
            return
        self.show_op_list()
        self.show_impls()
        await self.query_one(SpecEditor).show(ws.op, ws.run)
        self.show_results()

    def show_op_list(self) -> None:
        ws = self.ws
        self.query_one(OpList).show(ws.run_titles(), list(ws.catalog.ops), ws.current_id)

    def show_impls(self) -> None:
        ws = self.ws
        params = {name: editing.params_of(ws.run, ws.op, name) for name in editing.selected(ws.run, ws.op)}
        self.query_one(ImplPanel).show(ws.op, editing.selected(ws.run, ws.op),
                                       editing.dtype_of(ws.run, ws.op), ws.run.actions, params)

    def show_results(self, shown_only: bool = False) -> None:
        """Every result pane from the run's model; `shown_only` (a streaming run's redraws): only
        the pane on screen, the others marked behind and brought up to date when shown
        (`on_tabbed_content_tab_activated`): the hidden panes' tables were rebuilt on every
        redraw, while the keys waited."""
        model = self.ws.model()
        sweep = self.ws.run.sweep if self.ws.run else None
        param = ", ".join(sweep.params) if sweep else ""
        for cls in (TimingPane, TrafficPane):  # (None before LazyPane mounts it, and while the app closes)
            pane = self._result_pane(cls)
            if pane is not None:
                pane.sweep_param = param
        self.mark_stale(redraw=False)  # the model set below redraws the chart, stale note included
        active = self.query_one(TabbedContent).active if shown_only else None
        for pane in RESULT_PANES:
            if (shown_only and PANE_IDS[pane] != active) or self._result_pane(pane) is None:
                self._behind = self._behind | {pane}
                continue
            self._behind = self._behind - {pane}
            self._set_model(pane, model)

    def _result_pane(self, cls):
        """The mounted widget of class `cls` (a result pane, the spec editor), or None before its
        LazyPane mounts it.
        Found once: a query walks every widget (~1.3 ms each on the 2-core CPU box, five or more
        per redraw of a streaming run)."""
        if self._mounted_panes is None:
            self._mounted_panes = {}
        pane = self._mounted_panes.get(cls)
        if pane is not None and pane.is_attached:
            return pane
        pane = next(iter(self.query(cls)), None)
        if pane is not None:
            self._mounted_panes[cls] = pane
        return pane

    def _set_model(self, pane, model) -> None:
        widget = self._result_pane(pane)
        if widget is None:  # a LazyPane not mounted yet: pane_mounted gives it the model
            return
        try:
            widget.model = model
        except Exception as exc:  # a record the pane did not expect: say so, keep the app
            self.report(f"{pane.__name__} could not show the results: {type(exc).__name__}: {exc}")

    def pane_mounted(self, pane) -> None:
        """A LazyPane's pane is mounted: it gets what show_results gave the others meanwhile."""
        if type(pane) not in RESULT_PANES or self.ws.run is None:
            return
        if isinstance(pane, TrafficPane):
            sweep = self.ws.run.sweep
            pane.sweep_param = ", ".join(sweep.params) if sweep else ""
        self._behind = self._behind - {type(pane)}
        self._set_model(type(pane), self.ws.model())

    def on_tabbed_content_tab_activated(self, event) -> None:
        self.pane_shown(event.pane.id)

    def pane_shown(self, pane_id: str | None) -> None:
        """A pane behind the streaming run comes on screen (a pane key, a tab click): painted
        first as it was, brought up to date right after (the key is answered before the pane's
        redraw), or before the next key if that comes first (app.owe)."""
        pane = next((p for p, known in PANE_IDS.items() if known == pane_id), None)
        if pane in self._behind:
            self._behind = self._behind - {pane}
            # owed: a key typed with the pane key (`3 n`, `2 j`) finds the pane up to date
            self.owe(f"pane {pane.__name__}", lambda: self._set_model(pane, self.ws.model()))

    # -- messages up ------------------------------------------------------------------------
    async def pick(self, kind: str, value) -> None:
        """Show run `value` (kind 'run') or a new run of op `value` (kind 'op')."""
        if kind == "run":
            self.ws.pick_run(value)
        else:
            self.ws.pick_op(value)
        await self.show_run()

    def on_impls_picked(self, message: ImplsPicked) -> None:
        if self.ws.op is not None:
            self._edit_checked(editing.with_impls(self.ws.run, self.ws.op, message.names))

    def on_params_edited(self, message: ParamsEdited) -> None:
        if self.ws.op is not None:
            try:
                run = editing.with_params(self.ws.run, self.ws.op, message.impl, message.texts)
            except ValueError as exc:  # the run keeps the last value the parameter can take
                self.notify(f"{exc} (not applied)", severity="warning", timeout=3, source=f"params:{message.impl}")
                return
            self._edit_checked(run)

    def on_spec_edited(self, message: SpecEdited) -> None:
        ws, editor = self.ws, self.query_one(SpecEditor)
        if ws.op is None:
            return
        # the shape's and the sweep's problems together (one at a time hid the first bad field)
        errors, run = [], editing.with_actions(ws.run, message.actions)
        try:
            run = editing.with_shape(run, ws.op, message.shape, message.dtype or ws.op.default_dtype)
        except ValueError as exc:
            errors.append(str(exc))
        try:
            run = dataclasses.replace(run, sweep=editing.parse_sweep(message.sweep_params, message.sweep_values, ws.op))
        except ValueError as exc:
            errors.append(str(exc))
        if errors:
            self._spec_problem(editor, "; ".join(errors))
            return
        problems = ws.run_problems(run, self._kernels())  # what --check says of the whole run
        if problems:
            self._spec_problem(editor, problems[0] + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""))
            return
        self._spec_problem(editor, "")
        availability = (run.dtype, run.actions) != (ws.run.dtype, ws.run.actions)
        if self._edit(run) and availability:
            self.show_impls()

    def _spec_problem(self, editor: SpecEditor, problem: str) -> None:
        """The editor shows `problem` ("" none); the Timing and Diagnosis panes' note follows
        (mark_stale) when it changed: at 80x24 the editor is off screen once a pane has the keyboard."""
        if editor.problem != problem:
            editor.problem = problem
            self.mark_stale()

    def mark_stale(self, redraw: bool = True) -> None:
        """Tell the Timing and Diagnosis panes the spec being edited, so results of another spec are marked;
        redraw=False when the caller redraws the pane next (a chart drawn twice per results
        update was a third of the redraw mid-run)."""
        ws = self.ws
        current = None
        if ws.run is not None and ws.op is not None:
            swept = tuple(ws.run.sweep.params) if ws.run.sweep else ()
            editor = self._result_pane(SpecEditor)  # (found once; none while the app closes)
            problem = editor.problem if editor is not None else ""
            current = (editing.shape_of(ws.run, ws.op), editing.dtype_of(ws.run, ws.op), swept, problem)
        pane = self._result_pane(TimingPane)  # (None while the app closes: a timer's redraw then)
        if pane is None:
            pass
        elif redraw:
            pane.current = current
        else:
            pane.set_reactive(TimingPane.current, current)
        from .panes.diagnosis import DiagnosisPane

        diagnosis = self._result_pane(DiagnosisPane)  # mounted after the first frame (LazyPane)
        if diagnosis is not None and diagnosis.current != current:  # (its watcher diagnoses every row again:
            diagnosis.current = current  # each redraw of a streaming run did, the pane hidden)

    def _edit_checked(self, run) -> bool:
        """Apply an edit from the implementation list or a parameter field only when the run it
        makes can still run (Workspace.run_problems): unticking the one implementation that has
        a swept parameter is refused, saying why, rather than saved as a file --check refuses."""
        problems = self.ws.run_problems(run, self._kernels())
        if problems:
            self.notify(f"not applied: {problems[0]}", severity="warning", timeout=5)
            self.show_impls()  # the ticks go back to the run's
            return False
        return self._edit(run)

    def _edit(self, run) -> bool:
        titles = self.ws.run_titles()
        changed = self.ws.edit(run)
        if changed:
            self.mark_stale()
            self.schedule_autosave()
            if self.ws.run_titles() != titles:  # the run list's label follows the edit
                self.show_op_list()
        return changed

    async def on_choice(self, message: Choice) -> None:
        if message.kind in ("op", "run"):
            await self.pick(message.kind, message.value)
        elif message.kind == "impl":
            self._toggle_impl(message.value)
        elif message.kind == "session":
            self.open_path(message.value)

    def _toggle_impl(self, name: str) -> None:
        chosen = editing.selected(self.ws.run, self.ws.op)
        chosen = [n for n in chosen if n != name] if name in chosen else [*chosen, name]
        self._edit_checked(editing.with_impls(self.ws.run, self.ws.op, chosen))
        self.show_impls()

    # -- the palette ------------------------------------------------------------------------
    def palette_items(self, kind: str) -> list[tuple[str, str, str, object]]:
        """(text, help, kind, value) for the command palette's providers."""
        ws = self.ws
        if ws.catalog is None:
            return []
        if kind == "op":
            return [(f"new run: {op.name}", op.description, "op", op.name) for op in ws.catalog.ops.values()]
        if kind == "impl" and ws.op is not None:
            chosen = editing.selected(ws.run, ws.op)
            return [(f"{'untick' if i.name in chosen else 'tick'} {ws.op.name}/{i.name}",
                     i.reason(ws.run.actions, editing.dtype_of(ws.run, ws.op)) or i.description,
                     "impl", i.name) for i in ws.op.impls]
        if kind == "session":
            runs = [(f"show run {i}: {title}", "a run of this session", "run", i) for i, title in ws.run_titles()]
            files = [(f"open session {label}", str(path), "session", path)
                     for label, path in sessions_io.known_sessions(self.data_dir)]
            return runs + files
        return []

    # -- autosave ---------------------------------------------------------------------------
    def schedule_autosave(self) -> None:
        if self._autosave_timer is not None:
            self._autosave_timer.stop()
        self._autosave_timer = self.set_timer(AUTOSAVE_DELAY_S, self.autosave_now)

    def autosave_now(self) -> None:
        self._autosave_timer = None
        if not self.ws.session.runs:  # not a valid session file yet
            return
        try:
            sessions_io.autosave(self.ws.session, self.ws.path, self.data_dir)
        except (OSError, ValueError, TypeError) as exc:
            first = self.autosave_error is None
            self.autosave_error = str(exc)
            self.query_one("#title-bar", Static).update(self.title_text())
            if first:  # the title bar keeps saying so; one notice, not one per edit
                self.report(f"autosave failed: {exc}", "warning")
            return
        if self.autosave_error is not None:
            self.autosave_error = None
            self.query_one("#title-bar", Static).update(self.title_text())
