"""The value gates' one-pass Triton statistics (workbench/check/compare_triton.py) are the torch
path's (ChunkTotals.add): compared under TRITON_INTERPRET=1 (the interpreter runs the same kernel
on the CPU) on chunks with ragged tails, matching and mismatching NaN/inf, values past a dtype's
overflow threshold, zeros in the reference and errors on both sides of the gate; and the reports
judge_chunks makes through either path are the same."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from workbench.check import compare

ROOT = Path(__file__).resolve().parents[1]
pytest.importorskip("triton")

_CHILD = r"""
import json, math, torch
from workbench.check import compare
from workbench.check.compare_triton import TILE, chunk_statistics
from workbench.check.tolerance import MAX_EXPONENT, Tolerance, overflow_threshold

torch.manual_seed(0)
NAN, INF = math.nan, math.inf

def case(dtype, n, noise, specials=(), rtol=1e-3):
    ref = torch.randn(n, dtype=torch.float64) * 100
    out = (ref * (1 + noise * torch.randn(n, dtype=torch.float64))).to(dtype)
    for i, (r, o) in enumerate(specials):
        ref[5 * i + 3] = r
        out[5 * i + 3] = o
    return dtype, out, ref, rtol

cases = {
    "float32 ragged, within": case(torch.float32, 3 * TILE + 77, 1e-4),
    "bfloat16 one tile, some out": case(torch.bfloat16, TILE, 1e-2),
    "float16 matching specials": case(torch.float16, 5000, 1e-3,
                                      [(NAN, NAN), (INF, INF), (-INF, -INF), (0.0, -0.0), (-0.0, 0.0),
                                       (7e4, INF), (-1e6, -INF), (0.0, 0.5)]),
    "float32 mismatching specials": case(torch.float32, 4099, 1e-5,
                                         [(NAN, 1.0), (1.0, NAN), (INF, -INF), (2.0, INF), (INF, 3.0)]),
    "bfloat16 past the threshold": case(torch.bfloat16, 777, 1e-3, [(3.4e38, INF), (-3.5e38, -INF), (1e39, INF)]),
    # float32's threshold 2^128 (1 - 2^-25) is no float32 value (a float32 kernel argument is inf)
    "float32 past the threshold": case(torch.float32, 333, 1e-6, [(6.8e38, INF), (-3.4028235e38 * 1.0000001, -INF),
                                                                  (3.4028234e38, 3.4028234663852886e38)]),
    "float64 ragged": case(torch.float64, 1001, 1e-9, [(NAN, NAN), (0.0, 1e-300)]),
    "float32 one element": case(torch.float32, 1, 1e-3),
    "float32 empty": case(torch.float32, 0, 1e-3),
}
rows = []
for name, (dtype, out, ref, rtol) in cases.items():
    totals = compare.ChunkTotals()
    totals.add(0, out, ref, rtol)
    want = {"err_sq": totals.err_sq, "ref_sq": totals.ref_sq, "max_abs": totals.max_abs,
            "max_rel": totals.max_rel, "max_excess": totals.excess[0][1] if totals.excess else -math.inf,
            "finite": totals.finite, "mismatches": totals.mismatches}
    dname = str(dtype).removeprefix("torch.")
    got = chunk_statistics(out, ref, rtol, overflow_threshold(dname) if dname in MAX_EXPONENT else None)
    rows.append({"case": name, "want": {k: repr(v) for k, v in want.items()},
                 "got": {k: repr(v) for k, v in got.items()}})

# judge_chunks through ChunkTotals.add, the Triton pass forced (as for a CUDA chunk), against the
# torch path: several chunks, one of them failing the elementwise gate
ref = torch.randn(3 * TILE + 5, dtype=torch.float64)
out = ref.to(torch.float32)
out[TILE + 9] += 0.5
tol = Tolerance(1e-5, 1e-5, 0.0, 1e-4)
step = TILE + 1
piece = lambda k: ref[k * step:(k + 1) * step]
count = -(-ref.numel() // step)
compare._one_pass = lambda out, ref: False
a = compare.judge_chunks(out, piece, count, (ref.numel(),), tol)
compare._one_pass = lambda out, ref: True
b = compare.judge_chunks(out, piece, count, (ref.numel(),), tol)
rows.append({"case": "judge_chunks", "want": a.as_dict(), "got": b.as_dict()})
print(json.dumps(rows))
"""


def _close(a: str, b: str, rel: float = 1e-12) -> bool:
    x, y = float(a), float(b)
    return x == y or (abs(x - y) <= rel * max(abs(x), abs(y)))


@pytest.mark.slow  # a Python under TRITON_INTERPRET=1 (read when the kernel is decorated)
def test_the_triton_pass_gives_the_torch_paths_statistics():
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(rows) == 10
    for row in rows[:-1]:
        want, got = row["want"], row["got"]
        for key in ("finite", "mismatches", "max_abs", "max_rel"):  # counts and maxima: exactly
            assert want[key] == got[key], (row["case"], key, want[key], got[key])
        for key in ("err_sq", "ref_sq", "max_excess"):  # sums and a fused multiply-add: the last bits
            assert _close(want[key], got[key]), (row["case"], key, want[key], got[key])
    by_case = {row["case"]: row for row in rows}
    # the cases cover what they claim: matching specials leave finite errors and no mismatch,
    # mismatching ones count, the overflow clamp makes inf expected, and errors pass and fail
    assert by_case["float16 matching specials"]["got"]["mismatches"] == "0"
    assert by_case["float16 matching specials"]["got"]["max_abs"] != "inf"
    assert by_case["float32 mismatching specials"]["got"]["mismatches"] == "5"
    assert by_case["bfloat16 past the threshold"]["got"]["mismatches"] == "0"
    assert by_case["float32 past the threshold"]["got"]["mismatches"] == "0"
    assert float(by_case["float32 ragged, within"]["got"]["max_excess"]) < 0
    assert float(by_case["bfloat16 one tile, some out"]["got"]["max_excess"]) > 0
    assert by_case["float32 empty"]["got"]["finite"] == "0"
    want, got = by_case["judge_chunks"]["want"], by_case["judge_chunks"]["got"]
    assert want.keys() == got.keys() and want["gate"] == "elementwise+norm-wise" and want["first_bad_index"] == [2057]
    for key, value in want.items():
        if isinstance(value, float):
            assert _close(repr(value), repr(got[key])), (key, value, got[key])
        else:
            assert value == got[key], (key, value, got[key])


def test_only_compiled_cuda_chunks_take_the_triton_pass(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(compare, "_ONE_PASS_FAILED", [])
    ref = torch.zeros(8, dtype=torch.float64)
    assert not compare._one_pass(torch.zeros(8), ref)  # a CPU chunk: the torch path
    meta = torch.empty(8, device="meta")
    assert not compare._one_pass(meta, torch.empty(8, dtype=torch.float64, device="meta"))


def test_the_triton_pass_refuses_what_it_does_not_read():
    from workbench.check.compare_triton import chunk_statistics, readable, usable

    ref = torch.zeros(8, dtype=torch.float64)
    assert readable(torch.zeros(8), ref) and not usable(torch.zeros(8), ref)  # CPU: interpreter only
    assert not readable(torch.zeros(8, dtype=torch.int32), ref)
    assert not readable(torch.zeros(8).to(torch.float8_e4m3fn), ref)
    assert not readable(torch.zeros(16)[::2], ref)  # not contiguous
    assert not readable(torch.zeros(9), torch.zeros(9))  # a float32 reference
    with pytest.raises(ValueError, match="int32"):
        chunk_statistics(torch.zeros(8, dtype=torch.int32), ref, 1e-3, None)
    with pytest.raises(ValueError, match=r"\(7,\)"):
        chunk_statistics(torch.zeros(8), torch.zeros(7, dtype=torch.float64), 1e-3, None)


def test_a_triton_pass_that_fails_falls_back_to_the_torch_path_once_and_for_all(monkeypatch):
    # a GPU this Triton cannot build for must not fail every row's check: the torch path is the same
    from workbench.check import compare_triton

    calls = []

    def broken(*args):
        calls.append(args)
        raise RuntimeError("no kernel image for sm_120")

    monkeypatch.setattr(compare, "_ONE_PASS_FAILED", [])
    monkeypatch.setattr(compare, "_one_pass", lambda out, ref: not compare._ONE_PASS_FAILED)
    monkeypatch.setattr(compare_triton, "chunk_statistics", broken)
    ref = torch.randn(1000, dtype=torch.float64)
    out = ref.to(torch.float32)
    first = compare.ChunkTotals()
    first.add(0, out, ref, 1e-3)
    assert len(calls) == 1 and "no kernel image" in compare._ONE_PASS_FAILED[0]
    second = compare.ChunkTotals()
    second.add(0, out, ref, 1e-3)
    assert len(calls) == 1  # not tried again in this process
    plain = compare.ChunkTotals()
    monkeypatch.setattr(compare, "_one_pass", lambda out, ref: False)
    plain.add(0, out, ref, 1e-3)
    assert first == second == plain and first.finite == 1000


def test_workbench_compare_torch_keeps_the_torch_path(monkeypatch):
    from types import SimpleNamespace

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(compare, "_ONE_PASS_FAILED", [])
    monkeypatch.setenv("WORKBENCH_COMPARE", "torch")
    cuda_chunk = SimpleNamespace(device=SimpleNamespace(type="cuda"))  # decided before it is read
    assert not compare._one_pass(cuda_chunk, cuda_chunk)
    monkeypatch.delenv("WORKBENCH_COMPARE")
    monkeypatch.setattr(compare, "_ONE_PASS_FAILED", ["an earlier failure"])
    assert not compare._one_pass(cuda_chunk, cuda_chunk)


@pytest.mark.parametrize("out_type", ["fp32", "bf16"])
def test_the_compare_kernel_builds_for_hopper_in_float64(out_type):
    # the installed Triton (CI: the pinned one, 3.6 and the newest) compiles the kernel ahead of
    # time for sm_90; the comparison runs in float64 and takes rtol and the threshold from memory
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from workbench.check.compare_triton import TILE, _compare_tiles

    signature = {"out_ptr": f"*{out_type}", "ref_ptr": "*fp64", "params_ptr": "*fp64", "floats_ptr": "*fp64",
                 "counts_ptr": "*i64", "n": "i64", "CLAMP": "constexpr", "TILE": "constexpr"}
    src = ASTSource(fn=_compare_tiles, signature=signature, constexprs={"CLAMP": True, "TILE": TILE})
    ptx = triton.compile(src, target=GPUTarget("cuda", 90, 32)).asm["ptx"]
    assert "setp.ge.f64" in ptx  # |ref| >= the overflow threshold, compared in float64
    assert "setp.nan.f64" in ptx  # NaN handled in float64
    assert "div.rn.f64" in ptx  # max_rel: an IEEE division, not an approximation
