"""Diagnosis rules on recorded H200 rows (results/h200/*.json, committed documents).

Where a rule reads a field the recorded documents predate (PTX fp64 counts, host_launch_ms, the
environment switches, a clock drop on a 1980 MHz-throughout run), the test takes a recorded row
and adds exactly that field, saying so; the PTX counts come from nvcc's PTX of kernels/gelu.cu
(tests/fixtures/ptx) through the same counter the engine uses.
"""

from __future__ import annotations

import copy
import glob
import json
from pathlib import Path

import pytest

from workbench.diagnosis import RULE_NAMES, diagnose_document, diagnose_record
from workbench.ptx.counts import count_instructions, split_kernels

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "results" / "h200"
PTX_FIXTURE = Path(__file__).parent / "fixtures" / "ptx" / "gelu_naive_f32_sm90.ptx"


def _doc(name: str) -> dict:
    return diagnose_document(json.loads((RESULTS / name).read_text()))


def _row(doc: dict, label: str, run_index: int = 0, sweep=None) -> dict:
    return next(r for r in doc["results"] if r["label"] == label and r["run_index"] == run_index
                and r["sweep_value"] == sweep)


def _finding(record: dict, rule: str) -> dict | None:
    return next((f for f in record["diagnosis"] if f["rule"] == rule), None)


def _rules(record: dict) -> list[str]:
    return [f["rule"] for f in record["diagnosis"]]


def test_every_committed_record_gets_a_diagnosis_list():
    for path in sorted(glob.glob(str(RESULTS / "*.json"))):
        doc = json.loads(Path(path).read_text())
        if not isinstance(doc, dict) or "results" not in doc:
            continue
        diagnose_document(doc)
        for record in doc["results"]:
            assert isinstance(record["diagnosis"], list)
            for finding in record["diagnosis"]:
                assert finding["rule"] in RULE_NAMES and finding["evidence"] and finding["suggestion"]
                assert finding["severity"] in ("problem", "note")
            if record["status"] == "unavailable":  # only the findings of its PTX alone
                assert {f["rule"] for f in record["diagnosis"]} <= {"fp64", "scalar_loads", "spills"}
            elif record["status"] != "ok":
                assert record["diagnosis"] == []


def test_manual_gelu_unfused_nine_kernels_eleven_times_the_bytes():
    manual = _row(_doc("lecture06-gelu.json"), "manual")
    found = _finding(manual, "unfused")
    assert found["data"]["kernels"] == 9 and found["data"]["ratio"] == pytest.approx(11.0)
    assert "9 kernels per call" in found["evidence"] and "(11x)" in found["evidence"]
    assert "torch.compile" in found["suggestion"]
    assert found["data"]["fused_speedup"] == pytest.approx(5.4784 / 0.5091, rel=0.01)  # against `pytorch`
    assert _rules(manual)[0] == "unfused"  # problems first


def test_fused_gelu_is_at_the_copy_roofline_and_not_unfused():
    pytorch = _row(_doc("lecture06-gelu.json"), "pytorch")
    assert "unfused" not in _rules(pytorch)
    found = _finding(pytorch, "memory_bound")
    assert found["severity"] == "note" and found["data"]["pct_of_copy"] > 99


def test_manual_softmax_unfused_four_times_and_looped_reads_twice():
    doc = _doc("lecture06-softmax.json")
    found = _finding(_row(doc, "manual"), "unfused")
    assert found["data"]["kernels"] == 5 and found["data"]["ratio"] == pytest.approx(4.0, rel=1e-3)
    looped = _row(doc, "triton_looped")
    assert _finding(looped, "extra_passes")["data"]["ratio"] == pytest.approx(1.5)
    assert "unfused" not in _rules(looped)
    assert _finding(looped, "memory_bound")["data"]["pct_per_moved"] == pytest.approx(100, abs=2)


def _with_nvcc_counts(record: dict) -> dict:
    """The recorded cuda_naive row with its kernel's counts as the current counter gives them."""
    record = copy.deepcopy(record)
    (kernel,) = split_kernels(PTX_FIXTURE.read_text())
    record["ptx"]["kernels"][0]["counts"] = count_instructions(kernel.text)
    return record


def test_cuda_naive_computes_in_fp64():
    doc = json.loads((RESULTS / "lecture06-gelu.json").read_text())
    naive = _with_nvcc_counts(_row(doc, "cuda_naive"))
    findings = diagnose_record(naive, doc["environment"], doc["results"])
    names = [f["rule"] for f in findings]
    fp64 = findings[names.index("fp64")]
    assert fp64["data"]["fp64_arith"] > 20 and "float32 kernel" in fp64["evidence"]
    assert "0.5f" in fp64["suggestion"] and "tanhf" in fp64["suggestion"]
    assert "scalar_loads" in names and "memory_bound" not in names  # FP64 units bind it, not HBM


def test_cuda_naive_without_fp64_counts_says_nothing_about_fp64():
    assert "fp64" not in _rules(_row(_doc("lecture06-gelu.json"), "cuda_naive"))


def test_vectorised_cuda_gelu_is_not_scalar():
    assert "scalar_loads" not in _rules(_row(_doc("lecture06-gelu.json"), "cuda"))


def test_mlp_batch_sweep_is_launch_bound():
    """lecture06-mlp run 2: batch 256 -> 1280 (5x the FLOPs) at roughly constant time."""
    row = _row(_doc("lecture06-mlp.json"), "pytorch", run_index=2, sweep=1280)
    found = _finding(row, "launch_bound")
    assert "5x the work" in found["evidence"] and "CUDA graph" in found["suggestion"]
    assert "compute_bound" not in _rules(row)  # a host-bound row's TFLOP/s says nothing of the GPU


def test_mlp_host_time_against_kernel_time_and_the_graph_variant():
    """A recorded MLP row given the fields the engine now records: host launch time, a profile
    of its kernels, and a `+graph` peer row."""
    doc = json.loads((RESULTS / "lecture06-mlp.json").read_text())
    row = copy.deepcopy(_row(doc, "pytorch", run_index=0, sweep=2))
    row["timing"]["host_launch_ms"] = 2.2
    row["profile"] = {"rows": [{"name": "gemm", "kind": "kernel", "calls": 120, "self_device_us": 1500.0}],
                      "kernel_count": 24.0, "device_events": True, "reason": None}
    graph = copy.deepcopy(row)
    graph.update(label="pytorch+graph", profile=None)
    graph["timing"].update(median_ms=0.4, mode="graph")
    findings = diagnose_record(row, doc["environment"], [row, graph])
    found = next(f for f in findings if f["rule"] == "launch_bound")
    assert "host 2.2 ms per call against 0.3 ms of kernels" in found["evidence"]
    assert found["data"]["graph_speedup"] == pytest.approx(2.342 / 0.4, rel=0.01)
    assert "`pytorch+graph` takes 0.4 ms" in found["suggestion"]


def test_matmul_4097_against_4096():
    doc = _doc("lecture06-matmul.json")
    triton = _finding(_row(doc, "triton", sweep=4097), "shape_alignment")
    assert triton["data"]["ratio"] == pytest.approx(6.38 / 17.55, rel=0.02)
    assert "4096" in triton["evidence"]
    cublas = _finding(_row(doc, "pytorch", sweep=4097), "shape_alignment")
    assert 0.8 < cublas["data"]["ratio"] < 0.9
    assert _finding(_row(doc, "pytorch", sweep=4096), "shape_alignment") is None
    assert _finding(_row(doc, "cuda", sweep=4097), "wave_quantization")["data"]["waves"] == pytest.approx(1.031)


def test_float32_matmul_on_cuda_cores_prescribes_tf32():
    found = _finding(_row(_doc("lecture06-matmul.json"), "pytorch", sweep=4096), "compute_bound")
    assert "tf32" in found["suggestion"] and found["data"]["pct_of_cublas"] > 95


def test_tiny_matmul_is_launch_bound_and_leaves_sms_idle():
    doc = _doc("lecture06-matmul.json")
    assert "launch_bound" in _rules(_row(doc, "pytorch", sweep=128))
    found = _finding(_row(doc, "cuda", sweep=129), "wave_quantization")
    assert "SMs idle" in found["evidence"]


def test_clock_drop_launch_blocking_recompiles():
    doc = json.loads((RESULTS / "lecture06-gelu.json").read_text())
    row = copy.deepcopy(_row(doc, "triton"))
    row["timing"].update(clock_fell=True, throttle=["sw_power_cap"],
                         sm_clock_mhz={"min": 1530.0, "median": 1755.0, "max": 1980.0, "n": 40},
                         env={"CUDA_LAUNCH_BLOCKING": "1"})
    row["recompiles"] = 2
    names = {f["rule"]: f for f in diagnose_record(row, doc["environment"], [row])}
    assert "1530-1980 MHz" in names["clock_drop"]["evidence"] and "sw_power_cap" in names["clock_drop"]["evidence"]
    assert "CUDA_LAUNCH_BLOCKING=1" in names["launch_blocking"]["evidence"]
    assert names["recompiles"]["data"]["recompiles"] == 2
    row["timing"]["env"] = {"CUDA_LAUNCH_BLOCKING": "0"}
    assert "launch_blocking" not in [f["rule"] for f in diagnose_record(row, doc["environment"], [row])]


def test_l2_resident_small_row_timed_warm():
    doc = json.loads((RESULTS / "lecture06-gelu.json").read_text())
    row = copy.deepcopy(_row(doc, "triton"))
    row["traffic"].update(bytes=8 << 20, bytes_moved_est=8 << 20, l2_resident=True)
    row["timing"]["flush_l2"] = False
    found = next(f for f in diagnose_record(row, doc["environment"], [row]) if f["rule"] == "l2_resident")
    assert "fits in the 62.9 MB L2" in found["evidence"] and "flush_l2: true" in found["suggestion"]


def test_spills_and_low_occupancy_from_the_ptx_and_launch_records():
    doc = json.loads((RESULTS / "lecture06-gelu.json").read_text())
    row = copy.deepcopy(_row(doc, "cuda_naive"))
    row["ptx"]["kernels"][0].update(spills=96, registers=255)
    row["launch"].update(occupancy=0.125, blocks_per_sm=1, limiter="registers", registers=255)
    names = {f["rule"]: f for f in diagnose_record(row, doc["environment"], [row])}
    assert "96 bytes of registers spilled" in names["spills"]["evidence"]
    assert "occupancy 12%" in names["low_occupancy"]["evidence"]


def test_failed_rows_have_no_findings():
    doc = json.loads((RESULTS / "lecture06-matmul.json").read_text())
    failed = next(r for r in doc["results"] if r["status"] == "failed")
    assert diagnose_record(failed, doc["environment"], doc["results"]) == []


CPU_DOC = Path(__file__).parent / "fixtures" / "cpu_gelu_softmax_ptx.json"  # replayed on a CPU (no GPU), PTX for sm_90


def test_unavailable_cuda_naive_on_a_cpu_still_shows_fp64_from_its_ptx():
    """A CPU replay compiles cuda_naive's PTX but cannot run it: its PTX findings still show."""
    doc = diagnose_document(json.loads(CPU_DOC.read_text()))
    naive = _row(doc, "cuda_naive")
    assert naive["status"] == "unavailable"
    assert _rules(naive) == ["fp64", "scalar_loads"]
    assert _finding(naive, "fp64")["data"]["fp64_arith"] == 46
    assert _rules(_row(doc, "cuda")) == []  # vector loads with a scalar tail kernel, no FP64
    timed = _row(doc, "triton")  # ran in the interpreter on the CPU: no SMs, no waves
    assert "wave_quantization" not in _rules(timed) and "fp64" not in _rules(timed)
    assert timed["launch"]["grid"]  # a grid was recorded, so only the device keeps the rule out


def test_unavailable_row_without_ptx_and_other_statuses_get_nothing():
    doc = json.loads(CPU_DOC.read_text())
    naive = _row(doc, "cuda_naive")
    assert diagnose_record({**naive, "ptx": None}, doc["environment"], doc["results"]) == []
    failed = {**naive, "status": "failed", "error": "check failed"}
    assert diagnose_record(failed, doc["environment"], doc["results"]) == []


def test_unconverged_mlp_row_is_noisy_and_points_at_an_ab():
    row = _row(_doc("lecture06-mlp.json"), "pytorch", run_index=0, sweep=2)
    found = _finding(row, "noisy")
    assert found["severity"] == "note" and found["evidence"].startswith("median not converged: estimated error 2.5%")
    assert "compare: [A, B]" in found["suggestion"]
    converged = _row(_doc("lecture06-gelu.json"), "pytorch")
    assert "noisy" not in _rules(converged)


TODAY = RESULTS / "2026-12-01" / "replay"  # replayed through the CLI on the H200, 2026-12-01


def test_recorded_mlp_is_launch_bound_from_host_time_against_the_event_median():
    """lecture06-mlp (batch 256, dim 256): no profile, but the host's 2.07 ms per call against a
    0.33 ms CUDA-event median behind the headroom spin; at 8 steps the host outran the capped
    2 ms spin and the median follows the host. Not "5% of cuBLAS: use tf32"."""
    doc = diagnose_document(json.loads((TODAY / "lecture06-mlp.json").read_text()))
    two = _row(doc, "pytorch", sweep=2)
    found = _finding(two, "launch_bound")
    assert found["evidence"].startswith("host 2.07 ms per call against a device median of 0.328 ms (16%")
    assert "compute_bound" not in _rules(two) and "pytorch+graph" in found["suggestion"]
    eight = _finding(_row(doc, "pytorch", sweep=8), "launch_bound")
    assert "outran the 2 ms spin" in eight["evidence"] and "follows the host" in eight["evidence"]


def test_recorded_device_bound_rows_are_not_launch_bound():
    fused = diagnose_document(json.loads((TODAY / "lecture06-fused.json").read_text()))
    assert "launch_bound" not in _rules(_row(fused, "pytorch", run_index=1, sweep=4096))  # 0.175 ms median, 0.023 ms host
    assert "launch_bound" not in _rules(_row(fused, "compiled", sweep=8192))
    gelu = diagnose_document(json.loads((TODAY / "lecture06-gelu.json").read_text()))
    assert not any("launch_bound" in _rules(r) for r in gelu["results"])
    assert _rules(_row(gelu, "cuda_naive")) == ["fp64", "scalar_loads"]  # FP64 from today's PTX
