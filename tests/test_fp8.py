"""fp8 (issue 43): the dtypes, their tolerance terms, the datasheet's fp8 peaks, `scaled_mm`'s
implementations against the float64 reference of the dequantised inputs, and the known-wrong fp8
implementations failing the check on CPU."""

from __future__ import annotations

import pytest
import torch

from workbench.backends.base import Action
from workbench.datasheet import peaks_for
from workbench.dtypes import STANDARD_DTYPES, DType
from workbench.engine.measure.ceilings import compute_key
from workbench.errors import UnknownNameError
from workbench.machine import Machine
from workbench.registry import BuildContext, discover
from workbench.check.tolerance import FP8_MAX, UNIT_ROUNDOFF, overflow_threshold, tolerance
from workbench.check.row import RowCheck

REGISTRY = discover()
CPU = BuildContext(device="cpu")


def test_fp8_dtypes_and_their_rounding():
    assert DType.parse("float8_e4m3fn").itemsize == 1 and DType.float8_e5m2.is_fp8
    assert UNIT_ROUNDOFF["float8_e4m3fn"] == 2.0 ** -4 and UNIT_ROUNDOFF["float8_e5m2"] == 2.0 ** -3
    assert FP8_MAX == {"float8_e4m3fn": torch.finfo(torch.float8_e4m3fn).max,
                       "float8_e5m2": torch.finfo(torch.float8_e5m2).max}
    assert overflow_threshold("float8_e4m3fn") == float("inf")  # saturates, never rounds to inf
    # the output's dtype sets the rounding term: e4m3's is 16x bfloat16's
    assert tolerance("float8_e4m3fn").rtol > 15 * tolerance("bfloat16").rtol


def test_ops_that_do_not_declare_fp8_refuse_it_naming_their_dtypes():
    with pytest.raises(UnknownNameError, match="float32, float16, bfloat16"):
        REGISTRY.op("matmul").make_spec({}, "float8_e4m3fn")
    assert REGISTRY.op("softmax").dtypes == STANDARD_DTYPES
    assert REGISTRY.op("scaled_mm").dtypes == (DType.float8_e4m3fn,)


def test_datasheet_fp8_dense_peaks():
    for name in ("NVIDIA H100 80GB HBM3", "NVIDIA H200"):
        assert peaks_for(name).tflops("float8") == 1979.0
    assert peaks_for("NVIDIA A100-SXM4-80GB").tflops("float8") is None
    assert compute_key(True, "float8_e4m3fn", "ieee") == "float8"


def test_fp8_rows_unavailable_below_sm89_and_run_on_cpu():
    impl = REGISTRY.op("scaled_mm").get_impl("pytorch")
    a100 = Machine(True, "NVIDIA A100-SXM4-80GB", None, True, True, capability=80)
    h100 = Machine(True, "NVIDIA H100 80GB HBM3", None, True, True, capability=90)
    cpu = Machine(False, None, None, True, False)
    assert "sm_89+" in impl.backend.unavailable(impl, Action.check, a100, DType.float8_e4m3fn)
    assert impl.backend.unavailable(impl, Action.check, h100, DType.float8_e4m3fn) is None
    assert impl.backend.unavailable(impl, Action.check, cpu, DType.float8_e4m3fn) is None


def _check(op_name, impl_name, shape, fn=None, ctx=CPU):
    op = REGISTRY.op(op_name)
    impl = op.get_impl(impl_name)
    spec = op.make_spec(shape)
    fn = fn or impl.builder(spec, impl.resolve_params({}), ctx)
    inputs = op.make_inputs(spec, "cpu", 0)
    return RowCheck(op, impl, spec, ctx, inputs, 0).run_all(fn, fn(*inputs), timed_calls=1)


@pytest.mark.parametrize("rowwise", [0, 1])
@pytest.mark.parametrize("impl", ["pytorch", "manual"])  # triton: tests/test_ops_triton.py (interpreter child)
def test_scaled_mm_passes_on_cpu(impl, rowwise):
    ctx = BuildContext(device="cpu", interpret=impl == "triton")
    report = _check("scaled_mm", impl, {"M": 100, "N": 130, "K": 300, "rowwise": rowwise}, ctx=ctx)
    assert report.passed, report.detail


def test_scaled_mm_inputs_are_fp8_with_cublaslt_layout():
    op = REGISTRY.op("scaled_mm")
    a, b, sa, sb = op.make_inputs(op.make_spec({"M": 8, "N": 6, "K": 32, "rowwise": 1}), "cpu", 0)
    assert a.dtype == b.dtype == torch.float8_e4m3fn and b.shape == (32, 6) and b.stride(0) == 1
    assert sa.shape == (8, 1) and sb.shape == (1, 6) and sa.dtype == torch.float32
    assert float(a.float().abs().amax()) == 448.0  # the amax row maps to e4m3's max


# -- known-wrong fp8 implementations (tests/wrong_impls.py; the child-process run of every kind
# over every op is tests/test_check_known_wrong.py) -------------------------------------------
@pytest.mark.parametrize("op_name,kind,shape", [
    ("scaled_mm", "scale2x", {"M": 64, "N": 48, "K": 96}),
    ("scaled_mm", "scale2x", {"M": 64, "N": 48, "K": 96, "rowwise": 1}),
    ("scaled_mm", "e5m2", {"M": 64, "N": 48, "K": 96}),
    ("scaled_mm", "fp16acc", {"M": 32, "N": 24, "K": 2048}),
    ("quantize", "scale2x", {"M": 7, "N": 300}),
    ("quantize", "e5m2", {"M": 7, "N": 300}),
    ("quantize", "zeros", {"M": 7, "N": 300}),
    ("quantize", "half", {"M": 7, "N": 300}),
    ("quantize", "dtype", {"M": 7, "N": 300}),
    ("quantize", "input", {"M": 7, "N": 300}),
    ("quantize", "notail", {"M": 7, "N": 300}),
    ("quantize", "overwrite", {"M": 7, "N": 300}),
    ("quantize", "once", {"M": 7, "N": 300}),
    ("quantize", "ptrcache", {"M": 7, "N": 300}),
])
def test_known_wrong_fp8_fails_on_cpu(op_name, kind, shape):
    from wrong_impls import EXPECTED_GATES, KINDS, applicable

    op = REGISTRY.op(op_name)
    assert kind in applicable(op) or kind == "fp16acc"  # fp16acc: only here, at K=2048 (wrong_impls.applicable)
    host = "pytorch" if op_name == "scaled_mm" else "manual"  # tolerance factor 1, as manual_wrong_* has
    report = _check(op_name, host, shape, fn=KINDS[kind](op, op.make_spec(shape), "default"))
    assert not report.passed and report.gate in EXPECTED_GATES[kind] | {"shape", "dtype"}, report.detail
    if kind in ("once", "ptrcache"):  # quantize's special set in the same tensors catches a stale result
        assert report.input_set in ("special", "timed"), report.detail
    if kind in ("dtype", "input"):
        assert report.gate == {"dtype": "dtype", "input": "shape"}[kind], report.detail


@pytest.mark.parametrize("impl", ["manual"])  # compiled starts Inductor workers: tests/test_ops.py
def test_quantize_passes_on_cpu_with_its_special_rows(impl):
    report = _check("quantize", impl, {"M": 9, "N": 1000})
    assert report.passed and report.sets_checked == ["first", "special", "timed calls", "timed"], report.detail


def test_quantize_outputs_and_scales():
    from workbench.kernels.quantize import manual_quantize

    x = torch.tensor([[1.0, -2.0, 0.5], [0.0, 0.0, 0.0]], dtype=torch.bfloat16)
    q, s = manual_quantize(x)
    assert q.dtype == torch.float8_e4m3fn and q[0].float().tolist() == [224.0, -448.0, 112.0]
    assert s[0, 0] == pytest.approx(2.0 / 448) and q[1].float().tolist() == [0.0, 0.0, 0.0]


def test_quantize_cuda_launch_geometry_mirrors_the_kernel_choice():
    """kernels/quantize.py's CUDA_SHAPES (the PTX pane's launch geometry) are launch_fitting's in
    quantize.cu: (most packs, threads) in the same order."""
    import re

    from workbench.kernels.quantize import CU_FILE, CUDA_SHAPES

    body = CU_FILE.read_text().split("static bool launch_fitting", 1)[1].split("return true;", 1)[0]
    shapes = [(int(p), int(t)) for p, t in re.findall(r"packs <= (\d+)\) launch_vec<(\d+),", body)]
    assert shapes == list(CUDA_SHAPES), shapes


@pytest.mark.slow  # runs nvcc
def test_quantize_cu_reads_16_bytes_and_stores_paired_satfinite_fp8(tmp_path):
    """The register kernel's PTX: 16-byte loads, the paired saturating conversions of both kinds,
    8-byte stores, and no per-element IEEE division (div.rn.f32 is there once a thread: 1 / s)."""
    import re
    import subprocess

    from workbench.kernels.quantize import CU_FILE
    from workbench.machine import find_nvcc

    nvcc = find_nvcc()
    if nvcc is None:
        pytest.skip("nvcc not found (CUDA toolkit not installed)")
    out = tmp_path / "quantize.ptx"
    proc = subprocess.run([nvcc, "-ptx", "-arch=sm_90", "-O3", str(CU_FILE), "-o", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    entries = re.split(r"\.entry\s+", out.read_text())[1:]
    vec = {e.split("(", 1)[0]: e for e in entries if e.startswith("_Z24quantize_rows_vec_kernelILi256ELi4E")}
    assert len(vec) == 2, list(vec)  # e4m3 and e5m2
    for name, body in vec.items():
        kind = "e5m2" if "Lb1E" in name else "e4m3"
        assert body.count("ld.global.nc.v4") == 4 and body.count(f"cvt.rn.satfinite.{kind}x2.f32") == 17, name
        assert body.count("st.global.v2") == 4 and body.count("div.rn.f32") <= 2, name


# -- PTX: fp8 tensor-core instructions counted and named ---------------------------------------
def test_fp8_mma_counted_in_ptx_and_named_in_the_notes():
    from workbench.ptx.counts import count_instructions

    ptx = """
    wgmma.fence.sync.aligned;
    wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3 {%r1}, %rd1, %rd2, %p1, 1, 1;
    wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {%r1}, %rd1, %rd2, %p1, 1, 1, 0, 1;
    mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e5m2.f32 {%f1}, {%r1}, {%r2}, {%f2};
    """
    counts = count_instructions(ptx)
    assert (counts["wgmma"], counts["wgmma_fp8"], counts["mma"], counts["mma_fp8"]) == (3, 1, 1, 1)
    assert "wgmma_fp8" not in count_instructions("wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {%r1};")


@pytest.mark.slow  # Triton's ahead-of-time compile runs ptxas
def test_triton_scaled_mm_emits_fp8_wgmma_for_sm90():
    from sm90_aot import compile_sm90
    from workbench.kernels.scaled_mm import CANDIDATES, H100_CANDIDATES, _KEYS, _launch_of
    from workbench.ptx.counts import count_instructions

    op = REGISTRY.op("scaled_mm")
    for rowwise in (0, 1):
        spec = op.make_spec({"M": 4096, "N": 4096, "K": 4096, "rowwise": rowwise})
        for config, tma in ((CANDIDATES[90][0], True), (H100_CANDIDATES[-1], False)):
            compiled = compile_sm90(_launch_of(spec, dict(zip(_KEYS, config))))
            ptx = compiled.asm["ptx"]
            counts = count_instructions(ptx)
            assert counts["wgmma_fp8"] > 0 and ".e4m3.e4m3" in ptx, counts
            assert ("cp.async.bulk.tensor" in ptx) == tma, config  # the TMA kernel's loads, not the pointer kernel's
            assert compiled.metadata.shared <= 227 * 1024, (config, compiled.metadata.shared)


def test_scaled_mm_tma_configs_fall_back_to_the_pointer_kernel_where_tma_cannot_go():
    from workbench.kernels.scaled_mm import CANDIDATES, _KEYS, _launch_of, _scaled_mm_kernel, _scaled_mm_tma_kernel

    op = REGISTRY.op("scaled_mm")
    config = dict(zip(_KEYS, CANDIDATES[90][0]))
    assert config["TMA"] == 1
    fits = _launch_of(op.make_spec({"M": 1100, "N": 4096, "K": 4096}), config, sms=132)  # 9 x 16 tiles
    assert fits.kernel is _scaled_mm_tma_kernel and fits.grid == (132, 1, 1)  # persistent: one program an SM
    few = _launch_of(op.make_spec({"M": 128, "N": 512, "K": 4096}), config, sms=132)
    assert few.grid == (2, 1, 1) and few.constexprs["NUM_PROGRAMS"] == 2  # no more programs than tiles
    for shape in ({"M": 64, "N": 4096, "K": 100}, {"M": 64, "N": 1000 + 4, "K": 4096}):  # K % 16, N % 8
        assert _launch_of(op.make_spec(shape), config).kernel is (
            _scaled_mm_tma_kernel if shape["N"] % 8 == 0 and shape["K"] % 16 == 0 else _scaled_mm_kernel)
    assert _launch_of(op.make_spec({"M": 64, "N": 4095, "K": 4096}), config).kernel is _scaled_mm_kernel


_TMA_UNDER_THE_INTERPRETER = """
import torch
from workbench.registry import discover
from workbench.kernels.scaled_mm import reference, runner
op = discover().op("scaled_mm")
for rowwise in (0, 1):
    spec = op.make_spec({"M": 100, "N": 136, "K": 160, "rowwise": rowwise})  # tails in M, N and K
    inputs = op.make_inputs(spec, "cpu", 0)
    tile = dict(BLOCK_M=32, BLOCK_N=64, BLOCK_K=32, GROUP_M=2, num_warps=4, num_stages=1)
    pointer = runner(spec, dict(tile, TMA=0, SUBTILE=0))(*inputs)
    for sub in (0, 1):
        tma = runner(spec, dict(tile, TMA=1, SUBTILE=sub), sms=3)(*inputs)
        assert torch.equal(tma, pointer), (rowwise, sub, (tma.float() - pointer.float()).abs().max())
    ref = reference(*(t.double() for t in inputs))
    assert (pointer.double() - ref).abs().max() < 2 ** -7 * ref.abs().max(), rowwise
print("ok")
"""


@pytest.mark.slow  # an interpreter child (TRITON_INTERPRET is read when the op files are imported)
def test_scaled_mm_tma_kernel_matches_the_pointer_kernel_under_the_interpreter():
    import os
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", _TMA_UNDER_THE_INTERPRETER], capture_output=True, text=True,
                          timeout=600, env={**os.environ, "TRITON_INTERPRET": "1"})
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-3000:]


def test_a_session_asking_fp8_of_an_op_that_does_not_declare_it_names_the_allowed_dtypes(tmp_path):
    from workbench.session.api import SessionError, load_session

    path = tmp_path / "bad.yaml"
    path.write_text("schema_version: 1\nname: x\nruns: [{op: gelu, dtype: float8_e4m3fn}, "
                    "{op: scaled_mm, dtype: float8_e4m3fn}, {op: matmul, dtype: e4m3}]\n")
    with pytest.raises(SessionError) as info:
        load_session(path)
    text = str(info.value)
    assert 'gelu does not take dtype "float8_e4m3fn"; allowed: float32, float16, bfloat16' in text, text
    assert "runs[1]" not in text and 'write "float8_e4m3fn"' in text, text


def test_scaled_mm_tile_lists_per_device():
    from workbench.kernels.scaled_mm import CANDIDATES, GPU_LISTS, H100_CANDIDATES, _KEYS, candidates

    h100 = GPU_LISTS.select("NVIDIA H100 80GB HBM3 sm_90")[1]
    assert h100 == [dict(zip(_KEYS, c)) for c in H100_CANDIDATES] and set(H100_CANDIDATES) <= set(CANDIDATES[90])
    assert h100[0]["TMA"] == 1 and any(c["TMA"] == 0 for c in h100)  # TMA first, a pointer config kept
    assert len(GPU_LISTS.select("NVIDIA H200 sm_90")[1]) == len(CANDIDATES[90])  # not measured there yet
    generic = GPU_LISTS.select("NVIDIA L4 sm_89")[1]
    assert generic[0]["BLOCK_N"] == CANDIDATES[89][0][1] and not any(c["TMA"] for c in generic)  # no TMA on Ada
    assert candidates(CPU)[0]["BLOCK_M"] == 32  # the interpreter's small tile, nothing timed


@pytest.mark.parametrize("rowwise", [0, 1])
def test_padding_for_cublaslt_leaves_the_product_unchanged(rowwise):
    from workbench.kernels.scaled_mm import pad_for_cublaslt, torch_scaled_mm

    op = REGISTRY.op("scaled_mm")
    inputs = op.make_inputs(op.make_spec({"M": 5, "N": 30, "K": 37, "rowwise": rowwise}), "cpu", 0)
    a, b, sa, sb, (m, n) = pad_for_cublaslt(*inputs)
    assert a.shape == (5, 48) and b.shape == (48, 32) and b.stride(0) == 1 and (m, n) == (5, 30)
    assert torch.equal(torch_scaled_mm(a, b, sa, sb)[:, :n], torch_scaled_mm(*inputs))
