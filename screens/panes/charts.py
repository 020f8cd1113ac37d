"""Drawing the charts into a textual-plotext `Plot` (plain functions over plain data).

Every function clears the plot's data first and returns a caption (rich Text): the legend, one
glyph and colour per series (so NO_COLOR and colour-blind readers can tell them apart), with
the sweep values a series covers, then what was dropped and which axes are logarithmic. The
legend lives under the chart, never over the data (plotext's own legend is not used).
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Sequence

from rich.text import Text

from ..fmt import is_number
from ..model import Row

# (plotext colour, the same colour in rich) per series, and one glyph per series beside it
COLORS = (("cyan", "cyan"), ("orange", "dark_orange"), ("green", "green"), ("magenta", "magenta"),
          ("blue", "blue"), ("red", "red"), ("cyan+", "bright_cyan"), ("green+", "bright_green"))
MARKERS = ("◆", "●", "▲", "■", "✚", "★", "◇", "○")
# lines in half blocks: in the app, braille lines on a log axis drifted off their points
LINE = "hd"
Point = tuple[str, Any, Any, Any]  # (implementation label, sweep value or None, x, y)
METRICS = {"time": "median ms", "gbps": "GB/s", "tflops": "TFLOP/s"}
LOG_RATIO = 20.0  # an axis spanning more than this factor is drawn logarithmic
# The live scatter keeps one sample per cell of a grid finer than any chart (a 200x50 terminal's
# chart is ~180x35 cells): a stream of 0.5 ms kernels sends ~2000 samples a second, and plotext's
# build of one 58,280-sample series took 94-226 ms of the event loop on the 2-core CPU.
THIN_CELLS = (320, 80)
INTERPRETED = "Triton interpreter: no GPU speed"  # why a row timed on the CPU's interpreter has no place
MAX_X_TICKS = 6  # ticks on a sweep's x axis of whole numbers (integer_ticks)


def metric_value(row: Row, ms: float | None, metric: str) -> float | None:
    """`ms` in the chosen metric: the engine's own GB/s or TFLOP/s rescaled to this time."""
    if not is_number(ms) or ms <= 0:
        return None
    if metric == "time":
        return ms
    median, rate = row.timing.median_ms, getattr(row.traffic, metric, None)
    if not (is_number(median) and is_number(rate)):
        return None
    return rate * median / ms


def keep_points(xs: Sequence, ys: Sequence, log_x: bool, log_y: bool) -> tuple[list, list, int]:
    """Drop NaN/None points, and zero or negative ones on a log axis; returns (xs, ys, dropped)."""
    kept = [(x, y) for x, y in zip(xs, ys)
            if _ok(x, log_x) and _ok(y, log_y)]
    return [p[0] for p in kept], [p[1] for p in kept], len(xs) - len(kept)


def _ok(value, log: bool) -> bool:
    return is_number(value) and (value > 0 or not log)


def wants_log(values: Iterable) -> bool:
    positive = [v for v in values if is_number(v) and v > 0]
    return len(positive) > 1 and max(positive) / min(positive) > LOG_RATIO


def setup(plt) -> None:
    """Clear the plot; titles and axis names go in the caption (rows are scarce at 80x24)."""
    plt.clear_data()
    plt.clear_figure()


def thin(ys: Sequence[float], cells: tuple[int, int] = THIN_CELLS) -> tuple[list[int], list[float]]:
    """(x, y) of the samples a scatter shows, x the 1-based sample number: all of them when there
    are no more than cells[0]; else the first sample in each occupied cell of a cells[0] x cells[1]
    grid over the samples' x and y range (every occupied cell keeps a point, so the outliers and the
    band's width stay), in sample order."""
    n = len(ys)
    if n <= cells[0]:
        return list(range(1, n + 1)), list(ys)
    import numpy as np

    y = np.asarray(ys, dtype=float)
    lo, hi = float(np.nanmin(y)), float(np.nanmax(y))
    row = np.nan_to_num((y - lo) / ((hi - lo) or 1.0) * (cells[1] - 1)).astype(np.int64)
    column = np.arange(n, dtype=np.int64) * cells[0] // n
    _, first = np.unique(column * cells[1] + row, return_index=True)
    first.sort()
    return (first + 1).tolist(), y[first].tolist()


def live_samples(plt, rows: Sequence[Row]) -> Text:
    """Every sample so far (thinned to one per cell: thin), one series per implementation
    (x: sample number, y: ms)."""
    setup(plt)
    legend = []
    for style, row in zip(styles(), rows):
        if row.samples_ms:
            (color, _), marker = style
            plt.scatter(*thin(row.samples_ms), color=color, marker=marker)
            legend.append((style, row.label))
    if not legend:
        return Text("waiting for samples…")
    return caption(legend, "samples as they arrive: y ms, x sample number")


def medians(plt, rows: Sequence[Row], metric: str) -> Text:
    """Median per implementation with its p20..p80 bar, one line each (names on the y axis)."""
    setup(plt)
    points = [(row, metric_value(row, row.timing.median_ms, metric)) for row in rows]
    points = [(row, v) for row, v in points if v is not None]
    if not points:
        return Text(f"no timed results: {untimed_reasons(rows)}")
    log = wants_log(v for _, v in points)
    plt.xscale("log" if log else "linear")
    for y, (((color, _), marker), (row, value)) in enumerate(reversed(list(zip(styles(), points))), start=1):
        lo, hi = (metric_value(row, q, metric) for q in (row.timing.p20_ms, row.timing.p80_ms))
        if lo is not None and hi is not None:
            plt.plot([lo, hi], [y, y], color=color, marker="─")
        plt.scatter([value], [y], color=color, marker=marker)
    plt.yticks(list(range(1, len(points) + 1)), [r.label for r, _ in reversed(points)])
    plt.ylim(0.5, len(points) + 0.5)
    # the names are on the y axis: no legend needed
    return caption([], f"x {METRICS[metric]}: glyph median, ─ p20..p80 (m: metric)", log_x=log)


def sweep(plt, rows: Sequence[Row], metric: str, param: str) -> Text:
    """The metric against the swept value, one line per implementation; log axes where they help."""
    setup(plt)
    series = _series(rows, metric)
    log_x = wants_log(x for xs, _ in series.values() for x in xs)
    log_y = wants_log(y for _, ys in series.values() for y in ys)
    plt.xscale("log" if log_x else "linear")
    plt.yscale("log" if log_y else "linear")
    dropped, legend = 0, []
    for style, (label, (xs, ys)) in zip(styles(), series.items()):
        (color, _), marker = style
        xs, ys, lost = keep_points(xs, ys, log_x, log_y)
        dropped += lost
        if xs:
            plt.plot(xs, ys, color=color, marker=LINE)
            plt.scatter(xs, ys, color=color, marker=marker)
        legend.append((style, label + placed_note(len(xs), len(xs) + lost)))
    placed = [x for xs, ys in series.values() for x in keep_points(xs, ys, log_x, log_y)[0]]
    ticks = integer_ticks(placed, log_x)
    if ticks:  # whole sweep values get whole ticks: plotext's own read 127.50 for a sweep of N
        plt.xticks(ticks, [str(int(t)) for t in ticks])
    return caption(legend, f"y {METRICS[metric]}, x {param} (m: metric)", log_x, log_y, dropped)


def integer_ticks(values: Sequence, log: bool, most: int = MAX_X_TICKS) -> list[int]:
    """Tick positions for an axis of whole numbers (a sweep of N): the values themselves, at
    most `most` of them, each at least 1/(most+1) of the axis from the one before (the first and
    the last always); [] when some value is not a whole number (plotext's ticks then)."""
    if not values or not all(is_number(v) and float(v).is_integer() for v in values):
        return []
    points = sorted({int(v) for v in values})
    if log and points[0] <= 0:
        return []
    where = [math.log10(v) if log else float(v) for v in points]
    gap = (where[-1] - where[0]) / (most + 1)
    kept = [0]
    for index in range(1, len(points)):
        if where[index] - where[kept[-1]] >= gap:
            kept.append(index)
    if kept[-1] != len(points) - 1:  # the last value always: it replaces the one too close to it
        kept[-1 if len(kept) > 1 else len(kept):] = [len(points) - 1]
    return [points[i] for i in kept]


def _series(rows: Sequence[Row], metric: str) -> dict[str, tuple[list, list]]:
    """label -> (sweep values, metric values) of the rows that have finished: a row still queued
    or running has no figure yet, and is not a point dropped for zero/NaN (a new user read
    "not placed: zero/NaN" mid-run)."""
    series: dict[str, tuple[list, list]] = {}
    for row in rows:
        xs, ys = series.setdefault(row.label, ([], []))
        if row.status in ("queued", "running"):
            continue
        xs.append(_scalar(row.sweep_value))
        ys.append(metric_value(row, row.timing.median_ms, metric))
    return series


def roofline(plt, points: Sequence[Point], copy_gbps: float | None, peak_tflops: float | None,
             param: str = "", interpreted: Iterable[str] = ()) -> Text:
    """Achieved TFLOP/s against intensity (FLOP/byte), both log, under the measured ceilings:
    one glyph per implementation, its sweep points joined in sweep order. `interpreted`: labels
    timed under the Triton interpreter (no GPU speed: named so when not placed)."""
    interpreted = set(interpreted)
    setup(plt)
    xs = [x for _, _, x, _ in points if is_number(x) and x > 0]
    if not xs:
        return Text("no points: run bench to place the implementations")
    plt.xscale("log")
    plt.yscale("log")
    ceiling = _ceiling(plt, min(xs) / 4, max(xs) * 4, copy_gbps, peak_tflops)
    groups: dict[str, list[Point]] = {}
    for point in points:
        groups.setdefault(point[0], []).append(point)
    dropped, legend, placed = 0, [], []
    for style, (label, group) in zip(styles(), groups.items()):
        (color, _), marker = style
        kept = [(x, y) for _, _, x, y in group if _ok(x, True) and _ok(y, True)]
        placed += kept
        if label not in interpreted:  # those are named in the legend: no GPU speed, not a bad figure
            dropped += len(group) - len(kept)
        if len(kept) > 1:
            plt.plot([x for x, _ in kept], [y for _, y in kept], color=color, marker=LINE)
        if kept:
            plt.scatter([x for x, _ in kept], [y for _, y in kept], color=color, marker=marker)
        legend.append((style, label + sweep_span(param, [p[1] for p in group])
                       + placed_note(len(kept), len(group), INTERPRETED if label in interpreted else "zero/NaN")))
    if not placed and not is_number(copy_gbps):
        # nothing on log axes at all (the CPU, every row interpreted): plotext's build raised
        # TypeError ('NoneType' object is not iterable) on the empty log ticks; empty linear axes
        # build, and the legend says why each series is missing
        plt.xscale("linear")
        plt.yscale("linear")
        return caption(legend, f"roofline: y TFLOP/s, x FLOP/byte · {ceiling}", False, False, dropped)
    _widen_single_values(plt, placed, ceiling_drawn=is_number(copy_gbps))
    return caption(legend, f"roofline: y TFLOP/s, x FLOP/byte · {ceiling}", True, True, dropped)


def _widen_single_values(plt, placed: Sequence[tuple[float, float]], ceiling_drawn: bool) -> None:
    """An axis whose values are all one number (a lone point, no ceiling line: the CPU) gets a
    4x range either side: plotext drew it upside down (0.0005 at the top, 0.0787 at the bottom).
    Log axes take their limits as log10 values."""
    if not placed:
        return
    for values, set_limits, spread_by_ceiling in (([x for x, _ in placed], plt.xlim, ceiling_drawn),
                                                  ([y for _, y in placed], plt.ylim, ceiling_drawn)):
        if not spread_by_ceiling and len(set(values)) == 1:
            set_limits(math.log10(values[0] / 4), math.log10(values[0] * 4))


def untimed_reasons(rows: Sequence[Row]) -> str:
    """Why no row has a median, counted: '4 cancelled', '1 failed, 2 unavailable', 'not
    benchmarked (no bench action)'. The fixed '(check failed, unavailable, or not benchmarked)'
    was shown after a cancel too, naming none of the three that happened."""
    from collections import Counter

    def why(row: Row) -> str:
        if row.status == "skipped" and row.error == "cancelled":
            return "cancelled"
        if row.status in ("ok", None):
            return "not benchmarked"
        return row.status
    counts = Counter(why(row) for row in rows)
    return ", ".join(f"{n} {reason}" for reason, n in counts.items()) or "no rows yet"


def placed_note(kept: int, total: int, why: str = "zero/NaN") -> str:
    """What a legend entry adds when its series lost points: ' (not placed: zero/NaN)' for none
    placed (`why`: INTERPRETED for a row timed under the Triton interpreter), ' (2 of 5
    placed)' for some; '' when all are. The caption's count alone left a legend naming an
    implementation with nothing on the chart."""
    if kept == total:
        return ""
    return f" (not placed: {why})" if kept == 0 else f" ({kept} of {total} placed)"


def sweep_span(param: str, values: Sequence) -> str:
    """' N 256…65536' for a series over sweep values ('' when it is one unswept point)."""
    values = [_scalar(v) for v in values if v is not None]
    if not values:
        return ""
    name = f" {param}" if param else ""
    if len(values) == 1:
        return f"{name} {values[0]}"
    return f"{name} {values[0]}…{values[-1]}"


def _ceiling(plt, x_lo: float, x_hi: float, copy_gbps, peak_tflops) -> str:
    if not is_number(copy_gbps):
        return "no measured ceilings here (CPU): points only"
    grid = [x_lo * (x_hi / x_lo) ** (i / 40) for i in range(41)]
    roof = [min(x * copy_gbps / 1000, peak_tflops if is_number(peak_tflops) else math.inf)
            for x in grid]
    plt.plot(grid, roof, color="gray", marker="·")
    return f"grey line: the ceiling, {copy_gbps:.0f} GB/s copy" + (
        f", {peak_tflops:.0f} TFLOP/s" if is_number(peak_tflops) else "")


def caption(legend: Sequence[tuple[tuple, str]], what: str, log_x: bool = False, log_y: bool = False,
            dropped: int = 0) -> Text:
    """The legend (glyph and name per series, in its colour), then `what`, log axes, drops."""
    text = Text()
    for ((_, rich_color), marker), label in legend:
        text.append(f"{marker} {label}", style=rich_color)
        text.append("  ")
    if legend:
        text.append("\n")
    parts = [what] if what else []
    axes = [a for a, on in (("x", log_x), ("y", log_y)) if on]
    if axes:
        parts.append(f"log {' and '.join(axes)}")
    if dropped:
        parts.append(f"dropped {dropped} zero/NaN point{'s' if dropped > 1 else ''}")
    text.append(" · ".join(parts), style="dim")
    return text


def _scalar(value):
    return value[0] if isinstance(value, (list, tuple)) and value else value


def styles():
    """((plotext colour, rich colour), glyph) per series, repeating after len(MARKERS)."""
    index = 0
    while True:
        yield COLORS[index % len(COLORS)], MARKERS[index % len(MARKERS)]
        index += 1
