"""The bench stage of a row: timing (+ clocks, launch floor, device time), traffic and bars.

Launch-bound rows (MEASUREMENT.md rule 5, P1; rules in engine/floor.py): `launch_bound: true`,
`device_median_ms` from CUDA-graph replay (L2-warm); a median below the measured floor is
flagged (`below_launch_floor`), never changed. Bars (rule 11, engine/traffic.py): only a figure
above its physical peak fails the row; beating a measured reference is a flag.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

from workbench.engine.measure.ceilings import Ceilings
from workbench.engine.measure.clocks import ClockSampler
from workbench.engine.measure.launch_floor import below_floor_flag, device_time_ms, is_launch_bound, launch_floor_ms
from workbench.engine.measure.stats import StopRule, median_rel_error, summarize
from workbench.engine.measure.timing import flush_kind, make_timer, measure_run, unjoined_failure
from workbench.engine.measure.traffic import above_peak, reference_flags, traffic_record
from workbench.events import Log, Samples
from workbench.results.document import INTERPRETER_FLAG
from workbench.results.record import Flag, Record, Timing

if TYPE_CHECKING:
    from workbench.engine.rows import RowContext

CANCEL_POLL_S = 0.05  # cancel is finished within 3 s (CONTRACTS.md): 50 ms of polling is plenty
# A CPU row whose threads waited for a core over this share of its timed window is flagged. On the
# 2-core CPU (smoke-quick): 11-31% idle (the front end reading the samples), 52-140% beside two
# busy processes, ~100% on the two rows whose medians jumped 300x (0.02 -> 7.98 ms).
CONTENDED = 0.5


def bench_row(dev, rc: RowContext, record: Record, fn, inputs, ceilings: Ceilings, rotation=None) -> None:
    """Fill record.timing and .traffic (and status/error/flags on a ceiling breach).
    rc: the row resolved in this worker (engine/rows.RowContext); rotation: the timed call
    (engine/rotation.Rotation: rotated inputs, kept outputs), else fn(*inputs)."""
    row, op, impl, spec = rc.row, rc.op, rc.impl, rc.spec
    settings = row.settings
    interpreted = dev.job.interpret and impl.backend.interpreted(dev.device)
    timer = make_timer(dev.device, interpreted=interpreted)
    flush = dev.flush() if settings.flush_l2 else None
    rule = StopRule(rep_ms=settings.rep_ms, min_samples=settings.min_samples,
                    target_rel_error=settings.target_rel_error)

    def on_samples(batch):
        dev.channel.event(Samples(row.key, batch, timer.name))

    waited0, t0 = (None if dev.is_cuda else run_delay_s()), time.perf_counter()  # CPU rows only
    with ClockSampler(dev.info if dev.is_cuda else None) as clocks:
        call = rotation if rotation is not None else (lambda: fn(*inputs))
        run = measure_run(call, timer, rule, warmup_ms=settings.warmup_ms, flush=flush,
                          on_samples=on_samples, cancelled=throttled(dev.stop.is_set), limited=clocks.limited,
                          phase=dev.phase)  # NVTX ranges around warm-up and the whole timed window
    samples = run.samples_ms
    unjoined = None
    if hasattr(timer, "stream_audit"):  # rule 13: work left on other streams, outside the timed run
        unjoined = unjoined_failure(list(run.spills_ms or []) + timer.stream_audit(call),
                                    summarize(samples).median_ms if samples else None)
    if not dev.is_cuda:
        flag = contention_flag(waited0, run_delay_s(), time.perf_counter() - t0)
        if flag:
            record.flags.append(flag)
    timing = Timing(timer=timer.name, flush_l2=flush is not None, flush_kind=flush_kind(flush),
                    throttle=[], host_launch_ms=run.host_launch_ms, headroom_ms=run.headroom_ms,
                    batches=run.batches, sustained=run.sustained,
                    warmup_calls=run.warmup_calls, warmup_back_to_back=run.warmup_back_to_back,
                    samples_ms=list(samples) if settings.keep_samples else None,
                    **summarize(samples).as_dict())
    flag = convergence_flag(samples, settings.target_rel_error, settings.rep_ms)
    if flag:
        record.flags.append(flag)
    timing.update(**clocks.fields())
    if dev.is_cuda:
        _launch_floor(dev, row, record, timing, fn, inputs)
    record.timing = timing
    cost = impl.cost(op, spec)
    record.traffic = traffic_record(cost, timing, ceilings, l2_bytes=dev.info.l2_bytes)
    _flag_bars(record, ceilings, dev.info.l2_bytes)
    if timer.name == "interpreter":
        record.flags.append(INTERPRETER_FLAG)
    if not dev.is_cuda and timer.name == "perf_counter" and record.status is None:
        _cpu_bound(record, cost.bytes, timing.median_ms)
    if unjoined is not None:  # what the events timed was not all the work: no time (rule 13)
        record.flags.append(unjoined)
        record.fail(f"measurement error: {unjoined}")
        record.timing = record.traffic = None


def convergence_flag(samples_ms, target_rel_error: float, rep_ms: float) -> str | None:
    """A flag when timing stopped (rep_ms or max_samples) before the median was known to
    target_rel_error (rule 4): the spread is then too wide to rank against close neighbours."""
    error = median_rel_error(samples_ms)
    if error <= target_rel_error:
        return None
    digits = 2  # as many as it takes for the two to read differently ("0.01% > 0.01%" did not)
    while digits < 6 and f"{100 * error:.{digits}g}" == f"{100 * target_rel_error:.{digits}g}":
        digits += 1
    shown = "unknown" if error == float("inf") else f"{100 * error:.{digits}g}%"
    return Flag.NOT_CONVERGED.format(detail=f"estimated error {shown} > target {100 * target_rel_error:.{digits}g}% "
                                            f"after {len(samples_ms)} samples (rep_ms {rep_ms:g} reached)")


def run_delay_s() -> float | None:
    """Seconds this process's threads have spent runnable but waiting for a CPU, summed over
    them (Linux /proc/self/task/*/schedstat, second field: run-queue delay in ns); None where the
    kernel keeps no schedstats. A thread that ended is not counted."""
    total, found = 0, False
    for stat in Path("/proc/self/task").glob("*/schedstat"):
        try:
            total += int(stat.read_text().split()[1])
            found = True
        except (OSError, ValueError, IndexError):  # the thread ended meanwhile
            continue
    return total / 1e9 if found else None


def contention_flag(before_s: float | None, after_s: float | None, wall_s: float) -> str | None:
    """A CPU row's flag when its worker's threads waited for a core more than CONTENDED of the
    timed window: other processes (or the TUI itself) held the cores, and a multi-threaded CPU
    op then stalls on its slowest thread (measured: rms_norm 256x1024 20.5 ms with two threads
    on a busy 2-core machine, 0.18 ms with one), so the medians are not the op's."""
    if before_s is None or after_s is None or wall_s <= 0:
        return None
    share = (after_s - before_s) / wall_s
    if share <= CONTENDED:
        return None
    return Flag.CPU_CONTENDED.format(
        detail=f"while timing, the worker's threads waited {share:.2f} s for a core per second (summed over its "
               f"threads; {os.cpu_count()} cores, shared with other processes or this workbench's own front "
               f"end), so these timings are not the op's alone")


def throttled(check, interval_s: float = CANCEL_POLL_S, clock=time.perf_counter):
    """`check()` at most every interval_s (else False). The stop flag is a multiprocessing Event:
    reading it is a semaphore operation, which on a loaded 2-core host stalled CPU samples for a
    scheduler tick (medians in 4 ms steps) when polled after every sample."""
    last = [clock()]

    def poll() -> bool:
        now = clock()
        if now - last[0] < interval_s:
            return False
        last[0] = now
        return bool(check())
    return poll


def _launch_floor(dev, row, record: Record, timing: Timing, fn, inputs) -> None:
    floor_ms = launch_floor_ms(dev, flushed=bool(timing.flush_l2))
    timing.launch_floor_ms = floor_ms
    timing.launch_bound = timing.median_ms is not None and is_launch_bound(timing.median_ms, floor_ms)
    if timing.launch_bound:
        timing.device_median_ms, source, how = device_time_ms(lambda: fn(*inputs))
        timing.device_median_source = source
        timing.device_median_l2_warm = source is not None
        dev.channel.event(Log(row.key, f"launch-bound: device time from {how}"))
    flag = below_floor_flag(timing, floor_ms)
    if flag:
        record.flags.append(flag)


def _cpu_bound(record: Record, nbytes: int, median_ms: float | None) -> None:
    """Rule 13 on the CPU (engine/measure/cpu_bound.py): a median no work of the row's bytes fits in
    fails the row as a measurement error, its figures cleared, as a datasheet breach does."""
    from workbench.engine.measure.cpu_bound import copy_reference, cpu_bound_failure

    breach = cpu_bound_failure(median_ms, nbytes, *copy_reference(nbytes))
    if breach is not None:  # confirmed on a fresh copy measurement first
        breach = cpu_bound_failure(median_ms, nbytes, *copy_reference(nbytes, again=True))
    if breach is None or record.traffic is None:
        return
    record.flags.append(breach)
    record.fail(f"measurement error: {breach}")
    record.traffic.clear_speed()


def _flag_bars(record: Record, ceilings: Ceilings, l2_bytes: int | None) -> None:
    """Rule 11: a figure above its physical peak is a measurement error, not a result; beating a
    measured reference is shown as a flag and never fails the row."""
    if record.traffic is None:
        return
    breach = above_peak(record.traffic, ceilings)
    if breach is None:
        record.flags.extend(reference_flags(record.traffic, ceilings, l2_bytes))
        return
    record.flags.append(breach)
    record.fail(f"measurement error: {breach}")
    record.traffic.clear_speed()
