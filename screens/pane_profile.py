"""Profile: per implementation, the profiler's kernel table (sortable: click a header or press s),
kernels per call, and CPU against device time.

Attributes down: `model`. The implementation shown is picked in the pane's own Select.
"""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.reactive import reactive
from textual.widgets import DataTable, Select, Static

from . import fmt
from .keys import KeyDataTable
from .model import Row, RunModel

COLUMNS = (("name", "name"), ("kind", "kind"), ("calls", "calls"),
           ("device µs", "self_device_us"), ("CPU µs", "self_cpu_us"), ("%", "pct"))


class ProfilePane(Vertical):
    BINDINGS = [Binding("s", "next_sort", "Sort")]

    model: reactive[RunModel | None] = reactive(None, always_update=True, init=False)

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._sort = (3, True)  # column index, descending

    def compose(self) -> ComposeResult:
        yield Select[str]([], id="profile-impl", compact=True, prompt="implementation")
        yield Static("", id="profile-summary", classes="summary")
        yield KeyDataTable(id="profile-table", cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        table = self.query_one(KeyDataTable)
        for label, key in COLUMNS:
            table.add_column(label, key=key)

    def watch_model(self, model: RunModel | None) -> None:
        rows = [r for r in (model.rows.values() if model else ()) if r.profile]
        options = [(_title(r), _title(r)) for r in rows]
        select = self.query_one("#profile-impl", Select)
        current = select.value
        with self.prevent(Select.Changed):
            select.set_options(options)
            if options:
                select.value = current if current in dict(options) else options[0][1]
        self._show(self._row(rows, select.value))

    @on(Select.Changed, "#profile-impl")
    def _picked(self, event: Select.Changed) -> None:
        event.stop()
        rows = [r for r in (self.model.rows.values() if self.model else ()) if r.profile]
        self._show(self._row(rows, event.value))

    @staticmethod
    def _row(rows: list[Row], title) -> Row | None:
        return next((r for r in rows if _title(r) == title), None)

    def _show(self, row: Row | None) -> None:
        profile = row.profile if row else None
        self.query_one("#profile-summary", Static).update(summary(profile))
        device = bool((profile or {}).get("device_events"))
        self.query_one(KeyDataTable).replace_rows(  # no device events: '-', never rows of 0
            [_cell(item.get(key) if device or key != "self_device_us" else None) for _, key in COLUMNS]
            for item in (profile or {}).get("rows", ()))
        self._apply_sort()

    def action_next_sort(self) -> None:
        column, descending = self._sort
        self._sort = ((column + 1) % len(COLUMNS), column + 1 >= 2)
        self._apply_sort()

    @on(DataTable.HeaderSelected)
    def _header(self, event: DataTable.HeaderSelected) -> None:
        event.stop()
        column, descending = self._sort
        self._sort = (event.column_index, not descending if column == event.column_index else True)
        self._apply_sort()

    def _apply_sort(self) -> None:
        table = self.query_one(KeyDataTable)
        if table.row_count:
            column, descending = self._sort
            table.sort(COLUMNS[column][1], key=_sort_key, reverse=descending)


def summary(profile: dict | None) -> str:
    """Kernels per call, and CPU against device time over the profiled rows."""
    if not profile:
        return "no profile: tick `profile` in the actions and run"
    rows = profile.get("rows", ())
    device = sum(r.get("self_device_us") or 0 for r in rows)
    cpu = sum(r.get("self_cpu_us") or 0 for r in rows)
    kernels = profile.get("kernel_count")
    if not profile.get("device_events"):
        return f"no device rows here (CPU-only profile) · CPU {cpu:.1f} µs"
    return f"kernels per call {kernels if kernels is not None else '-'} · device {device:.1f} µs · CPU {cpu:.1f} µs"


def _title(row: Row) -> str:
    return fmt.row_title(row.label, row.sweep_value)


def _cell(value) -> str | float:
    if isinstance(value, float):
        return fmt.number(value)
    return "-" if value is None else str(value)


def _sort_key(value):
    try:
        return (0, float(str(value).replace(",", "")))
    except ValueError:
        return (1, str(value))
