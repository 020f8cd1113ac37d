"""A/B rows in the worker: two implementations built, checked, then timed round-robin in ONE
process, and their paired ratio with a bootstrap interval (workbench/abstats.py).

One A/B row per (run with `compare: [A, B]`, sweep point). Both sides are built (graph mode
where a side is `<impl>+graph`) and checked as every row is (workbench/verify.RowCheck: the
first call and the special-values set before timing, the second seeded set after it); a side
that fails a check ends the row ("failed", no ratio). Each side is timed as a row's timed call is
(engine/measure/rotation.row_rotation, MEASUREMENT.md rule 13): its inputs rotate between two sets,
outputs of its timed calls are kept and checked after timing ("timed outputs" gate, before the
timed set), so a side right when checked and idle or cached when timed fails the A/B row too.
Timing: both warm up, then batches of event pairs with
the ordinary L2 flush before every call, A and B ALTERNATING inside each batch (ABAB..., the
next batch BABA...: neither always goes first); pair i is A's and B's i-th sample of a batch.
The loop stops, after `min_samples` pairs (and at least abstats.MIN_PAIRS), once the interval's relative half-width is below
`target_rel_error`, or after 2 x rep_ms (two implementations' budget), or at MAX_PAIRS.

The entry (a document's `ab` list, docs/CONTRACTS.md): every key of AB_KEYS; ratio = A time /
B time (< 1: A is faster), verdict "faster" | "slower" (A against B) | "no difference" (the
interval spans 1).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from workbench.abstats import MIN_PAIRS, half_width, paired_ratio
from workbench.engine.ab_plan import new_entry
from workbench.engine.worker.ab_sides import resolve_side
from workbench.engine.measure.graph_mode import GraphCall, graph_reason
from workbench.engine.measure.rotation import check_rotation, row_rotation
from workbench.engine.worker.precision import effective_fp32_precision
from workbench.engine.measure.stats import StopRule, quantile
from workbench.engine.measure.timing import Cancelled, Timer, batch_size, headroom_ms, sample_hooks, warm_up
from workbench.errors import WorkbenchError
from workbench.events import Log
from workbench.registry import BuildContext

MAX_PAIRS = 5000
LOOP_RESAMPLES = 500  # bootstrap resamples for the stopping rule (the final interval uses 2000)


@dataclass(frozen=True)
class Pairs:
    a_ms: list[float]
    b_ms: list[float]
    batches: int


class _Alternating:
    """A callable that calls `first`, then `second`, then `first`... (one per timed sample). Where
    the sides are the engine's timed calls (engine/measure/rotation.Rotation), the timers' sample
    hooks (outside the timed window) go to the side of the sample: a batch of n samples is a batch
    of n/2 on each side, each with its input sets rotated and its kept outputs."""

    def __init__(self, first: Callable[[], Any], second: Callable[[], Any]):
        self.calls, self.count = (first, second), 0
        self.hooks = [sample_hooks(c) for c in self.calls]
        if any(h != (None, None, None) for h in self.hooks):  # else the timers see no hooks at all
            self.start_batch, self.before_sample, self.after_sample = self._start_batch, self._before, self._after

    def __call__(self) -> Any:
        call = self.calls[self.count % 2]
        self.count += 1
        return call()

    def _start_batch(self, n: int) -> None:
        for side, (start, _, _) in enumerate(self.hooks):
            share = (n - side + 1) // 2  # samples count, count + 2, ... of this batch go to `side`
            if start is not None and share:
                start(share)

    def _before(self) -> None:
        before = self.hooks[self.count % 2][1]
        if before is not None:
            before()

    def _after(self, out: Any) -> None:
        after = self.hooks[(self.count - 1) % 2][2]
        if after is not None:
            after(out)


def measure_pairs(call_a: Callable[[], Any], call_b: Callable[[], Any], timer: Timer, rule: StopRule, *,
                  warmup_ms: float = 25.0, flush: Callable[[], None] | None = None,
                  cancelled: Callable[[], bool] = lambda: False,
                  clock: Callable[[], float] = time.perf_counter, max_pairs: int = MAX_PAIRS) -> Pairs:
    """Round-robin samples of A and B (module docstring); rule.rep_ms is the whole loop's budget.
    Raises Cancelled when `cancelled()` turns true (polled after every batch)."""
    warm_a = warm_up(call_a, timer, warmup_ms, clock, flush)
    warm_b = warm_up(call_b, timer, warmup_ms, clock, flush)
    spin = 0.0
    if getattr(timer, "spins", False):
        flush_ms = quantile(sorted(timer.time_batch(flush, 3)), 0.5) if flush is not None else 0.0
        spin = headroom_ms(max(warm_a.host_launch_ms, warm_b.host_launch_ms), flush_ms)
    a_ms: list[float] = []
    b_ms: list[float] = []
    batches, t0 = 0, clock()
    while True:
        n = batch_size(warm_a.round_ms + warm_b.round_ms, len(a_ms), (clock() - t0) * 1e3, rule)
        n = max(1, min(n, max_pairs - len(a_ms)))
        a_first = batches % 2 == 0
        pair = _Alternating(call_a, call_b) if a_first else _Alternating(call_b, call_a)
        samples = timer.time_batch(pair, 2 * n, flush, spin)
        firsts, seconds = samples[0::2], samples[1::2]
        a_ms += firsts if a_first else seconds
        b_ms += seconds if a_first else firsts
        batches += 1
        if cancelled():
            raise Cancelled()
        if _done(a_ms, b_ms, rule, (clock() - t0) * 1e3, max_pairs):
            return Pairs(a_ms, b_ms, batches)


def _done(a_ms: list[float], b_ms: list[float], rule: StopRule, elapsed_ms: float, max_pairs: int) -> bool:
    if len(a_ms) < min(max(rule.min_samples, MIN_PAIRS), max_pairs):  # fewer give no verdict (abstats.py)
        return False
    if elapsed_ms >= rule.rep_ms or len(a_ms) >= max_pairs:
        return True
    return half_width(paired_ratio(a_ms, b_ms, resamples=LOOP_RESAMPLES)) < rule.target_rel_error


# -- in the worker ---------------------------------------------------------------------------
@dataclass
class _Built:
    label: str
    fn: Callable[..., Any]
    inputs: tuple
    side: Any
    check: Any
    error: str | None = None


def ab_row(runner: Any, row: Any) -> dict:
    """Build, check and time both sides of an A/B row; the `ab` entry (module docstring)."""
    from workbench.engine.measure.bench import throttled
    from workbench.engine.measure.timing import make_timer
    from workbench.check.row import failure_text

    dev = runner.device(row)
    dev.apply_precision(effective_fp32_precision(runner.registry.op(row.op), row.settings.fp32_precision))
    scratch = Path(runner.job.build_dir or "/tmp") / "ab-revisions"
    built = [_build_side(runner, row, side, dev, scratch) for side in row.compare]
    entry = new_entry(row, a_impl=built[0].side.impl.name, b_impl=built[1].side.impl.name,
                      a_source=built[0].side.source, b_source=built[1].side.source)
    failures = [f"{b.label}: {b.error}" for b in built if b.error]
    if failures:
        entry.update(status="failed", error="A/B needs both sides to pass their check; " + "; ".join(failures))
        return entry
    interpreted = runner.job.interpret and any(b.side.impl.backend.interpreted(row.device) for b in built)
    timer = make_timer(row.device, interpreted=interpreted)
    flush = dev.flush() if row.settings.flush_l2 else None
    s = row.settings
    rule = StopRule(rep_ms=2 * s.rep_ms, min_samples=s.min_samples, target_rel_error=s.target_rel_error)
    runner.channel.event(Log(row.key, f"A/B {entry['a']} vs {entry['b']}: both checks passed; timing round-robin"))
    rotations = [row_rotation(b.fn, b.check) for b in built]  # rule 13, as a row's timed call
    pairs = measure_pairs(rotations[0], rotations[1], timer, rule, warmup_ms=s.warmup_ms, flush=flush,
                          cancelled=throttled(runner.stop.is_set))
    after = [f"{b.label}: {failure_text(b.check.report)}" for b, rotation in zip(built, rotations)
             if not _checked_after(b, rotation)]
    if after:  # a wrong result gets no speed (rule 6), the timed input set included
        entry.update(status="failed", error="A/B: a side failed its check after timing; " + "; ".join(after))
        return entry
    stats = paired_ratio(pairs.a_ms, pairs.b_ms)
    entry.update(stats.as_dict(), a_median_ms=quantile(sorted(pairs.a_ms), 0.5),
                 b_median_ms=quantile(sorted(pairs.b_ms), 0.5), timer=timer.name,
                 flush_l2=flush is not None, batches=pairs.batches, status="ok")
    return entry


def _checked_after(built: _Built, rotation: Any) -> bool:
    """A side's checks after timing: its kept timed outputs ("timed outputs" gate), then the
    timed set."""
    report = check_rotation(built.check, built.fn, rotation)
    return (report is None or report.passed) and built.check.timed(built.fn).passed


def _build_side(runner: Any, row: Any, side: Any, dev: Any, scratch: Path) -> _Built:
    """Build one side and run the row check's first and special sets (workbench/verify.RowCheck)."""
    from workbench.check.row import RowCheck, failure_text

    resolved = resolve_side(side, row.op, runner.registry, scratch)
    op, impl = resolved.op, resolved.impl
    spec = op.make_spec(row.shape, row.dtype)
    precision = effective_fp32_precision(op, row.settings.fp32_precision)
    ctx = BuildContext(device=row.device, fp32_precision=precision, interpret=runner.job.interpret,
                       build_dir=Path(runner.job.build_dir) if runner.job.build_dir else None)
    inputs = op.make_inputs(spec, row.device, row.settings.seed)
    check = RowCheck(op, impl, spec, ctx, inputs, row.settings.seed, sync=dev.sync,  # before the first call
                     judge=getattr(runner, "judge", None))
    fn = impl.builder(spec, impl.resolve_params(side.params), ctx)
    if resolved.mode == "graph":
        reason = graph_reason(row.device)
        if reason:
            raise WorkbenchError(f"{side.display}: {reason}")
        fn = GraphCall(fn, inputs)
    out = fn(*inputs)
    dev.sync()
    passed = check.first(out).passed
    del out
    if passed:
        check.special(fn)
    error = None if check.passed else failure_text(check.report)
    return _Built(side.display, fn, inputs, resolved, check, error)
