"""The engine's pieces of issue 15 on CPU: graph mode and counters say why they are unavailable,
A/B rows run round-robin in one worker (registry, plugin-file and git-revision sides), every
record carries its diagnosis, and the ncu plumbing runs a fake ncu end to end."""

from __future__ import annotations

import stat
import sys
import threading
from pathlib import Path

import pytest

from workbench.abstats import MIN_PAIRS, paired_ratio
from workbench.engine.worker.ab import measure_pairs
from workbench.engine.ab_plan import AB_KEYS
from workbench.engine.measure.counters_run import run_under_ncu
from workbench.engine.plan import RunOptions, run_plan
from workbench.engine.measure.stats import StopRule
from workbench.engine.measure.timing import PerfCounterTimer
from workbench.engine.measure.timing_notes import env_switches
from workbench.session.model import ABSide, ImplRef, RunSpec, Session, Settings

PLUGINS = Path(__file__).parent / "plugins"
FIXTURES = Path(__file__).parent / "fixtures" / "ncu"
FAST = Settings(device="cpu", warmup_ms=1.0, rep_ms=20.0, min_samples=5, timeout_s=120.0)


def _run(*runs: RunSpec, settings: Settings = FAST, plugins: tuple[str, ...] = ()) -> tuple[dict, list]:
    events: list = []
    session = Session(name="t", runs=runs, settings=settings, plugins=plugins)
    doc = run_plan(session, on_event=events.append, stop=threading.Event(),
                   options=RunOptions(warm_spare=False))
    return doc, events


@pytest.mark.slow  # run_plan starts engine children
def test_graph_variant_and_counters_unavailable_on_cpu_with_their_reasons():
    doc, _ = _run(RunSpec(op="gelu", impls=(ImplRef("manual"), ImplRef("manual+graph")), shape={"M": 8, "N": 16},
                          actions=("check", "bench", "counters")))
    eager, graph = doc["results"]
    assert graph["label"] == "manual+graph" and graph["impl"] == "manual"
    assert graph["status"] == "unavailable" and "CUDA graphs need a CUDA device" in graph["error"]
    assert eager["status"] == "ok" and eager["timing"]["mode"] == "eager"
    assert "counters need a CUDA device" in eager["measured"]["reason"] and eager["measured"]["dram_bytes"] is None
    assert isinstance(eager["diagnosis"], list) and graph["diagnosis"] == []
    assert doc["ab"] == []


@pytest.mark.slow  # run_plan starts engine children
def test_ab_round_robin_in_one_worker_on_cpu():
    run = RunSpec(op="gelu", impls=(ImplRef("manual"), ImplRef("pytorch")), shape={"M": 8, "N": 64},
                  actions=("check",), compare=(ABSide("manual"), ABSide("pytorch")))
    doc, events = _run(run)
    (entry,) = doc["ab"]
    assert set(entry) == set(AB_KEYS) and entry["status"] == "ok", entry
    assert (entry["a"], entry["b"], entry["a_source"]) == ("manual", "pytorch", "registry")
    assert entry["n"] >= FAST.min_samples and entry["ci_low"] <= entry["ratio"] <= entry["ci_high"]
    assert entry["verdict"] in ("faster", "slower", "no difference") and entry["timer"] == "perf_counter"
    assert any(type(e).__name__ == "Compared" for e in events)
    assert [r["label"] for r in doc["results"]] == ["manual", "pytorch"]  # A/B rows are not results


@pytest.mark.slow  # run_plan starts engine children
def test_ab_side_that_fails_its_check_gets_no_ratio():
    run = RunSpec(op="gelu", impls=(ImplRef("pytorch"),), shape={"M": 3, "N": 4097}, actions=("check",),
                  compare=(ABSide("pytorch"), ABSide("manual_notail", plugin=str(PLUGINS / "wrong_ops.py"))))
    doc, _ = _run(run)
    (entry,) = doc["ab"]
    assert entry["status"] == "failed" and entry["ratio"] is None
    assert "A/B needs both sides to pass their check" in entry["error"] and "manual_notail" in entry["error"]


@pytest.mark.slow  # run_plan starts engine children
def test_ab_sides_from_a_plugin_file_and_a_git_revision():
    run = RunSpec(op="gelu", impls=(ImplRef("pytorch_erf"),), shape={"M": 4, "N": 32}, actions=("check",),
                  dtype="float32",
                  compare=(ABSide("manual_erf", plugin=str(PLUGINS / "my_ops.py")), ABSide("pytorch_erf", rev="HEAD")))
    doc, _ = _run(run)
    (entry,) = doc["ab"]
    assert entry["status"] == "ok", entry
    assert entry["a_source"].endswith("my_ops.py") and entry["b_source"] == "git:HEAD:gelu.py"
    recorded = [r["path"] for r in doc["provenance"]["plugins"]]  # the A side's file ran too
    assert recorded == [str((PLUGINS / "my_ops.py").resolve())]


@pytest.mark.slow  # run_plan starts engine children
def test_ab_unknown_side_in_a_plugin_file_is_one_clear_error():
    run = RunSpec(op="gelu", impls=(ImplRef("pytorch"),), shape={"M": 2, "N": 8}, actions=("check",),
                  compare=(ABSide("pytorch"), ABSide("triton_nope", plugin=str(PLUGINS / "my_ops.py"))))
    (entry,) = _run(run)[0]["ab"]
    assert entry["status"] == "failed" and "registers no implementation 'triton_nope'" in entry["error"]
    assert "manual_erf" in entry["error"]


def test_measure_pairs_alternates_and_pairs_samples():
    """A fake clock: A costs 2 ticks, B 3 or 3.3 in turn; whichever side runs first in a batch
    (ABAB, then BABA), every A sample is A's and every B sample B's, in pairs."""
    ticks, b_calls = [0.0], [0]

    def clock() -> float:
        return ticks[0]

    def call_a() -> None:
        ticks[0] += 0.002

    def call_b() -> None:
        b_calls[0] += 1
        ticks[0] += 0.003 if b_calls[0] % 2 else 0.0033
    timer = PerfCounterTimer(clock=clock)
    rule = StopRule(rep_ms=1e9, min_samples=8, target_rel_error=1e-9)
    pairs = measure_pairs(call_a, call_b, timer, rule, warmup_ms=0.0, clock=clock, max_pairs=40)
    assert len(pairs.a_ms) == len(pairs.b_ms) == 40 and pairs.batches >= 3
    assert pairs.a_ms == pytest.approx([2.0] * 40)
    assert all(b == pytest.approx(3.0) or b == pytest.approx(3.3) for b in pairs.b_ms)
    assert 2 / 3.3 <= paired_ratio(pairs.a_ms, pairs.b_ms).ratio <= 2 / 3


def test_measure_pairs_takes_enough_pairs_for_a_verdict():
    """min_samples 3 and a target met at once: the loop still takes MIN_PAIRS pairs."""
    ticks = [0.0]

    def clock() -> float:
        return ticks[0]

    def call() -> None:
        ticks[0] += 0.002
    rule = StopRule(rep_ms=1e9, min_samples=3, target_rel_error=0.5)
    pairs = measure_pairs(call, call, PerfCounterTimer(clock=clock), rule, warmup_ms=0.0, clock=clock)
    assert len(pairs.a_ms) >= MIN_PAIRS


def test_env_switches_recorded():
    assert env_switches({"CUDA_LAUNCH_BLOCKING": "1", "HOME": "/root"}) == {"CUDA_LAUNCH_BLOCKING": "1"}


def _fake_ncu(tmp_path: Path, fixture: str, exit_code: int = 0) -> str:
    """An executable that writes a recorded ncu log to --log-file (and runs nothing)."""
    script = tmp_path / "ncu"
    script.write_text(f"""#!{sys.executable}
import shutil, sys
args = sys.argv[1:]
shutil.copy({str(FIXTURES / fixture)!r}, args[args.index("--log-file") + 1])
sys.exit({exit_code})
""")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


def test_run_under_fake_ncu_parses_its_log(tmp_path):
    ncu = _fake_ncu(tmp_path, "gelu_manual_16384_f32.details.csv")
    measured = run_under_ncu(ncu, {"op": "gelu"}, timeout_s=60, model_bytes=22 * 2**30, ideal_bytes=2 * 2**30)
    assert measured["reason"] is None and measured["kernel_count"] == 9
    assert 95 < measured["pct_of_model"] < 100


def test_run_under_fake_ncu_without_permission(tmp_path):
    ncu = _fake_ncu(tmp_path, "permission_denied.log", exit_code=1)
    measured = run_under_ncu(ncu, {"op": "gelu"}, timeout_s=60)
    assert measured["reason"].startswith("ERR_NVGPUCTRPERM") and measured["kernels"] == []


def test_wrap_for_mode_passes_eager_calls_through_and_refuses_graphs_on_cpu():
    import dataclasses

    from workbench.engine.measure.graph_mode import graph_reason, wrap_for_mode
    from workbench.engine.rows import expand
    from workbench.registry import discover

    session = Session(name="g", settings=FAST, runs=(RunSpec(op="gelu", impls=(ImplRef("manual"), ImplRef("manual+graph")),
                                                             shape={"M": 2, "N": 2}),))
    eager, graph = expand(session, discover(), has_cuda=False)
    assert (eager.settings.timing_mode, graph.settings.timing_mode) == ("eager", "graph")
    assert graph.impl == "manual" and graph.label == "manual+graph"
    fn = len
    assert wrap_for_mode(eager, fn, ()) is fn
    with pytest.raises(RuntimeError, match="CUDA graphs need a CUDA device"):
        wrap_for_mode(graph, fn, ())
    assert graph_reason("cuda:0") is None and graph_reason(dataclasses.replace(graph).device)
