"""A/B statistics: a ratio of two implementations' times with a bootstrap confidence interval.

Paired (`paired_ratio`): samples taken round-robin in one process, A and B alternating, so pair i
shares the machine's state (clock, temperature, neighbours). The statistic is the median of the
per-pair ratios t_A,i / t_B,i; its interval is the percentile bootstrap over pairs (resampling
pairs with replacement keeps each pair's shared drift together). Efron & Tibshirani, "An
Introduction to the Bootstrap" (1993), ch. 13 (percentile intervals).

Unpaired (`unpaired_ratio`): two documents timed at different times (`--compare`). The statistic
is median(A) / median(B); A and B are resampled independently.

`ratio` < 1: A takes less time than B (A is faster). The verdict is "faster" / "slower" (A against
B) only when the whole interval lies on one side of 1 and there are at least MIN_PAIRS pairs (or
samples a side), else "no difference". Pure functions; numpy only; a seeded generator, so the
same samples give the same interval.

MIN_PAIRS: below 6 values no distribution-free 95% interval for a median can exclude anything
(the sign test: all n ratios on one side of 1 has probability 2 * 0.5**n, >= 0.0625 for n <= 5),
while the percentile bootstrap of 3 pairs, all below 1 by chance (1 time in 4 for an A/A), would
say "faster" (Conover, "Practical Nonparametric Statistics", 3rd ed., 3.4 and 3.6).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

CONFIDENCE = 0.95
RESAMPLES = 2000
SEED = 0
VERDICTS = ("faster", "slower", "no difference")
MIN_PAIRS = 6  # fewest pairs (or samples a side) for a verdict other than "no difference"


@dataclass(frozen=True)
class RatioCI:
    """ratio: the point estimate (A time / B time); ci_low/ci_high: the bootstrap interval at
    `confidence`; n: pairs (paired) or min(len(A), len(B)) (unpaired); verdict: see module."""

    ratio: float
    ci_low: float
    ci_high: float
    n: int
    confidence: float = CONFIDENCE

    @property
    def verdict(self) -> str:
        return verdict(self.ci_low, self.ci_high) if self.n >= MIN_PAIRS else "no difference"

    def as_dict(self) -> dict:
        return {"ratio": self.ratio, "ci_low": self.ci_low, "ci_high": self.ci_high, "n": self.n,
                "confidence": self.confidence, "verdict": self.verdict}


def verdict(ci_low: float, ci_high: float) -> str:
    """"faster" when the interval lies below 1 (A takes less time), "slower" above, else
    "no difference" (the interval spans 1)."""
    if ci_high < 1.0:
        return "faster"
    if ci_low > 1.0:
        return "slower"
    return "no difference"


def _positive(values: Sequence[float], name: str) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1 or array.size == 0:
        raise ValueError(f"{name}: need a non-empty list of times, got {array.size} values")
    if not np.all(np.isfinite(array)) or np.any(array <= 0):
        raise ValueError(f"{name}: times must be finite and > 0")
    return array


def _interval(stats: np.ndarray, confidence: float) -> tuple[float, float]:
    tail = 100.0 * (1.0 - confidence) / 2.0
    low, high = np.percentile(stats, [tail, 100.0 - tail])
    return float(low), float(high)


def paired_ratio(a_ms: Sequence[float], b_ms: Sequence[float], *, confidence: float = CONFIDENCE,
                 resamples: int = RESAMPLES, seed: int = SEED) -> RatioCI:
    """Median of t_A,i / t_B,i over pairs i, with a percentile-bootstrap interval over pairs.

    a_ms, b_ms: equally long lists of times (any unit, the same for both), pair i taken together.
    Raises ValueError for empty or unequal lists, or a time that is not finite and > 0.
    """
    a, b = _positive(a_ms, "A"), _positive(b_ms, "B")
    if a.size != b.size:
        raise ValueError(f"paired samples need equal counts, got {a.size} (A) and {b.size} (B)")
    ratios = a / b
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, ratios.size, size=(resamples, ratios.size))
    boot = np.median(ratios[picks], axis=1)
    low, high = _interval(boot, confidence)
    return RatioCI(float(np.median(ratios)), low, high, int(ratios.size), confidence)


def unpaired_ratio(a_ms: Sequence[float], b_ms: Sequence[float], *, confidence: float = CONFIDENCE,
                   resamples: int = RESAMPLES, seed: int = SEED) -> RatioCI:
    """median(A) / median(B) with A and B resampled independently (percentile bootstrap).

    Raises ValueError for an empty list or a time that is not finite and > 0.
    """
    a, b = _positive(a_ms, "A"), _positive(b_ms, "B")
    rng = np.random.default_rng(seed)
    boot_a = np.median(a[rng.integers(0, a.size, size=(resamples, a.size))], axis=1)
    boot_b = np.median(b[rng.integers(0, b.size, size=(resamples, b.size))], axis=1)
    low, high = _interval(boot_a / boot_b, confidence)
    return RatioCI(float(np.median(a) / np.median(b)), low, high, int(min(a.size, b.size)), confidence)


def half_width(ci: RatioCI) -> float:
    """Relative half-width of the interval, (ci_high - ci_low) / (2 ratio): what the A/B loop
    drives below its target before stopping."""
    return (ci.ci_high - ci.ci_low) / (2.0 * ci.ratio) if ci.ratio > 0 else float("inf")
