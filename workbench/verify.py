"""Check one implementation against the float64 reference of its math variant (rule 6)."""

from __future__ import annotations

from typing import Any

import torch

from workbench.checking import CheckReport, compare
from workbench.dtypes import tolerance
from workbench.registry import BuildContext, Impl, Op
from workbench.spec import Spec


def uses_tf32(op: Op, spec: Spec, ctx: BuildContext) -> bool:
    """Whether float32 inputs of this op really run in TF32 (rule 7, P9)."""
    return op.matmul_like and ctx.fp32_precision == "tf32" and str(spec.dtype) == "float32"


def reference_output(op: Op, impl: Impl, inputs: tuple) -> torch.Tensor:
    """The float64 reference of impl's math variant, on the inputs' device."""
    upcast = tuple(t.to(torch.float64) if torch.is_tensor(t) and t.is_floating_point() else t for t in inputs)
    return op.reference_fn(impl.math)(*upcast)


def check_output(op: Op, impl: Impl, spec: Spec, ctx: BuildContext, inputs: tuple, out: Any) -> CheckReport:
    """Compare `out` with the reference computed from the same `inputs`."""
    tol = tolerance(spec.dtype, tf32=uses_tf32(op, spec, ctx),
                    reduction_length=op.reduction_length(spec) if op.reduction_length else None,
                    scale=impl.tolerance_scale)
    return compare(out, reference_output(op, impl, inputs), tol)

