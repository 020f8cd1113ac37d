"""Comparing an output with its float64 reference, chunk by chunk (MEASUREMENT.md rule 6).

The reference may be computed in chunks (workbench.check.row); each chunk of the output is compared
with its chunk of the reference on the output's device, in place and without boolean-mask
indexing (which would materialise int64 index tensors the size of the chunk), and the chunk's
statistics are accumulated. The elementwise gate's atol scales with rms(ref), known only after
the last chunk, so each chunk keeps max(|out - ref| - rtol*|ref|); the gate passes when no chunk's
maximum exceeds atol, and the first bad index is found by recomputing the first chunk that does.

Non-finite values (decided here, documented in docs/MEASUREMENT.md and docs/CONTRACTS.md):
- the expected value is the reference rounded to the output's dtype where that overflows: a
  reference at or beyond the dtype's overflow threshold expects +-inf (float16 65520 -> inf);
- NaN expected: the output must be NaN there; +-inf expected: the same signed inf;
- finite expected: the output must be finite and within tolerance; an inf or NaN there is an
  unbounded error (max_abs_err = inf) and counts in `nonfinite_mismatches`;
- -0 and +0 are equal. rms(ref) and the norms are taken over the finite expected values.
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass, field

import torch

from workbench.check.tolerance import MAX_EXPONENT, Tolerance, overflow_threshold


@dataclass(frozen=True)
class CheckReport:
    """The `check` record of a result (CONTRACTS.md).

    passed: every gate passed; gate: the first gate that failed ("shape", "dtype", "device",
    "inputs", "elementwise", "norm-wise", "elementwise+norm-wise"; rule 13: "ownership",
    "timed outputs", "strict": --strict's clean process could not judge), None when passed;
    input_set: the input set these numbers are from ("first", "special", "timed"): the failing
    one, else the first; sets_checked: every set checked, in order;
    max_abs_err, max_rel_err: over all elements (rel against |ref|, zeros excluded), inf for a
    non-finite mismatch; rel_l2_err: ||out - ref|| / ||ref|| over finite expected values;
    first_bad_index: index tuple of the first element failing the elementwise gate (row-major),
    or None; atol, rtol: the elementwise gate (atol resolved with ref_rms); norm_rtol: the
    norm-wise gate's bound; ref_rms: rms of the finite reference values; nonfinite_mismatches:
    elements where out and the expected value differ in NaN/inf; chunks: how many reference
    chunks were compared; detail: the one-line reason for a failed gate (not in the record dict;
    the row's `error` carries it).
    """

    passed: bool
    gate: str | None
    max_abs_err: float | None
    max_rel_err: float | None
    rel_l2_err: float | None
    first_bad_index: list[int] | None
    atol: float | None
    rtol: float | None
    norm_rtol: float | None
    ref_rms: float | None = None
    nonfinite_mismatches: int = 0
    chunks: int = 0
    input_set: str = "first"
    sets_checked: list[str] = field(default_factory=list)
    detail: str | None = None

    def as_dict(self) -> dict:
        data = asdict(self)
        data.pop("detail")
        return data


def gate_failure(gate: str, reason: str, tol: Tolerance | None = None, input_set: str = "first") -> CheckReport:
    """A report for a gate that failed before any value was compared (shape, dtype, device, inputs)."""
    return CheckReport(False, gate, None, None, None, None, None, tol.rtol if tol else None,
                       tol.norm_rtol if tol else None, input_set=input_set,
                       detail=f"{gate} gate ({input_set} inputs): {reason}")


@dataclass
class ChunkTotals:
    """Statistics accumulated over the chunks of one comparison (Python numbers, one sync per chunk)."""

    elements: int = 0
    finite: int = 0
    ref_sq: float = 0.0
    err_sq: float = 0.0
    max_abs: float = 0.0
    max_rel: float = 0.0
    mismatches: int = 0
    excess: list[tuple[int, float]] = field(default_factory=list)  # (chunk start, max excess)

    def add(self, start: int, out: torch.Tensor, ref: torch.Tensor, rtol: float) -> None:
        """Compare one chunk: `out` (any dtype) and `ref` (float64) of the same numel, flat
        index of their first element `start`. Neither tensor is modified. A CUDA chunk is
        compared in one Triton pass where it can be (check/compare_triton.py: the same
        statistics; `WORKBENCH_COMPARE=torch` keeps this path)."""
        if _one_pass(out, ref):
            from workbench.check.compare_triton import chunk_statistics

            name = str(out.dtype).removeprefix("torch.")
            try:
                stats = chunk_statistics(out.reshape(-1), ref.reshape(-1), rtol,
                                         overflow_threshold(name) if name in MAX_EXPONENT else None)
            except Exception as exc:  # noqa: BLE001 - Triton cannot build for this GPU: the torch path below
                _ONE_PASS_FAILED.append(f"{type(exc).__name__}: {exc}"[:300])
            else:
                self._add_statistics(start, out.numel(), stats)
                return
        err, absref, scratch, same, finite_ref, finite_got = _chunk_errors(out, ref)
        self.elements += err.numel()
        if err.numel() == 0:
            return
        self.finite += int(finite_ref.sum())
        self.mismatches += int(((~finite_ref | ~finite_got) & ~same).sum())
        torch.mul(err, err, out=scratch).masked_fill_(~finite_ref, 0.0)
        self.err_sq += float(scratch.sum())
        torch.mul(absref, absref, out=scratch).masked_fill_(~finite_ref, 0.0)
        self.ref_sq += float(scratch.sum())
        self.max_abs = max(self.max_abs, float(err.max()))
        _nan_is_inf_(torch.div(err, absref, out=scratch).masked_fill_(same | (absref == 0), 0.0))
        self.max_rel = max(self.max_rel, float(scratch.max()))
        self.excess.append((start, float(_excess(err, absref, same, rtol, scratch).max())))

    def _add_statistics(self, start: int, elements: int, stats: dict) -> None:
        """Accumulate one chunk's statistics as compare_triton.chunk_statistics gives them."""
        self.elements += elements
        if elements == 0:
            return
        self.finite += stats["finite"]
        self.mismatches += stats["mismatches"]
        self.err_sq += stats["err_sq"]
        self.ref_sq += stats["ref_sq"]
        self.max_abs = max(self.max_abs, stats["max_abs"])
        self.max_rel = max(self.max_rel, stats["max_rel"])
        self.excess.append((start, stats["max_excess"]))

    @property
    def ref_rms(self) -> float:
        return math.sqrt(self.ref_sq / self.finite) if self.finite else 0.0

    @property
    def rel_l2(self) -> float:
        if self.ref_sq > 0:
            return math.sqrt(self.err_sq) / math.sqrt(self.ref_sq)
        return 0.0 if self.err_sq == 0 else math.inf


_ONE_PASS_FAILED: list[str] = []  # why the Triton pass failed in this process (then never tried again)


def _one_pass(out: torch.Tensor, ref: torch.Tensor) -> bool:
    """Whether a chunk is compared by the Triton pass: CUDA tensors it reads (compare_triton.usable,
    after flattening), Triton compiled (not interpreted, not missing), WORKBENCH_COMPARE not
    `torch`, and the pass has not failed in this process."""
    if out.device.type != "cuda" or os.environ.get("WORKBENCH_COMPARE", "") == "torch" or \
            os.environ.get("TRITON_INTERPRET", "0") not in ("", "0") or _ONE_PASS_FAILED:
        return False
    from workbench.triton_support import HAVE_TRITON
    from workbench.check.compare_triton import usable

    return HAVE_TRITON and usable(out.reshape(-1), ref.reshape(-1))


def _expected(ref: torch.Tensor, out_dtype: torch.dtype) -> torch.Tensor:
    """`ref` with values that overflow `out_dtype` replaced by the inf they round to (a new
    tensor only when there are any)."""
    name = str(out_dtype).removeprefix("torch.")
    if name not in MAX_EXPONENT or ref.numel() == 0:
        return ref
    threshold = overflow_threshold(name)
    if bool(ref.abs().amax() < threshold):  # NaN compares false: take the slow path
        return ref
    return torch.where(ref.abs() >= threshold, ref.sign() * math.inf, ref)


def _chunk_errors(out: torch.Tensor, ref: torch.Tensor):
    """(|out - expected| with matching NaN/inf as 0 and other NaN as inf, |expected|, a float64
    scratch, the matching mask, finite(expected), finite(out)), all flat."""
    expected = _expected(ref.reshape(-1), out.dtype)
    got = out.reshape(-1).to(torch.float64, copy=True)
    finite_got = got.isfinite()
    same = (got == expected) | (got.isnan() & expected.isnan())
    _nan_is_inf_(got.sub_(expected).abs_().masked_fill_(same, 0.0))
    absref = expected.abs()
    return got, absref, torch.empty_like(absref), same, expected.isfinite(), finite_got


def _nan_is_inf_(t: torch.Tensor) -> torch.Tensor:
    """NaN -> +inf in place, infinities kept (nan_to_num's default would clamp them)."""
    return t.nan_to_num_(nan=math.inf, posinf=math.inf, neginf=-math.inf)


def _excess(err: torch.Tensor, absref: torch.Tensor, same: torch.Tensor, rtol: float,
            out: torch.Tensor) -> torch.Tensor:
    """|out - ref| - rtol*|ref| into `out`, -inf where out matches (NaN or inf) and +inf for an
    unmatched non-finite value: the elementwise gate passes where this is <= atol."""
    return _nan_is_inf_(torch.mul(absref, -rtol, out=out).add_(err)).masked_fill_(same, -math.inf)


def first_bad(out: torch.Tensor, ref: torch.Tensor, rtol: float, atol: float) -> int | None:
    """Flat index (within the chunk) of the first element failing the elementwise gate, i.e. with
    |out - ref| - rtol*|ref| > atol (NaN/inf rules as above), or None. argmax of a uint8 mask:
    no index tensor is made."""
    err, absref, scratch, same, *_ = _chunk_errors(out, ref)
    bad = _excess(err, absref, same, rtol, scratch) > atol
    if not bool(bad.any()):
        return None
    return int(torch.argmax(bad.to(torch.uint8)))


def unravel(flat: int, shape: tuple[int, ...]) -> list[int]:
    """Row-major index tuple of flat index `flat` in `shape`."""
    index = []
    for size in reversed(shape):
        flat, rest = divmod(flat, size) if size else (flat, 0)
        index.append(rest)
    return list(reversed(index))


def verdict(totals: ChunkTotals, tol: Tolerance) -> tuple[str | None, float, int | None]:
    """(failed gate or None, resolved atol, flat start of the first chunk failing the
    elementwise gate or None) of accumulated totals."""
    atol = tol.atol(totals.ref_rms)
    bad_chunk = next((start for start, excess in totals.excess if not excess <= atol), None)
    elementwise = bad_chunk is None and totals.mismatches == 0
    norm = totals.rel_l2 <= tol.norm_rtol
    gate = None if elementwise and norm else "elementwise" if norm else "norm-wise" if elementwise \
        else "elementwise+norm-wise"
    return gate, atol, bad_chunk


def judge_chunks(flat_out: torch.Tensor, piece, count: int, shape: tuple[int, ...], tol: Tolerance,
                 input_set: str = "first") -> CheckReport:
    """The value gates of a flat output against its reference in `count` chunks (`piece(k)`: the
    k-th float64 chunk, any shape, in flat order; asked again for the first failing chunk): the
    totals, the verdict and the first bad index in `shape`. workbench.check.row.compare_output calls
    it in the worker; the clean process of --strict (workbench/check/strict.py) on the chunks the
    worker handed over."""
    totals = ChunkTotals()
    start = 0
    for k in range(count):
        ref = piece(k).reshape(-1)
        totals.add(start, flat_out[start:start + ref.numel()], ref, tol.rtol)
        start += ref.numel()
    gate, atol, bad_start = verdict(totals, tol)
    index = None
    if bad_start is not None:
        k = [s for s, _ in totals.excess].index(bad_start)
        ref = piece(k).reshape(-1)
        offset = first_bad(flat_out[bad_start:bad_start + ref.numel()], ref, tol.rtol, atol)
        index = unravel(bad_start + (offset or 0), shape)
    return report_of(totals, tol, gate, atol, index, input_set)


def compare(out: torch.Tensor, ref: torch.Tensor, tol: Tolerance) -> CheckReport:
    """Compare a whole `out` with a whole float64 `ref` (one chunk); shape must already match
    (a mismatch is a failed "shape" report). For chunked checks see workbench.check.row."""
    if tuple(out.shape) != tuple(ref.shape):
        return gate_failure("shape", f"output shape {tuple(out.shape)} != expected {tuple(ref.shape)}", tol)
    totals = ChunkTotals()
    totals.add(0, out, ref, tol.rtol)
    gate, atol, bad_chunk = verdict(totals, tol)
    index = first_bad(out, ref, tol.rtol, atol) if bad_chunk is not None else None
    return report_of(totals, tol, gate, atol, None if index is None else unravel(index, tuple(out.shape)))


def report_of(totals: ChunkTotals, tol: Tolerance, gate: str | None, atol: float,
              first_bad_index: list[int] | None, input_set: str = "first") -> CheckReport:
    """The CheckReport of accumulated totals (detail filled for a failed gate)."""
    report = CheckReport(gate is None, gate, totals.max_abs, totals.max_rel, totals.rel_l2, first_bad_index,
                         atol, tol.rtol, tol.norm_rtol, totals.ref_rms, totals.mismatches,
                         len(totals.excess), input_set)
    if gate is None:
        return report
    return _with_detail(report)


def _with_detail(report: CheckReport) -> CheckReport:
    from dataclasses import replace

    nonfinite = f", {report.nonfinite_mismatches} NaN/inf mismatches" if report.nonfinite_mismatches else ""
    detail = (f"{report.gate} gate ({report.input_set} inputs): max_abs_err {report.max_abs_err:.3g}, "
              f"max_rel_err {report.max_rel_err:.3g}, rel_l2_err {report.rel_l2_err:.3g} "
              f"(norm-wise bound {report.norm_rtol:.3g}), first bad index {report.first_bad_index}{nonfinite} "
              f"(atol {report.atol:.3g} = rms(ref) {report.ref_rms:.3g} scaled, rtol {report.rtol:.3g})")
    return replace(report, detail=detail)


def needed_factor(out: torch.Tensor, ref: torch.Tensor, tol: Tolerance) -> tuple[float, float]:
    """(elementwise, norm-wise) factor by which `tol` would have to grow for `out` to pass just
    barely: max |out - ref| / (atol + rtol*|ref|) and rel_l2 / norm_rtol, on whole tensors. For
    calibrating the constants (benchmarks/stages/check.py), not for the check itself. An output
    whose shape differs from the reference's passes under no factor: (inf, inf)."""
    if tuple(out.shape) != tuple(ref.shape):
        return math.inf, math.inf
    totals = ChunkTotals()
    totals.add(0, out, ref, tol.rtol)
    err, absref, scratch, same, *_ = _chunk_errors(out, ref)
    limit = torch.mul(absref, tol.rtol, out=scratch).add_(tol.atol(totals.ref_rms))
    ratio = _nan_is_inf_(err.div_(limit).masked_fill_(same, 0.0))
    elementwise = float(ratio.max()) if ratio.numel() else 0.0
    return elementwise, totals.rel_l2 / tol.norm_rtol if tol.norm_rtol else math.inf
