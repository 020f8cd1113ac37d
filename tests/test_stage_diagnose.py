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
from workbench.session.api import session_from_data

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("quick", [True, False])
def test_every_part_is_a_valid_session(quick):
    registry = discover()
    names = []
    for name, data in core.parts(quick):
        session = session_from_data(data, registry=registry)
        names.append(name)
        assert all(run.op in registry for run in session.runs)
    assert names == ["ab", "lecture", "counters"]  # the cheapest first: a spent budget drops ncu's runs
    ab = dict(core.parts(quick))["ab"]["runs"]
    assert [r["compare"] for r in ab] == [["triton", "pytorch"], ["triton", "triton"]]


@pytest.mark.parametrize("quick", [True, False])
def test_every_item_of_the_issues_evidence_has_its_run(quick):
    missing = [item for item, run in core.evidence_runs(core.parts(quick)).items() if run is None]
    assert missing == []
    runs = core.evidence_runs(core.parts(quick))
    assert runs["ncu vs model: fused GeLU bfloat16"]["shape"] == core.SQUARE
    assert runs["diagnosis: matmul 4097 against 4096"]["sweep"]["values"] == [4096, 4097]


def test_evidence_lookup_says_what_is_missing():
    parts = core.parts(True)
    dict(parts)["ab"]["runs"].pop()  # the A/A run
    runs = core.evidence_runs(parts)
    assert runs["A/B: triton vs triton"] is None and runs["A/B: triton vs pytorch softmax bfloat16"] is not None


def test_cpu_parts_are_tiny_and_valid():
    registry = discover()
    for _name, data in core.parts(True, cpu=True):
        assert data["settings"]["device"] == "cpu"
        session_from_data(data, registry=registry)
        for run in data["runs"]:
            assert all(v <= 256 for v in run["shape"].values())


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


@pytest.mark.slow  # starts warm workers
def test_cpu_run_goes_through_every_part_and_says_it_is_no_evidence(tmp_path):
    """Without a GPU the stage runs its quick parts at tiny shapes: documents written per part,
    A/B entries, diagnoses (cuda_naive's FP64 from its PTX), counters unavailable with why."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is here: the stage would time at full size")
    rows = diagnose.run(True, tmp_path)
    summary = json.loads((tmp_path / "diagnose-summary.json").read_text())
    assert summary["cpu"] and "no figure of this run is evidence" in summary["skipped"][0]
    assert len(summary["skipped"]) == 1  # nothing else skipped or failed
    by_item = {r["item"]: r for r in rows}
    assert "fp64" in by_item["gelu cuda_naive"]["findings"]
    assert by_item["mlp pytorch+graph"]["status"] == "unavailable"
    assert "CUDA device" in by_item["ncu gelu manual float32"]["note"]
    ab = json.loads((tmp_path / "diagnose-ab.json").read_text())["ab"]
    assert [(e["a"], e["b"], e["status"]) for e in ab] == [("triton", "pytorch", "ok"), ("triton", "triton", "ok")]
    lecture = json.loads((tmp_path / "diagnose-lecture.json").read_text())
    assert {r["op"] for r in lecture["results"]} == {"mlp", "gelu", "softmax", "matmul"}
