"""The batched timing loop (engine/timing.py) with injected timers, clocks and a fake torch.cuda:
one synchronize per batch, a flush before every sample, the headroom spin sized from the host
launch time, the flush kinds, streaming and cancel. No real-time assertions."""

from __future__ import annotations

import types

import pytest

from workbench.engine.measure import timing
from workbench.engine.measure.stats import StopRule
from workbench.engine.measure.timing import (BATCH_MS, Cancelled, L2Flush, SerialTimer, batch_size, headroom_ms,
                                     measure_run)


class Clock:
    def __init__(self):
        self.now_s = 0.0

    def __call__(self) -> float:
        return self.now_s


class BatchTimer(SerialTimer):
    """Each sample `sample_ms` long (the clock advances by it); records every batch it is asked for."""

    name = "fake"

    def __init__(self, clock: Clock, sample_ms: float = 1.0, spins: bool = False, flush_ms: float = 0.0):
        self.clock, self.sample_ms, self.spins, self.flush_ms = clock, sample_ms, spins, flush_ms
        self.batches: list[tuple[int, float]] = []

    def time_batch(self, call, n, flush=None, headroom_ms=0.0):
        self.batches.append((n, headroom_ms))
        return super().time_batch(call, n, flush)

    def time_call(self, call) -> float:
        if getattr(call, "is_flush", False):
            return self.flush_ms
        call()
        self.clock.now_s += self.sample_ms / 1e3
        return self.sample_ms


def test_batches_start_at_min_samples_then_double_within_the_time_and_rep_budgets():
    rule = StopRule(rep_ms=1000.0, min_samples=10)
    assert batch_size(1.0, 0, 0.0, rule) == 10
    assert batch_size(1.0, 10, 10.0, rule) == 10
    assert batch_size(1.0, 40, 40.0, rule) == 40
    assert batch_size(1.0, 400, 400.0, rule) == int(BATCH_MS)      # ~100 ms of work per batch
    assert batch_size(1.0, 40, 990.0, rule) == 10                  # what rep_ms leaves
    assert batch_size(1.0, 4, 2000.0, rule) == 6                   # rep spent: still reach min_samples
    assert batch_size(200.0, 0, 0.0, rule) == 1                    # a 200 ms kernel: one per batch
    assert batch_size(1e-6, 5000, 0.0, StopRule(rep_ms=1e9, min_samples=10)) == timing.MAX_BATCH


def test_one_timer_batch_per_loop_step_and_the_stop_rule_asked_after_each():
    clock = Clock()
    timer = BatchTimer(clock, sample_ms=1.0)
    rule = StopRule(rep_ms=1e6, min_samples=10, target_rel_error=-1.0, max_samples=160)  # never precise
    run = measure_run(lambda: None, timer, rule, warmup_ms=0.0, clock=clock)
    sizes = [n for n, _ in timer.batches]
    assert sizes == [1, 10, 10, 20, 40, 80]          # warm-up (1 call), then min_samples, doubling
    assert run.batches == 5 and len(run.samples_ms) == 160 and run.warmup_calls == 1


def test_headroom_is_sized_from_host_launch_time_less_the_flush():
    assert headroom_ms(0.010, 0.070) == 0.0                       # cuBLAS-like launch: the flush covers it
    assert headroom_ms(0.060, 0.070) == pytest.approx(1.5 * 0.070 - 0.070)  # a Triton-like launcher
    assert headroom_ms(0.060, 0.0) == pytest.approx(1.5 * 0.070)  # no flush to hide behind
    assert headroom_ms(50.0, 0.070) == timing.MAX_HEADROOM_MS
    assert headroom_ms(0.130, 0.070, device_ms=1.5) == 0.0        # a long kernel keeps the host ahead
    assert headroom_ms(0.130, 0.070, device_ms=0.05) == pytest.approx(1.5 * 0.140 - 0.120)


def test_measure_run_passes_the_warm_up_headroom_to_every_batch():
    clock = Clock()
    timer = BatchTimer(clock, sample_ms=0.01, spins=True, flush_ms=0.07)  # a 10 us kernel

    def call():  # 0.2 ms on the host before it returns (a Python-heavy launcher)
        clock.now_s += 0.2e-3

    def flush():
        pass
    flush.is_flush = True
    run = measure_run(call, timer, StopRule(rep_ms=1e6, min_samples=5), warmup_ms=0.0, flush=flush, clock=clock)
    expected = 1.5 * (0.2 + timing.EVENT_RECORD_MS) - 0.07
    assert run.host_launch_ms == pytest.approx(0.2)
    assert run.headroom_ms == pytest.approx(expected)
    # warm-up (no spin), the flush's own device time (3 samples), then the timed batches with the spin
    assert timer.batches[0] == (1, 0.0) and timer.batches[1] == (3, 0.0)
    long_kernel = BatchTimer(clock, sample_ms=1.5, spins=True, flush_ms=0.07)
    run = measure_run(call, long_kernel, StopRule(rep_ms=1e6, min_samples=5), warmup_ms=0.0, flush=flush, clock=clock)
    assert run.headroom_ms == 0.0  # a kernel longer than its launch: the host stays ahead, no spin
    assert all(h == pytest.approx(expected) for _n, h in timer.batches[2:])


def test_samples_stream_at_most_ten_times_a_second():
    clock = Clock()
    streamed = []
    timer = BatchTimer(clock, sample_ms=2.0)
    rule = StopRule(rep_ms=1000.0, min_samples=3, target_rel_error=-1.0)
    run = measure_run(lambda: None, timer, rule, warmup_ms=0.0, on_samples=streamed.append, clock=clock)
    assert sum(len(b) for b in streamed) == len(run.samples_ms)
    assert len(streamed) <= 1000.0 / 100 + 1


def test_cancel_is_polled_after_each_batch():
    clock = Clock()
    timer = BatchTimer(clock, sample_ms=1.0)
    with pytest.raises(Cancelled):
        measure_run(lambda: None, timer, StopRule(min_samples=100), warmup_ms=0.0, cancelled=lambda: True,
                    clock=clock)
    assert [n for n, _ in timer.batches] == [1, 100]  # warm-up, then one batch, then the poll


class FakeEvent:
    log: list = []
    count = 0

    def __init__(self, enable_timing=False):
        assert enable_timing
        FakeEvent.count += 1
        self.id = FakeEvent.count

    def record(self):
        FakeEvent.log.append(("record", self.id))

    def synchronize(self):
        FakeEvent.log.append(("synchronize", self.id))

    def elapsed_time(self, other):
        return 0.5


def _fake_cuda(monkeypatch, with_sleep=True):
    import torch

    FakeEvent.log, FakeEvent.count = [], 0
    fake = types.SimpleNamespace(Event=FakeEvent, synchronize=lambda: FakeEvent.log.append(("sync",)))
    if with_sleep:
        fake._sleep = lambda cycles: FakeEvent.log.append(("sleep", cycles))
    monkeypatch.setattr(torch, "cuda", fake)


def test_cuda_event_batch_flushes_spins_and_synchronises_once(monkeypatch):
    _fake_cuda(monkeypatch)
    timer = timing.CudaEventTimer()
    log = FakeEvent.log
    samples = timer.time_batch(lambda: log.append(("call",)), 3, flush=lambda: log.append(("flush",)),
                               headroom_ms=0.05)
    assert samples == [0.5, 0.5, 0.5]
    probe = log.index(("synchronize", 6))  # the spin rate probe: 3 _sleep(1e6) pairs, one sync
    assert log[:probe].count(("sleep", 1_000_000)) == 3
    cycles = int(0.05 * 1_000_000 / 0.5)   # 0.5 ms per 1e6 cycles
    rest = log[probe + 1:]
    assert rest == [("flush",), ("sleep", cycles), ("record", 1), ("call",), ("record", 2),
                    ("flush",), ("sleep", cycles), ("record", 3), ("call",), ("record", 4),
                    ("flush",), ("sleep", cycles), ("record", 5), ("call",), ("record", 6),
                    ("synchronize", 6)]
    log.clear()  # events are reused; the spin rate is measured once
    timer.time_batch(lambda: None, 2)
    assert log == [("record", 1), ("record", 2), ("record", 3), ("record", 4), ("synchronize", 4)]


def test_no_spin_without_torch_cuda_sleep(monkeypatch):
    _fake_cuda(monkeypatch, with_sleep=False)
    timing.CudaEventTimer().time_batch(lambda: FakeEvent.log.append(("call",)), 1, headroom_ms=1.0)
    assert FakeEvent.log == [("record", 1), ("call",), ("record", 2), ("synchronize", 2)]


def test_flush_kinds_read_leaves_the_buffer_unwritten_zero_writes_it(monkeypatch):
    import torch

    monkeypatch.setattr(timing, "MIN_FLUSH_BYTES", 4096)
    read = L2Flush("cpu", None, "read")
    read()
    assert read.kind == "read" and read.nbytes == 4096 and bool(torch.all(read._buf == 1))
    zero = L2Flush("cpu", 1024, "zero")
    zero()
    assert zero.nbytes == 4096 and bool(torch.all(zero._buf == 0))
    with pytest.raises(ValueError, match="flush kind must be one of"):
        L2Flush("cpu", None, "write")
    assert timing.flush_kind(read) == "read" and timing.flush_kind(None) is None
    assert timing.flush_kind(lambda: None) == "custom"
    assert timing.make_l2_flush("cpu", 2**20) is None


def test_a_power_or_thermal_limit_holds_off_the_converged_stop_until_rep_ms():
    """Constant samples converge at min_samples; once `limited` says a power or thermal limit was
    met, the run goes on to rep_ms (the sustained clock, as do_bench times it)."""
    rule = StopRule(rep_ms=50.0, min_samples=10, target_rel_error=0.005)
    free = measure_run(lambda: None, BatchTimer(Clock(), sample_ms=1.0), rule, warmup_ms=0.0, clock=Clock())
    assert len(free.samples_ms) == 10 and not free.sustained
    clock = Clock()
    held = measure_run(lambda: None, BatchTimer(clock, sample_ms=1.0), rule, warmup_ms=0.0, clock=clock,
                       limited=lambda: True)
    assert held.sustained and len(held.samples_ms) >= 50


def test_the_clock_sampler_reports_a_limit_only_for_power_or_thermal_reasons():
    from workbench.engine.measure.clocks import ClockSampler

    sampler = ClockSampler(None)
    assert not sampler.limited()
    sampler.reason_bits = 0x1 | 0x10          # idle, sync boost: not limits
    assert not sampler.limited()
    sampler.reason_bits |= 0x4                # sw_power_cap
    assert sampler.limited()


class PipelinedTimer:
    """A timer that queues batches (launch_batch) and waits for them (collect), logging both; each
    sample `sample_ms` long on a device clock the host clock catches up with at collect."""

    name = "fake_pipelined"
    spins = False

    def __init__(self, clock: Clock, sample_ms: float = 1.0, values=None):
        self.clock, self.sample_ms, self.log, self.values = clock, sample_ms, [], values
        self.device_s = 0.0

    def time_batch(self, call, n, flush=None, headroom_ms=0.0):  # warm-up's one-sample rounds
        return self.collect(self.launch_batch(call, n, flush, headroom_ms))

    def launch_batch(self, call, n, flush=None, headroom_ms=0.0):
        for _ in range(n):
            call()
        self.log.append(("launch", n))
        self.device_s = max(self.device_s, self.clock.now_s) + n * self.sample_ms / 1e3
        return (n, self.device_s)

    def collect(self, handle):
        n, done_s = handle
        self.log.append(("collect", n))
        self.clock.now_s = max(self.clock.now_s, done_s)
        return [self.values.pop(0) if self.values else self.sample_ms for _ in range(n)]

    def sync(self):
        pass


def test_the_next_batch_is_queued_before_the_host_waits_on_the_current_one():
    clock = Clock()
    timer = PipelinedTimer(clock, sample_ms=1.0)
    rule = StopRule(rep_ms=1e6, min_samples=10, target_rel_error=-1.0, max_samples=160)  # never precise
    run = measure_run(lambda: None, timer, rule, warmup_ms=0.0, clock=clock)
    log = timer.log[2:]  # after warm-up's launch + collect of one sample
    assert log[:4] == [("launch", 10), ("launch", 10), ("collect", 10), ("launch", 20)]
    # every collect but the last comes after the next launch: the device always has a batch queued
    for i, (kind, _) in enumerate(log[:-1]):
        if kind == "collect" and i + 1 < len(log) - 1:
            assert any(k == "launch" for k, _ in log[i - 1:i]), log
    assert len(run.samples_ms) == 160 and log[-1][0] == "collect"
    assert sum(n for k, n in log if k == "launch") == sum(n for k, n in log if k == "collect") == 160


def test_no_batch_is_queued_past_rep_ms_and_a_queued_one_is_kept_on_convergence():
    clock = Clock()
    timer = PipelinedTimer(clock, sample_ms=10.0)
    rule = StopRule(rep_ms=100.0, min_samples=5, target_rel_error=-1.0)
    run = measure_run(lambda: None, timer, rule, warmup_ms=0.0, clock=clock)
    launched = sum(n for k, n in timer.log[2:] if k == "launch")
    assert launched == len(run.samples_ms)          # nothing queued that was not collected
    assert sum(run.samples_ms) <= 100.0 + 10.0 * 5  # the rep budget, overshot by at most one batch
    # a converged stop after the first batch: the second, already queued, is waited for and kept
    clock = Clock()
    steady = PipelinedTimer(clock, sample_ms=1.0)
    run = measure_run(lambda: None, steady, StopRule(rep_ms=1e6, min_samples=10), warmup_ms=0.0, clock=clock)
    assert [e for e in steady.log[2:]] == [("launch", 10), ("launch", 10), ("collect", 10), ("collect", 10)]
    assert len(run.samples_ms) == 20 and run.batches == 2


def test_batches_in_flight_hold_distinct_event_pairs(monkeypatch):
    _fake_cuda(monkeypatch, with_sleep=False)
    timer = timing.CudaEventTimer()
    first = timer.launch_batch(lambda: None, 3)
    second = timer.launch_batch(lambda: None, 3)
    ids = [e.id for pair in first + second for e in pair]
    assert len(set(ids)) == 12                      # no event recorded twice while in flight
    assert timer.collect(first) == [0.5] * 3
    third = timer.launch_batch(lambda: None, 3)     # reuses the first batch's pairs, not the second's
    assert {e.id for pair in third for e in pair} == {e.id for pair in first for e in pair}


def test_nvtx_phases_wrap_the_warm_up_and_the_whole_timed_window_never_a_sample(monkeypatch):
    """measure_run's phases (engine/measure/nvtx.py ranges): warm-up, then one `timed` range pushed before
    the first sample's start event and popped after the last sample's stop event."""
    import contextlib

    _fake_cuda(monkeypatch)
    log = FakeEvent.log

    @contextlib.contextmanager
    def phase(name):
        log.append(("push", name))
        yield
        log.append(("pop", name))

    run = measure_run(lambda: log.append(("call",)), timing.CudaEventTimer(),
                      StopRule(rep_ms=1e6, min_samples=10, target_rel_error=-1.0, max_samples=40),
                      warmup_ms=0.0, phase=phase)
    ranges = [(i, e) for i, e in enumerate(log) if e[0] in ("push", "pop")]
    assert [e for _, e in ranges] == [("push", "warm-up"), ("pop", "warm-up"), ("push", "timed"), ("pop", "timed")]
    start, stop = ranges[2][0], ranges[3][0]
    records = [i for i, e in enumerate(log) if e[0] == "record"]
    timed_calls = sum(1 for e in log[start:stop] if e == ("call",))
    assert len(run.samples_ms) == 40 and timed_calls == 40  # every timed sample inside the one range
    assert start < min(i for i in records if i > start) and max(records) < stop  # events inside it


def test_nvtx_ranges_are_named_after_the_row_and_nothing_on_cpu(monkeypatch):
    import types

    import torch

    from workbench.engine.measure.nvtx import nvtx_range, row_range

    assert row_range((0, "triton", None)) == "run0-triton"
    assert row_range((2, "my impl/v2", 4096)) == "run2-my_impl_v2-4096"  # no `/`: ncu reads it as nesting
    calls = []
    fake = types.SimpleNamespace(nvtx=types.SimpleNamespace(range_push=lambda n: calls.append(("push", n)),
                                                            range_pop=lambda: calls.append(("pop",))))
    monkeypatch.setattr(torch, "cuda", fake)
    with nvtx_range("run0-triton", enabled=False):
        pass
    assert calls == []
    with pytest.raises(KeyError):
        with nvtx_range("run0-triton", enabled=True):
            raise KeyError("the block failed")
    assert calls == [("push", "run0-triton"), ("pop",)]  # popped even when the block raised


def test_the_nvtx_setting_turns_a_rows_ranges_off(monkeypatch):
    """`nvtx: false` (a session or run setting): the device's phases push nothing on a CUDA device."""
    import types

    import torch

    from workbench.engine.measure.device import DeviceSession
    from workbench.engine.rows import run_settings
    from workbench.session.api import parse_session

    session = parse_session("schema_version: 1\nname: n\nruns:\n  - op: gelu\n    settings: {nvtx: false}\n"
                            "  - op: gelu\n")
    assert [run_settings(session, r, None).nvtx for r in session.runs] == [False, True]
    with pytest.raises(Exception, match="nvtx: must be true or false"):
        parse_session("schema_version: 1\nname: n\nsettings: {nvtx: 0}\nruns: [{op: gelu}]\n")
    calls = []
    fake = types.SimpleNamespace(nvtx=types.SimpleNamespace(range_push=lambda n: calls.append(n),
                                                            range_pop=lambda: None))
    monkeypatch.setattr(torch, "cuda", fake)
    dev = DeviceSession.__new__(DeviceSession)  # a CUDA device's session, without a GPU
    dev.is_cuda, dev.nvtx = True, False
    with dev.phase("timed"):
        pass
    assert calls == []
    dev.nvtx = True
    with dev.phase("timed"):
        pass
    assert calls == ["timed"]
