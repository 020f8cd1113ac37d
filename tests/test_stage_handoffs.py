"""The `handoffs` GPU stage on the CPU: it skips cleanly without a GPU, its session is valid, and its
checks of a kept trace and a kept report can fail."""

from __future__ import annotations

import json
import sys
import time

import pytest
import torch
import yaml

from benchmarks.stages import handoffs as stage


def test_without_a_gpu_the_stage_skips_and_says_why(tmp_path):
    if torch.cuda.is_available():
        return  # on a GPU box the stage runs for real (benchmarks/gpu_evidence.py)
    assert stage.run(True, tmp_path) == [{"part": "all", "status": "skipped", "why": "no CUDA GPU"}]


def test_the_stage_sessions_are_valid_and_keep_the_lecture_shape():
    from workbench.session.api import parse_session

    session = parse_session(yaml.safe_dump(stage.gelu_session(quick=True)))
    assert session.name == "lecture06-gelu" and session.runs[0].shape == {"M": 16384, "N": 16384}
    assert "counters" in session.runs[1].actions
    data, sides = stage.nvtx_session(3, 60)
    onoff = parse_session(yaml.safe_dump(data))
    assert [r.settings["nvtx"] for r in onoff.runs] == sides


def test_nvtx_rounds_alternate_and_flip_their_order():
    _, sides = stage.nvtx_session(4, 60)
    assert sides == [True, False, False, True, True, False, False, True]


def _onoff_doc(medians):
    """A results document of the on/off session: (run_index, label, median) per row."""
    return {"results": [{"run_index": i, "label": label, "status": "ok", "timing": {"median_ms": m}}
                        for i, label, m in medians]}


def test_nvtx_ratio_is_the_median_on_over_the_median_off_per_impl():
    sides = [True, False, False, True]
    doc = _onoff_doc([(0, "triton", 1.00), (1, "triton", 1.00), (2, "triton", 1.02), (3, "triton", 1.03),
                      (0, "pytorch", 2.0), (1, "pytorch", 2.0), (2, "pytorch", 2.0), (3, "pytorch", 2.1)])
    rows = {r["impl"]: r for r in stage.nvtx_ratios(doc, sides)}
    assert rows["triton"]["on_ms"] == pytest.approx(1.015) and rows["triton"]["off_ms"] == pytest.approx(1.01)
    assert rows["triton"]["status"] == "ok" and rows["triton"]["rounds"] == 2
    assert rows["pytorch"]["ratio"] == pytest.approx(1.025) and rows["pytorch"]["status"] == "moved"  # 2.5% > 1%


def test_nvtx_ratio_fails_where_a_side_has_no_median():
    doc = _onoff_doc([(0, "triton", 1.0)])
    doc["results"].append({"run_index": 1, "label": "triton", "status": "failed", "timing": None})
    assert stage.nvtx_ratios(doc, [True, False])[0]["status"] == "failed"


def test_device_tags_name_the_card():
    assert stage.device_tag("NVIDIA H100 80GB HBM3") == "h100"
    assert stage.device_tag("NVIDIA H200") == "h200"
    assert stage.device_tag("Some Card") == "gpu"


@pytest.mark.slow
def test_a_child_past_its_timeout_is_killed_with_its_group_and_says_so():
    """A child that starts a grandchild and sleeps: both killed at the timeout, rc None ("timed out")."""
    code = ("import subprocess, sys, time; p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']);"
            "print(p.pid, flush=True); time.sleep(60)")
    rc, text, took = stage.child([sys.executable, "-c", code], 3)
    assert rc is None and "timed out after 3 s" in text and took < 30
    grandchild = int(text.split()[0])
    time.sleep(0.2)
    assert not _alive(grandchild)
    assert stage.status_of(rc) == "timed out" and stage.status_of(0) == "ok" and stage.status_of(1) == "failed"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


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


def _wheel(folder, name):
    """A minimal pure-Python wheel of package `name` (version 0.1)."""
    import zipfile

    path = folder / f"{name}-0.1-py3-none-any.whl"
    info = f"{name}-0.1.dist-info"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{name}/__init__.py", "VALUE = 1\n")
        z.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
        z.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{info}/RECORD", "")
    return path


@pytest.mark.slow
def test_a_missing_package_is_installed_from_its_wheel_for_the_children(tmp_path, monkeypatch):
    _wheel(tmp_path, "handoffs_probe_pkg")
    monkeypatch.setenv("WHEEL_DIR", str(tmp_path))
    monkeypatch.setattr(stage, "WHEELS", {"handoffs_probe_pkg": "handoffs_probe_pkg-*.whl",
                                          "handoffs_absent_pkg": "handoffs_absent_pkg-*.whl"})
    monkeypatch.setattr(stage, "CHILD_ENV", {"WORKBENCH_DAEMON": "0"})
    rows = {r["impl"]: r for r in stage.wheels()}
    assert rows["handoffs_probe_pkg"]["status"] == "ok"
    absent = rows["handoffs_absent_pkg"]
    assert absent["status"] == "skipped" and "no handoffs_absent_pkg-*.whl" in absent["why"]
    assert stage.importable("handoffs_probe_pkg") and not stage.importable("handoffs_absent_pkg")
    rc, text, _ = stage.child([sys.executable, "-c", "import handoffs_probe_pkg; print(handoffs_probe_pkg.VALUE)"], 60)
    assert rc == 0 and text.strip() == "1"  # the children see it on their PYTHONPATH
