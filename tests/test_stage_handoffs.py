"""The `handoffs` GPU stage on the CPU: it skips cleanly without a GPU, its session is valid, and its
checks of a kept trace and a kept report can fail."""

from __future__ import annotations

import json

import torch
import yaml

from benchmarks.stages import handoffs as stage


def test_without_a_gpu_the_stage_skips_and_says_why(tmp_path):
    if torch.cuda.is_available():
        return  # on a GPU box the stage runs for real (benchmarks/gpu_evidence.py)
    assert stage.run(True, tmp_path) == [{"part": "all", "status": "skipped", "why": "no CUDA GPU"}]


def test_the_stage_session_is_valid_and_keeps_the_lecture_shape():
    from workbench.session.api import parse_session

    data = stage.session(quick=True)
    session = parse_session(yaml.safe_dump(data))
    assert session.name == "lecture06-gelu" and session.runs[0].shape == {"M": 16384, "N": 16384}
    assert "counters" in session.runs[1].actions and session.runs[2].sweep is not None


def _record(trace_path, kernels):
    rows = [{"name": k, "kind": "kernel"} for k in kernels] + [{"name": "aten::gelu", "kind": "operator"}]
    return {"run_index": 0, "label": "triton", "profile": {"trace_path": trace_path, "rows": rows},
            "measured": None}


def test_a_trace_passes_only_with_the_rows_kernels_in_it(tmp_path):
    path = tmp_path / "s-run0-triton.pt.trace.json"
    path.write_text(json.dumps({"traceEvents": [{"cat": "kernel", "name": "gelu_kernel"},
                                                {"cat": "cpu_op", "name": "aten::gelu"}]}))
    assert stage.trace_row(_record(str(path), ["gelu_kernel"]))["status"] == "ok"
    assert stage.trace_row(_record(str(path), ["other_kernel"]))["status"] == "failed"
    assert stage.trace_row(_record(str(tmp_path / "missing.pt.trace.json"), ["gelu_kernel"]))["why"] == "no trace file"


def test_a_report_row_fails_without_a_kept_report():
    record = {"run_index": 1, "label": "triton",
              "measured": {"report_path": None, "reason": "no ncu (Nsight Compute) on PATH", "dram_bytes": None}}
    row = stage.report_row(record)
    assert row["status"] == "failed" and "no ncu" in row["why"]
