"""Timing one callable: timers, L2 flush, warm-up, the measuring loop (MEASUREMENT.md rules 1-4).

Timers (the `timing.timer` field of a result):
- `cuda_event`: CUDA events recorded on the current stream around each call, read after the end
  event synchronises (rule 1). Host overhead between calls is outside the window.
- `perf_counter`: host time.perf_counter around each call; eager CPU torch is synchronous.
- `interpreter`: the same host clock for Triton kernels under TRITON_INTERPRET; it times numpy
  emulating the kernel and is never presented as kernel speed (gbps/tflops stay null).

The loop is testable without a device: pass any object with `name`, `time_call` and `sync`,
and any monotonic `clock` (seconds).
"""

from __future__ import annotations

import time
from typing import Any, Callable, Protocol

from workbench.engine.stats import StopRule

MIN_FLUSH_BYTES = 256 * 2**20  # floor for the L2 flush buffer: triton.testing.do_bench's 256 MB
HOST_HEADROOM_CYCLES = 200_000  # ~100 us at 1.98 GHz: device spin queued before the start event
SAMPLE_BATCH_S = 0.1           # at most 10 Samples events per second per child (CONTRACTS.md)


class Cancelled(Exception):
    """The stop flag was set while measuring."""


class Timer(Protocol):
    name: str

    def time_call(self, call: Callable[[], Any]) -> float:
        """Run `call` once and return its time in ms (synchronised)."""

    def sync(self) -> None:
        """Wait for queued device work."""


class PerfCounterTimer:
    """Host clock around a synchronous call; `name` "perf_counter" or "interpreter"."""

    def __init__(self, name: str = "perf_counter", clock: Callable[[], float] = time.perf_counter):
        self.name, self._clock = name, clock

    def time_call(self, call: Callable[[], Any]) -> float:
        t0 = self._clock()
        call()
        return (self._clock() - t0) * 1e3

    def sync(self) -> None:
        pass


class CudaEventTimer:
    """CUDA events on the current stream around each call (ms, event resolution ~0.5 us).

    Before the start event a short device spin (`torch.cuda._sleep`, HOST_HEADROOM_CYCLES) is
    queued, so the GPU is still busy while the host runs a Python-heavy launcher (Triton's,
    torch.compile's guards, a wrapper allocating its output): the window then holds device
    work, not the host's launch latency. Seen on an H200 (2026-11-29): Triton GeLU at 4096^2
    timed 0.053 ms without it against do_bench's 0.037 ms, with the same kernel.
    """

    name = "cuda_event"

    def __init__(self, headroom_cycles: int = HOST_HEADROOM_CYCLES) -> None:
        import torch

        self._torch = torch
        self._start = torch.cuda.Event(enable_timing=True)
        self._end = torch.cuda.Event(enable_timing=True)
        spin = getattr(torch.cuda, "_sleep", None)  # private but long-standing; feature-detected
        self._spin = (lambda: spin(headroom_cycles)) if spin and headroom_cycles > 0 else (lambda: None)

    def time_call(self, call: Callable[[], Any]) -> float:
        self._spin()
        self._start.record()
        call()
        self._end.record()
        self._end.synchronize()
        return self._start.elapsed_time(self._end)

    def sync(self) -> None:
        self._torch.cuda.synchronize()


def make_timer(device: str, interpreted: bool = False) -> Timer:
    """The timer for a torch device string ("cpu", "cuda:0")."""
    if device.startswith("cuda"):
        return CudaEventTimer()
    return PerfCounterTimer("interpreter" if interpreted else "perf_counter")


def make_l2_flush(device: str, l2_bytes: int | None) -> Callable[[], None] | None:
    """A callable that evicts L2 by zeroing a buffer of max(2 x L2, 256 MiB); None on CPU.

    The zeroing is a device kernel queued before the start event, so it is outside the timed
    window (triton.testing.do_bench does the same with a 256 MB buffer).
    """
    if not device.startswith("cuda"):
        return None
    import torch

    nbytes = max(2 * int(l2_bytes or 0), MIN_FLUSH_BYTES)
    buf = torch.empty(nbytes // 4, dtype=torch.int32, device=device)
    return buf.zero_


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

    def flush(self) -> None:
        if self._pending:
            self._emit(tuple(self._pending))
            self._pending = []
        self._last_s = self._clock()


def warm_up(call: Callable[[], Any], timer: Timer, warmup_ms: float,
            clock: Callable[[], float] = time.perf_counter) -> int:
    """Untimed calls for `warmup_ms` of host time, never fewer than one; returns the call count."""
    t0, calls = clock(), 0
    while True:
        call()
        timer.sync()
        calls += 1
        if (clock() - t0) * 1e3 >= warmup_ms:
            return calls


def measure(call: Callable[[], Any], timer: Timer, rule: StopRule, *, warmup_ms: float = 25.0,
            flush: Callable[[], None] | None = None,
            on_samples: Callable[[tuple[float, ...]], None] | None = None,
            cancelled: Callable[[], bool] = lambda: False,
            clock: Callable[[], float] = time.perf_counter) -> list[float]:
    """Warm up, then time `call` until `rule` says stop; returns the samples in ms.

    flush: run before each repetition, outside the timed window (L2 flush); on_samples: receives
    batches of samples (<= 10 per second); cancelled: polled after every sample, raises Cancelled.
    """
    warm_up(call, timer, warmup_ms, clock)
    batcher = SampleBatcher(on_samples or (lambda _batch: None), clock=clock)
    samples: list[float] = []
    t0 = clock()
    while True:
        if flush is not None:
            flush()
        samples.append(timer.time_call(call))
        batcher.add(samples[-1])
        if cancelled():
            raise Cancelled()
        if rule.done(samples, (clock() - t0) * 1e3):
            batcher.flush()
            return samples
