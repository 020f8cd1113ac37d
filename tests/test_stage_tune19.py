"""The `tune19` GPU stage's logic on CPU (issue #19): the CUDA targets' sweep with a stand-in for
the load_inline module (every candidate checked, a failing one named, the passing ones timed and
related to the copy), the plan and the table; and the whole stage as a dry run (slow: interpreted
Triton in a child process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from benchmarks.stages import tune19 as stage
from benchmarks.stages._tune19_core import Sweep, sweep_target
from workbench.kernels import _onepass as op1
from workbench.registry import discover

ROOT = Path(__file__).resolve().parents[1]


def stage_rows_candidates() -> list[dict]:
    """The pruned Triton configs for the 16384-wide rows (the stage times every one)."""
    from workbench.kernels import _softmax_rows as rows_kernel

    return rows_kernel.candidates(16384, 16)


class FakeSoftmaxModule:
    """softmax_rows(x, threads, packs, spacks, cluster, keep, even, twopass) as the binding takes it:
    torch.softmax in float32, except one configuration that computes something else (a wrong kernel
    to catch)."""

    def __init__(self, wrong: tuple[int, int, int, int, int]):
        self.calls, self.wrong = [], wrong

    def softmax_rows(self, x, threads, packs, spacks, cluster, keep, even, twopass):
        assert twopass == 0, "a clustered row never takes the two-pass kernel"
        self.calls.append((threads, packs, spacks, cluster, keep))
        y = torch.softmax(x.float(), dim=-1).to(x.dtype)
        return y * 1.5 if (threads, packs, spacks, cluster, keep) == self.wrong else y


def test_the_cuda_sweep_checks_every_cluster_shape_and_times_the_passing_ones():
    op = discover().op("softmax")
    sw = Sweep.make("cpu", True, 60)
    wanted = op1.cluster_candidates(262144, 4)
    bad = wanted[-1]
    module = FakeSoftmaxModule((bad.threads, bad.packs, bad.spacks, bad.cluster, bad.keep))
    target, cands, refs, tune = stage._cuda_target(sw, op, {"M": 4096, "N": 262144}, "float32", False, module, False)
    assert target["shape"] == {"M": stage.CPU_ROWS, "N": 262144} and len(cands) == len(wanted)
    saves = []
    sweep_target(sw, target, cands, refs, lambda: saves.append(json.dumps(target, default=str)))
    assert len(saves) == 2 and "_op" not in target  # saved after the checks and after the timing
    assert {c[2] for c in module.calls} == {c.spacks for c in wanted}  # staged shapes were launched
    assert {c[4] for c in module.calls} == {0, 1}  # and the KEEP ones
    rows = {r["label"]: r for r in target["candidates"]}
    failed = [r for r in rows.values() if not r["passed"]]
    assert [r["config"] for r in failed] == [bad.params()] and "timing" not in failed[0]
    assert failed[0]["check"][0]["input_set"] == "first" and len(failed[0]["check"]) == 1
    ok = [r for r in rows.values() if r["passed"]]
    assert all([c["input_set"] for c in r["check"]] == ["first", "special"] for r in ok)
    assert all(r["timing"]["median_ms"] > 0 and "x_pytorch" in r and r["pct_of_copy"] > 0 for r in ok)
    assert target["fastest"]["label"] in rows and target["copy"]["median_ms"] > 0
    configs, run_cfg, version = tune
    assert configs == [c.params() for c in wanted] and version == op1.ONEPASS_VERSION


def test_the_gemm_target_names_every_tma_candidate_and_relates_to_cublas_without_a_copy():
    from workbench.kernels._tma_gemm import TMA_VERSION, candidate_configs

    op = discover().op("matmul")
    sw = Sweep.make("cpu", True, 60)
    target, cands, refs, tune = stage._matmul_target(sw, op, {"M": 4096, "N": 4096, "K": 4096}, "bfloat16", False)
    assert [c[1] for c in cands] == candidate_configs() and tune[2] == TMA_VERSION and set(refs) == {"cublas"}
    # The TMA kernel runs only on sm_90: the sweep's logic with the product in its place.
    fakes = [(label, cfg, (lambda a, b: a @ b) if i else (lambda a, b: (a @ b) * 2)) for i, (label, cfg, _) in enumerate(cands)]
    sweep_target(sw, target, fakes, refs, lambda: None, copy=False)
    assert "copy" not in target and not target["candidates"][0]["passed"]
    ok = [r for r in target["candidates"] if r["passed"]]
    assert len(ok) == len(cands) - 1 and all("x_cublas" in r and "pct_of_copy" not in r for r in ok)
    assert target["fastest"]["pct_of_copy"] is None


def test_a_target_that_would_not_fit_the_budget_is_skipped():
    assert "stage budget" in stage._skip_reason("matmul", True, stage.MIN_LEFT_S["matmul"] - 1)
    assert stage._skip_reason("triton", True, 100) is None
    assert "no CUDA GPU" in stage._skip_reason("cuda", False, 100)


def test_the_plan_covers_round_2_and_the_table_summarises(tmp_path):
    quick = stage._plan(True)
    sq, long, cube = {"M": 16384, "N": 16384}, {"M": 4096, "N": 262144}, {"M": 4096, "N": 4096, "K": 4096}
    assert quick == [("triton", sq, "bfloat16"), ("cuda", long, "bfloat16"), ("cuda", long, "float32"),
                     ("matmul", cube, "bfloat16"), ("matmul", cube, "float16"), ("triton", sq, "float16")]
    assert len(stage._plan(False)) > len(quick)
    doc = {"targets": [{"name": "cuda x", "skipped": "no CUDA GPU here"},
                       {"name": "t", "candidates": [
                           {"label": "a", "passed": True, "timing": {"median_ms": 2.0, "spread_pct": 1}, "pct_of_copy": 50},
                           {"label": "b", "passed": True, "timing": {"median_ms": 1.0, "spread_pct": 1}, "pct_of_copy": 100},
                           {"label": "c", "passed": False}],
                        "references": {"pytorch": {"median_ms": 3.0, "pct_of_copy": 33}},
                        "autotuner": {"config": {"k": 1}}}]}
    rows = stage._table(doc)
    assert rows[0]["what"] == "no CUDA GPU here"
    assert [r["what"] for r in rows[1:4]] == ["a", "b", "pytorch"]
    assert "1 of 3 failed" in rows[-1]["what"] and "{'k': 1}" in rows[-1]["what"]


@pytest.mark.slow  # the stage in a child process, Triton interpreted
def test_the_stage_dry_run_writes_every_target(tmp_path):
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run([sys.executable, "benchmarks/gpu_evidence.py", "--stage", "tune19", "--quick",
                           "--out", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    doc = json.loads((tmp_path / "tune19.json").read_text())
    by_name = {t["name"]: t for t in doc["targets"]}
    assert len(by_name) == len(stage._plan(True))
    for dtype in ("bfloat16", "float16"):
        t = by_name[f"triton 16384x16384 {dtype}"]
        assert [r["config"] for r in t["candidates"]] == stage_rows_candidates() and all(r["passed"] for r in t["candidates"]), t
        assert all("timing" in r for r in t["candidates"]) and "pytorch" in t["references"]
    assert all("no CUDA GPU" in t["skipped"] for n, t in by_name.items() if n.startswith("cuda"))
