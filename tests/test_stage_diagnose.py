"""Stage `diagnose` on CPU: its sessions are valid, its summaries read real documents, and
without a GPU it says so and times nothing."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from benchmarks.stages import _diagnose_core as core
from benchmarks.stages import diagnose
from workbench.counters import measured_record, parse_ncu_csv
from workbench.diagnosis import diagnose_document
from workbench.registry import discover
from workbench.session import session_from_data

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("quick", [True, False])
def test_every_part_is_a_valid_session(quick):
    registry = discover()
    names = []
    for name, data in core.parts(quick):
        session = session_from_data(data, registry=registry)
        names.append(name)
        assert all(run.op in registry for run in session.runs)
    assert names == ["counters", "ab", "lecture"]
    ab = dict(core.parts(quick))["ab"]["runs"]
    assert [r["compare"] for r in ab] == [["triton", "pytorch"]] + ([] if quick else [["triton", "triton"]])


def test_summaries_from_recorded_documents():
    doc = diagnose_document(json.loads((ROOT / "results" / "h200" / "lecture06-gelu.json").read_text()))
    rows = core.lecture_rows(doc)
    manual = next(r for r in rows if r["item"] == "gelu manual")
    assert manual["findings"].startswith("unfused (kernels 9, ratio 11")
    counted = copy.deepcopy(doc)
    kernels = parse_ncu_csv((ROOT / "tests" / "fixtures" / "ncu" / "gelu_pytorch_16384_f32.details.csv").read_text())
    counted["results"][1]["measured"] = measured_record(kernels, model_bytes=2**31, ideal_bytes=2**31)
    (row,) = core.counters_rows(counted)
    assert row["within_10pct"] and row["measured/model"] == pytest.approx(2.12e9 / 2**31)
    entry = {"op": "softmax", "dtype": "bfloat16", "a": "triton", "b": "pytorch", "status": "ok", "ratio": 0.79,
             "ci_low": 0.78, "ci_high": 0.8, "n": 200, "verdict": "faster", "error": None}
    assert core.ab_rows({"ab": [entry]})[0]["verdict"] == "faster"


def test_merge_renumbers_runs():
    a = {"results": [{"run_index": 0, "label": "x"}], "ab": [], "environment": {"device": "d"}}
    b = {"results": [{"run_index": 0, "label": "y"}], "ab": [{"run_index": 0}], "environment": {"device": "d"}}
    merged = core.merge(core.merge(None, a), b)
    assert [r["run_index"] for r in merged["results"]] == [0, 1] and merged["ab"][0]["run_index"] == 1


def test_cpu_run_says_why_and_times_nothing(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is here: the stage would time")
    rows = diagnose.run(True, tmp_path)
    assert rows[0]["status"] == "skipped"
    assert "no CUDA GPU" in json.loads((tmp_path / "diagnose-summary.json").read_text())["skipped"][0]
