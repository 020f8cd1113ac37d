"""A cross-check of our timing against `triton.testing.do_bench` (DESIGN.md: our own short
event loop streams samples; it is checked on the GPU against do_bench). MEASUREMENT.md P3:
do_bench's `warmup` and `rep` are milliseconds; its return statistic must be named; its keyword
arguments differ across Triton versions, so they are feature-detected here.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable


def do_bench_median_ms(fn: Callable[[], Any], *, warmup_ms: float = 25.0,
                       rep_ms: float = 100.0) -> tuple[float, str]:
    """(time in ms, the statistic's name) from triton.testing.do_bench.

    Uses return_mode="median" where do_bench has it, else quantiles=[0.5], else its default
    statistic (named "default" then). Raises ImportError without Triton.
    """
    from triton.testing import do_bench

    params = inspect.signature(do_bench).parameters
    kwargs: dict[str, Any] = {}
    if "warmup" in params:
        kwargs["warmup"] = warmup_ms
    if "rep" in params:
        kwargs["rep"] = rep_ms
    if "return_mode" in params:
        return float(do_bench(fn, return_mode="median", **kwargs)), "median"
    if "quantiles" in params:
        value = do_bench(fn, quantiles=[0.5], **kwargs)
        return float(value[0] if isinstance(value, (list, tuple)) else value), "median"
    return float(do_bench(fn, **kwargs)), "default"


def do_bench_quantiles_ms(fn: Callable[[], Any], quantiles: tuple[float, ...] = (0.2, 0.5, 0.8), *,
                          warmup_ms: float = 25.0, rep_ms: float = 100.0) -> list[float] | None:
    """triton.testing.do_bench's quantiles of one call (ms, in the order asked; its own
    torch.quantile over the samples of that call), or None where do_bench takes no quantiles.
    Raises ImportError without Triton."""
    from triton.testing import do_bench

    params = inspect.signature(do_bench).parameters
    if "quantiles" not in params:
        return None
    kwargs: dict[str, Any] = {k: v for k, v in (("warmup", warmup_ms), ("rep", rep_ms)) if k in params}
    value = do_bench(fn, quantiles=list(quantiles), **kwargs)
    return [float(v) for v in (value if isinstance(value, (list, tuple)) else [value])]


def do_bench_samples_ms(fn: Callable[[], Any], *, warmup_ms: float = 25.0,
                        rep_ms: float = 100.0) -> list[float] | None:
    """Every sample (ms, in order) of one triton.testing.do_bench call, from its
    return_mode="all"; None where do_bench has no such mode (its median is then
    do_bench_median_ms's). The median of these samples is do_bench's own median statistic
    (torch.quantile at 0.5, linear interpolation). Raises ImportError without Triton."""
    from triton.testing import do_bench

    params = inspect.signature(do_bench).parameters
    if "return_mode" not in params:
        return None
    kwargs: dict[str, Any] = {k: v for k, v in (("warmup", warmup_ms), ("rep", rep_ms)) if k in params}
    try:
        value = do_bench(fn, return_mode="all", **kwargs)
    except (AssertionError, ValueError):  # a do_bench whose return_mode has no "all"
        return None
    return [float(v) for v in value] if isinstance(value, (list, tuple)) else None


def our_median_ms(fn: Callable[[], Any], device: str, *, warmup_ms: float = 25.0, rep_ms: float = 100.0,
                  min_samples: int = 10, target_rel_error: float = 0.005, flush_l2: bool = True,
                  flush_kind: str = "read") -> float:
    """The median our engine reports for `fn` on `device` (same timer, flush and stopping rule);
    flush_kind "zero" flushes as do_bench does (to compare the loops alone)."""
    from workbench.engine.measure.environment import device_info
    from workbench.engine.measure.stats import StopRule, summarize
    from workbench.engine.measure.timing import make_l2_flush, make_timer, measure

    flush = make_l2_flush(device, device_info(device).l2_bytes, flush_kind) if flush_l2 else None
    rule = StopRule(rep_ms=rep_ms, min_samples=min_samples, target_rel_error=target_rel_error)
    samples = measure(fn, make_timer(device), rule, warmup_ms=warmup_ms, flush=flush)
    return summarize(samples).median_ms
