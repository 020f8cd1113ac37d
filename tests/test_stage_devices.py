"""The devices stage's comparison (benchmarks/stages/devices.py) on made-up documents: same rows
or not, and median ratios against the plain run."""

from __future__ import annotations

from benchmarks.stages.devices import compare


def _doc(medians, status="ok"):
    return {"results": [{"label": f"r{i}", "sweep_value": None, "status": status, "check": {"passed": True},
                         "timing": {"median_ms": m, "p20_ms": m * 0.99, "p80_ms": m * 1.01}}
                        for i, m in enumerate(medians)]}


def test_equal_runs_are_within_noise():
    result = compare(_doc([1.0, 2.0]), _doc([1.0, 2.0]))
    assert result == {"same_rows": True, "timed": 2, "max_abs_ratio_minus_1": 0.0, "within_2pct": 2,
                      "within_spread": 2}


def test_a_slower_row_and_a_different_status_show():
    result = compare(_doc([1.0, 2.1]), _doc([1.0, 2.0]))
    assert result["max_abs_ratio_minus_1"] == 0.05 and result["within_2pct"] == 1 and result["within_spread"] == 1
    assert compare(_doc([1.0], status="failed"), _doc([1.0]))["same_rows"] is False
