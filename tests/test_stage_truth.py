"""Stage `truth` (benchmarks/stages/truth.py) on CPU: its cases, the interleaving, the exact row
shape of truth-dobench.json, writing as rows finish, the budget, and the no-GPU path. The GPU half
(_truth_gpu.py) runs on the H200 only."""

from __future__ import annotations

import json
import statistics

import pytest

from benchmarks.stages import truth
from benchmarks.stages._truth_core import (Case, TruthFiles, all_rounds, cases, clock_matched, flush_split, interleave,
                                           run_cases, state_split, summary_row)
from workbench.registry import discover

ROW_KEYS = {"op", "impl", "dtype", "shape", "engine_ms", "do_bench_ms", "ratio"}


def test_the_cases_are_the_issues_rows_and_all_exist_in_the_registry():
    full, quick = cases(False), cases(True)
    registry = discover()
    for case in full:
        impl = registry.op(case.op).get_impl(case.impl)
        assert case.dtype in [d.value for d in (impl.dtypes or registry.op(case.op).dtypes)]
    names = {(c.op, c.impl, c.dtype) for c in full}
    for op in ("gelu", "softmax"):
        for dtype in ("float32", "bfloat16"):
            assert {(op, i, dtype) for i in ("manual", "pytorch", "compiled", "triton", "cuda")} <= names
    assert {("add", "pytorch", "float32"), ("add", "triton", "bfloat16")} <= names
    # matmul last: the power-limited GEMMs heat the GPU and lowered the next rows' clocks
    assert full[-2:] == [Case("matmul", "pytorch", "bfloat16", {"M": 8192, "N": 8192, "K": 8192}),
                         Case("matmul", "triton", "bfloat16", {"M": 8192, "N": 8192, "K": 8192})]
    assert all(c.shape == {"M": 16384, "N": 16384} for c in full if c.op != "matmul")
    key = lambda c: (c.op, c.impl, c.dtype)  # noqa: E731
    assert not {c.impl for c in quick} & {"compiled", "cuda"} and {key(c) for c in quick} < {key(c) for c in full}


def test_methods_are_interleaved_with_a_rotating_order():
    order = []
    methods = {name: (lambda name=name: order.append(name) or (1.0, None)) for name in ("a", "b", "c")}
    found = interleave(methods, 3)
    assert order == ["a", "b", "c", "b", "c", "a", "c", "a", "b"]
    assert {k: len(v) for k, v in found.items()} == {"a": 3, "b": 3, "c": 3}
    order.clear()
    interleave(methods, 1, settle=lambda: order.append("settle"))
    assert order == ["settle", "a", "b", "c"]          # the GPU settled once, before the first round


def test_with_an_rng_each_round_is_a_random_order_logged_and_reproducible():
    import random

    def run(seed):
        order, orders = [], []
        methods = {name: (lambda name=name: order.append(name) or (1.0, None)) for name in ("a", "b", "c")}
        interleave(methods, 12, rng=random.Random(seed), orders=orders)
        return order, orders
    order, orders = run("gelu.compiled.bfloat16")
    assert len(orders) == 12 and all(sorted(o) == ["a", "b", "c"] for o in orders)  # each method once a round
    assert order == [name for o in orders for name in o]                            # in the logged order
    assert len({tuple(o) for o in orders}) > 3     # not a fixed cycle (a rotation has 3 orders)
    assert run("gelu.compiled.bfloat16") == (order, orders) and run("add.cuda.float32")[1] != orders


def _calls(*medians, n=40, spread=0.002):
    """One call per median: n samples spread evenly within +-spread around it."""
    return [[m * (1 + spread * (2 * i / (n - 1) - 1)) for i in range(n)] for m in medians]


def test_the_same_state_medians_compare_the_calls_made_in_the_fast_state():
    # a power-cap cycle: fast calls at 0.314 (both methods alike), slow ones at 0.34-0.35;
    # do_bench landed in the slow state 8 times of 12, the engine 4
    engine = _calls(*([0.314] * 8 + [0.340, 0.345, 0.350, 0.342]))
    theirs = _calls(*([0.3145] * 4 + [0.341, 0.346, 0.349, 0.343, 0.347, 0.348, 0.344, 0.340]))
    state = state_split({"engine": engine, "do_bench": theirs, "engine_zero_flush": _calls(*[0.3142] * 12)})
    assert state["fast_calls"] == {"engine": 8, "do_bench": 4, "engine_zero_flush": 12}
    assert state["slow_share"]["do_bench"][:4] == [0.0] * 4 and state["slow_share"]["do_bench"][4:] == [1.0] * 8
    assert state["ratio"] == pytest.approx(0.314 / 0.3145)
    found = {name: [(statistics.median(c), None) for c in calls] for name, calls in (("engine", engine), ("do_bench", theirs))}
    assert all_rounds(found)["ratio"] < 0.93                          # the medians over all rounds: the cycle's
    row = summary_row(Case("gelu", "compiled", "bfloat16", {"M": 4, "N": 4}), found, state)
    assert set(row) == ROW_KEYS and row["ratio"] == pytest.approx(state["ratio"]) and row["engine_ms"] == state["engine_ms"]


def test_a_biased_method_gets_no_same_state_figure_and_keeps_its_all_rounds_ratio():
    engine = _calls(*[0.300] * 10)
    theirs = _calls(*[0.315] * 10)                                  # 5% slower in every call: a bias, not a state
    state = state_split({"engine": engine, "do_bench": theirs})
    assert state["fast_calls"]["do_bench"] == 0 and "ratio" not in state
    found = {name: [(statistics.median(c), None) for c in calls] for name, calls in (("engine", engine), ("do_bench", theirs))}
    assert summary_row(Case("add", "cuda", "float32", {}), found, state)["ratio"] == pytest.approx(0.300 / 0.315)
    # fewer than 3 fast calls of one method: no same-state figure either
    assert "ratio" not in state_split({"engine": _calls(0.3, 0.3, 0.35), "do_bench": _calls(0.3, 0.3, 0.3)})
    # a do_bench without return_mode="all" leaves its calls empty: no state, the all-rounds ratio
    assert "ratio" not in state_split({"engine": _calls(0.3, 0.3, 0.3), "do_bench": [[], [], []]})
    assert state_split({}) == {} and state_split({"engine": [[]]}) == {}


def test_the_row_has_exactly_the_contract_keys_and_the_ratio_of_medians():
    found = {"engine": [(1.0, 1980.0), (1.2, 1980.0), (1.1, None)], "do_bench": [(1.0, None), (1.0, None), (2.0, None)],
             "engine_zero_flush": [(5.0, None)] * 3}
    row = summary_row(Case("gelu", "triton", "float32", {"M": 4, "N": 4}), found)
    assert set(row) == ROW_KEYS
    assert row["engine_ms"] == 1.1 and row["do_bench_ms"] == 1.0 and row["ratio"] == pytest.approx(1.1)


def test_the_clock_matched_ratio_takes_only_rounds_at_the_same_clock():
    found = {"engine": [(0.30, 1980.0), (0.30, 1965.0), (0.30, 1980.0)],
             "do_bench": [(0.32, 1700.0), (0.303, 1980.0), (0.306, 1980.0)]}
    got = clock_matched(found)  # round 1 (1980 against 1700 MHz) is left out
    assert got["matched"] == 2
    assert got["clock_matched_ratio"] == pytest.approx((0.30 / 0.303 + 0.30 / 0.306) / 2)
    assert clock_matched({"engine": [(1.0, None)], "do_bench": [(1.0, 1980.0)]}) == {"clock_matched_ratio": None,
                                                                                     "matched": 0}


def test_the_flush_split_separates_the_loop_from_the_flush_kind():
    # do_bench 1.00; the engine's loop with do_bench's zero flush 0.99 (the loop: -1%); the engine
    # with its read flush 0.97 (the flush: 0.97 / 0.99)
    found = {"engine": [(0.97, None), (0.96, None), (0.98, None)],
             "do_bench": [(1.00, None), (1.02, None), (0.98, None)],
             "engine_zero_flush": [(0.99, None), (1.01, None), (0.97, None)]}
    got = flush_split(found)
    assert got["engine_zero_flush_ms"] == 0.99
    assert got["same_flush_ratio"] == pytest.approx(0.99 / 1.00)
    assert got["paired_same_flush_ratio"] == pytest.approx(statistics.median([0.99, 1.01 / 1.02, 0.97 / 0.98]))
    assert got["flush_effect"] == pytest.approx(0.97 / 0.99)
    assert flush_split({"engine": [(1.0, None)], "do_bench": [(1.0, None)]}) == {}
    files = TruthFiles.__new__(TruthFiles)  # the table's note carries both halves
    files.rows = [summary_row(Case("gelu", "compiled", "bfloat16", {"M": 4, "N": 4}), found)]
    files.matched, files.details = [{**clock_matched(found), **got}], {"rows": [], "skipped": []}
    note = files.table()[0]["note"]
    assert "ratio 0.970 (outside 2%)" in note and "same flush 0.990" in note and "read/zero flush 0.980" in note


def test_rows_are_written_as_they_finish_and_the_budget_skips_the_rest(tmp_path):
    files = TruthFiles(tmp_path)
    now = [0.0]
    seen_on_disk = []

    def time_case(case):
        seen_on_disk.append(len(json.loads((tmp_path / "truth-dobench.json").read_text())["rows"])
                            if (tmp_path / "truth-dobench.json").exists() else 0)
        now[0] += 10.0
        if case.impl == "cuda":
            raise RuntimeError("nvcc exploded\nsecond line")
        found = {"engine": [(2.0, None)], "do_bench": [(2.0, None)]}
        return summary_row(case, found), {"op": case.op, "impl": case.impl, "dtype": case.dtype}
    todo = [Case("add", impl, "float32", {"M": 1, "N": 1}) for impl in ("pytorch", "cuda", "triton", "compiled")]
    run_cases(todo, files, time_case, budget_s=25.0, clock=lambda: now[0])
    assert seen_on_disk == [0, 1, 1]             # each finished row was on disk before the next began
    rows = json.loads((tmp_path / "truth-dobench.json").read_text())
    assert list(rows) == ["rows"] and [r["impl"] for r in rows["rows"]] == ["pytorch", "triton"]
    assert all(set(r) == ROW_KEYS for r in rows["rows"])
    details = json.loads((tmp_path / "truth-details.json").read_text())
    assert details["rows"][1]["error"] == "RuntimeError: nvcc exploded"
    assert details["skipped"] == [{"op": "add", "impl": "compiled", "dtype": "float32",
                                   "why": "not started within the stage budget (25 s)"}]
    table = files.table()
    assert [t.get("status") for t in table] == [None, None, "failed", "skipped"]


def test_without_a_gpu_the_stage_says_so_and_writes_empty_rows(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present: the stage would time for real")
    table = truth.run(True, tmp_path)
    assert table == [{"item": "truth", "status": "skipped", "note": "no CUDA GPU"}]
    assert json.loads((tmp_path / "truth-dobench.json").read_text()) == {"rows": []}


def test_the_gpu_half_builds_checks_and_times_a_case_on_cpu(monkeypatch):
    """The plumbing of _truth_gpu.GpuTruth with host timers and do_bench replaced (no GPU here)."""
    import benchmarks.dobench as dobench
    from benchmarks.stages._truth_gpu import GpuTruth

    def fake_do_bench(fn, warmup_ms, rep_ms):
        fn()
        return 0.5, "median"

    def fake_quantiles(fn, quantiles, warmup_ms, rep_ms):
        fn()
        return [0.45, 0.5, 0.7]
    monkeypatch.setattr(dobench, "do_bench_median_ms", fake_do_bench)
    monkeypatch.setattr(dobench, "do_bench_quantiles_ms", fake_quantiles)
    monkeypatch.setattr(dobench, "do_bench_samples_ms", lambda *a, **k: None)  # a do_bench without "all"
    gpu = GpuTruth("cpu", rounds=2, quick=True)
    row, detail = gpu.time_case(Case("add", "pytorch", "float32", {"M": 64, "N": 64}))
    assert set(row) == ROW_KEYS and row["do_bench_ms"] == 0.5 and row["ratio"] == row["engine_ms"] / 0.5
    n = detail["n_rounds"]  # 2, or more where the host timer's rounds moved (unsettled)
    assert 2 <= n <= 15 and detail["do_bench_spread"] == [{"p20_ms": 0.45, "p80_ms": 0.7}] * n
    monkeypatch.setattr(dobench, "do_bench_quantiles_ms", lambda *a, **k: None)  # no quantiles: the median alone
    row, detail = gpu.time_case(Case("add", "pytorch", "float32", {"M": 64, "N": 64}))
    n = detail["n_rounds"]
    assert row["do_bench_ms"] == 0.5 and detail["do_bench_spread"] == [None] * n
    assert detail["check"].get("passed") is True, detail["check"]
    assert {k: len(v) for k, v in detail["rounds"].items()} == {"engine": n, "do_bench": n, "engine_zero_flush": n}
    assert detail["paired_ratio"] > 0
    assert detail["engine_method"]["flush_kind"] in ("read", "zero") and detail["build_ms"] > 0
    assert detail["statistic"] == "all_rounds" and row["ratio"] == detail["all_rounds"]["ratio"]  # no do_bench samples
    assert len(detail["orders"]) == n and all(sorted(o) == sorted(detail["rounds"]) for o in detail["orders"])

    def fake_samples(fn, warmup_ms, rep_ms):  # do_bench's every sample: the host timer's scale, 10 of them
        fn()
        return [0.9, 1.0, 1.1, 1.0, 1.0, 0.95, 1.05, 1.0, 1.0, 1.0]
    monkeypatch.setattr(dobench, "do_bench_samples_ms", fake_samples)
    row, detail = gpu.time_case(Case("add", "pytorch", "float32", {"M": 64, "N": 64}))
    n = detail["n_rounds"]
    assert detail["do_bench_spread"][0] == {"p20_ms": pytest.approx(0.99), "p80_ms": pytest.approx(1.01)}  # linear, as torch.quantile
    assert [len(c) for c in gpu.call_samples["do_bench"]] == [10] * n and len(gpu.call_samples["engine"]) == n
    assert set(detail["state_split"]["fast_calls"]) == {"engine", "do_bench", "engine_zero_flush"}
    assert detail["statistic"] in ("same_state", "all_rounds")


def test_unsettled_rows_get_more_rounds_up_to_the_cap_each_after_a_resettle():
    from benchmarks.stages._truth_core import paired_ratio, unsettled

    steady = {"engine": [(1.00, None), (1.001, None), (0.999, None)], "do_bench": [(1.03, None)] * 3}
    assert not unsettled(steady)  # two steady methods 3% apart: more rounds would not move that
    assert unsettled({"engine": [(1.0, None), (1.05, None), (1.1, None)], "do_bench": [(1.0, None)] * 3})
    # the engine's rounds are steady; do_bench's first rounds ran in a slow episode, later ones not
    times = {"engine": iter([1.0] * 20), "do_bench": iter([1.05, 1.05, 1.0, 1.05, 1.0, 1.0, 1.0, 1.0, 1.0] + [1.0] * 11)}
    events = []
    methods = {name: (lambda name=name: events.append(name) or (next(times[name]), None)) for name in ("engine", "do_bench")}
    found = interleave(methods, 3, settle=lambda: events.append("settle"), max_rounds=15, unsettled=unsettled,
                       resettle=lambda: events.append("resettle"))
    assert len(found["engine"]) > 3 and not unsettled(found)          # stopped once the rounds settled
    assert events[0] == "settle" and events.count("settle") == 1
    assert events.count("resettle") == len(found["engine"]) - 3      # one before each extra round
    assert paired_ratio(found) == pytest.approx(1.0)
    # never past the cap, however unsettled
    noisy = {"engine": iter([1.0, 1.2] * 20), "do_bench": iter([1.0] * 40)}
    methods = {name: (lambda name=name: (next(noisy[name]), None)) for name in ("engine", "do_bench")}
    assert len(interleave(methods, 3, max_rounds=7, unsettled=unsettled)["engine"]) == 7


def test_only_selects_rows_by_op_or_by_op_impl_dtype_in_the_stage_order():
    picked = truth.selected(cases(False), ("matmul", "gelu.pytorch.bfloat16"))
    assert [(c.op, c.impl, c.dtype) for c in picked] == [("gelu", "pytorch", "bfloat16"), ("matmul", "pytorch", "bfloat16"),
                                                         ("matmul", "triton", "bfloat16")]
    assert truth.selected(cases(True), None) == cases(True)


def test_only_names_a_row_that_exists_or_says_which_do():
    with pytest.raises(ValueError, match="gelu.pytorch.bf16"):
        truth.selected(cases(True), ("gelu.pytorch.bf16",))


def test_truth_split_reads_details_files_and_marks_figures_outside_2_percent(tmp_path, capsys):
    from benchmarks import truth_split

    rounds = lambda *ms: [{"ms": m, "sm_clock_mhz": 1980.0} for m in ms]  # noqa: E731
    details = {"rows": [
        {"op": "gelu", "impl": "compiled", "dtype": "bfloat16", "rounds": {
            "engine": rounds(0.970, 0.960, 0.980), "do_bench": rounds(1.0, 1.02, 0.98),
            "engine_zero_flush": rounds(0.99, 1.01, 0.97)}},
        {"op": "add", "impl": "cuda", "dtype": "float32", "rounds": {  # an older file: no zero-flush rounds
            "engine": rounds(1.0), "do_bench": rounds(1.0)}},
        {"op": "add", "impl": "triton", "dtype": "float32", "error": "check failed: no speed for a wrong result"}]}
    got = truth_split.split_rows(details)
    assert [(r["op"], r["impl"]) for r in got] == [("gelu", "compiled"), ("add", "cuda")]  # the failed row has no rounds
    assert got[0]["ratio"] == pytest.approx(0.97) and got[0]["flush_effect"] == pytest.approx(0.97 / 0.99)
    assert "same_flush_ratio" not in got[1]
    path = tmp_path / "run1" / "truth-details.json"
    path.parent.mkdir()
    path.write_text(json.dumps(details))
    assert truth_split.main([str(path)]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[2] == "| run1 | gelu compiled bfloat16 | 3 | 0.970* | 0.970* | 0.970* | 0.990 | 0.990 | 0.980* |"
    assert table[3].endswith("| 1.000 | 1.000 | 1.000 | - | - | - |")
    assert truth_split.main([str(tmp_path / "missing.json")]) == 2
    assert "no such file" in capsys.readouterr().err


@pytest.mark.parametrize("content, says", [
    (None, "a directory"), ("{not json", "not JSON"), ('["a"]', "no list of rows"),
    ('{"rows": [{"op": "gelu", "engine_ms": 1.0}]}', "its rounds are in truth-details.json"),
])
def test_truth_split_says_what_is_wrong_with_a_file_in_one_line(tmp_path, capsys, content, says):
    from benchmarks import truth_split

    path = tmp_path / "d"
    if content is None:
        path.mkdir()
    else:
        path.write_text(content)
    assert truth_split.main([str(path)]) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_truth_split_help_and_no_arguments(capsys):
    from benchmarks import truth_split

    assert truth_split.main(["--help"]) == 0 and "truth-details.json" in capsys.readouterr().out
    assert truth_split.main([]) == 2 and "no file given" in capsys.readouterr().err
    assert truth_split.main(["--bogus"]) == 2 and "unknown option --bogus" in capsys.readouterr().err
