"""A/B rows time each side as a row's timed call is (MEASUREMENT.md rule 13, issue 38): inputs
rotated between two sets, outputs of timed calls kept per side and checked after timing
(engine/measure/rotation.row_rotation / check_rotation, shared with the row's timing)."""

from __future__ import annotations

import random
import threading
from pathlib import Path

import pytest

from workbench.engine.measure.rotation import Rotation
from workbench.engine.measure.stats import StopRule
from workbench.engine.measure.timing import PerfCounterTimer
from workbench.engine.plan import RunOptions, run_plan
from workbench.engine.worker.ab import measure_pairs
from workbench.session.model import ABSide, ImplRef, RunSpec, Session, Settings

PLUGINS = Path(__file__).parent / "plugins"


def test_each_side_rotates_its_own_sets_and_keeps_its_own_outputs():
    """Two Rotations as the A/B sides, under a fake clock: every call of a side runs on that
    side's current set (set by ITS before-sample hook), each side alternates its two sets, and
    each side's kept outputs are its own, from both of its sets, in every batch."""
    ticks, calls, jitter = [0.0], [], random.Random(0)

    def clock() -> float:
        return ticks[0]

    def side(name):
        def fn(x):
            ticks[0] += 0.002 * (1 + jitter.random())  # never converges: the loop runs to max_pairs
            calls.append((name, x))
            return (name, x)
        return fn
    a = Rotation(side("A"), [("a0",), ("a1",)], rng=random.Random(1), nudges=False)
    b = Rotation(side("B"), [("b0",), ("b1",)], rng=random.Random(2), nudges=False)
    rule = StopRule(rep_ms=1e9, min_samples=8, target_rel_error=1e-9)
    pairs = measure_pairs(a, b, PerfCounterTimer(clock=clock), rule, warmup_ms=0.0, clock=clock, max_pairs=40)
    assert len(pairs.a_ms) == 40 and pairs.batches >= 3
    assert {x for n, x in calls if n == "A"} == {"a0", "a1"} and {x for n, x in calls if n == "B"} == {"b0", "b1"}
    for rotation, name in ((a, "A"), (b, "B")):
        assert rotation.kept and all(k.out[0] == name for k in rotation.kept)
        assert {k.out[1] for k in rotation.kept} == {f"{name.lower()}0", f"{name.lower()}1"}
        assert all(k.out[1] == f"{name.lower()}{k.set_index}" for k in rotation.kept)  # kept with its own set
        assert max(k.batch for k in rotation.kept) > 1  # kept beyond the first batch
    for name in "AB":
        seen = [x for n, x in calls if n == name][1:]  # after the warm-up's call (no hooks: set "first")
        assert all(x != y for x, y in zip(seen, seen[1:])), seen  # one set after the other, per side


@pytest.mark.slow  # run_plan starts an engine worker
def test_a_side_that_idles_when_timed_fails_the_ab_row_at_the_timed_outputs_gate():
    """`manual_wrong_sniff` (tests/wrong_impls.py) is right at every check outside the engine's
    timed call and returns its last result inside it: with the sides' calls rotated and checked,
    the A/B row fails naming the gate and gets no ratio."""
    run = RunSpec(op="gelu", impls=(ImplRef("pytorch"),), shape={"M": 8, "N": 64}, actions=("check",),
                  compare=(ABSide("pytorch"), ABSide("manual_wrong_sniff")))
    session = Session(name="t", runs=(run,), plugins=(str(PLUGINS / "known_wrong.py"),),
                      settings=Settings(device="cpu", warmup_ms=1.0, rep_ms=10.0, min_samples=5, timeout_s=120.0))
    doc = run_plan(session, on_event=lambda _e: None, stop=threading.Event(), options=RunOptions(warm_spare=False))
    (entry,) = doc["ab"]
    assert entry["status"] == "failed" and entry["ratio"] is None, entry
    assert "a side failed its check after timing" in entry["error"] and "manual_wrong_sniff" in entry["error"]
    assert "timed outputs gate" in entry["error"], entry["error"]
