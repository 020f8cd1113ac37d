"""The check's tolerances (workbench.check.tolerance) on synthesised outputs: right results pass, wrong
ones fail in every dtype at large K, and no term grows to 1 (MEASUREMENT.md rule 6)."""

from __future__ import annotations

import math

import pytest
import torch

from workbench.check.compare import compare
from workbench.check.tolerance import (ACCUMULATION_ULPS, FP32_UNIT_ROUNDOFF, UNIT_ROUNDOFF, overflow_threshold,
                                 tolerance)

HALF = ("float16", "bfloat16")


def test_elementwise_tolerance_is_a_few_ulps_of_the_dtype():
    for dtype, u in UNIT_ROUNDOFF.items():
        tol = tolerance(dtype)
        assert 2 * u <= tol.rtol <= 2 * u + 17 * FP32_UNIT_ROUNDOFF
        assert u <= tol.norm_rtol <= u + 17 * FP32_UNIT_ROUNDOFF
        assert tol.atol_rms <= 16 * FP32_UNIT_ROUNDOFF


@pytest.mark.parametrize("dtype", list(UNIT_ROUNDOFF))
def test_no_tolerance_grows_to_one(dtype):
    """The old rtol grew with sqrt(K) and reached 1 at K ~ 3900 in bfloat16 (all-zeros passed)."""
    for k in (2 ** 12, 2 ** 16, 2 ** 24, 2 ** 30):
        tol = tolerance(dtype, reduction_length=k, sum_length=k)
        # fp8's own rounding is 2^-4 (e4m3) or 2^-3 (e5m2): its rtol is 2 u, still far below 1
        assert tol.rtol < max(0.05, 2.5 * UNIT_ROUNDOFF[dtype]) and tol.norm_rtol < 0.5 and tol.atol_rms < 0.5, (k, tol)
        assert tol.rtol == tolerance(dtype, sum_length=k).rtol  # K never touches rtol


def test_the_accumulation_term_is_absolute_and_scales_with_rms():
    tol = tolerance("float32", reduction_length=16384)
    assert tol.atol_rms == pytest.approx((16 + ACCUMULATION_ULPS * 128) * FP32_UNIT_ROUNDOFF)
    # H200, cuBLAS float32 IEEE at M = N = K = 16384: max error 4.8 * u * K with rms(ref) = sqrt(K)
    assert tol.atol(ref_rms=128.0) > 3 * 4.8 * FP32_UNIT_ROUNDOFF * 16384


def test_a_declared_factor_never_touches_the_output_rounding_term():
    base, wide = tolerance("bfloat16"), tolerance("bfloat16", factor=4096)
    assert wide.rtol - base.rtol == pytest.approx(4095 * 16 * FP32_UNIT_ROUNDOFF)
    assert wide.rtol == pytest.approx(3 * UNIT_ROUNDOFF["bfloat16"])  # 4096 x 16 u_f32 = u_bf16
    with pytest.raises(ValueError, match=">= 1"):
        tolerance("float32", factor=0.5)


def _product(k: int, dtype: torch.dtype, m: int = 48, n: int = 40, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    a = torch.randn(m, k, generator=gen).to(dtype)
    b = torch.randn(k, n, generator=gen).to(dtype)
    ref = a.double() @ b.double()
    return a, b, ref


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("k", [4096, 8192, 16384])
def test_half_matmul_at_large_k_rejects_zeros_and_half_and_keeps_right_results(dtype, k):
    a, b, ref = _product(k, getattr(torch, dtype), m=64, n=64)
    tol = tolerance(dtype, reduction_length=k)
    right = (a.float() @ b.float()).to(getattr(torch, dtype))          # float32 accumulation, one rounding
    assert compare(right, ref, tol).passed, compare(right, ref, tol)
    assert compare(ref.to(getattr(torch, dtype)), ref, tol).passed       # correctly rounded
    for wrong in (torch.zeros_like(right), 0.5 * right):
        report = compare(wrong, ref, tol)
        assert not report.passed and report.gate == "elementwise+norm-wise", report
        assert report.first_bad_index is not None and "gate" in report.detail


def _tf32(x: torch.Tensor) -> torch.Tensor:
    """Round float32 to TF32's 10 mantissa bits (round to nearest, ties away), as tensor cores read it."""
    bits = x.float().contiguous().view(torch.int32)
    rounded = (bits + (1 << 12)) & ~((1 << 13) - 1)
    return rounded.view(torch.float32)


@pytest.mark.parametrize("k", [1024, 8192])
def test_ieee_float32_passes_and_tf32_fails_the_float32_check(k):
    a, b, ref = _product(k, torch.float32)
    tol = tolerance("float32", reduction_length=k)
    assert compare(a @ b, ref, tol).passed                     # IEEE float32 on the CPU
    tf32 = (_tf32(a).double() @ _tf32(b).double()).float()     # TF32 inputs, exact accumulation
    report = compare(tf32, ref, tol)
    assert not report.passed, report
    assert compare(tf32, ref, tolerance("float32", tf32=True, reduction_length=k)).passed
    assert math.isfinite(report.max_abs_err)


def test_bf16_gelu_clipped_to_zero_below_minus_2_5_is_rejected():
    """Issue 11: the old atol of 1.6e-2 let a GeLU returning 0 for every x < -2.5 pass."""
    from workbench.kernels.gelu import reference_tanh

    gen = torch.Generator().manual_seed(0)
    x = (3.0 * torch.randn(64, 4096, generator=gen)).to(torch.bfloat16)
    ref = reference_tanh(x.double())
    right = ref.to(torch.bfloat16)
    clipped = torch.where(x < -2.5, torch.zeros_like(right), right)
    assert compare(right, ref, tolerance("bfloat16")).passed
    report = compare(clipped, ref, tolerance("bfloat16"))
    assert not report.passed and report.gate == "elementwise", report
    assert float(x.reshape(-1)[_flat(report.first_bad_index, x.shape)]) < -2.5


def _flat(index, shape) -> int:
    return index[0] * shape[1] + index[1]


# -- NaN and inf (workbench.check.compare's docstring) -------------------------------------------------
def test_matching_nan_and_inf_pass_and_zero_signs_are_equal():
    ref = torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0, 1.0], dtype=torch.float64)
    out = torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0, 1.0], dtype=torch.float32)
    report = compare(out, ref, tolerance("float32"))
    assert report.passed and report.max_abs_err == 0.0 and report.max_rel_err == 0.0, report


@pytest.mark.parametrize("got", [float("nan"), float("inf"), 3.0])
def test_a_nonfinite_mismatch_fails_with_an_unbounded_error(got):
    ref = torch.tensor([1.0, 2.0, float("inf") if got == 3.0 else 3.0], dtype=torch.float64)
    out = torch.tensor([1.0, 2.0, got], dtype=torch.float32)
    report = compare(out, ref, tolerance("float32"))
    assert not report.passed and report.first_bad_index == [2] and report.nonfinite_mismatches == 1
    assert report.max_abs_err == math.inf and "NaN/inf mismatches" in report.detail


def test_a_reference_beyond_the_dtype_range_expects_inf():
    assert overflow_threshold("float16") == 65520.0
    ref = torch.tensor([65519.0, 65520.0, -70000.0], dtype=torch.float64)
    right = torch.tensor([65504.0, float("inf"), -float("inf")], dtype=torch.float16)
    assert compare(right, ref, tolerance("float16")).passed
    clamped = torch.tensor([65504.0, 65504.0, -65504.0], dtype=torch.float16)
    assert not compare(clamped, ref, tolerance("float16")).passed


def test_fp8_tensor_core_accumulation_widens_the_elementwise_term_only():
    """An op with fp8 inputs sums its K products in about 14 bits on Hopper's tensor cores
    (FP8_MMA_UNIT_ROUNDOFF); the norm-wise gate keeps float32's accumulation term."""
    from workbench.check.tolerance import FP8_MMA_UNIT_ROUNDOFF, tolerance

    plain = tolerance("bfloat16", reduction_length=4096)
    fp8 = tolerance("bfloat16", reduction_length=4096, accumulation_u=FP8_MMA_UNIT_ROUNDOFF)
    assert fp8.atol_rms > 100 * plain.atol_rms
    assert fp8.norm_rtol == plain.norm_rtol and fp8.rtol == plain.rtol
    assert tolerance("bfloat16", accumulation_u=FP8_MMA_UNIT_ROUNDOFF) == tolerance("bfloat16")  # no K: nothing
