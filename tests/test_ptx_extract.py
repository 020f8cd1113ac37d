"""ptx_record / launch_record end to end on CPU: Triton ahead-of-time for sm_90, nvcc for the `.cu`.

Compiles are shared at module scope (Triton's own cache makes repeats fast). Tiny test-local
Triton kernels (a row reduction, a bf16 tl.dot) prove shfl.sync and tensor-core detection
whatever ops are registered; the registry-driven tests then cover every shipped Triton and CUDA
implementation, so the lecture's softmax and matmul are checked as they land.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from workbench.dtypes import DType
from workbench.errors import UnavailableError
from workbench.kernel_source import CudaSource, TritonLaunch, TritonSource, triton_ptr
from workbench.machine import find_nvcc
from workbench.ptx.extract import NO_KERNEL_SOURCE, launch_record, ptx_record
from workbench.ptx.triton_aot import aot_compile, build_source, interpreter_active, resolve_target, specialisation
from workbench.registry import Op, Registry, discover
from workbench.spec import Spec
from workbench.triton_support import HAVE_TRITON, jit, tl

needs_triton = pytest.mark.skipif(not HAVE_TRITON, reason="Triton is not installed")
needs_compiled_triton = pytest.mark.skipif(
    HAVE_TRITON and interpreter_active(), reason="this process runs Triton interpreted (TRITON_INTERPRET=1)")
needs_nvcc = pytest.mark.skipif(find_nvcc() is None, reason="nvcc not found")


# -- test-local kernels and ops ---------------------------------------------------------------------
@jit
def _row_max_kernel(x_ptr, y_ptr, n_cols, BLOCK_N: tl.constexpr):
    """One program per row: the row's max (a reduction across the block's warps)."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=-float("inf"))
    tl.store(y_ptr + row, tl.max(x, axis=0))


@jit
def _dot_kernel(a_ptr, b_ptr, c_ptr, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """C tile = A tile @ B tile over K, row-major operands of leading dimension K / BLOCK_N."""
    rm = tl.arange(0, BLOCK_M)
    rn = tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * BLOCK_N + rn[None, :])
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * BLOCK_N + rn[None, :], acc)


@dataclass(frozen=True)
class _MNSpec(Spec):
    M: int = 64
    N: int = 1024
    dtype: DType = DType.float32


def _local_op(name: str, launch, *, matmul_like: bool = False) -> Op:
    op = Op(name, _MNSpec, registry=Registry(), matmul_like=matmul_like)
    op.impl("triton", source=TritonSource(launch))(lambda spec, params, ctx: None)
    op.impl("pytorch")(lambda spec, params, ctx: None)
    return op


def _row_max_launch(spec, params) -> TritonLaunch:
    ptr = triton_ptr(spec.dtype)
    return TritonLaunch(_row_max_kernel, {"x_ptr": ptr, "y_ptr": ptr, "n_cols": "i32", "BLOCK_N": "constexpr"},
                        {"BLOCK_N": spec.N}, (spec.M, 1, 1), num_warps=4, scalars={"n_cols": spec.N})


def _dot_launch(spec, params) -> TritonLaunch:
    ptr = triton_ptr(spec.dtype)
    return TritonLaunch(_dot_kernel, {"a_ptr": ptr, "b_ptr": ptr, "c_ptr": "*fp32", "K": "i32",
                                      "BLOCK_M": "constexpr", "BLOCK_N": "constexpr", "BLOCK_K": "constexpr"},
                        {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64}, (1, 1, 1), num_warps=4, num_stages=3,
                        scalars={"K": spec.N})


def _spec_for(op, impl):
    """The op's first test spec (else its default) in float32, or the first dtype both support."""
    dtypes = [d for d in op.dtypes if impl.supports(d)]
    dtype = DType.float32 if DType.float32 in dtypes else dtypes[0]
    return op.make_spec(op.test_specs[0] if op.test_specs else None, dtype)


@pytest.fixture(scope="module")
def registry():
    return discover()


@pytest.fixture(scope="module")
def gelu_triton(registry):
    op = registry.op("gelu")
    return ptx_record(op, "triton", op.make_spec({"M": 1024, "N": 1024}, "float32"), target="sm_90")


# -- Triton: GeLU, alignment, reduction, tensor cores -------------------------------------------------------
@needs_triton
@needs_compiled_triton
def test_gelu_triton_aot_has_vector_loads_and_stores(gelu_triton):
    record, texts = gelu_triton
    assert record["target"] == "sm_90" and record["source"] in ("aot", "launched")
    (kernel,) = record["kernels"]
    counts = kernel["counts"]
    assert counts["ld_global_total"] > 0 and counts["st_global_total"] > 0
    assert counts["ld_global_v4"] > 0 and counts["st_global_v4"] > 0, counts  # 16-byte, with the hints
    assert any(n.startswith("16-byte vector loads") for n in kernel["notes"])
    assert any(n.startswith("8 elements per thread: thread coarsening") for n in kernel["notes"])
    assert kernel["registers"] and kernel["spills"] == 0 and kernel["shared_bytes"] == 0
    assert texts[kernel["name"]]["ptx"].lstrip().startswith("//")
    assert all(texts[kernel["name"]][ir] for ir in ("ttir", "ttgir", "llir"))
    assert any(n.startswith("config: num_warps=4, num_stages=3, BLOCK_SIZE=1024") for n in record["notes"])


@needs_triton
@needs_compiled_triton
def test_gelu_triton_sass_where_cuobjdump_exists(gelu_triton):
    from workbench.ptx.tools import find_tool
    record, texts = gelu_triton
    (kernel,) = record["kernels"]
    if find_tool("cuobjdump") is None:
        assert texts[kernel["name"]]["sass"] is None and any("SASS" in n for n in record["notes"])
    else:
        assert kernel["sass_lines"] > 0 and kernel["sass_counts"]["LDG"] > 0
        assert "LDG.E.128" in texts[kernel["name"]]["sass"]


def _launch(op, impl_name, shape):
    impl = op.get_impl(impl_name)
    return impl.backend.kernel_source(impl, op.make_spec(shape), impl.resolve_params({}))


def _specialised(launch, target):
    build = build_source(launch, target)
    return specialisation(aot_compile(build), build.jit_fn)


@needs_triton
@needs_compiled_triton
def test_specialisation_mirrors_the_launch(registry):
    """Triton's own specialisation of the launch's arguments (read back from the compiled kernel)."""
    op, target = registry.op("gelu"), resolve_target("sm_90")
    assert _specialised(_launch(op, "triton", {"M": 64, "N": 64}), target)["divisible"] == [0, 1, 2]
    assert _specialised(_launch(op, "triton", {"M": 1, "N": 1000}), target)["divisible"] == [0, 1]  # 1000 % 16
    one = _local_op("one_row", _row_max_launch)
    built = _specialised(_row_max_launch(one.make_spec({"M": 1, "N": 1}), {}), target)
    assert built["signature"]["n_cols"] == "constexpr" and built["constexprs"]["n_cols"] == 1


@needs_triton
@needs_compiled_triton
def test_unaligned_length_gives_scalar_loads(registry):
    op = registry.op("gelu")
    record, _ = ptx_record(op, "triton", op.make_spec({"M": 1, "N": 1000}), target="sm_90")
    counts = record["kernels"][0]["counts"]
    assert counts["ld_global_v4"] == 0 and counts["ld_global"] > 0
    assert any(n.startswith("scalar loads") for n in record["kernels"][0]["notes"])


@needs_triton
@needs_compiled_triton
def test_row_reduction_uses_shfl_sync():
    op = _local_op("row_max", _row_max_launch)
    record, _ = ptx_record(op, "triton", op.make_spec({"M": 64, "N": 1024}), target="sm_90")
    counts = record["kernels"][0]["counts"]
    assert counts["shfl_sync"] > 0 and counts["bar_sync"] > 0  # in-warp shuffles, then across warps
    assert any(n.startswith("warp reduction through shfl.sync") for n in record["kernels"][0]["notes"])


@needs_triton
@needs_compiled_triton
def test_bf16_dot_uses_tensor_cores_on_sm90():
    op = _local_op("tiny_dot", _dot_launch, matmul_like=True)
    record, _ = ptx_record(op, "triton", op.make_spec({"M": 128, "N": 256}, "bfloat16"), target="sm_90")
    kernel = record["kernels"][0]
    assert kernel["counts"]["wgmma"] > 0, kernel["counts"]
    assert any(n.startswith("tensor cores: wgmma (Hopper)") for n in kernel["notes"])
    assert kernel["shared_bytes"] > 0  # operands staged through shared memory


@needs_triton
@needs_compiled_triton
def test_registered_triton_impls_give_ptx(registry):
    """Every Triton implementation of every registered op, at its first test spec."""
    seen = 0
    for op in registry.ops.values():
        for impl in op.impls.values():
            if not isinstance(impl.source, TritonSource):
                continue
            spec = _spec_for(op, impl)
            record, texts = ptx_record(op, impl, spec, target="sm_90")
            assert record["kernels"], (op.name, impl.name, record["notes"])
            assert record["kernels"][0]["counts"]["st_global_total"] > 0, (op.name, impl.name)
            if op.name == "softmax":
                assert record["kernels"][0]["counts"]["shfl_sync"] > 0, impl.name
            seen += 1
    assert seen >= 1


# -- CUDA through nvcc ---------------------------------------------------------------------------------
def _cu_files() -> list[Path]:
    import workbench.kernels as shipped
    return sorted(Path(shipped.__file__).parent.glob("*.cu"))


@needs_nvcc
@pytest.mark.parametrize("cu", _cu_files(), ids=lambda p: p.name)
def test_every_cu_compiles_to_ptx(cu, tmp_path_factory):
    from workbench.ptx.counts import split_kernels
    from workbench.ptx.nvcc import compile_cu
    from workbench.ptx.resources import parse_ptxas_log
    out = compile_cu(cu, "sm_90", cache_dir=tmp_path_factory.getbasetemp() / "nvcc")
    entries = split_kernels(out.ptx)
    assert entries and ".target sm_90" in out.ptx
    resources = parse_ptxas_log(out.ptxas_log)
    assert all(resources[e.name].registers for e in entries)


@needs_nvcc
def test_registered_cuda_impls_give_ptx(registry, tmp_path_factory):
    cache = tmp_path_factory.getbasetemp() / "nvcc"
    seen = 0
    for op in registry.ops.values():
        for impl in op.impls.values():
            if not isinstance(impl.source, CudaSource):
                continue
            record, texts = ptx_record(op, impl, _spec_for(op, impl), cache_dir=cache)
            assert record["source"] == "nvcc" and record["kernels"], (op.name, impl.name, record["notes"])
            for kernel in record["kernels"]:
                assert kernel["registers"] and kernel["resources_from"] == "ptxas -v"
                assert kernel["counts"]["ld_global_total"] + kernel["counts"]["ld_shared_total"] > 0
                assert texts[kernel["name"]]["ptx"].lstrip().startswith(".visible .entry")
            seen += 1
    assert seen >= 1


@needs_nvcc
def test_cuda_dtype_instantiation_is_chosen(registry, tmp_path):
    op = registry.op("gelu")
    record, _ = ptx_record(op, "cuda_naive", op.make_spec({"M": 4, "N": 4}, "bfloat16"),
                           cache_dir=tmp_path.parent / "nvcc")
    assert [k["name"] for k in record["kernels"]] == ["gelu_naive_kernel<__nv_bfloat16>"]


def test_no_nvcc_is_a_note(registry, monkeypatch, tmp_path):
    import workbench.ptx.nvcc as nvcc_mod
    monkeypatch.setattr(nvcc_mod, "find_nvcc", lambda: None)
    op = registry.op("gelu")
    record, texts = ptx_record(op, "cuda", op.make_spec({"M": 4, "N": 4}), cache_dir=tmp_path)
    assert record["kernels"] == [] and texts == {} and "nvcc not found" in record["notes"][0]


# -- kinds without kernel source, no GPU, interpreter ---------------------------------------------------------
def test_library_kernels_have_no_source(registry):
    for op in registry.ops.values():
        for impl in op.impls.values():
            if impl.backend.source_type is None:  # library kinds (pytorch, manual)
                record, texts = ptx_record(op, impl, _spec_for(op, impl))
                assert record["kernels"] == [] and texts == {} and record["notes"] == [NO_KERNEL_SOURCE]


def test_compiled_without_gpu_is_a_note(registry):
    import torch
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: Inductor kernels are collected (GPU evidence stage)")
    op = registry.op("gelu")
    record, _ = ptx_record(op, "compiled", op.make_spec({"M": 4, "N": 4}))
    assert record["source"] == "inductor" and record["kernels"] == []
    assert record["notes"] == ["Inductor does not cross-compile: needs a CUDA device"]


@needs_triton
def test_refuses_under_triton_interpret(registry, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    op = registry.op("gelu")
    with pytest.raises(UnavailableError, match="TRITON_INTERPRET"):
        ptx_record(op, "triton", op.make_spec({"M": 4, "N": 4}))


# -- launch record -------------------------------------------------------------------------------------------
def test_launch_record_from_the_declared_launch(registry, gelu_triton):
    op = registry.op("gelu")
    spec = op.make_spec({"M": 1024, "N": 1024})
    rec = launch_record(op, "triton", spec, sm_count=132, ptx=gelu_triton[0] if HAVE_TRITON else None)
    assert rec["grid"] == [1024, 1, 1] and rec["num_warps"] == 4 and rec["block_threads"] == 128
    assert rec["blocks_per_sm"] == 16 and rec["waves"] == pytest.approx(1024 / (132 * 16), abs=1e-3)
    assert any(n.startswith("1024 blocks >= 4 x 132 SMs") for n in rec["notes"])
    assert launch_record(op, "pytorch", spec) is None
    naive = launch_record(op, "cuda_naive", spec, sm_count=132)
    assert naive["block_threads"] == 1024 and naive["grid"] == [1024, 1, 1]
    assert any("registers and shared memory unknown" in n for n in naive["notes"])


# -- the ahead-of-time build is the launch's own compile ---------------------------------------------------
@needs_triton
@needs_compiled_triton
@pytest.mark.parametrize("shape", [{"M": 64, "N": 64}, {"M": 1, "N": 1000}, {"M": 1, "N": 1}])
def test_aot_build_has_the_launch_cache_key(registry, shape):
    """The builder's real call (CPU tensors, caught before the launch by Triton's jit_cache_hook
    under the stand-in driver) and the ahead-of-time compile reach the same JIT cache key and
    compile options: Triton computed both, so no private option list is copied."""
    import torch
    from triton import knobs
    from workbench.ptx import triton_aot as aot
    op, target = registry.op("gelu"), resolve_target("sm_90")
    impl = op.get_impl("triton")
    spec, params = op.make_spec(shape), impl.resolve_params({})
    seen = []

    def hook(*, key, compile, **_):
        seen.append((key, {k: v for k, v in compile.items() if k != "key" and "warmup" not in k}))
        return True  # stop before compiling (and before any launch)
    fn = impl.builder(spec, params, None)
    previous, knobs.runtime.jit_cache_hook = knobs.runtime.jit_cache_hook, hook
    try:
        with aot.stand_in_driver(target):
            aot.unwrap_jit(_launch(op, "triton", shape).kernel).device_caches.clear()
            fn(torch.randn(spec.M, spec.N))                                   # the run: real tensors
            build = build_source(_launch(op, "triton", shape), target)
            build.jit_fn.warmup(*build.args, grid=tuple(build.launch.grid), **build.kwargs)  # the AOT call
    finally:
        knobs.runtime.jit_cache_hook = previous
    assert len(seen) == 2 and seen[0][0] == seen[1][0], seen
    assert str(seen[0][1]) == str(seen[1][1])


class _FakeGpuDriver:
    """A driver for device 0 of an sm_90 GPU that never launches (warmup only): it stands in for
    the real one, so the JIT's own device cache fills as a real launch would fill it."""

    def get_current_device(self):
        return 0

    def get_current_stream(self, device=None):
        return 0

    def get_current_target(self):
        return resolve_target("sm_90")


@needs_triton
@needs_compiled_triton
def test_launched_kernel_is_reported_when_the_launch_compiled_it(registry, monkeypatch):
    """On a GPU of the target's arch the record is `source: launched` when the launch's own
    kernel is in the JIT cache (filled here through warmup on a fake device 0: a real launch
    needs a GPU), and `aot` with a note for another specialisation."""
    from collections import defaultdict
    from dataclasses import dataclass as _dc
    from triton.runtime.driver import driver
    from workbench.ptx import triton_aot as aot
    from workbench.ptx.triton_cache import launched_ptx
    op = registry.op("gelu")
    impl = op.get_impl("triton")
    spec = op.make_spec({"M": 32, "N": 32})
    build = build_source(_launch(op, "triton", {"M": 32, "N": 32}), resolve_target("sm_90"))
    monkeypatch.setattr(build.jit_fn, "device_caches", defaultdict(build.jit_fn.create_binder))
    monkeypatch.setattr(aot, "this_gpu_capability", lambda: 90)
    monkeypatch.setattr(driver, "_active", _FakeGpuDriver())
    compiled = build.jit_fn.warmup(*build.args, grid=tuple(build.launch.grid), **build.kwargs)  # "the launch"
    assert launched_ptx(build.jit_fn) == {compiled.hash: compiled.asm["ptx"]}

    @_dc(frozen=True)
    class _Gpu:
        has_cuda: bool = True
    record, _ = ptx_record(op, impl, spec, target="sm_90", machine=_Gpu())
    assert record["source"] == "launched" and record["kernels"][0]["hash"] == compiled.hash
    other = op.make_spec({"M": 1, "N": 1000})  # another specialisation: not this row's kernel
    record, _ = ptx_record(op, impl, other, target="sm_90", machine=_Gpu())
    assert record["source"] == "aot" and any("none with this launch's specialisation" in n for n in record["notes"])


BROKEN_PLUGIN = '''
from dataclasses import dataclass
from workbench.cost import Cost
from workbench.dtypes import DType
from workbench.kernel_source import TritonLaunch, TritonSource, triton_ptr
from workbench.registry import Op, Registry
from workbench.spec import Spec
from workbench.triton_support import jit, tl


@dataclass(frozen=True)
class CopySpec(Spec):
    N: int = 1024
    dtype: DType = DType.float32


OP = Op("aot_broken_copy", CopySpec, description="a copy whose kernel no longer compiles",
        registry=Registry())  # its own registry: the shipped one stays as the other tests expect


@jit
def _copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offsets, undefined_name + tl.load(x_ptr + offsets, mask=offsets < n), mask=offsets < n)


def _launch(spec, params):
    return TritonLaunch(kernel=_copy, grid=(spec.N // 256, 1, 1),
                        signature={"x_ptr": triton_ptr(spec.dtype), "y_ptr": triton_ptr(spec.dtype), "n": "i32",
                                   "BLOCK": "constexpr"}, constexprs={"BLOCK": 256}, scalars={"n": spec.N})


@OP.impl("triton", source=TritonSource(_launch))
def build(spec, params, ctx):
    return lambda x: x
'''


@needs_compiled_triton
def test_a_kernel_that_no_longer_compiles_says_where(tmp_path):
    """The watch loop's broken edit: the PTX record's note names the plugin's file and line."""
    path = tmp_path / "broken_copy.py"
    path.write_text(BROKEN_PLUGIN)
    import importlib.util

    module_spec = importlib.util.spec_from_file_location("aot_broken_copy_plugin", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    op = module.OP
    record, texts = ptx_record(op, "triton", op.make_spec({"N": 1024}), target="sm_90")
    line = BROKEN_PLUGIN.splitlines().index(next(t for t in BROKEN_PLUGIN.splitlines() if "undefined_name" in t)) + 1
    assert record["kernels"] == [] and texts == {}
    assert record["notes"][0].startswith(f"ahead-of-time compile failed at {path}:{line}: ")
    assert "undefined_name" in record["notes"][0]


@needs_triton
@needs_compiled_triton
def test_build_ahead_leaves_the_cubin_tool_outputs_the_ptx_view_reads(registry, tmp_path, monkeypatch):
    """engine/build_ahead.py's Triton prebuild runs cuobjdump and nvdisasm on the kernel's cubin
    into the PTX cache (ptx/record.cubin_tools); the row's PTX record then reads them there and
    runs no tool at all (the ~1 s a Triton row's PTX view waited on the H200)."""
    from workbench.engine.worker import build_ahead
    from workbench.ptx import tools
    from workbench.ptx.tools import find_tool

    if find_tool("cuobjdump") is None:
        pytest.skip("cuobjdump not found: no tool outputs to cache")
    op = registry.op("gelu")
    spec = op.make_spec({"M": 512, "N": 512}, "float32")
    impl = op.get_impl("triton")
    launch = impl.backend.kernel_source(impl, spec, impl.resolve_params({}))
    compiled = aot_compile(build_source(launch, resolve_target("sm_90")))
    assert build_ahead._triton_tool_outputs(compiled, tmp_path)
    cached = sorted(p.name for p in tmp_path.glob("triton-*/*"))
    assert "sass.txt" in cached and "res-usage.txt" in cached

    def no_tools(*args, **kwargs):
        raise AssertionError(f"a tool ran although its output was built ahead: {args[0]}")
    monkeypatch.setattr(tools, "run_tool", no_tools)
    record, texts = ptx_record(op, impl, spec, target="sm_90", cache_dir=tmp_path)
    (kernel,) = record["kernels"]
    assert kernel["sass_lines"] > 0 and "LDG.E.128" in texts[kernel["name"]]["sass"]
