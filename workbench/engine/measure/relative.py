"""Ratios between the rows of one run (MEASUREMENT.md rule 11): `traffic.speedup_vs_pytorch`.

For every timed row, the median of the `pytorch` implementation at the same run, shape, dtype and
sweep point divided by the row's own median: 1.25 means 1.25x faster than PyTorch's built-in, 0.8
slower. A ratio above 1 is a result, never a failure. Rows without such a pytorch row (or without
a median of their own, or timed by the Triton interpreter) keep None.
"""

from __future__ import annotations

import json


def _point(record: dict) -> tuple:
    return (record.get("run_index"), json.dumps(record.get("shape"), sort_keys=True, default=str),
            record.get("dtype"), json.dumps(record.get("sweep_value"), default=str))


def _median(record: dict) -> float | None:
    timing = record.get("timing") or {}
    if record.get("status") != "ok" or timing.get("timer") == "interpreter":
        return None
    return timing.get("median_ms") or None


def relate_to_pytorch(records: list[dict]) -> None:
    """Fill traffic.speedup_vs_pytorch in place (module docstring). The first ok `pytorch` row of
    a point is its baseline (a second one, e.g. with another label, is compared against it)."""
    baseline: dict[tuple, float] = {}
    for record in records:
        median = _median(record)
        if record.get("impl") == "pytorch" and median is not None:
            baseline.setdefault(_point(record), median)
    for record in records:
        median, base = _median(record), baseline.get(_point(record))
        if median is not None and base is not None and isinstance(record.get("traffic"), dict):
            record["traffic"]["speedup_vs_pytorch"] = base / median
