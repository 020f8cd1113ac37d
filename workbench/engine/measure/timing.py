"""Timing one callable: timers, L2 flush, warm-up, the batched measuring loop (MEASUREMENT.md rules 1-4).

Timers (the `timing.timer` field of a result):
- `cuda_event`: CUDA events on the current stream around each call. Samples are taken in BATCHES:
  N event pairs, a flush before each, ONE synchronize per batch (rule 1: no clock is read before
  it), and the next batch is queued before the host waits on the current one (`_pipelined`), so
  the GPU works back to back as under triton.testing.do_bench. A synchronize after every
  sample leaves the GPU idle between samples, and a power-limited kernel then clocks higher: on the
  H200 cuBLAS bf16 8192^3 ran 756 TFLOP/s at 1710 MHz that way against 694 at 1530 MHz with do_bench.
- `perf_counter`: host time.perf_counter around each call; eager CPU torch is synchronous.
- `interpreter`: the same host clock for Triton kernels under TRITON_INTERPRET; it times numpy
  emulating the kernel and is never presented as kernel speed (gbps/tflops stay null).

Host headroom: before each start event a device spin (`torch.cuda._sleep`) keeps the GPU busy while
the host runs a Python-heavy launcher (Triton's, torch.compile's guards), so the window holds device
work, not launch latency. It is sized from the host launch time measured during warm-up
(`headroom_ms`), less the flush's own device time (the flush already covers that much); for cuBLAS
it is usually zero. The loop is testable without a device: pass any Timer (`time_batch`, `sync`)
and any monotonic `clock` (seconds).
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import Any, Callable, ContextManager, Protocol

from workbench.engine.measure.stats import StopRule, quantile
from workbench.results.record import Flag

MIN_FLUSH_BYTES = 256 * 2**20  # floor for the L2 flush buffer: triton.testing.do_bench's 256 MB
SAMPLE_BATCH_S = 0.1           # at most 10 Samples events per second per child (CONTRACTS.md)
BATCH_MS = 100.0               # host time one batch aims at: streaming and cancel stay responsive
MAX_BATCH = 1000               # event pairs per batch (events are reused)
HEADROOM_FACTOR = 1.5          # spin = 1.5 x host launch time + the event records, less the flush
EVENT_RECORD_MS = 0.010        # host time of the spin launch and the start event record (~10 us)
MAX_HEADROOM_MS = 2.0          # a launcher slower than this is host-bound anyway: no longer spin
FLUSH_KINDS = ("read", "zero")
# Work on other streams (rule 13): a synchronize on an idle device returns in ~5-20 us on the
# H100/H200; one that waits longer after the timed stream's end event waited for work some call
# left on another stream. The row fails ("streams" gate) when the median spill exceeds both
# UNJOINED_MIN_MS (well above an idle synchronize's jitter) and UNJOINED_SHARE of the median
# sample (work worth 10% of the kernel is more than any ranking between neighbours tolerates).
UNJOINED_MIN_MS = 0.05
UNJOINED_SHARE = 0.10
AUDIT_SAMPLES = 3              # isolated samples after the run, beside the spill of the run's last batch


class Cancelled(Exception):
    """The stop flag was set while measuring."""


class Timer(Protocol):
    name: str

    def time_batch(self, call: Callable[[], Any], n: int, flush: Callable[[], None] | None = None,
                   headroom_ms: float = 0.0) -> list[float]:
        """`n` samples of `call` in ms, `flush()` before each outside the window; synchronised once."""

    def sync(self) -> None:
        """Wait for queued device work."""


class SerialTimer:
    """A timer whose samples are taken one by one (`time_call`); the base of host timers."""

    name = "serial"

    def time_call(self, call: Callable[[], Any]) -> float:
        raise NotImplementedError

    def time_batch(self, call, n, flush=None, headroom_ms=0.0) -> list[float]:
        start_batch, before, after = sample_hooks(call)
        samples = []
        if start_batch is not None:
            start_batch(n)
        for _ in range(n):
            if before is not None:
                before()
            if flush is not None:
                flush()
            if after is None:
                samples.append(self.time_call(call))
            else:
                ms, out = self.time_call_kept(call)
                samples.append(ms)
                after(out)
                del out
        return samples

    def time_call_kept(self, call: Callable[[], Any]) -> tuple[float, Any]:
        """(ms, what call returned): for calls with sample hooks (engine/measure/rotation.py)."""
        box: list[Any] = []
        ms = self.time_call(lambda: box.append(call()))
        return ms, box[0] if box else None

    def sync(self) -> None:
        pass


class PerfCounterTimer(SerialTimer):
    """Host clock around a synchronous call; `name` "perf_counter" or "interpreter"."""

    def __init__(self, name: str = "perf_counter", clock: Callable[[], float] = time.perf_counter):
        self.name, self._clock = name, clock

    def time_call(self, call: Callable[[], Any]) -> float:
        t0 = self._clock()
        call()
        return (self._clock() - t0) * 1e3

    def time_call_kept(self, call: Callable[[], Any]) -> tuple[float, Any]:
        t0 = self._clock()
        out = call()
        t1 = self._clock()
        return (t1 - t0) * 1e3, out


class CudaEventTimer:
    """CUDA events on the current stream (ms, event resolution ~0.5 us), batched (module docstring).

    The headroom spin is `torch.cuda._sleep(cycles)` (private but long-standing; feature-detected:
    without it there is no spin). Its cycles per ms are measured once, with events.
    """

    name = "cuda_event"
    spins = True

    def __init__(self) -> None:
        import torch

        self._torch = torch
        self._sleep = getattr(torch.cuda, "_sleep", None)
        self._events: list[tuple[Any, Any]] = []
        self._cycles_per_ms: float | None = None

    def time_batch(self, call, n, flush=None, headroom_ms=0.0) -> list[float]:
        return self.collect(self.launch_batch(call, n, flush, headroom_ms))

    def launch_batch(self, call, n, flush=None, headroom_ms=0.0) -> list[tuple[Any, Any]]:
        """Queue `n` samples (flush, spin, start event, call, end event) without waiting; returns
        the batch's event pairs for `collect`. Several batches may be in flight (measure_run queues
        the next before it waits on this one): each takes event pairs no other batch holds."""
        cycles = self._cycles(headroom_ms)  # first: its one-time probe uses the same events
        pairs = self._pairs(n)
        start_batch, before, after = sample_hooks(call)
        if start_batch is not None:
            start_batch(n)
        for start, end in pairs:
            if before is not None:
                before()
            if flush is not None:
                flush()
            if cycles:
                self._sleep(cycles)
            start.record()
            out = call()
            end.record()
            if after is not None:  # after the end event: outside the window
                after(out)
            del out
        return pairs

    def collect(self, pairs: list[tuple[Any, Any]]) -> list[float]:
        """Wait for a launched batch's last event (the one synchronize), read its samples (ms) and
        give its event pairs back for reuse."""
        pairs[-1][1].synchronize()
        samples = [start.elapsed_time(end) for start, end in pairs]
        self._events.extend(pairs)
        return samples

    def sync(self) -> None:
        self._torch.cuda.synchronize()

    def spill_ms(self, clock: Callable[[], float] = time.perf_counter) -> float:
        """Right after a batch's last end event completed: how long a device-wide synchronize
        still waited (ms), less an idle synchronize's own time: work some call left on another
        stream that the timed stream never joined (rule 13). ~0 for a joined kernel."""
        t0 = clock()
        self._torch.cuda.synchronize()
        t1 = clock()
        self._torch.cuda.synchronize()
        t2 = clock()
        return max(0.0, (t1 - t0) - (t2 - t1)) * 1e3

    def stream_audit(self, call: Callable[[], Any], n: int = AUDIT_SAMPLES) -> list[float]:
        """`n` isolated samples after the run (device idle before each start event, so no call
        work can run before it): the spill after each end event (spill_ms)."""
        spills = []
        for pair in [self._pairs(1) for _ in range(n)]:
            self._torch.cuda.synchronize()
            start, end = pair[0]
            start.record()
            call()
            end.record()
            end.synchronize()
            spills.append(self.spill_ms())
            self._events.extend(pair)
        return spills

    def _pairs(self, n: int) -> list[tuple[Any, Any]]:
        """n event pairs taken out of the free pool (created where it has too few)."""
        event = self._torch.cuda.Event
        while len(self._events) < n:
            self._events.append((event(enable_timing=True), event(enable_timing=True)))
        taken, self._events = self._events[:n], self._events[n:]
        return taken

    def _cycles(self, headroom_ms: float) -> int:
        if headroom_ms <= 0 or self._sleep is None:
            return 0
        if self._cycles_per_ms is None:
            probe = 1_000_000
            ms = quantile(sorted(self.time_batch(lambda: self._sleep(probe), 3)), 0.5)
            self._cycles_per_ms = probe / ms if ms > 0 else 2e6  # ~2 GHz if the probe failed
        return int(headroom_ms * self._cycles_per_ms)


def sample_hooks(call: Any) -> tuple[Any, Any, Any]:
    """(start_batch(n), before_sample(), after_sample(out)) of a timed call that has them (the
    engine's Rotation: engine/measure/rotation.py), else Nones. Timers run them outside the timed
    window: before_sample before the flush, after_sample after the end event (rule 13)."""
    return (getattr(call, "start_batch", None), getattr(call, "before_sample", None),
            getattr(call, "after_sample", None))


def make_timer(device: str, interpreted: bool = False) -> Timer:
    """The timer for a torch device string ("cpu", "cuda:0")."""
    if device.startswith("cuda"):
        return CudaEventTimer()
    return PerfCounterTimer("interpreter" if interpreted else "perf_counter")


class L2Flush:
    """Evicts L2 before a timed call. kind "read" (the default): a reduction READS a buffer of
    max(2 x L2, 256 MiB), written once at allocation, so L2 ends full of clean lines and the timed
    kernel writes back nothing of ours. kind "zero": `zero_()` as triton.testing.do_bench does; it
    leaves up to L2 of DIRTY lines that the timed kernel must write back (read-heavy kernels of
    16-256 MiB timed 10-23% slower that way on the H200). "Zero then read" would end as clean as
    "read" at twice the flush traffic, so it is not offered."""

    def __init__(self, device: str, l2_bytes: int | None, kind: str = "read"):
        import torch

        if kind not in FLUSH_KINDS:
            raise ValueError(f"flush kind must be one of {FLUSH_KINDS}, got {kind!r}")
        self.kind = kind
        self.nbytes = max(2 * int(l2_bytes or 0), MIN_FLUSH_BYTES)
        self._buf = torch.ones(self.nbytes // 4, dtype=torch.float32, device=device)
        self._out = torch.empty((), dtype=torch.float32, device=device)
        self._torch = torch

    def __call__(self) -> None:
        if self.kind == "read":
            self._torch.amax(self._buf, dim=0, out=self._out)
        else:
            self._buf.zero_()


def make_l2_flush(device: str, l2_bytes: int | None, kind: str = "read") -> L2Flush | None:
    """An L2Flush for a CUDA device (queued before the start event: outside the window); None on CPU."""
    if not device.startswith("cuda"):
        return None
    return L2Flush(device, l2_bytes, kind)


def flush_kind(flush: Callable[[], None] | None) -> str | None:
    """The `timing.flush_kind` of a flush callable: "read", "zero", "custom" or None (no flush)."""
    if flush is None:
        return None
    return getattr(flush, "kind", "custom")


class SampleBatcher:
    """Collects samples and emits them in batches at most every `interval_s` (plus a final one)."""

    def __init__(self, emit: Callable[[tuple[float, ...]], None], interval_s: float = SAMPLE_BATCH_S,
                 clock: Callable[[], float] = time.perf_counter):
        self._emit, self._interval_s, self._clock = emit, interval_s, clock
        self._pending: list[float] = []
        self._last_s = clock()

    def add(self, sample_ms: float) -> None:
        self._pending.append(sample_ms)
        if self._clock() - self._last_s >= self._interval_s:
            self.flush()

    def extend(self, samples_ms) -> None:
        self._pending.extend(samples_ms)
        if self._clock() - self._last_s >= self._interval_s:
            self.flush()

    def flush(self) -> None:
        if self._pending:
            self._emit(tuple(self._pending))
            self._pending = []
        self._last_s = self._clock()


@dataclass(frozen=True)
class WarmUp:
    """What warm-up learnt: calls made (back_to_back of them in the back-to-back phase), the median
    host launch time of `call` (ms: the host's part of a call, from entering it to its return,
    which comes before the device is done) and the median host time of one timed flush + call +
    synchronize round (ms), which sizes batches."""

    calls: int
    host_launch_ms: float
    round_ms: float
    back_to_back: int = 0


WARMUP_ROUNDS = 5  # one-sample rounds that measure the launch and round time (do_bench estimates from 5 calls)


def warm_up(call: Callable[[], Any], timer: Timer, warmup_ms: float,
            clock: Callable[[], float] = time.perf_counter, flush: Callable[[], None] | None = None,
            back_to_back: bool = True) -> WarmUp:
    """Untimed calls for about `warmup_ms` of host time, never fewer than one (rule 2).

    First up to WARMUP_ROUNDS one-sample batches of the real loop (flush, headroom-free events,
    synchronize), which measure the host launch and round times. Then (back_to_back) what is left
    of `warmup_ms` is spent as triton.testing.do_bench warms up: calls back to back, no flush and
    no synchronize in between (at most remaining / round_ms of them, and no longer than the
    remaining host time), then one synchronize. Why: a power-limited kernel enters the timed loop
    at the clock do_bench's loop would find, not the higher one that idle gaps between warm-up
    rounds leave; on the H200 the engine read cuBLAS and Triton bf16 8192^3 2.1% faster than
    do_bench on average over 11 calls with round-only warm-up (0.944-0.999), and 0.996-1.001 in
    four runs over three calls with this one (results/history/h200/2026-12-03b).
    back_to_back=False: rounds only, for all of `warmup_ms` (the earlier method, kept for comparison)."""
    host_ms: list[float] = []

    def launch() -> None:
        h0 = clock()
        call()
        host_ms.append((clock() - h0) * 1e3)
    t0, round_ms = clock(), []
    while True:
        r0 = clock()
        timer.time_batch(launch, 1, flush)
        round_ms.append((clock() - r0) * 1e3)
        if (clock() - t0) * 1e3 >= warmup_ms or (back_to_back and len(round_ms) >= WARMUP_ROUNDS):
            break
    round_med = quantile(sorted(round_ms), 0.5)
    n = 0
    remaining = warmup_ms - (clock() - t0) * 1e3
    if back_to_back and remaining > 0:
        most = int(remaining / max(round_med, 1e-4))
        b0 = clock()
        while n < most and (clock() - b0) * 1e3 < remaining:
            call()
            n += 1
        timer.sync()
    return WarmUp(len(host_ms) + n, quantile(sorted(host_ms), 0.5), round_med, n)


def headroom_ms(host_launch_ms: float, flush_ms: float, device_ms: float = 0.0) -> float:
    """Device spin per sample: HEADROOM_FACTOR x (host launch + event records) less the device
    time the host's launch already overlaps: the flush's, and the previous sample's kernel
    (device_ms, estimated from warm-up: engine/timing.measure_run). Between 0 and MAX_HEADROOM_MS.
    A kernel longer than its launch keeps the host ahead within a batch and needs no spin; a spin
    there only idled the device (0.15 ms a sample for a 1.5 ms Triton GEMM on the H200), letting
    a power-limited kernel clock higher than under do_bench (0.944 of do_bench's median, against
    0.999 for cuBLAS, whose spin was 0: results/history/h200/2026-12-01b/truth-call2)."""
    need = HEADROOM_FACTOR * (host_launch_ms + EVENT_RECORD_MS) - flush_ms - device_ms
    return min(MAX_HEADROOM_MS, max(0.0, need))


def batch_size(round_ms: float, n_done: int, elapsed_ms: float, rule: StopRule) -> int:
    """Samples in the next batch: first min_samples, then as many as are done so far (the total
    doubles: the stopping rule is asked early, syncs stay few), within about BATCH_MS of work and
    what rep_ms leaves (but enough to reach min_samples), at most MAX_BATCH and max_samples."""
    per_ms = max(round_ms, 1e-4)
    grow = max(rule.min_samples - n_done, n_done, 1)
    by_time = int(BATCH_MS / per_ms)
    by_rep = max(int(max(0.0, rule.rep_ms - elapsed_ms) / per_ms), rule.min_samples - n_done)
    return max(1, min(grow, by_time, by_rep, MAX_BATCH, rule.max_samples - n_done))


@dataclass(frozen=True)
class Measurement:
    """The samples (ms) and how they were taken (the timing record's method fields)."""

    samples_ms: list[float]
    host_launch_ms: float
    headroom_ms: float
    batches: int
    warmup_calls: int
    sustained: bool = False  # the rel. SE stop was held off: a power or thermal limit was met
    warmup_back_to_back: int = 0  # of warmup_calls, made back to back (warm_up)
    spills_ms: list[float] | None = None  # device-wide waits after batches with nothing queued behind (streams)


def measure_run(call: Callable[[], Any], timer: Timer, rule: StopRule, *, warmup_ms: float = 25.0,
                flush: Callable[[], None] | None = None,
                on_samples: Callable[[tuple[float, ...]], None] | None = None,
                cancelled: Callable[[], bool] = lambda: False,
                limited: Callable[[], bool] = lambda: False,
                clock: Callable[[], float] = time.perf_counter,
                back_to_back_warm_up: bool = True,
                phase: Callable[[str], ContextManager] = lambda _name: contextlib.nullcontext()) -> Measurement:
    """Warm up (warm_up, back_to_back=back_to_back_warm_up), then time `call` in batches until
    `rule` says stop.

    flush: run before each sample, outside the timed window (L2 flush); on_samples: receives
    batches of samples (<= 10 per second); cancelled: polled after every batch, raises Cancelled;
    limited: polled after every batch (engine/clocks.py ClockSampler.limited: the SM clock met a
    power or thermal limit during warm-up or timing): once true, the run is not stopped on a
    converged median but timed for the whole rep_ms. A power-limited kernel (a large bf16 GEMM
    on an H200) clocks down over tens of milliseconds; stopping after 10 samples (15 ms) timed
    the burst clock, 5% faster than do_bench's 100 ms (results/history/h200/2026-12-01/truth-details.json).
    phase: a context manager per phase, "warm-up" then "timed" (engine/measure/nvtx.py: NVTX ranges); the
    timed one opens before the first sample's start event and closes after the last one's stop.
    """
    with phase("warm-up"):
        warm = warm_up(call, timer, warmup_ms, clock, flush, back_to_back_warm_up)
        spin = 0.0
        if getattr(timer, "spins", False):
            flush_ms = quantile(sorted(timer.time_batch(flush, 3)), 0.5) if flush is not None else 0.0
            # the kernel's device time, under-estimated (so the spin errs long): a warm-up round is
            # the host launch, then the flush and kernel on the device, then the synchronize
            device_ms = max(0.0, warm.round_ms - warm.host_launch_ms - flush_ms)
            spin = headroom_ms(warm.host_launch_ms, flush_ms, device_ms)
    batcher = SampleBatcher(on_samples or (lambda _batch: None), clock=clock)
    with phase("timed"):
        return _timed(call, timer, rule, warm, flush, spin, batcher, cancelled, limited, clock)


def _timed(call, timer: Timer, rule: StopRule, warm: WarmUp, flush, spin: float, batcher: "SampleBatcher",
           cancelled, limited, clock) -> Measurement:
    """The timed window: batches of samples until the rule stops (the pipelined loop where the
    timer can queue a batch without waiting)."""
    if hasattr(timer, "launch_batch"):
        return _pipelined(call, timer, rule, warm, flush, spin, batcher, cancelled, limited, clock)
    samples: list[float] = []
    batches, t0, sustained = 0, clock(), False
    while True:
        n = batch_size(warm.round_ms, len(samples), (clock() - t0) * 1e3, rule)
        samples += timer.time_batch(call, n, flush, spin)
        batches += 1
        batcher.extend(samples[-n:])
        if cancelled():
            raise Cancelled()
        sustained = sustained or limited()
        if rule.done(samples, (clock() - t0) * 1e3, converge=not sustained):
            batcher.flush()
            return Measurement(samples, warm.host_launch_ms, spin, batches, warm.calls, sustained, warm.back_to_back)


def _pipelined(call, timer, rule: StopRule, warm: WarmUp, flush, spin: float, batcher: "SampleBatcher",
               cancelled, limited, clock) -> Measurement:
    """The loop of a timer that can queue a batch without waiting (`launch_batch` / `collect`):
    the next batch is queued BEFORE the host waits on the current one and reads its events, so
    the device goes from batch to batch without idling while the host reads elapsed times and
    asks the stopping rule, as under do_bench's one long loop. With a synchronize after each
    batch and the host's reading of up to 100 samples before the next was queued, the device
    idled for that time every batch; on the H200 power-limited rows (PyTorch's bf16 GeLU,
    torch.compile's softmax, cuBLAS bf16 8192^3) then came out 2-4% faster than do_bench over
    15 interleaved rounds, where the rows that hold their clock agreed within 1-1.5%.

    A batch is not queued when the one in flight is expected to reach rep_ms or max_samples (by
    the warm-up's round time); when the rule stops on convergence, the batch already queued is
    waited for and its samples are kept (nothing measured is dropped: rule 12)."""
    samples: list[float] = []
    batches, t0, sustained = 0, clock(), False

    spills: list[float] = []
    spill = getattr(timer, "spill_ms", None)

    def take(pairs, last: bool = False) -> None:  # wait for a batch, keep and stream its samples
        nonlocal batches
        got = timer.collect(pairs)
        if last and spill is not None:  # nothing queued behind it: a device-wide wait is the spill
            spills.append(spill())
        samples.extend(got)
        batches += 1
        batcher.extend(got)
    n = batch_size(warm.round_ms, 0, 0.0, rule)
    inflight: tuple[Any, int] | None = (timer.launch_batch(call, n, flush, spin), n)
    while True:
        if inflight is None:  # nothing queued (the last batch was expected to be the last): queue one
            n = batch_size(warm.round_ms, len(samples), (clock() - t0) * 1e3, rule)
            inflight = (timer.launch_batch(call, n, flush, spin), n)
        pairs, n = inflight
        after = len(samples) + n
        expected_ms = (clock() - t0) * 1e3 + n * warm.round_ms  # host time when this batch ends
        queued = None
        if after < rule.max_samples and expected_ms < rule.rep_ms:
            m = batch_size(warm.round_ms, after, expected_ms, rule)
            queued = (timer.launch_batch(call, m, flush, spin), m)
        take(pairs, last=queued is None)
        if cancelled():
            raise Cancelled()
        sustained = sustained or limited()
        if rule.done(samples, (clock() - t0) * 1e3, converge=not sustained):
            if queued is not None:  # already on the device: its samples are measured ones
                take(queued[0], last=True)
            batcher.flush()
            return Measurement(samples, warm.host_launch_ms, spin, batches, warm.calls, sustained, warm.back_to_back,
                               spills)
        inflight = queued


def unjoined_failure(spills_ms: list[float], median_ms: float | None) -> str | None:
    """The "streams" gate's reason when the device-wide window outlasts the event window (the
    spills: ms a device-wide synchronize still waited after end events), else None."""
    if not spills_ms or median_ms is None:
        return None
    spill = quantile(sorted(spills_ms), 0.5)
    bound = max(UNJOINED_MIN_MS, UNJOINED_SHARE * median_ms)
    if spill <= bound:
        return None
    return Flag.STREAMS_GATE.format(
        detail=f"work left on another stream: after the timed stream's end event a device-wide synchronize "
               f"still waited {spill:.3g} ms (median of {len(spills_ms)}) against a {median_ms:.3g} ms median "
               f"sample (bound {bound:.3g} ms): the events did not time all the work")


def measure(call: Callable[[], Any], timer: Timer, rule: StopRule, **kwargs) -> list[float]:
    """`measure_run(...).samples_ms` (same arguments)."""
    return measure_run(call, timer, rule, **kwargs).samples_ms
