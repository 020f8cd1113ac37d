"""Every shipped (op, implementation, test spec, dtype) against the float64 reference of its math
variant (MEASUREMENT.md rule 6), generated from the registry; this file runs the ones that need
no Triton (manual, pytorch, compiled, cuda), in this process. Triton: test_ops_triton.py.

`compiled` runs at each op's first test spec only (a CPU Inductor compile takes ~1 s).
Skips name their reason (`workbench.machine.unavailable_reason`: no GPU, no nvcc, ...).
"""

from __future__ import annotations

import pytest
import torch

from op_cases import Case, correctness_cases, describe, layout_cases, run_case
from workbench.dtypes import DType
from workbench.machine import probe, unavailable_reason
from workbench.registry import discover

REGISTRY = discover()
MACHINE = probe()
DEVICE = "cuda" if MACHINE.has_cuda else "cpu"

EAGER_KINDS = ("manual", "pytorch", "cuda")
CASES = (correctness_cases(REGISTRY, EAGER_KINDS)
         + correctness_cases(REGISTRY, ("compiled",), first_spec_only=True))
LAYOUT_CASES = (layout_cases(REGISTRY, EAGER_KINDS)
                + layout_cases(REGISTRY, ("compiled",), layouts=("transposed",)))


def skip_reason(case: Case) -> str | None:
    impl = REGISTRY.op(case.op).get_impl(case.impl)
    return unavailable_reason(impl, "check", MACHINE, DType(case.dtype))


@pytest.fixture(autouse=True)
def fresh_dynamo():
    """Each compiled case compiles from scratch (no cache entries or recompile counts carried over)."""
    torch._dynamo.reset()
    yield


def check(case: Case) -> None:
    reason = skip_reason(case)
    if reason:
        pytest.skip(reason)
    result = run_case(REGISTRY, case, DEVICE)
    assert result["passed"], describe(result)


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_matches_reference(case: Case) -> None:
    check(case)


@pytest.mark.slow
@pytest.mark.parametrize("case", LAYOUT_CASES, ids=lambda c: c.id)
def test_noncontiguous_inputs(case: Case) -> None:
    """A transposed view or a strided slice gives the same result (never silently wrong)."""
    check(case)


def test_every_shipped_op_has_cases() -> None:
    ops_with_cases = {c.op for c in CASES}
    assert {"gelu", "softmax", "matmul", "matmul_gelu", "add", "cdist", "mlp", "sleep"} <= ops_with_cases
