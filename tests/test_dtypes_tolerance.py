"""The check's tolerance for matmul-like ops: IEEE float32 passes at large K, TF32 does not (P9)."""

from __future__ import annotations

import math

import pytest
import torch

from workbench.checking import compare
from workbench.dtypes import ACCUMULATION_ULPS, BASE_TOLERANCE, FP32_UNIT_ROUNDOFF, DType, tolerance


def test_elementwise_ops_keep_the_rule_6_tolerance():
    assert tolerance(DType.float32) == BASE_TOLERANCE["float32"]
    assert tolerance(DType.float16, reduction_length=1) == BASE_TOLERANCE["float16"]


def test_matmul_tolerance_grows_with_sqrt_k_plus_the_accumulation_term():
    tol = tolerance(DType.float32, reduction_length=16384)
    assert tol.rtol == pytest.approx(1.3e-6 * 128)
    assert tol.atol == pytest.approx(1e-5 * 128 + ACCUMULATION_ULPS * FP32_UNIT_ROUNDOFF * 16384)
    # the H200 case that failed before: cuBLAS IEEE max error 4.72e-3 at K = 16384
    assert tol.atol > 4.72e-3 * 2


def _tf32(x: torch.Tensor) -> torch.Tensor:
    """Round float32 to TF32's 10 mantissa bits (round to nearest, ties away), as tensor cores read it."""
    bits = x.float().contiguous().view(torch.int32)
    rounded = (bits + (1 << 12)) & ~((1 << 13) - 1)
    return rounded.view(torch.float32)


@pytest.mark.parametrize("k", [1024, 8192])
def test_ieee_float32_passes_and_tf32_fails_the_float32_check(k):
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(48, k, generator=gen)
    b = torch.randn(k, 40, generator=gen)
    ref = a.double() @ b.double()
    tol = tolerance(DType.float32, reduction_length=k)
    assert compare(a @ b, ref, tol).passed                     # IEEE float32 on the CPU
    tf32 = (_tf32(a).double() @ _tf32(b).double()).float()     # TF32 inputs, exact accumulation
    report = compare(tf32, ref, tol)
    assert not report.passed, report
    assert compare(tf32, ref, tolerance(DType.float32, tf32=True, reduction_length=k)).passed
    assert math.isfinite(report.max_abs_err)
