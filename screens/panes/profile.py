"""Profile: per implementation, the profiler's kernel table (sortable: click a header or press s),
kernels per call, and CPU against device time.

Kernel names are shortened for the table (screens.panes.kernel_names: demangled, namespaces dropped,
template arguments collapsed, cut to the width left by the time columns, which stay in view);
the highlighted row's full name is on the line under the table, and enter shows it whole.
t shows where the row's Kineto trace was kept (`--trace-dir DIR`) and how to open it in Perfetto.
i opens the list of implementations (the pane's Select, otherwise reached only by shift+tab).

Attributes down: `model`. The implementation shown is picked in the pane's own Select.
"""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.reactive import reactive
from textual.widgets import DataTable, Select, Static

from .. import fmt
from . import kernel_names
from ..dialogs import TextScreen
from ..keys import KeyDataTable
from ..model import Row, RunModel

COLUMNS = (("name", "name"), ("device µs", "self_device_us"), ("CPU µs", "self_cpu_us"),
           ("%", "pct"), ("calls", "calls"), ("kind", "kind"))
FIXED_COLUMNS = 3  # name, device µs, CPU µs: the times stay in view; %, calls, kind may scroll
MIN_NAME_WIDTH = 16


class ProfilePane(Vertical):
    BINDINGS = [Binding("s", "next_sort", "Sort"),
                Binding("enter", "show_name", "Whole kernel name", show=False),
                Binding("t", "show_trace", "Trace file", show=False),
                Binding("i", "pick_impl", "Pick the implementation", show=False)]

    model: reactive[RunModel | None] = reactive(None, always_update=True, init=False, repaint=False)

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._sort = (1, True)  # column index, descending: device time first (CPU time in a CPU-only profile)
        self._sort_chosen = False  # s or a header click chose it: kept whatever the profile
        self._shown: Row | None = None
        self._names: list[str] = []  # full names, by row key
        self._chosen: str | None = None  # the implementation picked in the Select, kept across re-runs

    def compose(self) -> ComposeResult:
        yield Select[str]([], id="profile-impl", compact=True, prompt="implementation")
        yield Static("", id="profile-summary", classes="summary")
        yield KeyDataTable(id="profile-table", cursor_type="row", zebra_stripes=True,
                           fixed_columns=FIXED_COLUMNS)
        yield Static("", id="kernel-detail", classes="row-detail")

    _built_width = -1  # the table's width when its names were fitted (`_show`)

    def on_resize(self) -> None:
        """The names fitted again where the table's width changed. Not on every Resize: the
        pane gets one each time its tab is shown (hidden, it has no size), and the rebuild
        (every row added again, every cell rendered anew, a layout) was a third of the `2` key's
        main-thread CPU in a headless pilot on the 2-core box (178-218 against 144-149 ms)."""
        if self._shown is not None and _width(self.query_one(KeyDataTable)) != self._built_width:
            self._show(self._shown)

    def watch_model(self, model: RunModel | None) -> None:
        rows = [r for r in (model.rows.values() if model else ()) if r.profile]
        options = [(_title(r), _title(r)) for r in rows]
        select = self.query_one("#profile-impl", Select)
        # the one picked, once it has a profile again (a re-run starts with none: the Select was
        # emptied and came back on the first implementation), else the one shown, else the first
        wanted = [t for t in (self._chosen, select.value) if t in dict(options)]
        with self.prevent(Select.Changed):
            select.set_options(options)
            if options:
                select.value = wanted[0] if wanted else options[0][1]
        self._show(self._row(rows, select.value))

    @on(Select.Changed, "#profile-impl")
    def _picked(self, event: Select.Changed) -> None:
        event.stop()
        if isinstance(event.value, str):
            self._chosen = event.value
        rows = [r for r in (self.model.rows.values() if self.model else ()) if r.profile]
        self._show(self._row(rows, event.value))

    @staticmethod
    def _row(rows: list[Row], title) -> Row | None:
        return next((r for r in rows if _title(r) == title), None)

    def _show(self, row: Row | None) -> None:
        highlighted = self._highlighted_name()  # the kernel under the cursor stays under it (a sort)
        self._shown = row
        profile = row.profile if row else None
        device = bool((profile or {}).get("device_events"))
        if not self._sort_chosen:  # a CPU-only profile's device µs are all '-': its CPU µs, largest first
            self._sort = (1, True) if device or not profile else (2, True)
        sort, descending = self._sort  # named here too: at 80 columns the sorted header may be scrolled off
        sorted_by = f" · sorted by {sort_label(COLUMNS[sort][0], descending)} (s)" if profile else ""
        self.query_one("#profile-summary", Static).update(
            summary(profile, running=bool(getattr(self.app, "running_shown", False))) + sorted_by)
        items = list((profile or {}).get("rows", ()))
        self._names = [str(item.get("name") or "") for item in items]
        cells = [[(_pct_cell if key == "pct" else _cell)(item.get(key) if device or key != "self_device_us" else None)
                  for _, key in COLUMNS[1:]] for item in items]  # no device events: '-'
        table = self.query_one(KeyDataTable)
        cursor = table.cursor_row if table.row_count else 0  # kept across a redraw or a resize
        self._built_width = _width(table)
        # the name gets what the times and % leave (calls and kind may scroll off at 80 columns)
        room = max(MIN_NAME_WIDTH, self._built_width - _others_width(cells, 3, self._sort[0]) - 3)
        names = display_names(self._names, items, room)
        width = min(room, max((len(n) for n in names), default=MIN_NAME_WIDTH))  # no gap to the times
        table.clear(columns=True)
        sort, descending = self._sort  # the sorted column's header carries ▼ (largest first) or ▲
        labels = [sort_label(label, descending) if i == sort else label for i, (label, _) in enumerate(COLUMNS)]
        table.add_column(labels[0], key=COLUMNS[0][1], width=width)
        for label, (_, key) in zip(labels[1:], COLUMNS[1:]):
            table.add_column(label, key=key)
        for index, (name, rest) in enumerate(zip(names, cells)):
            table.add_row(name, *rest, key=str(index))
        self._apply_sort()
        if table.row_count:
            if highlighted and highlighted in self._names:
                cursor = table.get_row_index(str(self._names.index(highlighted)))
            table.move_cursor(row=min(cursor, table.row_count - 1), animate=False)
        self._show_detail()

    @on(DataTable.RowHighlighted, "#profile-table")
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_detail()

    def _show_detail(self) -> None:
        self.query_one("#kernel-detail", Static).update(self._highlighted_name())

    def _highlighted_name(self) -> str:
        table = self.query_one(KeyDataTable)
        if not table.row_count or not 0 <= table.cursor_row < table.row_count:
            return ""
        key = table.coordinate_to_cell_key((table.cursor_row, 0)).row_key.value
        return self._names[int(key)]

    @on(DataTable.RowSelected, "#profile-table")
    def _selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_show_name()

    def action_show_name(self) -> None:
        """The highlighted kernel's whole name, in a dialog (it can be 900 characters)."""
        name = self._highlighted_name()
        if name:
            self.app.push_screen(TextScreen("Kernel name", name))

    def action_show_trace(self) -> None:
        """Where the shown row's profiler trace is, and how to open it (trace_text)."""
        if self._shown is not None:
            self.app.push_screen(TextScreen("Profiler trace", trace_text(self._shown.profile)))

    def action_pick_impl(self) -> None:
        """The implementations with a profile, listed to pick from (the Select, opened)."""
        select = self.query_one("#profile-impl", Select)
        select.focus()
        select.action_show_overlay()

    def action_next_sort(self) -> None:
        """The next column whose order differs from the one on screen (device µs all '-' on a
        CPU, or CPU µs in the profiler's own order, changed nothing: `s` looked dead); the
        header marks it (▼ largest first, ▲)."""
        table = self.query_one(KeyDataTable)
        shown = [table.get_row_at(r) for r in range(table.row_count)]
        column = self._sort[0]
        for _ in range(len(COLUMNS)):
            column = (column + 1) % len(COLUMNS)
            descending = COLUMNS[column][1] not in ("name", "kind")  # figures: largest first
            if column >= len(table.columns) or not shown:
                break
            ordered = sorted(shown, key=lambda row: _sort_key(row[column]), reverse=descending)
            if ordered != shown:
                break
        self._sort, self._sort_chosen = (column, descending), True
        self._show(self._shown)

    @on(DataTable.HeaderSelected)
    def _header(self, event: DataTable.HeaderSelected) -> None:
        event.stop()
        column, descending = self._sort
        self._sort = (event.column_index, not descending if column == event.column_index else True)
        self._sort_chosen = True
        self._show(self._shown)

    def _apply_sort(self) -> None:
        table = self.query_one(KeyDataTable)
        column, descending = self._sort
        if table.row_count:
            table.sort(COLUMNS[column][1], key=_sort_key, reverse=descending)


def summary(profile: dict | None, running: bool = False) -> str:
    """Kernels per call, and CPU against device time over the profiled rows; without a profile,
    what to do (running: a run is on, whose rows bring theirs if `profile` is ticked)."""
    if not profile:
        if running:
            return "no profile yet: each row's appears here when the row finishes (if `profile` is ticked)"
        return "no profile yet: press r to run (rows are profiled when `profile` is among the run's actions)"
    rows = profile.get("rows", ())
    device = sum(r.get("self_device_us") or 0 for r in rows)
    cpu = sum(r.get("self_cpu_us") or 0 for r in rows)
    kernels = profile.get("kernel_count")
    # numbers as the table writes them (fmt.grouped): '186881.6 µs' above a column of '128,705' read as another unit
    if not profile.get("device_events"):
        return f"no device rows here (CPU-only profile) · CPU {fmt.grouped(cpu)} µs"
    return (f"kernels per call {fmt.number(kernels)} · device {fmt.grouped(device)} µs · "
            f"CPU {fmt.grouped(cpu)} µs")


def trace_text(profile: dict | None) -> str:
    """The row's kept trace and how to open it, or how to keep one (the `t` key)."""
    path = (profile or {}).get("trace_path")
    if not path:
        return ("no trace kept for this row: start workbench (or --replay) with --trace-dir DIR to keep each "
                "profiled row's trace as DIR/<session>-run<i>-<label>.pt.trace.json")
    return (f"{path}\n\nopen it in https://ui.perfetto.dev (Open trace file), or chrome://tracing; "
            "TensorBoard's profiler plugin and HTA read the same file")


def display_names(names: list[str], items: list[dict], width: int) -> list[str]:
    """Kernel rows shortened (screens.panes.kernel_names) and cut to `width`; operators and runtime
    calls only cut. Two different kernels that shorten alike are told apart by `·2`, `·3`."""
    shown, seen = [], {}
    for name, item in zip(names, items):
        text = kernel_names.short(name) if item.get("kind", "kernel") == "kernel" else name
        variants = seen.setdefault(text, [])
        if name not in variants:
            variants.append(name)
        number = variants.index(name) + 1
        suffix = f" ·{number}" if number > 1 else ""
        shown.append(kernel_names.fit_name(text, width - len(suffix)) + suffix)
    return shown


def sort_label(label: str, descending: bool) -> str:
    """A column header with the sort's direction: 'device µs ▼' (largest first) or 'name ▲'."""
    return f"{label} {'▼' if descending else '▲'}"


def _others_width(cells: list[list[str]], count: int, sort: int = -1) -> int:
    """Cells the first `count` non-name columns take: each its widest cell or label, plus padding."""
    widths = [len(label) + (2 if index == sort else 0)  # + 2: the sort mark (" ▼")
              for index, (label, _) in enumerate(COLUMNS[1:1 + count], start=1)]
    for row in cells:
        widths = [max(w, len(str(c))) for w, c in zip(widths, row)]
    return sum(w + 2 for w in widths)


def _width(table: DataTable) -> int:
    """The width the names are fitted to (0 while the pane's tab is hidden)."""
    return table.size.width


def _title(row: Row) -> str:
    return fmt.row_title(row.label, row.sweep_value)


def _cell(value) -> str | float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):  # calls too: '2550' beside '22,517'
        return fmt.grouped(value)
    return "-" if value is None else str(value)


def _pct_cell(value) -> str:
    """A share of the device time at one decimal ("99.9", "<0.1"): four significant digits gave
    "99.87", "0.1234" and "1.2e-05" in one column."""
    if not fmt.is_number(value):
        return "-"
    return "<0.1" if 0 < value < 0.05 else f"{value:.1f}"


def _sort_key(value):
    try:
        text = str(value).replace(",", "")
        return (0, float(text[1:]) / 2) if text.startswith("<") else (0, float(text))  # "<0.1": under 0.1
    except ValueError:
        return (1, str(value))
