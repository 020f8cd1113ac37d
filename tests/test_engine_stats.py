"""Statistics and the stopping rule on injected samples and clocks (no real timing)."""

from __future__ import annotations

import math

import pytest

from workbench.engine.measure.stats import StopRule, median_rel_error, quantile, summarize
from workbench.engine.measure.timing import Cancelled, PerfCounterTimer, SampleBatcher, SerialTimer, measure, warm_up


class FakeClock:
    """A clock that advances only when told to (seconds)."""

    def __init__(self):
        self.now_s = 0.0

    def __call__(self) -> float:
        return self.now_s


class FakeTimer(SerialTimer):
    """Returns the next injected sample and advances the fake clock by it."""

    name = "fake"

    def __init__(self, samples_ms, clock: FakeClock):
        self.samples_ms, self.clock, self.calls = list(samples_ms), clock, 0

    def time_call(self, call) -> float:
        call()
        ms = self.samples_ms[min(self.calls, len(self.samples_ms) - 1)]
        self.calls += 1
        self.clock.now_s += ms / 1e3
        return ms


def test_quantile_matches_linear_interpolation():
    values = [1.0, 2.0, 3.0, 4.0, 5.0]
    assert quantile(values, 0.5) == 3.0
    assert quantile(values, 0.2) == pytest.approx(1.8)
    assert quantile(values, 0.8) == pytest.approx(4.2)
    assert quantile([7.0], 0.2) == 7.0
    with pytest.raises(ValueError):
        quantile([], 0.5)


def test_summarize_reports_every_statistic():
    s = summarize([3.0, 1.0, 2.0, 4.0, 100.0])
    assert (s.median_ms, s.min_ms, s.n) == (3.0, 1.0, 5)
    assert s.mean_ms == pytest.approx(22.0)
    assert s.p20_ms == pytest.approx(1.8) and s.p80_ms == pytest.approx(23.2)


def test_median_rel_error_is_robust_and_shrinks_with_n():
    base = [1.0, 1.01, 0.99, 1.02, 0.98] * 4
    err = median_rel_error(base)
    # MAD 0.01, IQR 0.02: sigma = max(1.4826 * 0.01, 0.02 / 1.349); SE = 1.2533 sigma / sqrt(20)
    sigma = max(1.4826 * 0.01, 0.02 / 1.349)
    assert err == pytest.approx(1.2533 * sigma / math.sqrt(20), rel=1e-6)
    assert median_rel_error(base * 4) == pytest.approx(err / 2, rel=1e-6)
    assert median_rel_error(base + [1000.0]) < 2 * err  # one outlier barely moves it
    assert median_rel_error([1.0]) == math.inf
    assert median_rel_error([2.0] * 10) == 0.0
    assert median_rel_error([1.0, 3.0, 1.0, 3.0, 1.0]) > 0.1  # bimodal: MAD is 0, the IQR is not


def test_stop_rule_never_stops_under_min_samples():
    rule = StopRule(rep_ms=1.0, min_samples=10, target_rel_error=1.0)
    assert not rule.done([1.0] * 9, elapsed_ms=1e9)
    assert rule.done([1.0] * 10, elapsed_ms=0.0)


def test_stop_rule_stops_at_time_cap_or_precision():
    rule = StopRule(rep_ms=100.0, min_samples=3, target_rel_error=0.005)
    noisy = [1.0, 2.0, 3.0, 4.0] * 5
    assert not rule.done(noisy, elapsed_ms=50.0)
    assert rule.done(noisy, elapsed_ms=100.0)
    assert rule.done([1.0, 1.0001, 0.9999, 1.0] * 5, elapsed_ms=1.0)
    assert StopRule(max_samples=5, min_samples=1).done([1.0, 9.0] * 3, elapsed_ms=0.0)


def test_measure_stops_by_precision_with_injected_timer():
    clock = FakeClock()
    timer = FakeTimer([1.0], clock)  # identical samples: rel. error 0 -> stop at min_samples
    samples = measure(lambda: None, timer, StopRule(rep_ms=1e6, min_samples=12), warmup_ms=0.0, clock=clock)
    assert samples == [1.0] * 12


def test_measure_stops_by_time_cap_with_noisy_samples():
    clock = FakeClock()
    timer = FakeTimer([1.0, 3.0] * 1000, clock)
    rule = StopRule(rep_ms=50.0, min_samples=5, target_rel_error=1e-9)
    samples = measure(lambda: None, timer, rule, warmup_ms=10.0, clock=clock, back_to_back_warm_up=False)
    # the timer advances the clock by each sample; warm-up's median round (2 ms) sizes the batches,
    # which are cut to what rep_ms leaves: the cap is hit after ~50 ms of samples
    assert 50.0 <= sum(samples) <= 53.0


def test_warm_up_makes_at_least_one_call_and_honours_the_budget():
    clock = FakeClock()
    calls = []

    def call():
        calls.append(1)
        clock.now_s += 0.004
    assert warm_up(call, PerfCounterTimer(clock=clock), warmup_ms=0.0, clock=clock).calls == 1
    warm = warm_up(call, PerfCounterTimer(clock=clock), warmup_ms=10.0, clock=clock)
    assert warm.calls == 3 and warm.host_launch_ms == pytest.approx(4.0) and warm.round_ms == pytest.approx(4.0)


class _CountingTimer(PerfCounterTimer):
    """A host timer that counts synchronizes and the calls it times (rounds)."""

    def __init__(self, clock):
        super().__init__(clock=clock)
        self.syncs, self.rounds = 0, 0

    def time_batch(self, call, n, flush=None, headroom_ms=0.0):
        self.rounds += n
        return super().time_batch(call, n, flush, headroom_ms)

    def sync(self):
        self.syncs += 1


def test_warm_up_spends_the_rest_back_to_back_without_flush_then_one_synchronize():
    clock = FakeClock()
    calls, flushes = [], []

    def call():
        calls.append(1)
        clock.now_s += 0.001  # 1 ms a call on this host clock
    timer = _CountingTimer(clock)
    warm = warm_up(call, timer, warmup_ms=25.0, clock=clock, flush=lambda: flushes.append(1))
    # 5 measuring rounds (flushed), then 20 ms left: 20 calls back to back, unflushed, one sync
    assert timer.rounds == 5 and len(flushes) == 5
    assert warm.back_to_back == 20 and warm.calls == 25 == len(calls) and timer.syncs == 1
    assert warm.round_ms == pytest.approx(1.0)
    old = warm_up(call, _CountingTimer(clock), warmup_ms=25.0, clock=clock, flush=lambda: flushes.append(1),
                  back_to_back=False)
    assert old.back_to_back == 0 and old.calls == 25 and len(flushes) == 5 + 25  # rounds only, each flushed


def test_back_to_back_warm_up_is_bounded_by_the_round_time_not_the_host_time():
    """A launch that returns at once (the device is behind) must not queue warmup_ms of host
    time's worth of calls: the count is what the measured round time allows."""
    clock = FakeClock()
    calls = []
    timer = _CountingTimer(clock)

    def timed_round(call_, n, flush=None, headroom_ms=0.0):  # a round waits 2 ms for the device
        timer.rounds += n
        out = []
        for _ in range(n):
            call_()
            clock.now_s += 0.002
            out.append(2.0)
        return out
    timer.time_batch = timed_round
    warm = warm_up(lambda: calls.append(1), timer, warmup_ms=25.0, clock=clock)
    assert warm.round_ms == pytest.approx(2.0) and warm.back_to_back == int(15.0 / 2.0)


def test_flush_runs_before_every_timed_call_and_outside_it():
    clock = FakeClock()
    order = []
    timer = FakeTimer([2.0], clock)
    measure(lambda: order.append("call"), timer, StopRule(min_samples=3, rep_ms=1e6), warmup_ms=0.0,
            flush=lambda: order.append("flush"), clock=clock)
    assert order == ["flush", "call"] * 4  # warm-up first, flushed like a sample


def test_measure_can_be_cancelled():
    clock = FakeClock()
    with pytest.raises(Cancelled):
        measure(lambda: None, FakeTimer([1.0], clock), StopRule(min_samples=100), warmup_ms=0.0,
                cancelled=lambda: True, clock=clock)


def test_samples_are_batched_at_most_ten_per_second():
    clock = FakeClock()
    batches = []
    batcher = SampleBatcher(batches.append, interval_s=0.1, clock=clock)
    for _ in range(100):  # 100 samples over 0.5 s
        clock.now_s += 0.005
        batcher.add(1.0)
    batcher.flush()
    assert 5 <= len(batches) <= 6
    assert sum(len(b) for b in batches) == 100


def test_perf_counter_timer_measures_host_time_in_ms():
    clock = FakeClock()

    def call():
        clock.now_s += 0.25
    assert PerfCounterTimer(clock=clock).time_call(call) == pytest.approx(250.0)
    assert PerfCounterTimer("interpreter").name == "interpreter"


def test_do_bench_keywords_are_feature_detected(monkeypatch):
    """MEASUREMENT.md P3: warmup/rep are ms; the statistic is named; old and new signatures work."""
    import triton.testing

    from benchmarks.dobench import do_bench_median_ms

    seen = {}

    def new_style(fn, warmup=25, rep=100, grad_to_none=None, quantiles=None, return_mode="mean"):
        seen.update(warmup=warmup, rep=rep, return_mode=return_mode)
        return 0.5

    def old_style(fn, warmup=25, rep=100, grad_to_none=None, quantiles=None, fast_flush=True):
        return [0.4] if quantiles == [0.5] else 9.9

    def minimal(fn, warmup=25, rep=100):
        return 0.3
    monkeypatch.setattr(triton.testing, "do_bench", new_style)
    assert do_bench_median_ms(lambda: None, warmup_ms=10, rep_ms=50) == (0.5, "median")
    assert seen == {"warmup": 10, "rep": 50, "return_mode": "median"}
    monkeypatch.setattr(triton.testing, "do_bench", old_style)
    assert do_bench_median_ms(lambda: None) == (0.4, "median")
    monkeypatch.setattr(triton.testing, "do_bench", minimal)
    assert do_bench_median_ms(lambda: None) == (0.3, "default")


def test_do_bench_quantiles_are_asked_where_do_bench_takes_them(monkeypatch):
    import triton.testing

    from benchmarks.dobench import do_bench_quantiles_ms

    def with_quantiles(fn, warmup=25, rep=100, grad_to_none=None, quantiles=None, return_mode="mean"):
        return [0.1 * q * 10 for q in quantiles]
    monkeypatch.setattr(triton.testing, "do_bench", with_quantiles)
    assert do_bench_quantiles_ms(lambda: None, (0.2, 0.5, 0.8)) == pytest.approx([0.2, 0.5, 0.8])
    monkeypatch.setattr(triton.testing, "do_bench", lambda fn, warmup=25, rep=100: 0.3)
    assert do_bench_quantiles_ms(lambda: None) is None


def test_do_bench_samples_come_from_return_mode_all_where_it_has_that_mode(monkeypatch):
    import triton.testing

    from benchmarks.dobench import do_bench_samples_ms

    asked = {}

    def with_all(fn, warmup=25, rep=100, grad_to_none=None, quantiles=None, return_mode="mean"):
        asked.update(warmup=warmup, rep=rep, return_mode=return_mode)
        if return_mode not in ("min", "max", "mean", "median", "all"):
            raise AssertionError(return_mode)
        return [0.3, 0.31, 0.29] if return_mode == "all" else 0.3
    monkeypatch.setattr(triton.testing, "do_bench", with_all)
    assert do_bench_samples_ms(lambda: None, warmup_ms=10, rep_ms=50) == [0.3, 0.31, 0.29]
    assert asked == {"warmup": 10, "rep": 50, "return_mode": "all"}

    def without_all(fn, warmup=25, rep=100, return_mode="mean"):  # an older do_bench: its assert refuses "all"
        assert return_mode in ("min", "max", "mean", "median")
        return 0.3
    monkeypatch.setattr(triton.testing, "do_bench", without_all)
    assert do_bench_samples_ms(lambda: None) is None
    monkeypatch.setattr(triton.testing, "do_bench", lambda fn, warmup=25, rep=100: 0.3)  # no return_mode at all
    assert do_bench_samples_ms(lambda: None) is None


def test_cancel_poll_is_throttled():
    """The stop flag is read at most once per interval, not after every sample."""
    from workbench.engine.measure.bench import throttled

    now = [0.0]
    calls = []
    poll = throttled(lambda: calls.append(now[0]) or True, interval_s=0.05, clock=lambda: now[0])
    results = []
    for step in range(10):
        now[0] = step * 0.02
        results.append(poll())
    assert calls == [0.06, 0.12, 0.18]
    assert results.count(True) == 3


def test_unconverged_median_is_flagged_and_a_tight_one_is_not():
    from workbench.engine.measure.bench import convergence_flag

    tight = [1.0, 1.001, 0.999, 1.0, 1.0005, 0.9995, 1.0, 1.0, 1.0002, 0.9998]
    wide = [1.0, 8.0, 1.2, 7.9, 0.9, 8.1, 1.1]
    assert convergence_flag(tight, 0.005, 100) is None
    flag = convergence_flag(wide, 0.005, 100)
    assert flag.startswith("median not converged") and "7 samples" in flag


def test_a_cpu_row_is_flagged_when_its_threads_waited_for_a_core():
    from workbench.engine.measure.bench import CONTENDED, contention_flag

    assert contention_flag(1.0, 1.0 + CONTENDED * 2.0, 2.0) is None  # at the line: not flagged
    flag = contention_flag(1.0, 2.6, 2.0)
    assert flag.startswith("CPU contended: while timing, the worker's threads waited 0.80 s for a core per second")
    assert contention_flag(None, 1.0, 1.0) is None and contention_flag(0.0, None, 1.0) is None


def test_run_delay_counts_threads_waiting_for_a_core():
    """More busy threads than cores (hashlib releases the GIL on large data): some wait."""
    import hashlib
    import os
    import threading
    import time

    from workbench.engine.measure.bench import run_delay_s

    start = run_delay_s()
    if start is None:
        pytest.skip("no schedstats here (/proc/self/task/*/schedstat)")
    data = b"\0" * (64 << 20)
    busy = [threading.Thread(target=lambda: [hashlib.sha256(data).digest() for _ in range(6)])
            for _ in range(2 * (os.cpu_count() or 1) + 2)]
    for thread in busy:
        thread.start()
    time.sleep(0.3)
    waited = run_delay_s() - start  # read while they run: a thread that ended is not counted
    for thread in busy:
        thread.join()
    assert waited > 0.01


def test_the_convergence_flag_never_reads_as_a_number_above_itself(monkeypatch):
    """A new user saw `estimated error 0.01% > target 0.01%`: both rounded to 2 digits."""
    import re

    import workbench.engine.measure.bench as bench

    monkeypatch.setattr(bench, "median_rel_error", lambda samples: 0.000104)
    flag = bench.convergence_flag([1.0] * 5, 0.0001, 100)
    shown, target = re.search(r"error ([\d.]+)% > target ([\d.]+)%", flag).groups()
    assert shown != target and float(shown) > float(target), flag
