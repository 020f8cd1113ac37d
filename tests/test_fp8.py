"""fp8 (issue 43): the dtypes, their tolerance terms, the datasheet's fp8 peaks, `scaled_mm`'s
implementations against the float64 reference of the dequantised inputs, and the known-wrong fp8
implementations failing the check on CPU."""

from __future__ import annotations

import pytest
import torch

from workbench.backends.base import Action
from workbench.datasheet import peaks_for
from workbench.dtypes import STANDARD_DTYPES, DType
from workbench.engine.ceilings import compute_key
from workbench.errors import UnknownNameError
from workbench.machine import Machine
from workbench.registry import BuildContext, discover
from workbench.tolerance import FP8_MAX, UNIT_ROUNDOFF, overflow_threshold, tolerance
from workbench.verify import RowCheck

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
