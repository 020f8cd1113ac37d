"""The left column's first two parts: the op list and the implementation checklist with its params.

Attributes down: the app calls `show(...)` with plain data. Messages up: Choice, ImplsPicked,
ParamsEdited. Filling the widgets from code never echoes a message back.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Input, Label, OptionList, SelectionList, Static
from textual.widgets.option_list import Option
from textual.widgets.selection_list import Selection

from .catalog import ImplInfo, OpInfo
from .keys import RUN_LIST_KEYS, FieldInput, KeyOptionList, KeySelectionList
from .messages import Choice, ImplsPicked, ParamsEdited


class OpList(KeyOptionList):
    """The session's runs, then every op as `+ op` (a new run of it). Highlighting a run shows it;
    Enter or a click on `+ op` starts a new run of that op.

    Option ids: `run:<index>` or `op:<name>`. d deletes the run, c copies it, K / J move it.
    """

    BINDINGS = RUN_LIST_KEYS

    def show(self, runs: Iterable[tuple[int, str]], ops: Iterable[str], current: str) -> None:
        options = [Option(f"{i} {title}", id=f"run:{i}") for i, title in runs]
        options += [Option(Text(f"+ {name}", style="dim"), id=f"op:{name}") for name in ops]
        with self.prevent(OptionList.OptionHighlighted):
            self.clear_options()
            self.add_options(options)
            ids = [o.id for o in options]
            self.highlighted = ids.index(current) if current in ids else None

    def highlighted_run(self) -> int | None:
        """The index of the run highlighted in the list (None: an op, or nothing)."""
        if self.highlighted is None:
            return None
        kind, _, value = (self.get_option_at_index(self.highlighted).id or "").partition(":")
        return int(value) if kind == "run" else None

    @on(OptionList.OptionSelected)
    def _picked(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        kind, _, value = event.option.id.partition(":")
        self.post_message(Choice(kind, int(value) if kind == "run" else value))

    @on(OptionList.OptionHighlighted)
    def _moved(self, event: OptionList.OptionHighlighted) -> None:
        """Moving onto a run shows it, so the panes are always the highlighted run's (never the
        previous run's panes while `r` runs the highlighted one). Moving onto
        `+ op` changes nothing: a new run starts only on Enter."""
        event.stop()
        kind, _, value = (event.option.id or "").partition(":")
        if kind == "run":
            self.post_message(Choice(kind, int(value)))


class ImplPanel(Vertical):
    """The selected op's implementations as a checklist; the highlighted one's detail and params."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._op: OpInfo | None = None
        self._dtype = ""
        self._actions: tuple[str, ...] = ()
        self._params: Mapping[str, Mapping[str, Any]] = {}
        self._params_for: str | None = None

    def compose(self) -> ComposeResult:
        yield KeySelectionList(id="impl-list", compact=True)
        yield Static("", id="impl-detail", classes="detail")
        yield Vertical(id="impl-params")

    def show(self, op: OpInfo, chosen: Iterable[str], dtype: str, actions: tuple[str, ...],
             params: Mapping[str, Mapping[str, Any]]) -> None:
        """Fill the checklist: blocked implementations greyed (disabled) with their reason."""
        same_op = self._op is not None and self._op.name == op.name
        self._op, self._dtype, self._actions, self._params = op, dtype, actions, params
        checklist = self.query_one("#impl-list", SelectionList)
        highlighted = checklist.highlighted if same_op else 0
        chosen = set(chosen)
        with self.prevent(SelectionList.SelectedChanged, SelectionList.SelectionHighlighted):
            checklist.clear_options()
            checklist.add_options([self._selection(i, i.name in chosen) for i in op.impls])
            checklist.highlighted = min(highlighted or 0, max(len(op.impls) - 1, 0))
        self._show_detail()

    def _selection(self, impl: ImplInfo, chosen: bool) -> Selection:
        """Greyed (not disabled: the highlight must reach it to show why) when blocked."""
        blocked = impl.blocked(self._actions, self._dtype)
        prompt = Text(impl.name, style="dim strike" if blocked else "")
        if impl.reason(self._actions, self._dtype):
            prompt.append("  ✗" if blocked else "  ◐", style="dim")
        return Selection(prompt, impl.name, chosen and not blocked)

    def _highlighted_impl(self) -> ImplInfo | None:
        checklist = self.query_one("#impl-list", SelectionList)
        if self._op is None or checklist.highlighted is None:
            return None
        return self._op.impls[checklist.highlighted]

    def _show_detail(self) -> None:
        impl = self._highlighted_impl()
        self.query_one("#impl-detail", Static).update(self._detail(impl) if impl else "")
        self.call_after_refresh(self._show_params, impl)

    def _detail(self, impl: ImplInfo) -> Text:
        text = Text(impl.description or impl.name)
        reasons = {a: r for a in self._actions if (r := impl.reasons.get((a, self._dtype)))}
        for action, reason in reasons.items():
            text.append(f"\n{action}: {reason}", style="italic")
        if impl.note:
            text.append(f"\n{impl.note}", style="italic")
        return text

    async def _show_params(self, impl: ImplInfo | None) -> None:
        """Rebuild the params editor only when another implementation is highlighted."""
        key = f"{self._op.name}/{impl.name}" if self._op and impl else None
        if key == self._params_for:
            return
        self._params_for = key
        box = self.query_one("#impl-params", Vertical)
        await box.remove_children()
        if impl is None or not impl.params:
            return
        values = self._params.get(impl.name, impl.params)
        with self.prevent(Input.Changed):
            await box.mount_all(self._param_row(impl.name, k, v) for k, v in values.items())

    def _param_row(self, impl: str, name: str, value: Any) -> Horizontal:
        field = FieldInput(str(value), compact=True, name=name, classes="param",
                      tooltip=f"{impl} parameter {name}")
        return Horizontal(Label(name, classes="field-name param-name"), field, classes="field")

    @on(SelectionList.SelectionHighlighted)
    def _highlight(self, event: SelectionList.SelectionHighlighted) -> None:
        event.stop()
        self._show_detail()

    @on(SelectionList.SelectedChanged)
    def _toggled(self, event: SelectionList.SelectedChanged) -> None:
        """Post the choice; a blocked implementation is unticked again, with its reason."""
        event.stop()
        checklist = event.selection_list
        for name in list(checklist.selected):
            impl = self._op.impl(name) if self._op else None
            if impl is not None and impl.blocked(self._actions, self._dtype):
                with self.prevent(SelectionList.SelectedChanged):
                    checklist.deselect(name)
                self.notify(f"{name}: {impl.reason(self._actions, self._dtype)}",
                            severity="warning", timeout=4)
        self.post_message(ImplsPicked(tuple(checklist.selected)))

    @on(Input.Changed, ".param")
    def _param_changed(self, event: Input.Changed) -> None:
        event.stop()
        impl = self._highlighted_impl()
        if impl is not None:
            texts = {i.name: i.value for i in self.query(".param").results(Input)}
            self.post_message(ParamsEdited(impl.name, texts))
