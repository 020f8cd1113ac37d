"""Figures of a results document for a slide or a report (`workbench --plot RESULTS.json -o FIG`).

One figure, one panel per run and a roofline panel:
- a run without a sweep: each implementation's median with its p20-p80 spread (a dot and a bar);
- a run with a sweep: one line per implementation over the sweep's values, the p20-p80 band shaded;
- the roofline: each measured row placed by its arithmetic intensity (FLOP per byte moved) and the
  FLOP/s it achieved (traffic.flops over the median), against the environment's measured copy
  bandwidth and matmul ceiling of the row's dtype (solid) and the datasheet's peaks (dashed).
  Rows without counted FLOPs or bytes are left out (the panel says how many).
The figure's title names the device; each panel its op, dtype and shape.

matplotlib is an optional extra (`pip install 'kernel-workbench[plot]'`); `MissingPlotting` says so.
Pure reading of the document: no torch, no GPU. Its records are read into Records once
(`plotted_rows`) and the panels read their fields.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping

from workbench.results.record import Record, read_record

EXTRA = "pip install 'kernel-workbench[plot]'  (matplotlib>=3.7)"


class MissingPlotting(RuntimeError):
    """matplotlib is not installed: the message names the extra."""


def plotted_rows(doc: Mapping[str, Any]) -> list[Record]:
    """The rows a figure can show: status ok with a median."""
    records = (read_record(r, f"results[{i}]") for i, r in enumerate(doc.get("results", ())))
    return [r for r in records if r.status == "ok" and _median(r) is not None]


def runs(doc: Mapping[str, Any]) -> dict[int, list[Record]]:
    """Plotted rows by run index, in document order."""
    out: dict[int, list[Record]] = {}
    for row in plotted_rows(doc):
        out.setdefault(int(row.run_index or 0), []).append(row)
    return out


def run_title(rows: list[Record]) -> str:
    """`gelu · float32 · M=16384 N=16384` (the sweep's parameter named instead of its value)."""
    first = rows[0]
    swept = _swept(rows)
    shape = " ".join(f"{k}={v}" for k, v in (first.shape or {}).items() if not (swept and _varies(rows, k)))
    parts = [str(first.op), str(first.dtype or "default dtype"), shape]
    if swept:
        parts.append("sweep over " + ", ".join(sorted(k for k in (first.shape or {}) if _varies(rows, k)) or ["value"]))
    return " · ".join(p for p in parts if p)


def roofline_points(doc: Mapping[str, Any]) -> tuple[list[dict], int]:
    """[{label, intensity, flops_per_s, dtype}] for rows with counted FLOPs and bytes, and how many
    plotted rows had neither, or no device speed (left out: a Triton-interpreter row's time is
    the host's, which the document itself gives no TFLOP/s)."""
    points, left_out = [], 0
    for row in plotted_rows(doc):
        flops, moved = (row.traffic.flops, row.traffic.bytes) if row.traffic else (None, None)
        median = _median(row)
        interpreted = row.timing is not None and row.timing.timer == "interpreter"
        if not flops or not moved or not median or interpreted:
            left_out += 1
            continue
        points.append({"label": _label(row, sweep=False), "intensity": flops / moved, "flops_per_s": flops / (median * 1e-3),
                       "dtype": row.dtype, "run_index": row.run_index})
    return points, left_out


def ceilings(doc: Mapping[str, Any], dtype: str | None) -> dict[str, float | None]:
    """Bandwidths (bytes/s) and matmul rates (FLOP/s) to draw: measured and datasheet, None where unknown."""
    env = doc.get("environment") or {}
    measured, sheet = env.get("ceilings") or {}, env.get("datasheet") or {}
    key = dtype if dtype in ("bfloat16", "float16", "float32") else "float32"

    def scaled(value, factor):
        return float(value) * factor if isinstance(value, (int, float)) and value > 0 else None

    return {"copy": scaled(measured.get("copy_gbps"), 1e9),
            "matmul": scaled((measured.get("matmul_tflops") or {}).get(key), 1e12),
            "hbm_peak": scaled(sheet.get("hbm_gbps"), 1e9),
            "matmul_peak": scaled((sheet.get("matmul_tflops") or {}).get(key), 1e12)}


def render(doc: Mapping[str, Any], out: str | Path) -> Path:
    """Draw the figure into `out` (.svg, .png or .pdf, by its extension); returns the path.
    Raises MissingPlotting without matplotlib, ValueError when nothing can be drawn."""
    try:
        import matplotlib
    except ImportError:
        raise MissingPlotting(f"--plot needs matplotlib, an optional extra: {EXTRA}") from None
    matplotlib.use("Agg")  # files only: never a window, works without a display
    import matplotlib.pyplot as plt

    by_run = runs(doc)
    if not by_run:
        raise ValueError("the document has no row with status ok and a median: nothing to plot")
    with plt.rc_context({"svg.fonttype": "none", "svg.hashsalt": "workbench"}):  # SVG text stays text
        return _draw(plt, doc, by_run, Path(out))


def _draw(plt, doc: Mapping[str, Any], by_run: dict[int, list[Record]], out: Path) -> Path:
    points, left_out = roofline_points(doc)
    panels = len(by_run) + 1
    fig, axes = plt.subplots(panels, 1, figsize=(10, 3.4 * panels), squeeze=False)
    env = doc.get("environment") or {}
    fig.suptitle(f"{env.get('device') or 'unknown device'} · session "
                 f"{(doc.get('provenance') or {}).get('session') or '?'}", fontsize=12)
    for ax, (index, rows) in zip(axes[:, 0], sorted(by_run.items())):
        (_sweep_panel if _swept(rows) else _medians_panel)(ax, rows)
        ax.set_title(f"run {index}: {run_title(rows)}", fontsize=10)
    _roofline_panel(axes[-1, 0], doc, points, left_out)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.45 / (3.4 * panels)))  # room for the title above the panels
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, format=out.suffix.lstrip(".").lower() or "svg", metadata=_metadata(out))
    plt.close(fig)
    return out


# -- panels ----------------------------------------------------------------------------------
def _medians_panel(ax, rows: list[Record]) -> None:
    labels = [_label(r) for r in rows]
    medians = [_median(r) or 0.0 for r in rows]  # (a plotted row has a median)
    low = [m - (_p(r, "p20_ms") or m) for m, r in zip(medians, rows)]
    high = [(_p(r, "p80_ms") or m) - m for m, r in zip(medians, rows)]
    ys = list(range(len(rows)))
    ax.barh(ys, medians, color="#9ecae1")
    ax.errorbar(medians, ys, xerr=[low, high], fmt="o", color="#08519c", capsize=4, label="median, p20-p80")
    ax.set_yticks(ys, labels)
    ax.invert_yaxis()
    ax.set_xlabel("median time per call (ms)")
    if max(medians) / max(min(medians), 1e-12) > 30:
        ax.set_xscale("log")
    ax.legend(loc="lower right", fontsize=8)


def _sweep_panel(ax, rows: list[Record]) -> None:
    swept = sorted(k for k in (rows[0].shape or {}) if _varies(rows, k))
    by_label: dict[str, list[Record]] = {}
    for row in rows:
        by_label.setdefault(_label(row, sweep=False), []).append(row)
    numeric = all(isinstance(r.sweep_value, (int, float)) for r in rows)
    order = sorted({r.sweep_value for r in rows}, key=lambda v: (not numeric, v if numeric else str(v)))
    for label, items in by_label.items():
        items = sorted(items, key=lambda r: order.index(r.sweep_value))
        xs = [r.sweep_value if numeric else order.index(r.sweep_value) for r in items]
        medians = [_median(r) for r in items]
        (line,) = ax.plot(xs, medians, marker="o", label=label)
        ax.fill_between(xs, [_p(r, "p20_ms") or m for r, m in zip(items, medians)],
                        [_p(r, "p80_ms") or m for r, m in zip(items, medians)], color=line.get_color(), alpha=0.2)
    if numeric and all(v > 0 for v in order) and max(order) / min(order) > 8:
        ax.set_xscale("log", base=2)
    elif not numeric:
        ax.set_xticks(range(len(order)), [str(v) for v in order])
    ax.set_yscale("log")
    ax.set_xlabel(", ".join(swept) if swept else "sweep value")
    ax.set_ylabel("median ms (p20-p80 shaded)")
    ax.legend(fontsize=8)


def _roofline_panel(ax, doc: Mapping[str, Any], points: list[dict], left_out: int) -> None:
    note = f" ({left_out} row(s) without counted FLOPs or bytes left out)" if left_out else ""
    ax.set_title("roofline: achieved FLOP/s against intensity" + note, fontsize=10)
    if not points:
        ax.text(0.5, 0.5, "no row has counted FLOPs and bytes", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        return
    xs = [p["intensity"] for p in points]
    lo, hi = min(xs) / 4, max(xs) * 4
    dtypes = sorted({p["dtype"] for p in points if p["dtype"]}) or [None]
    drawn = False
    for dtype in dtypes:
        lim = ceilings(doc, dtype)
        for bw, flops, style, what in ((lim["copy"], lim["matmul"], "-", "measured"),
                                       (lim["hbm_peak"], lim["matmul_peak"], "--", "datasheet")):
            if bw is None:
                continue
            lo_, hi_ = lo, hi
            if flops is not None:
                lo_, hi_ = min(lo, flops / bw / 4), max(hi, flops / bw * 4)
            grid = [lo_ * (hi_ / lo_) ** (i / 200) for i in range(201)]
            roof = [min(bw * x, flops) if flops else bw * x for x in grid]
            name = f"{what}: {bw / 1e9:,.0f} GB/s" + (f", {flops / 1e12:,.1f} TFLOP/s {dtype}" if flops else "")
            ax.plot(grid, roof, style, color="grey" if what == "measured" else "black", linewidth=1, label=name)
            drawn = True
    groups: dict[tuple, list[dict]] = {}  # one colour per implementation of a run (a sweep's points together)
    for point in points:
        groups.setdefault((point["run_index"], point["label"]), []).append(point)
    markers = "osD^v<>ph*"
    for (run_index, label), items in groups.items():
        ax.scatter([p["intensity"] for p in items], [p["flops_per_s"] for p in items], zorder=3,
                   marker=markers[int(run_index or 0) % len(markers)], label=f"{label} (run {run_index})")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP / byte)")
    ax.set_ylabel("achieved FLOP/s")
    if not drawn:
        ax.text(0.02, 0.95, "no measured ceilings or datasheet peaks in this document (CPU run?)",
                transform=ax.transAxes, fontsize=8, va="top")
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))


# -- small helpers ---------------------------------------------------------------------------
def _metadata(out: Path) -> dict | None:
    """No creation date in an SVG or PDF (a figure redrawn from the same document is the same file)."""
    suffix = out.suffix.lower()
    return {"Date": None} if suffix == ".svg" else ({"CreationDate": None} if suffix == ".pdf" else None)


def _median(row: Record) -> float | None:
    value = row.timing.median_ms if row.timing else None
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) and value > 0 else None


def _p(row: Record, key: str) -> float | None:
    value = getattr(row.timing, key) if row.timing else None
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def _label(row: Record, sweep: bool = True) -> str:
    label = str(row.label or row.impl)
    return f"{label} @{row.sweep_value}" if sweep and row.sweep_value is not None else label


def _swept(rows: list[Record]) -> bool:
    return any(r.sweep_value is not None for r in rows)


def _varies(rows: list[Record], key: str) -> bool:
    return len({str((r.shape or {}).get(key)) for r in rows}) > 1
