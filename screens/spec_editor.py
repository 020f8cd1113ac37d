"""The spec editor: the op's shape fields, dtype, actions and an optional sweep.

Attributes down: `show(op, run)` fills it, `problem` shows what is wrong with the text.
Messages up: SpecEdited with the raw text on every change; the app parses it (screens.editing).
"""

from __future__ import annotations

from typing import Any

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.reactive import reactive
from textual.widgets import Input, Label, Select, SelectionList, Static

from workbench.session.model import RunSpec

from . import editing
from .catalog import ACTIONS, OpInfo
from .keys import FieldInput, FieldSelect, FieldSelectionList
from .messages import SpecEdited


def _field(name: str, widget: Any) -> Horizontal:
    return Horizontal(Label(name, classes="field-name"), widget, classes="field")


class SpecEditor(Vertical):
    """Shape, dtype, actions and sweep of the run being edited."""

    problem: reactive[str] = reactive("", init=False)

    def compose(self) -> ComposeResult:
        yield Vertical(id="shape-fields")
        yield _field("dtype", FieldSelect([("float32", "float32")], id="dtype", compact=True, allow_blank=False))
        yield FieldSelectionList(*[(a, a) for a in ACTIONS], id="actions", compact=True)
        yield _field("sweep", FieldInput(placeholder="params e.g. N", id="sweep-params", compact=True))
        yield _field("values", FieldInput(placeholder="256, 1024, 4096", id="sweep-values", compact=True))
        yield Static("", id="spec-problem", classes="problem")

    async def show(self, op: OpInfo, run: RunSpec) -> None:
        """Fill every field from `run` (no SpecEdited is posted for it)."""
        with self.prevent(Input.Changed, Select.Changed, SelectionList.SelectedChanged):
            await self._show_shape(op, editing.shape_of(run, op))
            dtype = self.query_one("#dtype", Select)
            dtype.set_options((d, d) for d in op.dtypes)
            dtype.value = editing.dtype_of(run, op)
            actions = self.query_one("#actions", SelectionList)
            actions.deselect_all()
            for action in run.actions:
                actions.select(action)
            params, values = editing.sweep_texts(run.sweep)
            # the op's own last shape field ("params e.g. N" showed for the sleep op, which has none)
            fields = op.shape_fields
            self.query_one("#sweep-params", Input).placeholder = f"params e.g. {fields[-1]}" if fields else "params"
            self.query_one("#sweep-params", Input).value = params
            self.query_one("#sweep-values", Input).value = values
        self.problem = ""

    async def _show_shape(self, op: OpInfo, shape: dict[str, Any]) -> None:
        box = self.query_one("#shape-fields", Vertical)
        await box.remove_children()
        # plain text, not type="integer": that filtered keystrokes, so `1e6` applied as 16 and
        # `2.5` as 25 without a word; the text is kept as typed and editing.with_shape refuses it
        await box.mount_all(_field(name, FieldInput(str(value), name=name, compact=True, classes="shape"))
                            for name, value in shape.items())

    def watch_problem(self, problem: str) -> None:
        self.query_one("#spec-problem", Static).update(problem)
        self.set_class(bool(problem), "-problem")

    @on(Input.Changed)
    @on(Select.Changed)
    @on(SelectionList.SelectedChanged)
    def _edited(self, event: Any) -> None:
        event.stop()
        dtype = self.query_one("#dtype", Select).value
        self.post_message(SpecEdited(
            shape={i.name: i.value for i in self.query(".shape").results(Input)},
            dtype=str(dtype) if dtype is not Select.NULL else "",
            actions=tuple(self.query_one("#actions", SelectionList).selected),
            sweep_params=self.query_one("#sweep-params", Input).value,
            sweep_values=self.query_one("#sweep-values", Input).value))
