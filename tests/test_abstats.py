"""A/B statistics on synthetic samples: a known ratio is recovered, equal distributions span 1."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.abstats import half_width, paired_ratio, unpaired_ratio, verdict


def _lognormal(n: int, median: float, sigma: float, seed: int) -> np.ndarray:
    return median * np.exp(np.random.default_rng(seed).normal(0.0, sigma, n))


def test_paired_recovers_a_known_ratio():
    drift = _lognormal(200, 1.0, 0.05, seed=1)          # shared by both sides of a pair
    a = 0.8 * drift * _lognormal(200, 1.0, 0.01, seed=2)
    b = 1.0 * drift * _lognormal(200, 1.0, 0.01, seed=3)
    ci = paired_ratio(a, b)
    assert ci.ci_low < 0.8 < ci.ci_high
    assert abs(ci.ratio - 0.8) < 0.005
    assert ci.verdict == "faster" and ci.n == 200


def test_paired_equal_distributions_span_one():
    drift = _lognormal(150, 1.0, 0.05, seed=4)
    a = drift * _lognormal(150, 1.0, 0.02, seed=5)
    b = drift * _lognormal(150, 1.0, 0.02, seed=6)
    ci = paired_ratio(a, b)
    assert ci.ci_low < 1.0 < ci.ci_high
    assert ci.verdict == "no difference"


def test_pairing_removes_shared_drift():
    """The same data unpaired has a much wider interval: the pairs carry the drift."""
    drift = np.linspace(1.0, 2.0, 100)            # the clock falls during the run
    a, b = 0.95 * drift, 1.0 * drift
    paired, unpaired = paired_ratio(a, b), unpaired_ratio(a, b)
    assert paired.verdict == "faster"
    assert half_width(paired) < 0.1 * half_width(unpaired)
    assert unpaired.verdict == "no difference"


def test_unpaired_recovers_a_known_ratio():
    a = _lognormal(300, 1.25, 0.02, seed=7)
    b = _lognormal(300, 1.0, 0.02, seed=8)
    ci = unpaired_ratio(a, b)
    assert ci.ci_low < 1.25 < ci.ci_high
    assert ci.verdict == "slower"


def test_same_samples_same_interval():
    a, b = _lognormal(50, 1.0, 0.1, seed=9), _lognormal(50, 1.1, 0.1, seed=10)
    assert paired_ratio(a, b) == paired_ratio(a, b)


@pytest.mark.parametrize("low, high, word", [(0.8, 0.9, "faster"), (1.1, 1.2, "slower"),
                                             (0.9, 1.1, "no difference"), (1.0, 1.2, "no difference")])
def test_verdict(low, high, word):
    assert verdict(low, high) == word


@pytest.mark.parametrize("a, b, message", [([], [1.0], "non-empty"), ([1.0, 2.0], [1.0], "equal counts"),
                                           ([1.0, -1.0], [1.0, 1.0], "finite and > 0"),
                                           ([1.0, float("nan")], [1.0, 1.0], "finite and > 0")])
def test_paired_rejects_bad_samples(a, b, message):
    with pytest.raises(ValueError, match=message):
        paired_ratio(a, b)


def test_too_few_pairs_give_no_verdict():
    """3 pairs all below 1 (an A/A run does that 1 time in 4): the bootstrap interval lies below
    1, but 3 values cannot tell at 95%; 6 clear pairs can."""
    few = paired_ratio([0.97, 0.98, 0.96], [1.0, 1.0, 1.0])
    assert few.ci_high < 1 and few.n == 3 and few.verdict == "no difference"
    enough = paired_ratio([0.97, 0.98, 0.96, 0.97, 0.95, 0.98], [1.0] * 6)
    assert enough.ci_high < 1 and enough.verdict == "faster"
    assert unpaired_ratio([2.0, 2.1], [1.0, 1.05]).verdict == "no difference"
