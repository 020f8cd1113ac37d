"""The tuned softmax variants (issue #19): the Triton row kernel's ROWS / STREAM / RECOMPUTE configs
(kernels/_softmax_rows.py) under the interpreter against the float64 reference, and the CUDA
one-pass kernel's shared-memory-staged configurations (softmax.cu ONEPASS_STAGED_V*) compiled for
sm_90: cp.async in their PTX, no local-memory spills, shared memory within the limit."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import torch

import workbench.kernels
from workbench.kernels import _onepass as op1
from workbench.kernels import _softmax_rows as rows_kernel
from workbench.kernels.softmax import _tuned_launch, reference
from workbench.machine import find_nvcc
from workbench.registry import discover

REGISTRY = discover()
CU = Path(workbench.kernels.__file__).with_name("softmax.cu")


def test_long_rows_start_with_the_measured_winner_and_keep_the_lecture_config():
    long16 = rows_kernel.candidates(16384, 16)
    assert long16[0] == {**rows_kernel.DEFAULTS, "num_warps": 8, "EVEN": 1}  # 98.3% of copy (bf16, H200)
    assert {"num_warps": 16, **rows_kernel.DEFAULTS} in long16              # the lecture's config
    assert {c["num_warps"] for c in long16} == {4, 8, 16, 32} and len(long16) == 5 + len(rows_kernel.L2_PASSES)
    assert [c for c in long16 if c["L2PASS"]] == list(rows_kernel.L2_PASSES)  # tried last
    assert all(16384 % c["L2PASS"] == 0 for c in rows_kernel.L2_PASSES)
    assert not any(c["ROWS"] == 2 or c["STREAM"] for c in long16)  # measured slower: pruned
    assert len({tuple(c.items()) for c in long16}) == len(long16)  # no config twice
    for c in long16:  # a row of values per thread the registers can hold
        assert 8 <= c["ROWS"] * 16384 // (32 * c["num_warps"]) <= 128
    short = rows_kernel.candidates(1024, 4)
    assert all(rows_kernel.is_lecture(c) for c in short) and short[0]["num_warps"] == 4


@pytest.mark.parametrize("shape, rows, want", [((8, 128), 2, 0), ((7, 128), 2, 1), ((8, 100), 1, 1), ((7, 128), 1, 0)])
def test_even_drops_the_masks_only_where_every_tile_is_full(shape, rows, want):
    assert rows_kernel.masked({"EVEN": 1, "ROWS": rows}, *shape, 128) == want
    assert rows_kernel.masked({"EVEN": 0, "ROWS": rows}, *shape, 128) == 1


INTERPRETED = """
import sys, json, torch
from workbench.registry import discover
from workbench.kernels import _softmax_rows as rows_kernel
from workbench.kernels.softmax import _tuned_launch, reference
op = discover().op("softmax")
worst = {}
for dtype, tol in (("float32", 1e-5), ("bfloat16", 1e-2), ("float16", 2e-3)):
    for m, n in ((7, 100), (8, 128)):  # masked: a last program with missing rows, 100 of 128 columns; full tiles
        spec = op.make_spec({"M": m, "N": n}, dtype)
        (x,) = op.make_inputs(spec, "cpu", 0)
        x[3, 1::13] = float("-inf")  # masked entries, as in the special inputs
        x[5] += 1000.0               # a row far from zero: exp of the difference
        for knobs in KNOBS:
            launch = _tuned_launch(spec, 128, {"num_warps": 4, **knobs})
            assert launch.kernel is rows_kernel._softmax_rows_kernel and launch.grid[0] == -(-m // knobs["ROWS"])
            assert launch.constexprs["MASKED"] == rows_kernel.masked(knobs, m, n, 128)
            y = torch.empty_like(x)
            launch.run(x, y)
            err = float(((y.double() - reference(x.double())).abs() / tol).max())
            worst[f"{dtype} {m}x{n} {knobs}"] = err
print(json.dumps(worst))
"""
KNOBS = [dict(ROWS=1, STREAM=1, EVEN=0), dict(ROWS=2, STREAM=0, EVEN=1), dict(ROWS=4, STREAM=1, EVEN=1),
         dict(ROWS=1, STREAM=0, EVEN=1)]


L2_CHECK = """
import json, torch
from workbench.registry import discover
from workbench.kernels import _softmax_rows as rows_kernel
from workbench.kernels.softmax import _tuned_launch, reference
op = discover().op("softmax")
worst = {}
for dtype, tol in (("float32", 1e-5), ("bfloat16", 1e-2)):
    for m, n, chunk in ((7, 100, 32), (9, 128, 32), (3, 128, 128)):  # a ragged last chunk, full chunks, one chunk
        spec = op.make_spec({"M": m, "N": n}, dtype)
        (x,) = op.make_inputs(spec, "cpu", 0)
        x[1, 1::13] = float("-inf")
        x[2] += 1000.0
        for warps in (4, 8):
            knobs = {"num_warps": warps, "ROWS": 1, "STREAM": 0, "EVEN": 1, "L2PASS": chunk}
            launch = _tuned_launch(spec, 128, knobs)
            assert launch.kernel is rows_kernel._softmax_l2_kernel and launch.grid[0] == m
            elems = min(chunk * 4 // x.element_size(), 128)  # L2PASS counts float32 columns
            assert launch.constexprs == {"BLOCK_SIZE": elems, "MASKED": int(n % elems != 0)}
            y = torch.full_like(x, float("nan"))  # a column no pass wrote stays NaN and fails
            launch.run(x, y)
            worst[f"{dtype} {m}x{n} chunk {chunk} w{warps}"] = float(((y.double() - reference(x.double())).abs() / tol).max())
print(json.dumps(worst))
"""


@pytest.mark.slow  # a Python subprocess under TRITON_INTERPRET
def test_the_three_pass_kernel_matches_the_reference_under_the_interpreter():
    import json
    import os
    import sys

    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run([sys.executable, "-c", L2_CHECK], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    worst = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(worst) == 2 * 3 * 2
    bad = {k: v for k, v in worst.items() if not v <= 1.0}
    assert not bad, bad


@pytest.mark.slow  # a Python subprocess under TRITON_INTERPRET
def test_triton_variants_match_the_reference_under_the_interpreter():
    import json
    import os
    import sys

    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run([sys.executable, "-c", f"KNOBS = {KNOBS!r}\n" + INTERPRETED], capture_output=True,
                          text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    worst = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(worst) == 3 * 2 * len(KNOBS)
    bad = {k: v for k, v in worst.items() if not v <= 1.0}
    assert not bad, bad


def test_every_long_row_candidate_compiles_for_sm90_with_16_byte_accesses_and_no_spills(tmp_path):
    """The configs the device will time, compiled ahead of time here (a kernel that fails to
    compile would waste the GPU run): v4 loads and stores, no local memory, the hints in PTX."""
    from sm90_aot import compile_sm90, resources

    spec = REGISTRY.op("softmax").make_spec({"M": 16384, "N": 16384}, "bfloat16")
    for i, cfg in enumerate(rows_kernel.candidates(16384, 16)):
        compiled = compile_sm90(_tuned_launch(spec, 16384, cfg))
        ptx = compiled.asm["ptx"]
        assert re.search(r"ld\.global[\w.:]*\.v4\.b32", ptx), cfg
        if cfg["L2PASS"]:  # the first two passes keep the row in L2, the last lets it go
            assert "evict_last" in ptx and "evict_first" in ptx, cfg
        assert re.search(r"st\.global[\w.:]*\.v4\.b32", ptx), cfg
        assert ("evict_first" in ptx and "st.global.cs" in ptx) == bool(cfg["STREAM"]), cfg
        res = resources(compiled, tmp_path, f"k{i}")
        assert res.spill_bytes == 0 and res.registers <= 255, (cfg, res)


def test_the_lecture_config_launches_the_lecture_kernel():
    op = REGISTRY.op("softmax")
    spec = op.make_spec({"M": 4, "N": 16384}, "bfloat16")
    launch = _tuned_launch(spec, 16384, {"num_warps": 8})  # an older cache: num_warps alone
    assert launch.kernel.__name__ == "_softmax_kernel" and launch.num_warps == 8 and launch.grid == (4, 1, 1)


# -- CUDA: the staged configurations compiled for sm_90 -----------------------------------------------
@pytest.fixture(scope="module")
def resources(tmp_path_factory) -> tuple[str, str]:
    """(ptxas --resource-usage report, PTX) of softmax.cu for sm_90."""
    nvcc = find_nvcc()
    if nvcc is None:
        pytest.skip("nvcc not found (CUDA toolkit not installed)")
    out = tmp_path_factory.mktemp("cubin")
    proc = subprocess.run([nvcc, "-cubin", "-arch=sm_90", "-O3", "--resource-usage", "--keep",
                           "--keep-dir", str(out), str(CU), "-o", str(out / "softmax.cubin")],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ptx = next(out.glob("*.ptx")).read_text()
    return proc.stdout + proc.stderr, ptx


def _staged_mangled(dtype: str, vec: int, threads: int, packs: int, spacks: int, keep: int = 0, even: int = 0) -> str:
    """The Itanium-mangled template arguments of a clustered staged kernel (KEEP, then EVEN, last)."""
    return f"{dtype}Li{vec}ELi{threads}ELi{packs}ELb1ELi{spacks}ELb{keep}ELb{even}EE"


def _body(ptx: str, frag: str) -> str:
    """The PTX of the one entry whose name holds frag."""
    starts = [m.start() for m in re.finditer(r"\.entry\s+", ptx)] + [len(ptx)]
    for a, b in zip(starts, starts[1:]):
        if frag in ptx[a:a + 300]:
            return ptx[a:b]
    raise AssertionError(f"{frag}: no such entry")


def _reports(report: str) -> dict[str, str]:
    """kernel name -> the ptxas lines about it."""
    out, name = {}, None
    for line in report.splitlines():
        m = re.search(r"Function properties for (\S+)", line) or re.search(r"Compiling entry function '(\S+)'", line)
        if m:
            name = m.group(1)
            out.setdefault(name, "")
        elif name:
            out[name] += line + "\n"
    return out


def test_staged_kernels_use_cp_async_and_do_not_spill(resources):
    report, ptx = resources
    kernels = _reports(report)
    codes = {4: ["f"], 8: ["6__half", "13__nv_bfloat16"]}
    checked = 0
    shapes = [(vec, *shape, 0, 0) for vec, group in op1.STAGED_SHAPES.items() for shape in group]
    shapes += [(vec, *shape, 1, 0) for vec, group in op1.KEPT_SHAPES.items() for shape in group]
    shapes += [(vec, *shape, 1, 1) for vec, group in op1.EVEN_SHAPES.items() for shape in group]
    for vec, threads, packs, spacks, keep, even in shapes:
        for code in codes.get(vec, []):
            frag = _staged_mangled(code, vec, threads, packs, spacks, keep, even)
            names = [n for n in kernels if frag in n]
            assert names, f"{frag} not compiled"
            text = "".join(kernels[n] for n in names)
            assert "0 bytes spill stores" in text and "0 bytes spill loads" in text, (frag, text)
            body = _body(ptx, frag)
            assert "cp.async.cg.shared.global" in body and "barrier.cluster" in body, frag
            assert threads * spacks * 16 <= 227 * 1024
            if even:  # the EVEN twin: the same kernel without the per-pack bounds checks
                checked_twin = _body(ptx, _staged_mangled(code, vec, threads, packs, spacks, keep, 0))
                assert body.count("setp.") < checked_twin.count("setp.") - 2 * (packs + spacks), frag
            checked += 1
    assert checked == 3 * 3 + 2 * 3 + 2 * len(op1.EVEN_SHAPES[8])


def _row_mangled(dtype: str, vec: int, threads: int, packs: int, spacks: int, keep: int, cluster: int = 0) -> str:
    """The mangled template arguments of a one-pass kernel with IN_CLUSTER = cluster (EVEN false)."""
    return f"{dtype}Li{vec}ELi{threads}ELi{packs}ELb{cluster}ELi{spacks}ELb{keep}ELb0EE"


def test_one_block_row_shapes_compile_without_a_cluster_variant_or_spills(resources):
    """ROW_SHAPES (kernels/_onepass.py) are launched without a cluster: launch_row compiles only
    IN_CLUSTER = false. Staged ones copy with cp.async; kept ones take half the ex2 of the same
    shape without KEEP (the plan's 512 x 8 at 16384 float32)."""
    report, ptx = resources
    kernels = _reports(report)
    codes = {4: ["f"], 8: ["6__half", "13__nv_bfloat16"]}
    checked = 0
    for vec, group in op1.ROW_SHAPES.items():
        for threads, packs, spacks, keep in group:
            for code in codes.get(vec, []):
                frag = _row_mangled(code, vec, threads, packs, spacks, keep)
                names = [n for n in kernels if frag in n]
                assert names, f"{frag} not compiled"
                text = "".join(kernels[n] for n in names)
                assert "0 bytes spill stores" in text and "0 bytes spill loads" in text, (frag, text)
                assert not [n for n in kernels if _row_mangled(code, vec, threads, packs, spacks, keep, 1) in n]
                body = _body(ptx, frag)
                assert "barrier.cluster" not in body and ("cp.async.cg.shared.global" in body) == (spacks > 0), frag
                if keep:
                    plain = _body(ptx, _row_mangled(code, vec, threads, packs, spacks, 0))
                    elements = (packs + spacks) * vec
                    # one ex2 per element plus ~21 in the merges (sm_90 PTX), against two per element
                    assert body.count("ex2.approx") < elements + 32 and plain.count("ex2.approx") >= 2 * elements, frag
                checked += 1
    assert checked == 1 + 2


def test_the_l2_kernel_reads_with_cache_hints_in_few_registers(resources):
    """softmax_l2_kernel (three passes; twopass = 2, and 3 for TRITON_FORM): every dtype at 1024
    threads, no spills, at most 32 registers (two blocks of 1024 an SM), L2 evict_last for the
    first two reads and evict_first for the third; TRITON_FORM adds L1 evict_last to the first two
    and L1 evict_first to the third, as Triton's sm_90 PTX of _softmax_l2_kernel has them."""
    report, ptx = resources
    kernels = _reports(report)
    for code in ("f", "6__half", "13__nv_bfloat16"):
        for form in (0, 1):
            frag = f"softmax_l2_kernelI{code}Li1024ELb{form}E"
            names = [n for n in kernels if frag in n]
            assert names, f"{frag} not compiled"
            text = kernels[names[0]]
            assert "0 bytes spill stores" in text and "0 bytes spill loads" in text, text
            assert int(re.search(r"Used (\d+) registers", text).group(1)) <= 32, text
            body = _body(ptx, frag)
            assert "createpolicy.fractional.L2::evict_last" in body and "createpolicy.fractional.L2::evict_first" in body
            assert "barrier.cluster" not in body
            if form:
                assert body.count("ld.global.L1::evict_last.L2::cache_hint.v4") >= 2, frag
                assert body.count("ld.global.L1::evict_first.L2::cache_hint.v4") >= 1, frag
                assert "ld.global.L2::cache_hint" not in body, frag
            else:
                assert body.count("ld.global.L2::cache_hint.v4") >= 3 and "L1::evict" not in body, frag


def test_keep_takes_one_exponential_per_element_and_packed_maxima(resources):
    """KEEP's point (kernels/_onepass.py KEPT_SHAPES): half the ex2 of the same shape without it;
    16-bit rows take the max on packed pairs and keep the exponentials as float16 pairs."""
    _, ptx = resources
    codes = {4: ("f", None), 8: ("13__nv_bfloat16", "bf16x2"), 16: ("6__half", "f16x2")}
    for vec, group in op1.KEPT_SHAPES.items():
        for threads, packs, spacks in group:
            for code, pair in [codes[vec]] + ([codes[16]] if vec == 8 else []):
                kept = _body(ptx, _staged_mangled(code, vec, threads, packs, spacks, 1))
                plain = _body(ptx, _staged_mangled(code, vec, threads, packs, spacks, 0))
                elements = (packs + spacks) * vec
                assert kept.count("ex2.approx") < elements + 64 < plain.count("ex2.approx"), (code, threads)
                if pair:
                    assert f"max.{pair}" in kept and "cvt.rn.f16x2.f32" in kept, code


def test_the_ptx_record_of_the_cuda_softmax_holds_the_l2_kernel_it_may_launch(resources):
    """The tuner picks the three-pass L2 kernel for 16384-wide float32 rows (twopass 3): the PTX
    view must be able to show it, so the implementation names it among its kernels."""
    from workbench.ptx.nvcc import match_kernels

    _, ptx = resources
    source = REGISTRY.op("softmax").get_impl("cuda").source
    found, notes = match_kernels(ptx, source.kernels, "float32")
    names = [k.mangled for k in found]
    assert notes == [], notes
    assert any("softmax_l2_kernelIfLi1024ELb1E" in n for n in names)  # the tuned one: TRITON_FORM
    assert not any("softmax_l2_kernelI6__half" in n for n in names)  # float32's only


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_the_kernel_the_cuda_softmax_launches_is_named_exactly_for_every_candidate(resources, dtype, monkeypatch):
    """CudaSource.launched names the instantiation softmax_rows dispatches for each config the
    tuner may pick (the PTX view lists it first, the launch record reads its registers): every
    name must be an entry of softmax.cu's PTX, template arguments and all, for each candidate of
    the issue's shapes (16384-wide rows, the long rows) and a short row."""
    from workbench.kernels import softmax as sm
    from workbench.tuning import Tuned
    from workbench.ptx.extractors import launched_first
    from workbench.ptx.nvcc import match_kernels

    _, ptx = resources
    source = REGISTRY.op("softmax").get_impl("cuda").source
    found, _ = match_kernels(ptx, source.kernels, dtype)
    record = {"kernels": [{"name": k.display} for k in found], "notes": []}
    for shape in ({"M": 16384, "N": 16384}, {"M": 4096, "N": 262144}, {"M": 64, "N": 1000}):
        spec = REGISTRY.op("softmax").make_spec(shape, dtype)
        for config in sm.cuda_candidates(spec):
            monkeypatch.setattr(sm, "_cuda_config", lambda spec, ctx, run=None, c=config: Tuned(c, "cached", ""))
            name = source.launched_kernel(spec, {})
            ordered = launched_first(record, name)
            first = ordered["kernels"][0]["name"]
            if name == "softmax_kernel":  # the two-pass kernel is named by its base name alone
                assert first.split("<")[0].endswith("softmax_kernel"), (shape, config, first)
            else:
                assert first.replace(" ", "").endswith(name.replace(" ", "")), (shape, config, name, first)
            assert ordered["notes"] == [f"the run launches {name}: listed first"]
