"""Backends as registered objects (workbench/backends/): kinds, availability, kernel sources, the
first API's fields, a backend added as one module, and the CuPy backend off its GPU box."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from workbench.backends import base
from workbench.dtypes import DType
from workbench.errors import UnknownNameError, WorkbenchError
from workbench.kernel_source import CudaSource, TritonLaunch, TritonSource
from workbench.machine import Machine, find_nvcc, unavailable_reason
from workbench.registry import Op, Registry, discover, parse_impl_name
from workbench.spec import Spec

CPU = Machine(has_cuda=False, device_name=None, nvcc="/usr/local/bin/nvcc", triton=True, ninja=True)
GPU = Machine(has_cuda=True, device_name="NVIDIA H200", nvcc="/usr/local/bin/nvcc", triton=True, ninja=True)


@dataclass(frozen=True)
class _Spec(Spec):
    M: int = 4
    N: int = 4
    dtype: DType = DType.float32


def _op(name: str = "toy_op") -> Op:
    return Op(name, _Spec, registry=Registry())


def _noop(spec, params, ctx):
    return None


def test_builtin_kinds_are_registered_backends():
    assert base.kinds()[:5] == ["manual", "pytorch", "compiled", "cuda", "triton"]
    assert "cupy" in base.kinds()
    with pytest.raises(WorkbenchError, match="kind one of: manual, pytorch"):
        parse_impl_name("helion_fast")
    with pytest.raises(UnknownNameError):
        base.backend("helion")


def test_availability_is_the_backends_answer():
    registry = discover()
    gelu, matmul = registry.op("gelu"), registry.op("matmul")
    assert unavailable_reason(gelu.get_impl("cuda"), "bench", CPU) == "needs a CUDA GPU (none here)"
    assert unavailable_reason(gelu.get_impl("cuda"), "ptx", CPU) is None  # nvcc is enough for PTX
    no_nvcc = Machine(has_cuda=True, device_name="x", nvcc=None, triton=True, ninja=True)
    assert unavailable_reason(gelu.get_impl("cuda"), "ptx", no_nvcc) == "nvcc not found (needed for CUDA PTX)"
    assert unavailable_reason(gelu.get_impl("cuda"), "check", no_nvcc) == "nvcc not found (load_inline needs it)"
    assert "interpreter cannot run bfloat16" in unavailable_reason(matmul.get_impl("triton"), "check", CPU, DType.bfloat16)
    assert unavailable_reason(matmul.get_impl("triton"), "check", GPU, DType.bfloat16) is None
    no_triton = Machine(has_cuda=True, device_name="x", nvcc=None, triton=False, ninja=True)
    assert unavailable_reason(gelu.get_impl("triton"), "ptx", no_triton) == "Triton is not installed"
    assert unavailable_reason(gelu.get_impl("pytorch"), "bench", CPU) is None


def test_legacy_fields_become_source():
    """Plugins written against triton_launch= / interpreter_dtypes= / cuda_source= keep working."""
    op = _op()
    launch = lambda spec, params: None  # noqa: E731
    op.impl("triton", needs=["triton"], triton_launch=launch, interpreter_dtypes=["float16"])(_noop)
    cu = CudaSource(Path("x.cu"), ("k",))
    op.impl("cuda", needs=["cuda_device", "nvcc"], cuda_source=cu)(_noop)
    triton = op.get_impl("triton")
    assert triton.source == TritonSource(launch, (DType.float16,))
    assert op.get_impl("cuda").source is cu
    assert "interpreter cannot run float32" in unavailable_reason(triton, "check", CPU, DType.float32)


def test_bad_sources_name_the_field():
    op = _op()
    with pytest.raises(WorkbenchError, match="source= must be a TritonSource for kind 'triton', got CudaSource"):
        op.impl("triton_x", source=CudaSource(Path("x.cu"), ("k",)))(_noop)
    with pytest.raises(WorkbenchError, match="give source= only"):
        op.impl("triton_y", source=TritonSource(None), triton_launch=lambda s, p: None)(_noop)
    with pytest.raises(WorkbenchError, match="kind 'pytorch' takes no source=, got TritonSource"):
        op.impl("pytorch", source=TritonSource(None))(_noop)


def test_a_backend_is_one_module_of_decorated_functions(monkeypatch, tmp_path):
    """A plugin's kind: registered by creating it, answered by its functions, asked by everyone."""
    monkeypatch.setattr(base, "_BACKENDS", dict(base._BACKENDS))  # this test's kind leaves with it
    toy = base.Backend("toy", "a toy backend", source_type=CudaSource, needs={"cuda_device"}, ptx_needs={"nvcc"})
    watched = []

    @toy.reason
    def _no_toys(impl, action, machine, dtype, device):
        return None if action is base.Action.ptx else "toys are not installed"

    @toy.watcher
    def _watch():
        watched.append(1)
        return "a watcher"

    op = _op()
    cu = tmp_path / "toy.cu"
    cu.write_text('extern "C" __global__ void toy_kernel(float* x) { x[threadIdx.x] += 1.0f; }\n')
    op.impl("toy_fast", source=CudaSource(cu, ("toy_kernel",), launch=lambda s, p: ((1, 1, 1), 32)))(_noop)
    impl = op.get_impl("toy_fast")
    assert impl.kind == "toy" and impl.backend is toy and base.Need.cuda_device in impl.needs
    assert unavailable_reason(impl, "bench", CPU) == "needs a CUDA GPU (none here)"
    assert unavailable_reason(impl, "bench", GPU) == "toys are not installed"
    assert impl.backend.watch() == "a watcher" and watched == [1]
    from workbench.ptx.extract import launch_record, ptx_record
    assert launch_record(op, impl, op.make_spec(), sm_count=132)["block_threads"] == 32
    if find_nvcc() is not None:
        record, _ = ptx_record(op, impl, op.make_spec(), cache_dir=tmp_path / "nvcc")
        assert record["source"] == "nvcc" and [k["name"] for k in record["kernels"]] == ["toy_kernel"]


def test_cupy_is_unavailable_here_with_its_reason_and_its_ptx_comes_from_nvcc(tmp_path, monkeypatch):
    from workbench.backends import cupy as cupy_backend
    add = discover().op("add")
    impl = add.get_impl("cupy")
    assert impl.supports(DType.float32) and not impl.supports(DType.float16)
    assert unavailable_reason(impl, "bench", CPU) == "needs a CUDA GPU (none here)"
    monkeypatch.setattr(cupy_backend, "cupy_installed", lambda: False)
    assert unavailable_reason(impl, "bench", GPU) == cupy_backend.INSTALL_HINT
    assert unavailable_reason(impl, "ptx", CPU) is None
    if find_nvcc() is None:
        pytest.skip("nvcc not found")
    from workbench.ptx.extract import ptx_record
    record, texts = ptx_record(add, impl, add.make_spec({"M": 64, "N": 64}), cache_dir=tmp_path)
    (kernel,) = record["kernels"]
    assert record["source"] == "nvcc" and kernel["name"] == "add_f32_kernel"
    assert kernel["counts"]["ld_global_v4"] > 0 and kernel["counts"]["st_global_v4"] > 0


@pytest.mark.slow
def test_backends_and_sources_describe_themselves_without_torch():
    code = ("import json, sys\n"
            "import workbench.backends as b, workbench.kernel_source as k\n"
            "assert 'torch' not in sys.modules, 'torch imported'\n"
            "print(json.dumps(b.describe_all()))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    kinds = {b["kind"]: b for b in json.loads(out.stdout)}
    assert kinds["cuda"]["source"] == "CudaSource" and kinds["triton"]["interpreter"] == "Triton interpreter"


def test_impls_describe_themselves_as_plain_data():
    for op in discover().ops.values():
        for impl in op.impls.values():
            described = json.loads(json.dumps(impl.describe()))
            assert described["kind"] == impl.kind and described["name"] == impl.name
            if isinstance(impl.source, TritonSource):
                assert described["source"]["type"] == "triton"


def test_triton_launch_run_binds_tensors_to_pointers_in_order():
    calls = []

    class _Kernel:
        __name__ = "k"

        def __getitem__(self, grid):
            return lambda **kwargs: calls.append((grid, kwargs))

    launch = TritonLaunch(_Kernel(), {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"},
                          {"BLOCK": 64}, (2, 1, 1), num_warps=2, scalars={"n": 128})
    launch.run("X", "Y")
    assert calls == [((2, 1, 1), {"x_ptr": "X", "y_ptr": "Y", "n": 128, "BLOCK": 64, "num_warps": 2, "num_stages": 3})]
    with pytest.raises(WorkbenchError, match="1 tensors for 2 pointer arguments"):
        launch.run("X")
