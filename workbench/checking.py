"""Correctness against a float64 reference (MEASUREMENT.md, rule 6)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

from workbench.dtypes import Tolerance


@dataclass(frozen=True)
class CheckReport:
    """The `check` record of a result (CONTRACTS.md).

    passed: every element within atol + rtol*|ref| and no NaN/Inf mismatch;
    max_abs_err, max_rel_err: over all elements (rel against |ref|, zeros excluded);
    rel_l2_err: ||out - ref|| / ||ref||; first_bad_index: row-major index tuple of the
    first failing element, or None.
    """

    passed: bool
    max_abs_err: float
    max_rel_err: float
    rel_l2_err: float
    first_bad_index: list[int] | None
    atol: float
    rtol: float
    detail: str | None = None

    def as_dict(self) -> dict:
        data = asdict(self)
        data.pop("detail")
        return data


def compare(out: torch.Tensor, ref: torch.Tensor, tol: Tolerance) -> CheckReport:
    """Compare `out` (any float dtype) to `ref` (float64) elementwise on out's device.

    Raises nothing for a mismatch; a shape mismatch is a failed report saying both shapes.
    """
    if tuple(out.shape) != tuple(ref.shape):
        return CheckReport(False, float("inf"), float("inf"), float("inf"), None, tol.atol, tol.rtol,
                           detail=f"shape {tuple(out.shape)} != reference {tuple(ref.shape)}")
    got = out.detach().to(device=ref.device, dtype=torch.float64)
    diff = (got - ref).abs()
    bad = ~(diff <= tol.atol + tol.rtol * ref.abs())  # NaN compares false, so it is bad
    bad |= got.isnan() != ref.isnan()
    finite = torch.isfinite(diff)
    max_abs = float(diff[finite].max()) if bool(finite.any()) else 0.0
    if not bool(finite.all()):
        max_abs = float("inf")
    nonzero = ref.abs() > 0
    max_rel = float((diff[nonzero & finite] / ref.abs()[nonzero & finite]).max()) if bool((nonzero & finite).any()) else 0.0
    ref_norm = float(torch.linalg.vector_norm(ref))
    err_norm = float(torch.linalg.vector_norm(torch.where(finite, diff, torch.zeros_like(diff))))
    rel_l2 = err_norm / ref_norm if ref_norm > 0 else err_norm
    if not bool(finite.all()):
        rel_l2 = float("inf")
    first = None
    if bool(bad.any()):
        flat = int(torch.nonzero(bad.reshape(-1))[0])
        first = [int(i) for i in torch.unravel_index(torch.tensor(flat), bad.shape)]
    return CheckReport(not bool(bad.any()), max_abs, max_rel, rel_l2, first, tol.atol, tol.rtol)
