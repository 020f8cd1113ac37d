"""The `cheats` GPU stage's logic on CPU (benchmarks/stages/cheats.py): the gate a row's error
names, the verdict per row, the timing rows; without a GPU it runs nothing and says so."""

from __future__ import annotations

from benchmarks.stages import cheats


def _rec(impl, status, error=None, timing=None):
    return {"op": "gelu", "impl": impl, "status": status, "error": error, "timing": timing, "flags": []}


def test_the_gate_named_by_a_rows_error():
    assert cheats.gate_of("check failed: timed outputs gate (timed calls inputs): the output of") == "timed outputs"
    assert cheats.gate_of("measurement error: streams gate: work left on another stream") == "streams"
    assert cheats.gate_of("check failed: elementwise+norm-wise gate (special inputs): x") == "elementwise+norm-wise"
    assert cheats.gate_of("TypeError: boom") is None


def test_verdicts_want_the_right_gate_no_timing_and_shipped_ok():
    rows = cheats._case_rows({"results": [
        _rec("manual_wrong_side", "failed", "measurement error: streams gate: w"),
        _rec("manual_wrong_lazy", "failed", "check failed: timed outputs gate (timed calls inputs): x"),  # wrong gate
        _rec("manual_wrong_global", "ok", None, {"median_ms": 1.0}),                                     # got a time
        _rec("pytorch", "ok", None, {"median_ms": 1.0}),
        _rec("triton", "failed", "check failed: elementwise gate (first inputs): x")]})
    assert [r["verdict"] for r in rows] == ["as expected", "WRONG", "WRONG", "as expected", "WRONG"]


def test_timing_rows_flag_a_move_over_one_percent():
    rows = cheats._timing_rows([
        {"impl": "pytorch", "dtype": "float32", "do_bench": 1.0, "plain": 1.0, "rotated": 1.005},
        {"impl": "triton", "dtype": "float32", "do_bench": 1.0, "plain": 1.0, "rotated": 1.02},
        {"impl": "triton", "dtype": "bfloat16", "error": "ImportError: no triton"}])
    assert [r["status"] for r in rows] == ["ok", "moved", "skipped"]
    assert "rotated/plain 1.0050" in rows[0]["note"]


def test_without_a_gpu_nothing_runs(tmp_path, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert cheats.run(True, tmp_path) == []


def test_the_stream_cases_want_streams_for_the_ninety_percent_one_and_ok_for_the_joined_one():
    rows = cheats._case_rows({"results": [
        dict(_rec("manual_wrong_side90", "failed", "measurement error: streams gate: w"), shape={"M": 16384, "N": 8192}),
        dict(_rec("manual_side_joined", "ok", None, {"median_ms": 1.0}), shape={"M": 16384, "N": 8192}),
        _rec("manual_wrong_side90", "failed", "measurement error: above the datasheet peak"),  # not the streams gate
        _rec("manual_side_joined", "failed", "measurement error: streams gate: w")]})             # honest, failed
    assert [r["verdict"] for r in rows] == ["as expected", "as expected", "WRONG", "WRONG"]
    assert rows[0]["item"] == "gelu manual_wrong_side90 16384x8192" and rows[0]["expected"] == "streams"
    assert "manual_wrong_side90" in cheats.WRONG and "manual_side_joined" in cheats.STREAMS


def test_the_half_split_case_may_be_ok_only_when_no_faster_than_the_honest_row():
    honest = _rec("pytorch", "ok", None, {"median_ms": 1.0})
    slower = cheats._case_rows({"results": [honest, _rec("manual_wrong_side", "ok", None, {"median_ms": 1.7})]})
    faster = cheats._case_rows({"results": [honest, _rec("manual_wrong_side", "ok", None, {"median_ms": 0.6})]})
    alone = cheats._case_rows({"results": [_rec("manual_wrong_side", "ok", None, {"median_ms": 1.7})]})
    assert slower[1]["verdict"] == "as expected"
    assert faster[1]["verdict"] == "WRONG" and alone[0]["verdict"] == "WRONG"
    assert "manual_wrong_side90" not in cheats.SPLIT_OK
