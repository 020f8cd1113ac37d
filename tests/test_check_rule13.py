"""MEASUREMENT.md rule 13 (issue 38): what is timed is what was checked. In-process, CPU only:
the rotation of timed inputs and the kept outputs (engine/measure/rotation.py) under the host timer, the
ownership gate, the timed-outputs gate of RowCheck, the streams gate and the CPU bound with
injected numbers, and the trust flags of plugin code."""

from __future__ import annotations

import random

import pytest
import torch

from workbench.engine.measure.cpu_bound import CPU_BOUND_MARGIN, cpu_bound_failure
from workbench.engine.measure.rotation import Rotation
from workbench.engine.measure.timing import (UNJOINED_MIN_MS, UNJOINED_SHARE, PerfCounterTimer, unjoined_failure)
from workbench.registry import BuildContext, Op, Registry, discover
from workbench.check.row import TOLERANCE_SCALE_CAP, RowCheck, aliases, ownership_failure, trust_flags

CTX = BuildContext(device="cpu", fp32_precision="ieee")
REGISTRY = discover()


class FakeClock:
    """A clock that advances 1 ms per reading and logs the order of readings and calls."""

    def __init__(self, log):
        self.t, self.log = 0.0, log

    def __call__(self):
        self.log.append("clock")
        self.t += 1e-3
        return self.t


def _row(op_name="softmax", shape=None, dtype="float32"):
    op = REGISTRY.op(op_name)
    impl = op.get_impl("pytorch")
    spec = op.make_spec(shape or {"M": 8, "N": 100}, dtype)
    inputs = op.make_inputs(spec, "cpu", 0)
    return op, impl, spec, inputs, RowCheck(op, impl, spec, CTX, inputs, 0)


def test_rotation_alternates_sets_and_keeps_one_output_per_set_and_batch_outside_the_window():
    log = []
    sets = [(torch.zeros(2),), (torch.ones(2),)]
    seen = []

    def fn(x):
        log.append("call")
        seen.append(float(x[0]))
        return x + 1

    rotation = Rotation(fn, sets, rng=random.Random(1))
    timer = PerfCounterTimer(clock=FakeClock(log))
    timer.time_batch(rotation, 5)
    timer.time_batch(rotation, 3)
    assert seen == [0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0]
    # each timed call sits between its two clock readings: the hooks add no work inside
    assert log == ["clock", "call", "clock"] * 8
    assert sorted((k.batch, k.set_index) for k in rotation.kept) == [(1, 0), (1, 1), (2, 0), (2, 1)]
    for k in rotation.kept:
        assert float(k.out[0]) == k.set_index + 1  # the output of the set it was given


def test_the_kept_sample_is_not_predictable_across_batches():
    rotation = Rotation(lambda x: x.clone(), [(torch.zeros(1),)], keep_max=1000, keep_bytes=1 << 30)
    for _ in range(40):
        rotation.start_batch(8)
        for _ in range(8):
            rotation.before_sample()
            rotation.after_sample(rotation())
    assert len({k.sample for k in rotation.kept}) > 1  # SystemRandom: a different sample across batches


def test_kept_outputs_are_bounded_in_number():
    rotation = Rotation(lambda x: x.clone(), [(torch.zeros(4),)], keep_max=3)
    for _ in range(20):
        rotation.start_batch(2)
        for _ in range(2):
            rotation.before_sample()
            rotation.after_sample(rotation())
    assert len(rotation.kept) == 3 and rotation.batches == 20


def test_ownership_refuses_a_subclass_an_input_alias_and_a_held_output():
    op, _, _, inputs, _ = _row()
    x = inputs[0]

    class Sub(torch.Tensor):
        pass
    assert "not a plain torch.Tensor" in ownership_failure(op, torch.zeros(2).as_subclass(Sub), inputs)
    assert "input 0 of 1" in ownership_failure(op, x[1:3], inputs)  # a view into the input
    held = torch.zeros(10)
    assert "the earlier one" in ownership_failure(op, held[2:4], inputs, [("the earlier one", held)])
    assert ownership_failure(op, x.clone(), inputs, [("held", held)]) is None
    assert not aliases(torch.zeros(0), torch.zeros(0))
    sleep = REGISTRY.op("sleep")  # its output is its input: allowed there, and only that
    assert ownership_failure(sleep, inputs[0], inputs, [("held", inputs[0])]) is None
    cached = torch.zeros(1)
    assert "held, still held" in ownership_failure(sleep, cached, inputs, [("held", cached)])


def _timed(check, fn, calls=4, rng=None):
    rotation = Rotation(fn, check.rotation_sets(), rng=rng or random.Random(0))
    timer = PerfCounterTimer()
    for _ in range(calls // 2):
        timer.time_batch(rotation, 2)
    rotation.restore()
    kept, sets = rotation.kept, rotation.sets
    rotation.release()
    return check.timed_calls(fn, kept, sets)


def test_timed_calls_pass_a_right_implementation_on_both_sets():
    op, impl, spec, inputs, check = _row()
    fn = impl.builder(spec, {}, CTX)
    assert check.first(fn(*inputs)).passed
    sets = check.rotation_sets()
    assert len(sets) == 2 and all(a.data_ptr() != b.data_ptr() for a, b in zip(*sets))
    check = RowCheck(op, impl, spec, CTX, inputs, 0)
    report = _timed(check, fn)
    assert report.passed and report.input_set == "timed calls"


def test_a_global_buffer_fails_the_timed_outputs_gate():
    op, impl, spec, inputs, check = _row()
    right = impl.builder(spec, {}, CTX)
    buffer = torch.empty(8, 100)
    report = _timed(check, lambda x: buffer.copy_(right(x)))
    assert not report.passed and report.gate == "timed outputs" and "shares memory" in report.detail
    assert report.detail.startswith("timed outputs gate (timed calls inputs): the output of timed batch")


def test_a_kernel_that_idles_when_timed_fails_the_timed_outputs_gate():
    op, impl, spec, inputs, check = _row()
    right = impl.builder(spec, {}, CTX)
    calls = []

    def lazy(x):  # right on its first call only (a fresh zero tensor after: no aliasing)
        calls.append(1)
        return right(x) if len(calls) == 1 else torch.zeros(8, 100)
    assert check.first(lazy(*inputs)).passed
    report = _timed(check, lazy)
    assert not report.passed and report.gate == "timed outputs" and "elementwise" in report.detail


def test_a_byte_sample_cache_returning_fresh_copies_fails_under_nudges():
    op, impl, spec, inputs, check = _row()
    right = impl.builder(spec, {}, CTX)
    cache = {}

    def cached(x):  # keyed by the first element's bytes; a fresh copy each time (no aliasing)
        key = bytes(x.reshape(-1)[:1].view(torch.uint8).tolist())
        if key not in cache:
            cache[key] = right(x)
        return cache[key].clone()
    assert check.first(cached(*inputs)).passed
    report = _timed(check, cached, calls=6)
    assert not report.passed and report.gate == "timed outputs" and "elementwise" in report.detail


def test_nudges_are_undone_and_a_kept_output_is_graded_under_its_own_nudge():
    sets = [(torch.arange(6.0),), (torch.arange(6.0) + 10,)]
    rotation = Rotation(lambda x: x * 2, sets, rng=random.Random(3))
    for _ in range(3):
        PerfCounterTimer().time_batch(rotation, 2)
    changed = [k for k in rotation.kept if k.nudge and k.nudge[1] != k.nudge[2]]
    assert changed  # some kept output was computed on a nudged set
    originals = [torch.arange(6.0), torch.arange(6.0) + 10]
    for k in changed:  # the output shows the element copied from `source` at `pos`, the rest as seeded
        _, pos, source = k.nudge
        expected = originals[k.set_index].clone()
        expected[pos] = expected[source]
        assert torch.equal(k.out, 2 * expected)
    rotation.restore()
    assert torch.equal(sets[0][0], torch.arange(6.0)) and torch.equal(sets[1][0], torch.arange(6.0) + 10)


def test_inputs_modified_while_timed_fail_at_the_timed_calls():
    op, impl, spec, inputs, check = _row()
    right = impl.builder(spec, {}, CTX)
    calls = []

    def sneaky(x):
        calls.append(1)
        if len(calls) == 2:
            x.mul_(1.0 + 2 ** -10)  # the second set, quietly changed
        return right(x)
    report = _timed(check, sneaky)
    assert not report.passed and report.gate == "inputs" and report.input_set == "timed calls"


def test_the_streams_gate_with_injected_spills():
    assert unjoined_failure([], 1.0) is None
    assert unjoined_failure([0.01, 0.02, 0.015], 1.0) is None             # idle synchronize jitter
    assert unjoined_failure([UNJOINED_MIN_MS * 0.9] * 3, 0.01) is None     # under the floor
    assert unjoined_failure([0.2, 0.2, 0.0], 10.0) is None                 # under the share: 0.2 < 1.0
    reason = unjoined_failure([0.6, 0.5, 0.7], 1.0)                       # half the kernel after the end event
    assert reason.startswith("streams gate: work left on another stream") and "0.6 ms" in reason
    assert unjoined_failure([UNJOINED_SHARE * 10.0 * 1.01] * 3, 10.0) is not None


def test_the_cpu_bound_with_injected_copies():
    # a copy of the row's bytes takes 1.0 ms, 0.1 of it overhead: the bound is 0.9 / margin
    floor = 0.9 / CPU_BOUND_MARGIN
    assert cpu_bound_failure(floor * 1.01, 1 << 20, 1.0, 0.1) is None
    reason = cpu_bound_failure(floor * 0.5, 1 << 20, 1.0, 0.1)
    assert reason.startswith("CPU bound: a median of") and str(1 << 20) in reason
    assert cpu_bound_failure(1e-6, 64, 0.001, 0.001) is None   # all overhead: no bound
    assert cpu_bound_failure(None, 1 << 20, 1.0, 0.1) is None


def test_trust_flags_name_a_plugin_tolerance_above_the_cap_and_a_plugin_reference():
    registry = Registry()
    shipped = REGISTRY.op("softmax")
    assert all(trust_flags(shipped, i, shipped.make_spec({"M": 2, "N": 4}, d.value)) == []
               for i in shipped.impls.values() for d in shipped.dtypes)  # the shipped ones say nothing
    # a plugin's implementation and reference variant on a shipped op (the op's own inputs module)
    op = Op("softmax_copy", shipped.spec, registry=registry)
    op._inputs, op._references = shipped._inputs, dict(shipped._references)

    def mine(x):
        return x
    mine.__module__ = "my_plugin"
    op.reference("mine")(mine)
    op.impl("manual_loose", math="mine", tolerance_scale=TOLERANCE_SCALE_CAP * 2)(lambda spec, params, ctx: None)
    op.impl("manual_fine", tolerance_scale=TOLERANCE_SCALE_CAP)(lambda spec, params, ctx: None)
    spec = op.make_spec({"M": 2, "N": 4}, "float32")
    flags = trust_flags(op, op.get_impl("manual_loose"), spec)
    assert len(flags) == 2 and all(f.startswith("trust: ") for f in flags)
    assert "above the cap" in flags[0] and "reference variant 'mine'" in flags[1] and "my_plugin" in flags[1]
    assert trust_flags(op, op.get_impl("manual_fine"), spec) == []


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_shipped_softmax_passes_every_set_including_the_timed_calls(dtype):
    op, impl, spec, inputs, check = _row(dtype=dtype)
    fn = impl.builder(spec, {}, CTX)
    report = check.run_all(fn, fn(*inputs), timed_calls=4)
    assert report.passed and report.sets_checked == ["first", "special", "timed calls", "timed"], report


def test_the_cpu_copy_reference_is_also_timed_on_one_thread_and_restores_the_threads(monkeypatch):
    import torch

    from workbench.engine.measure import cpu_bound

    seen = []
    monkeypatch.setattr(torch, "get_num_threads", lambda: 4)
    monkeypatch.setattr(torch, "set_num_threads", lambda n: seen.append(n))
    # a clock that makes every multi-threaded copy take 5 ms and every one-thread copy 1 ms
    ticks = iter(range(10_000))

    def clock():
        step = next(ticks)
        return step * (0.001 if seen and seen[-1] == 1 else 0.005) / 2
    assert cpu_bound._fastest_copy_ms(1 << 12, clock) < 2.0   # the one-thread copy counted
    assert seen[0] == 4 and 1 in seen and seen[-1] == 4       # torch's threads restored after


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float8_e4m3fn])
def test_each_nudge_changes_its_element_beyond_an_fp8_step(dtype):
    """A nudge within the check's tolerance of the element it replaces goes unseen: a byte-sample
    cache of quantize to float8_e4m3fn (rtol one fp8 step, 0.125) passed 1 run in 6 when the
    copied element was drawn at random. Every nudge of the pool (rotation.nudge_pool) moves its
    element by more than 0.125 of its size, on seeded normal inputs of each dtype; it copies
    another element (values stay in their distribution) and the position is not the source."""
    from workbench.engine.measure.rotation import nudge_pool

    x = torch.randn(3, 4097, generator=torch.Generator().manual_seed(0)).to(dtype)
    y = torch.randn(64, generator=torch.Generator().manual_seed(1)).to(dtype)
    inputs = (x, torch.tensor(3), y)  # the 0-d integer is never nudged
    pool = nudge_pool(inputs, random.Random(5), size=200)
    assert len(pool) == 200 and {which for which, _, _ in pool} == {0, 2}
    for which, pos, source in pool:
        flat = inputs[which].reshape(-1).double()
        assert pos != source
        assert abs(flat[pos] - flat[source]) > 0.125 * abs(flat[pos]), (which, pos, source)
