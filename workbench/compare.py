"""`--compare BASELINE.json`: each result against the baseline row it matches (CONTRACTS.md).

A row is `slower` when its p20 is above the baseline's p80 AND its median ratio (current /
baseline) is above 1 + threshold; `faster` symmetrically (its p80 below the baseline's p20 AND
baseline / current above 1 + threshold); otherwise `same`. Rows without timing on either side
are `n/a`; rows on one side only are `new` / `missing`. Rows match by (op, label, shape, dtype,
sweep_value), the n-th such row of one document with the n-th of the other. Results from
different GPUs are never compared (`Comparison.different_gpu`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping

from rich.table import Table
from rich.text import Text

from workbench.report import fmt_num, shape_text

VERDICT_STYLE = {"slower": "bold red", "faster": "green", "same": "", "n/a": "dim", "new": "cyan",
                 "missing": "yellow"}


@dataclass(frozen=True)
class RowComparison:
    op: str
    label: str
    shape: Mapping[str, Any]
    dtype: str | None
    sweep_value: Any
    verdict: str                      # slower | faster | same | n/a | new | missing
    baseline_median_ms: float | None
    median_ms: float | None
    ratio: float | None               # current median / baseline median

    def as_dict(self) -> dict[str, Any]:
        return {"op": self.op, "label": self.label, "shape": dict(self.shape), "dtype": self.dtype,
                "sweep_value": self.sweep_value, "verdict": self.verdict,
                "baseline_median_ms": self.baseline_median_ms, "median_ms": self.median_ms,
                "ratio": self.ratio}


@dataclass(frozen=True)
class Comparison:
    threshold: float
    device: str | None
    baseline_device: str | None
    rows: list[RowComparison] = field(default_factory=list)

    @property
    def different_gpu(self) -> bool:
        return bool(self.device and self.baseline_device and self.device != self.baseline_device)

    def count(self, verdict: str) -> int:
        return sum(1 for r in self.rows if r.verdict == verdict)

    @property
    def regressions(self) -> int:
        return self.count("slower")

    def summary(self) -> str:
        parts = [f"{self.count(v)} {v}" for v in ("slower", "faster", "same", "n/a", "new", "missing") if self.count(v)]
        return f"compared with baseline (threshold {self.threshold:g}): {', '.join(parts) or 'no rows'}"

    def as_dict(self, baseline_path: str | None = None) -> dict[str, Any]:
        return {"baseline": baseline_path, "threshold": self.threshold, "device": self.device,
                "baseline_device": self.baseline_device, "different_gpu": self.different_gpu,
                "rows": [r.as_dict() for r in self.rows]}


def row_key(record: Mapping[str, Any]) -> tuple:
    shape = json.dumps(record.get("shape") or {}, sort_keys=True)
    return (record.get("op"), record.get("label"), shape, record.get("dtype"),
            json.dumps(record.get("sweep_value"), default=str))


def verdict(current: Mapping[str, Any], baseline: Mapping[str, Any], threshold: float) -> tuple[str, float | None]:
    """(verdict, median ratio current/baseline) for two matched result records."""
    cur, base = current.get("timing") or {}, baseline.get("timing") or {}
    needed = ("median_ms", "p20_ms", "p80_ms")
    if (current.get("status") != "ok" or baseline.get("status") != "ok"
            or any(cur.get(k) is None or base.get(k) is None for k in needed) or base["median_ms"] <= 0
            or cur["median_ms"] <= 0):
        return "n/a", None
    ratio = cur["median_ms"] / base["median_ms"]
    if cur["p20_ms"] > base["p80_ms"] and ratio > 1 + threshold:
        return "slower", ratio
    if cur["p80_ms"] < base["p20_ms"] and 1 / ratio > 1 + threshold:
        return "faster", ratio
    return "same", ratio


def compare_documents(current: Mapping[str, Any], baseline: Mapping[str, Any], threshold: float = 0.05) -> Comparison:
    """Match every result of `current` with `baseline` and give each a verdict."""
    base_rows: dict[tuple, list[Mapping[str, Any]]] = {}
    for record in baseline.get("results") or []:
        base_rows.setdefault(row_key(record), []).append(record)
    used: dict[tuple, int] = {}
    rows = []
    for record in current.get("results") or []:
        key = row_key(record)
        nth = used.get(key, 0)
        used[key] = nth + 1
        candidates = base_rows.get(key, [])
        if nth < len(candidates):
            base = candidates[nth]
            word, ratio = verdict(record, base, threshold)
            rows.append(_row(record, word, ratio, base))
        else:
            rows.append(_row(record, "new", None, None))
    for key, records in base_rows.items():
        for record in records[used.get(key, 0):]:
            rows.append(_row(record, "missing", None, record, current_side=False))
    return Comparison(threshold, _device(current), _device(baseline), rows)


def _row(record, word, ratio, base, current_side: bool = True) -> RowComparison:
    def median(r):
        return ((r or {}).get("timing") or {}).get("median_ms")
    return RowComparison(op=record.get("op"), label=record.get("label"), shape=record.get("shape") or {},
                         dtype=record.get("dtype"), sweep_value=record.get("sweep_value"), verdict=word,
                         baseline_median_ms=median(base), median_ms=median(record) if current_side else None,
                         ratio=ratio)


def _device(doc: Mapping[str, Any]) -> str | None:
    return (doc.get("environment") or {}).get("device")


def comparison_table(comparison: Comparison) -> Table:
    table = Table(title=comparison.summary(), title_justify="left", header_style="bold", pad_edge=False)
    for name in ("op", "impl", "shape", "sweep", "baseline ms", "now ms", "ratio", "verdict"):
        table.add_column(name, justify="right" if name.endswith("ms") or name == "ratio" else "left")
    for r in comparison.rows:
        table.add_row(r.op, r.label, shape_text(r.shape), "-" if r.sweep_value is None else str(r.sweep_value),
                      fmt_num(r.baseline_median_ms), fmt_num(r.median_ms),
                      "-" if r.ratio is None else f"{r.ratio:.3f}x", Text(r.verdict, VERDICT_STYLE.get(r.verdict, "")))
    return table
