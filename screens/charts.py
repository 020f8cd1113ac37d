"""Drawing the charts into a textual-plotext `Plot` (plain functions over plain data).

Every function clears the plot's data first and returns a caption line (what was dropped,
which axes are logarithmic) for the pane to show under the chart.
"""

from __future__ import annotations

import math
from typing import Iterable, Sequence

from .fmt import is_number
from .model import Row

COLORS = ("cyan", "orange", "green", "magenta", "blue", "red", "cyan+", "green+")
# one marker per implementation in the roofline, so points are told apart without colour too
MARKERS = ("◆", "●", "▲", "■", "✚", "★", "◇", "○")
METRICS = {"time": "median ms", "gbps": "GB/s", "tflops": "TFLOP/s"}
LOG_RATIO = 20.0  # an axis spanning more than this factor is drawn logarithmic


def metric_value(row: Row, ms: float | None, metric: str) -> float | None:
    """`ms` in the chosen metric: the engine's own GB/s or TFLOP/s rescaled to this time."""
    if not is_number(ms) or ms <= 0:
        return None
    if metric == "time":
        return ms
    median, rate = row.get("timing", "median_ms"), row.get("traffic", metric)
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


def live_samples(plt, rows: Sequence[Row]) -> str:
    """Every sample so far, one line per implementation (x: sample number, y: ms)."""
    setup(plt)
    drawn = 0
    for color, row in zip(_colors(), rows):
        if row.samples_ms:
            plt.plot(list(range(1, len(row.samples_ms) + 1)), row.samples_ms,
                     label=row.label, color=color, marker="braille")
            drawn += 1
    return "samples as they arrive: y ms, x sample number" if drawn else "waiting for samples…"


def medians(plt, rows: Sequence[Row], metric: str) -> str:
    """Median per implementation with its p20..p80 bar, one line each (names on the y axis)."""
    setup(plt)
    points = [(row, metric_value(row, row.get("timing", "median_ms"), metric)) for row in rows]
    points = [(row, v) for row, v in points if v is not None]
    if not points:
        return "no timed results (check failed, unavailable, or not benchmarked)"
    log = wants_log(v for _, v in points)
    plt.xscale("log" if log else "linear")
    for y, (color, (row, value)) in enumerate(zip(_colors(), reversed(points)), start=1):
        lo, hi = (metric_value(row, row.get("timing", q), metric) for q in ("p20_ms", "p80_ms"))
        if lo is not None and hi is not None:
            plt.plot([lo, hi], [y, y], color=color, marker="─")
        plt.scatter([value], [y], color=color, marker="◆")
    plt.yticks(list(range(1, len(points) + 1)), [r.label for r, _ in reversed(points)])
    plt.ylim(0.5, len(points) + 0.5)
    return _caption(log, False, 0, f"x {METRICS[metric]}: ◆ median, ─ p20..p80 (m: metric)")


def sweep(plt, rows: Sequence[Row], metric: str, param: str) -> str:
    """The metric against the swept value, one line per implementation; log axes where they help."""
    setup(plt)
    series = _series(rows, metric)
    log_x = wants_log(x for xs, _ in series.values() for x in xs)
    log_y = wants_log(y for _, ys in series.values() for y in ys)
    plt.xscale("log" if log_x else "linear")
    plt.yscale("log" if log_y else "linear")
    dropped = 0
    for color, (label, (xs, ys)) in zip(_colors(), series.items()):
        xs, ys, lost = keep_points(xs, ys, log_x, log_y)
        dropped += lost
        if xs:
            plt.plot(xs, ys, label=label, color=color, marker="braille")
            plt.scatter(xs, ys, color=color, marker="●")
    return _caption(log_x, log_y, dropped, f"y {METRICS[metric]}, x {param} (m: metric)")


def _series(rows: Sequence[Row], metric: str) -> dict[str, tuple[list, list]]:
    series: dict[str, tuple[list, list]] = {}
    for row in rows:
        xs, ys = series.setdefault(row.label, ([], []))
        xs.append(_scalar(row.sweep_value))
        ys.append(metric_value(row, row.get("timing", "median_ms"), metric))
    return series


def roofline(plt, points: Sequence[tuple[str, float | None, float | None]],
             copy_gbps: float | None, peak_tflops: float | None) -> str:
    """Achieved TFLOP/s against intensity (FLOP/byte), both log, under the measured ceilings."""
    setup(plt)
    xs = [x for _, x, _ in points if is_number(x) and x > 0]
    if not xs:
        return "no points: run bench to place the implementations"
    plt.xscale("log")
    plt.yscale("log")
    caption = _ceiling(plt, min(xs) / 4, max(xs) * 4, copy_gbps, peak_tflops)
    dropped = 0
    for index, (color, (label, x, y)) in enumerate(zip(_colors(), points)):
        if _ok(x, True) and _ok(y, True):
            plt.scatter([x], [y], label=label, color=color, marker=MARKERS[index % len(MARKERS)])
        else:
            dropped += 1
    return _caption(True, True, dropped, f"roofline: y TFLOP/s, x FLOP/byte · {caption}")


def _ceiling(plt, x_lo: float, x_hi: float, copy_gbps, peak_tflops) -> str:
    if not is_number(copy_gbps):
        return "no measured ceilings here (CPU): points only"
    grid = [x_lo * (x_hi / x_lo) ** (i / 40) for i in range(41)]
    roof = [min(x * copy_gbps / 1000, peak_tflops if is_number(peak_tflops) else math.inf)
            for x in grid]
    plt.plot(grid, roof, color="gray", marker="braille", label="ceiling")
    return f"ceiling: {copy_gbps:.0f} GB/s copy" + (
        f", {peak_tflops:.0f} TFLOP/s" if is_number(peak_tflops) else "")


def _caption(log_x: bool, log_y: bool, dropped: int, extra: str = "") -> str:
    parts = [extra] if extra else []
    axes = [a for a, on in (("x", log_x), ("y", log_y)) if on]
    if axes:
        parts.append(f"log {' and '.join(axes)}")
    if dropped:
        parts.append(f"dropped {dropped} zero/NaN point{'s' if dropped > 1 else ''}")
    return " · ".join(parts)


def _scalar(value):
    return value[0] if isinstance(value, (list, tuple)) and value else value


def _colors():
    while True:
        yield from COLORS
