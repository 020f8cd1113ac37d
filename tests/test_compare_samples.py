"""`--compare` with samples on both sides: the A/B statistics (bootstrap interval of the ratio)."""

from __future__ import annotations

import numpy as np
from results_docs import document, record

from workbench.results.baseline import compare_documents, comparison_table, verdict


def _with_samples(median: float, n: int, sigma: float, seed: int) -> dict:
    samples = list(median * np.exp(np.random.default_rng(seed).normal(0, sigma, n)))
    rec = record(median=float(np.median(samples)))
    rec["timing"]["samples_ms"] = samples
    return rec


def test_samples_decide_with_an_interval():
    base = _with_samples(1.0, 200, 0.01, seed=1)
    slower = _with_samples(1.10, 200, 0.01, seed=2)
    same = _with_samples(1.0, 200, 0.01, seed=3)
    assert verdict(slower, base, 0.05)[0] == "slower"
    assert verdict(same, base, 0.05)[0] == "same"
    assert verdict(base, slower, 0.05)[0] == "faster"


def test_wide_samples_are_not_a_regression_even_when_the_medians_differ():
    """+8% in the medians, but samples so spread that the interval spans 1: same."""
    base = _with_samples(1.0, 12, 0.3, seed=4)
    now = _with_samples(1.0, 12, 0.3, seed=5)
    now["timing"]["samples_ms"] = [v * 1.08 for v in now["timing"]["samples_ms"]]
    now["timing"].update(median_ms=float(np.median(now["timing"]["samples_ms"])), p20_ms=5.0, p80_ms=6.0)
    assert verdict(now, base, 0.05)[0] == "same"


def test_comparison_rows_carry_the_interval_and_the_table_shows_it():
    base, now = _with_samples(1.0, 100, 0.01, seed=6), _with_samples(1.2, 100, 0.01, seed=7)
    comparison = compare_documents(document(now), document(base))
    (row,) = comparison.rows
    assert row.verdict == "slower" and row.ci_low < row.ratio < row.ci_high and row.ci_low > 1
    assert row.as_dict()["ci_high"] == row.ci_high
    assert "95% CI" in [c.header for c in comparison_table(comparison).columns]
    plain = compare_documents(document(record(median=1.2)), document(record(median=1.0)))
    assert plain.rows[0].ci_low is None


def test_too_few_samples_fall_back_to_the_spread_rule():
    """3 samples a side: no interval (abstats.MIN_PAIRS), the p20/p80 rule decides."""
    from workbench.results.baseline import sample_interval

    base, now = _with_samples(1.0, 3, 0.01, seed=8), _with_samples(1.2, 3, 0.01, seed=9)
    assert sample_interval(now, base) is None
    assert sample_interval(_with_samples(1.2, 6, 0.01, seed=9), _with_samples(1.0, 6, 0.01, seed=8)) is not None
