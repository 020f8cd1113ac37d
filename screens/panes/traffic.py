"""Traffic: the cost model beside what was measured. Ideal bytes against what each
implementation's kernels really move (manual against fused, side by side), the DRAM bytes Nsight
Compute measured for one call (the `counters` action; "n/a" with the reason in the summary when
they could not be), GB/s against the ceiling, and a roofline with each implementation on it.

Attributes down: `model` (a RunModel; its `environment` holds the measured ceilings).
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.reactive import reactive
from textual.widgets import Static

from workbench.results.record import Flag, Measured, Part, has_flag

from .. import fmt
from . import charts
from .chart_plot import ChartPlot, DrawnWhenShown
from ..keys import KeyDataTable
from ..model import Row, RunModel

COLUMNS = ("impl", "ideal", "moved est.", "× ideal", "FLOPs", "FLOP/B", "GB/s", "% ceil", "bound")
MEASURED_AT = 4  # the ncu column goes beside the model's bytes, only when a row has counters
BAR_WIDTH = 12


class TrafficPane(DrawnWhenShown, Vertical):
    model: reactive[RunModel | None] = reactive(None, always_update=True, init=False, repaint=False)
    sweep_param: reactive[str] = reactive("", init=False, repaint=False)  # named in the roofline's legend

    def compose(self) -> ComposeResult:
        yield Static("", id="traffic-summary", classes="summary")
        yield KeyDataTable(id="traffic-table", cursor_type="row", zebra_stripes=True)
        yield ChartPlot(id="roofline-plot")
        yield Static("", id="roofline-caption", classes="caption")

    def on_mount(self) -> None:
        self.query_one(KeyDataTable).add_columns(*COLUMNS)
        self.watch_model(self.model)

    def watch_model(self, model: RunModel | None) -> None:
        if not self.is_mounted:
            return
        rows = [r for r in (model.rows.values() if model else ()) if _filled(r.record and r.record.traffic)]
        self.query_one("#traffic-summary", Static).update(summary(rows, model))
        self._fill_table(rows)
        self._draw_roofline(rows, (model.environment if model else None) or {})

    def _fill_table(self, rows: list[Row]) -> None:
        worst = max((r.traffic.bytes_moved_est or 0 for r in rows), default=0)
        table = self.query_one(KeyDataTable)
        measured = any(_filled(r.record and r.record.measured) for r in rows)
        if measured != (len(table.columns) > len(COLUMNS)):
            table.clear(columns=True)
            table.add_columns(*columns(measured))
        table.replace_rows(traffic_cells(row, worst, measured) for row in rows)

    def _draw_roofline(self, rows: list[Row], environment: dict) -> None:
        """Draw the roofline, or keep it for when the pane is shown (DrawnWhenShown)."""
        if self.draw_later(rows, environment):
            return
        plot = self.query_one(ChartPlot)
        ceilings = environment.get("ceilings") or {}
        dtype = next((r.record.dtype for r in rows if r.record), None)
        peak = (ceilings.get("matmul_tflops") or {}).get(dtype)
        points = [(r.label, r.sweep_value, r.traffic.intensity, r.traffic.tflops) for r in rows]
        copy, param = ceilings.get("copy_gbps"), self.sweep_param
        interpreted = {r.label for r in rows if has_flag(r.record, Flag.INTERPRETER)}
        caption = plot.draw(lambda plt: charts.roofline(plt, points, copy, peak, param, interpreted))
        self.query_one("#roofline-caption", Static).update(caption)

    _draw_shown = _draw_roofline


def _filled(part: Part | None) -> bool:
    """Whether a record's part is there with a key in it (an empty object: not there)."""
    return part is not None and bool(part.to_dict())


def columns(measured: bool) -> tuple[str, ...]:
    return COLUMNS[:MEASURED_AT] + ("measured",) + COLUMNS[MEASURED_AT:] if measured else COLUMNS


def traffic_cells(row: Row, worst_bytes: int, measured: bool = False) -> tuple[str, ...]:
    t = row.traffic
    ideal, moved = t.bytes, t.bytes_moved_est
    ratio = moved / ideal if fmt.is_number(moved) and fmt.is_number(ideal) and ideal else None
    bar = "█" * max(1, round(BAR_WIDTH * moved / worst_bytes)) if ratio and worst_bytes else ""
    cells = (fmt.row_title(row.label, row.sweep_value), fmt.size_bytes(ideal), f"{fmt.size_bytes(moved)} {bar}",
             f"{ratio:.3g}×" if ratio else "-", fmt.si(t.flops),
             fmt.number(t.intensity, 3), fmt.number(t.gbps),
             fmt.percent(t.pct_of_ceiling), str(t.bound or "-"))
    if not measured:
        return cells
    return cells[:MEASURED_AT] + (measured_cell(row.record.measured if row.record else None),) + cells[MEASURED_AT:]


def measured_cell(measured: Measured | dict | None) -> str:
    """DRAM bytes Nsight Compute measured for one call and their share of the model's moved
    bytes ("2.14 GiB 99.7%"); "-" when not asked, "n/a" when counters were unavailable.
    `measured`: the record's Measured (a dict is read into one)."""
    if measured is not None and not isinstance(measured, Measured):
        measured = Measured.from_dict(measured)
    if measured is None or not _filled(measured):
        return "-"
    if measured.reason or not fmt.is_number(measured.dram_bytes):
        return "n/a"
    pct = measured.pct_of_model
    return f"{fmt.size_bytes(measured.dram_bytes)}" + (f" {pct:.0f}%" if fmt.is_number(pct) else "")


def summary(rows: list[Row], model: RunModel | None) -> str:
    """The cost model in one line, and the ceilings it is measured against."""
    if not rows:
        return "no traffic figures yet: run check + bench"
    t = rows[0].traffic
    env = (model.environment if model else None) or {}
    ceiling = (env.get("ceilings") or {}).get("copy_gbps")
    sheet = (env.get("datasheet") or {}).get("hbm_gbps")
    parts = [f"ideal: read {fmt.size_bytes(t.bytes_read)}, write "
             f"{fmt.size_bytes(t.bytes_written)}, {fmt.si(t.flops)}FLOP"]
    if fmt.is_number(ceiling):
        parts.append(f"copy ceiling {ceiling:.0f} GB/s" + (f" (datasheet {sheet:.0f})" if fmt.is_number(sheet) else ""))
    else:
        parts.append("no measured ceiling on this device")
    why = next((m.reason for r in rows if r.record and (m := r.record.measured) and m.reason), None)
    if why:  # counters were asked for and could not be measured: say why once
        parts.append(f"counters: {why}")
    return " · ".join(parts)
