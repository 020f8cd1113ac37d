"""Sample statistics and the stopping rule (MEASUREMENT.md rule 4). Pure functions, no clocks.

The estimator of the median's relative standard error is robust (MAD-based):

    sigma_hat = max(1.4826 * MAD, IQR / 1.349) (MAD: median absolute deviation, IQR: p75 - p25;
                                               both estimate sigma for normal data; the IQR term
                                               keeps a two-valued (bimodal) sample from reading
                                               as MAD = 0)
    se(median) = 1.2533 * sigma_hat / sqrt(n)  (asymptotic SE of the median of normal samples,
                                               sqrt(pi/2) = 1.2533; e.g. Kendall & Stuart)
    rel_se = se(median) / median

A few outliers (a preempted launch) barely move MAD, so they neither stop the loop early nor keep
it running forever; identical samples (a coarse clock) give rel_se 0 and stop at min_samples.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

MAD_TO_SIGMA = 1.4826      # 1 / Phi^-1(3/4)
MEDIAN_SE_FACTOR = 1.2533  # sqrt(pi / 2)
IQR_TO_SIGMA = 1 / 1.349   # the IQR of a normal distribution is 1.349 sigma


@dataclass(frozen=True)
class Summary:
    """Statistics of timed samples, all in ms; n: the sample count."""

    median_ms: float
    p20_ms: float
    p80_ms: float
    min_ms: float
    mean_ms: float
    n: int

    def as_dict(self) -> dict:
        return {"median_ms": self.median_ms, "p20_ms": self.p20_ms, "p80_ms": self.p80_ms,
                "min_ms": self.min_ms, "mean_ms": self.mean_ms, "n": self.n}


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolation quantile (numpy's default) of already sorted values; q in [0, 1].

    Raises ValueError for an empty sequence or q outside [0, 1].
    """
    if not sorted_values:
        raise ValueError("quantile of no samples")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"q must be in [0, 1], got {q}")
    pos = q * (len(sorted_values) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def summarize(samples_ms: Sequence[float]) -> Summary:
    """median, p20, p80, min, mean and n of `samples_ms`; raises ValueError when empty."""
    ordered = sorted(samples_ms)
    return Summary(
        median_ms=quantile(ordered, 0.5), p20_ms=quantile(ordered, 0.2), p80_ms=quantile(ordered, 0.8),
        min_ms=ordered[0], mean_ms=math.fsum(ordered) / len(ordered), n=len(ordered))


def median_rel_error(samples_ms: Sequence[float]) -> float:
    """Estimated relative standard error of the median (module docstring); inf for n < 2 or median <= 0."""
    n = len(samples_ms)
    if n < 2:
        return math.inf
    ordered = sorted(samples_ms)
    median = quantile(ordered, 0.5)
    if median <= 0:
        return math.inf
    mad = quantile(sorted(abs(v - median) for v in ordered), 0.5)
    iqr = quantile(ordered, 0.75) - quantile(ordered, 0.25)
    sigma = max(MAD_TO_SIGMA * mad, IQR_TO_SIGMA * iqr)
    return MEDIAN_SE_FACTOR * sigma / (math.sqrt(n) * median)


@dataclass(frozen=True)
class StopRule:
    """When to stop timing: never under min_samples; then once the median's rel. SE is below
    target_rel_error, or once rep_ms of host time is spent, or at max_samples (a guard for
    sub-microsecond calls). `done(..., converge=False)` skips the rel. SE stop: a row whose SM
    clock met a power or thermal limit is timed for the whole rep_ms (engine/timing.py), as
    do_bench does, because its sustained clock is lower than a short burst's."""

    rep_ms: float = 100.0
    min_samples: int = 10
    target_rel_error: float = 0.005
    max_samples: int = 100_000

    def done(self, samples_ms: Sequence[float], elapsed_ms: float, converge: bool = True) -> bool:
        """Whether to stop after these samples and `elapsed_ms` of host time. Called once per
        batch of samples (engine/timing.py: at most ~10 batches per second), so the O(n log n)
        error estimate runs every time."""
        n = len(samples_ms)
        if n < max(1, self.min_samples):
            return False
        if n >= self.max_samples or elapsed_ms >= self.rep_ms:
            return True
        return converge and median_rel_error(samples_ms) < self.target_rel_error
