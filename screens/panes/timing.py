"""Timing: a chart that grows while samples arrive, then medians with p20..p80 (or the sweep),
above the results table. `m` switches time / GB/s / TFLOP/s.

The table's columns come in priority order (status and the time figures first, notes last);
impl, status, median and spread stay in view while the rest scrolls sideways (left/right,
h/l; the titles are cut before their sweep value where those four would not fit:
fit_fixed_columns); a long cell is cut with `…`, and the highlighted row's full text is on the
line below.

Attributes down: `model` (a RunModel, set again whenever it changed). The chart is redrawn
here, on the UI thread, by refreshing the plot widget itself.
"""

from __future__ import annotations

from rich.cells import cell_len
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Container, Vertical
from textual.reactive import reactive
from textual.widgets import DataTable, Static

from workbench.results.record import Flag, Timing, flag_kinds, has_flag, last_good, read_record

from .. import fmt
from . import charts
from .chart_plot import ChartPlot, DrawnWhenShown
from ..devices_view import row_devices, show_device_column
from .kernel_names import fit
from ..keys import KeyDataTable
from ..model import Row, RunModel
from ..statics import update_static

COLUMNS = ("impl", "status", "median", "spread", "GB/s", "% ceil", "TFLOP/s", "n",
           "check", "build", "timer", "notes")
FIXED_COLUMNS = 4  # impl, status, median, spread: always in view while the rest scrolls
METRIC_ORDER = tuple(charts.METRICS)
KEPT_TEXT = Flag.KEPT.template  # "kept from an earlier run: the run after it was cancelled before this row"
STATUS_WIDTH = 16  # the whole error is on the row's detail line and in the Log pane


MIN_CHART_LINES = 6  # app.tcss's #timing-chart min-height
SWEEP_PLOT_LINES = 6  # a sweep's plot: its frame, x axis and labels, and 2-3 rows of data


class TimingPane(DrawnWhenShown, Container):
    BINDINGS = [Binding("m", "next_metric", "Metric")]

    model: reactive[RunModel | None] = reactive(None, always_update=True, init=False, repaint=False)
    metric: reactive[str] = reactive("time", init=False, repaint=False)
    sweep_param: reactive[str] = reactive("", init=False, repaint=False)
    # (shape, dtype, swept params) of the run as edited now: results of another spec are marked
    current: reactive[tuple | None] = reactive(None, always_update=True, init=False, repaint=False)
    _rows: tuple[Row, ...] | list[Row] = ()  # the rows in the table, in its order
    _charted: RunModel | None = None  # the model whose rows the chart last drew

    def compose(self) -> ComposeResult:
        with Vertical(id="timing-chart"):
            yield ChartPlot(id="timing-plot")
            yield Static("", id="timing-caption", classes="caption")
        yield KeyDataTable(id="results-table", cursor_type="row", zebra_stripes=True,
                           fixed_columns=FIXED_COLUMNS)
        yield Static("", id="row-detail", classes="row-detail")

    def on_mount(self) -> None:
        self.query_one(KeyDataTable).add_columns(*COLUMNS)
        self._draw()

    def watch_model(self) -> None:
        self._draw()

    def watch_metric(self) -> None:
        self._draw()

    def watch_current(self) -> None:
        if self.is_mounted:
            self._draw_chart(list(self.model.rows.values()) if self.model else [])

    def action_next_metric(self) -> None:
        self.metric = METRIC_ORDER[(METRIC_ORDER.index(self.metric) + 1) % len(METRIC_ORDER)]

    def _draw(self) -> None:
        if not self.is_mounted:
            return
        rows = list(self.model.rows.values()) if self.model else []
        self._draw_chart(rows)
        self._fill_table(rows)

    def _draw_chart(self, rows: list[Row]) -> None:
        """Draw the chart, or keep it for when the pane is shown (DrawnWhenShown)."""
        if self.draw_later(rows):
            return
        plot = self.query_one(ChartPlot)
        if self.model is not self._charted:  # another run's rows (a run started): none of its lines stay
            self._charted = self.model
            plot.drop_last()
        metric, param = self.metric, self.sweep_param
        idle = "a run is starting: its samples appear here as they arrive" \
            if getattr(self.app, "running_shown", False) else "no results yet: press r to run"
        caption = plot.draw(lambda plt: self._chart(plt, rows, metric, param)) if rows else idle
        stale = stale_note(rows, self.current)
        if stale:
            caption = Text.assemble((stale, "bold yellow"), "\n", caption)
        update_static(self.query_one("#timing-caption", Static), caption)
        plot.display = bool(rows)
        self._fit_medians(rows, caption)

    def _fit_medians(self, rows: list[Row], caption) -> None:
        """The medians chart gets a line per implementation (its frame and x axis: 3 more, and
        the caption's lines): with fewer, at 80x24 six names in five lines overlap, and an
        implementation goes missing from the chart while the table lists it."""
        timed = [r for r in rows if r.record and r.sweep_value is None and r.timing.median_ms is not None]
        chart = self.query_one("#timing-chart")
        width = chart.size.width or self.size.width or 80
        text = str(getattr(caption, "plain", caption))
        lines = sum(max(1, -(-len(line) // width)) for line in text.split("\n"))  # as the caption wraps
        if any(r.sweep_value is not None for r in rows):  # the plot keeps SWEEP_PLOT_LINES under its caption
            need = SWEEP_PLOT_LINES + lines  # (at 80x24 a stale note and the legend left it none: axis upside down)
        else:
            need = len(timed) + 3 + lines if timed else 0
        chart.styles.min_height = max(MIN_CHART_LINES, need)

    _draw_shown = _draw_chart

    @staticmethod
    def _chart(plt, rows: list[Row], metric: str, param: str) -> str:
        swept = [r for r in rows if r.sweep_value is not None]
        if swept:
            return charts.sweep(plt, swept, metric, param or "sweep value")
        if any(r.record for r in rows):
            return charts.medians(plt, [r for r in rows if r.record], metric)
        return charts.live_samples(plt, rows)

    _filled_width = 0  # the table's width when its titles were fitted (fit_fixed_columns)

    def on_resize(self) -> None:
        if self._rows:  # the caption wraps otherwise: the chart's lines per implementation follow
            self._fit_medians(list(self._rows), self.query_one("#timing-caption", Static).render())
            if self._table_width() != self._filled_width:  # the titles are fitted to the width
                self._fill_table(list(self._rows))

    def _table_width(self) -> int:
        table = self.query_one(KeyDataTable)
        return table.scrollable_content_region.width or table.size.width

    def _fill_table(self, rows: list[Row]) -> None:
        """The table anew from `rows`; the cursor stays on the row it was on (by label and sweep
        value, wherever the row is now), else at its place."""
        table = self.query_one(KeyDataTable)
        cursor = table.cursor_row
        was = _identity(self._rows[cursor]) if 0 <= cursor < len(self._rows) else None
        spread = len(row_devices(rows)) > 1  # rows on several devices: which one each ran on
        show_device_column(table, spread)
        self._filled_width = width = self._table_width()
        cells = fit_fixed_columns([table_cells(row) for row in rows], rows, width)
        table.replace_rows(row_cells + ((row.device or "-",) if spread else ()) for row_cells, row in zip(cells, rows))
        self._rows = rows
        if rows:
            now = next((i for i, row in enumerate(rows) if _identity(row) == was), min(cursor, len(rows) - 1))
            table.move_cursor(row=now, animate=False)
        self._show_detail(table.cursor_row)

    @on(DataTable.RowHighlighted, "#results-table")
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_detail(event.cursor_row)

    def _show_detail(self, index: int) -> None:
        rows = self._rows
        detail = row_detail(rows[index]) if 0 <= index < len(rows) else ""
        update_static(self.query_one("#row-detail", Static), detail)


def _identity(row: Row) -> tuple:
    """A row's key in its RunModel: (label, sweep value)."""
    return row.label, row.sweep_value


def stale_note(rows: list[Row], current: tuple | None) -> str | None:
    """'results are for 512x512 float32; the spec is now 1024x512 float32 (r runs it)', or None
    when the shown results match the spec being edited (swept fields are not compared).
    `current` is (shape, dtype, swept fields[, the spec editor's problem]): while a field is
    invalid r runs nothing, and the note says so (results or none) rather than name the last
    valid spec as the one r runs."""
    if current is None:
        return None
    shape, dtype, swept, *rest = current
    problem = rest[0] if rest else ""
    if problem:
        return f"⚠ the spec being edited is not valid ({problem}): r runs nothing until it is"
    found = next((r.record for r in rows if r.record), None)
    if found is None:
        return None
    record = read_record(found)  # a Row's is a Record already
    old = {k: v for k, v in (record.shape or {}).items() if k not in swept}
    new = {k: v for k, v in shape.items() if k not in swept}
    if old == new and record.dtype == dtype:
        return None
    def spec(fields: dict, dt) -> str:  # a swept field by its name: "4xN float32" (it read "4 float32")
        dims = "x".join(str(k) if k in swept else str(v) for k, v in fields.items())
        return " ".join(x for x in (dims, str(dt or "")) if x)
    return (f"⚠ results are for {spec(record.shape or {}, record.dtype)}; the spec is now "
            f"{spec(shape, dtype)} (r runs it)")


def table_cells(row: Row) -> tuple[str, ...]:
    """One results-table line: figures from the finished record, or progress so far."""
    timing, traffic = row.timing, row.traffic
    median = timing.median_ms
    status = row.status if not row.error or row.status == "ok" else f"{row.status}: {fmt.tui_text(row.error)}"
    if row.status == "skipped" and row.error == "cancelled":
        status = "cancelled"  # "skipped: cancel…" pushed the spread out of view at 80 columns
    if row.kept:
        status = f"{status} (kept)"  # an earlier run's figures, not this run's
    return (fmt.row_title(row.label, row.sweep_value), fit(status, STATUS_WIDTH), fmt.ms(median),
            fmt.spread(timing.p20_ms, timing.p80_ms, median),
            fmt.number(traffic.gbps), fmt.percent(traffic.pct_of_ceiling),
            fmt.number(traffic.tflops), str(timing.n or len(row.samples_ms) or "-"),
            fmt.check(row.check), fmt.ms(row.build_ms),
            fmt.timer(timing.timer or row.timer, _interpreted(row)),
            ", ".join(filter(None, (earlier_code(row, short=True), notes(timing, row.flags)))))


def fit_fixed_columns(cells: list[tuple[str, ...]], rows: list[Row], width: int,
                      padding: int = 1) -> list[tuple[str, ...]]:
    """The rows' cells with the implementation titles cut ('pytorch_e… @ 1024', fmt.fit_title)
    where the FIXED_COLUMNS would not fit `width` cells otherwise (each column is its widest
    cell or header plus `padding` either side): a sweep's titles at 80x24 pushed the spread,
    which the table keeps in view, off the pane ('-0.39/+6.'). The row's detail line under
    the table has the whole title. width 0 (not laid out yet): unchanged."""
    if not width or not cells:
        return cells
    widths = [max([cell_len(COLUMNS[i])] + [cell_len(c[i]) for c in cells]) + 2 * padding
              for i in range(FIXED_COLUMNS)]
    if sum(widths) <= width:
        return cells
    room = max(len(COLUMNS[0]) + 2, width - sum(widths[1:]) - 2 * padding)
    return [(fmt.fit_title(row.label, row.sweep_value, room),) + c[1:] for c, row in zip(cells, rows)]


def row_detail(row: Row) -> Text:
    """The highlighted row's long cells in full: status with its whole error, check, timer and
    notes (the figures are in the table)."""
    timing = row.timing
    text = Text(f"{fmt.row_title(row.label, row.sweep_value)}: {row.status}", style="bold")
    if row.error and row.status != "ok":
        text.append(f": {fmt.tui_text(row.error)}", style="bold red" if row.status == "failed" else "yellow")
    if row.kept:
        text.append(f" · {KEPT_TEXT}", style="yellow")
    timer = timing.timer or row.timer
    parts = [f"check {fmt.check(row.check)}" if row.check else "",
             f"timer {fmt.timer(timer, _interpreted(row))}" if timer else "",
             notes(timing, row.flags)]
    for part in filter(None, parts):
        text.append(f" · {part}")
    earlier = earlier_code(row)
    if earlier:
        text.append(f" · {earlier}", style="yellow")
    return text


def earlier_code(row: Row, short: bool = False) -> str:
    """Watch mode: a row whose current code fails keeps its last good figures under `last_good`
    (docs/CONTRACTS.md "Watch mode"): 'last good (earlier code): 2 ms · 14 GB/s' and, in full,
    which files' sha256 they were measured from; '' for any other row."""
    kept = last_good(row.record)
    if not kept or not isinstance(kept.get("record"), dict):
        return ""
    from workbench.watch.diff import measured_from, speed_text

    figures = speed_text(kept["record"]) or "no figures"
    if short:
        return f"last good (earlier code) {figures}"
    return f"last good, from the earlier code ({measured_from(kept)}): {figures}"


def notes(timing: Timing | dict, flags=()) -> str:
    """What the figure's reader must know: launch-bound, clock drift, L2 not flushed, a CPU
    whose cores were busy, a median that did not converge (the engine's flags). `timing`: the
    record's Timing (a timing dict is read into one)."""
    if not isinstance(timing, Timing):
        timing = Timing.from_dict(timing)
    marks = [text for on, text in ((timing.launch_bound, "launch-bound"), (timing.clock_fell, "clock fell"))
             if on]
    if timing.flush_l2 is False:
        marks.append("L2 warm")
    if timing.device_median_ms is not None:
        marks.append(f"device {fmt.ms(timing.device_median_ms)}")
    kinds = flag_kinds(flags)
    if Flag.CPU_CONTENDED in kinds:
        marks.append("CPU contended")  # first: it is why the median did not converge
    if Flag.NOT_CONVERGED in kinds:
        marks.append("not converged")
    return ", ".join(marks)


def _interpreted(row: Row) -> bool:
    """The engine flags a record timed under a CPU interpreter (results.INTERPRETER_FLAG)."""
    return has_flag(row.record, Flag.INTERPRETER)
