"""Check one implementation against the float64 reference of its math variant (rule 6).

Gates, in order: the output is a tensor of the expected shape ("shape"), dtype ("dtype") and
device ("device"); the implementation left its inputs as they were ("inputs": bitwise
fingerprints taken before the call, workbench.check.inputs); then the values, elementwise and
norm-wise (workbench.check.compare). The reference is computed from those unmodified inputs, in
chunks along the axis the op declares (workbench.check.chunks), so the float64 workspace is a chunk,
not a copy of everything.

A row is checked on up to three input sets (`RowCheck`): "first" (the build's call), "special"
(the op's special values, where it declares them, filled into the same tensors), and "timed":
after timing, a second seeded set is written into the same input tensors in place (same
pointers, new values), the implementation is called once more and checked against that set's
reference: a kernel that is right once and then a no-op, or that caches its result by pointer,
fails there.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable

import torch

from workbench.check.chunks import CHUNK_ELEMENTS
from workbench.check.compare import ChunkTotals, CheckReport, first_bad, gate_failure, report_of, unravel, verdict
from workbench.check.inputs import BLOCK_ELEMENTS, first_changed_block, fingerprint
from workbench.registry import BuildContext, Impl, Need, Op, OutputForm
from workbench.spec import Spec
from workbench.check.tolerance import Tolerance, tolerance

SECOND_SEED_OFFSET = 7919  # the timed set's seed: row seed + this (any fixed offset would do)


def uses_tf32(op: Op, spec: Spec, ctx: BuildContext) -> bool:
    """Whether float32 inputs of this op really run in TF32 (rule 7, P9)."""
    return op.matmul_like and ctx.fp32_precision == "tf32" and str(spec.dtype) == "float32"


def tolerance_for(op: Op, impl: Impl, spec: Spec, ctx: BuildContext) -> Tolerance:
    """The row's tolerance: the output's rounding dtype (Op.rounding_dtype), TF32, the op's
    reduction length, the impl's factor."""
    rounding = str(op.rounding_dtype(spec)) if hasattr(spec, "dtype") else "float32"
    return tolerance(rounding, tf32=uses_tf32(op, spec, ctx),
                     reduction_length=op.reduction_length(spec) if op.reduction_length else None,
                     sum_length=op.sum_length(spec) if op.sum_length else None,
                     factor=impl.tolerance_factor(spec.dtype),
                     truncating=ctx.interpret and Need.triton in impl.needs and rounding == "bfloat16")


def _f64(t: Any) -> Any:
    return t.to(torch.float64) if torch.is_tensor(t) and t.is_floating_point() else t


def reference_output(op: Op, impl: Impl, inputs: tuple) -> torch.Tensor:
    """The whole float64 reference of impl's math variant, on the inputs' device."""
    return op.reference_fn(impl.math)(*(_f64(t) for t in inputs))


class _Pieces:
    """The reference of an output in chunks: `piece(k)` -> (flat start, float64 chunk, flat)."""

    def __init__(self, op: Op, impl: Impl, inputs: tuple, out_row_elements: int, chunk_elements: int):
        self.ref_fn = op.reference_fn(impl.math)
        self.chunks, self.inputs = op.check_chunks, inputs
        sliced = set(self.chunks.inputs) if self.chunks else set()
        self.whole = {i: _f64(t) for i, t in enumerate(inputs) if i not in sliced}
        if self.chunks is None:
            self.count, self.step = 1, None
            return
        first = inputs[self.chunks.inputs[0]]
        self.length = first.numel() if self.chunks.kind == "flat" else first.shape[0]
        item = 1 if self.chunks.kind == "flat" else max(1, out_row_elements)
        self.step = self.chunks.chunk_items(self.length, item, chunk_elements)
        self.count = max(1, -(-self.length // self.step))

    def piece(self, k: int) -> torch.Tensor:
        if self.chunks is None:
            return self.ref_fn(*(self.whole[i] for i in range(len(self.inputs))))
        lo, hi = k * self.step, min((k + 1) * self.step, self.length)
        args = []
        for i, t in enumerate(self.inputs):
            if i in self.whole:
                args.append(self.whole[i])
            elif self.chunks.kind == "flat":
                args.append(_f64(t.reshape(-1)[lo:hi]))
            else:
                args.append(_f64(t[lo:hi]))
        return self.ref_fn(*args)

    def expected_shape(self, first: torch.Tensor) -> tuple[int, ...]:
        """The whole reference's shape, from the first chunk's."""
        if self.chunks is None:
            return tuple(first.shape)
        if self.chunks.kind == "flat":
            return tuple(self.inputs[self.chunks.inputs[0]].shape)
        return (self.length, *first.shape[1:])


def compare_output(op: Op, impl: Impl, spec: Spec, ctx: BuildContext, inputs: tuple, out: Any, *,
                   input_set: str = "first", chunk_elements: int = CHUNK_ELEMENTS) -> CheckReport:
    """The shape, dtype, device and value gates of `out` against the reference of `inputs`."""
    tol = tolerance_for(op, impl, spec, ctx)
    if op.check_view is not None:
        try:
            out = op.check_view(spec, out)
        except OutputForm as form:
            return gate_failure(form.gate, form.reason, tol, input_set)
    failure = _form_gates(op, spec, inputs, out, tol, input_set)
    if failure is not None:
        return failure
    row = out.numel() // out.shape[0] if out.dim() and out.shape[0] else out.numel()
    pieces = _Pieces(op, impl, inputs, row, chunk_elements)
    first = pieces.piece(0)
    shape = pieces.expected_shape(first)
    if tuple(out.shape) != shape:
        return gate_failure("shape", f"output shape {tuple(out.shape)} != expected {shape}", tol, input_set)
    flat_out = out.reshape(-1)
    totals = ChunkTotals()
    start = 0
    for k in range(pieces.count):
        ref = (first if k == 0 else pieces.piece(k)).reshape(-1)
        totals.add(start, flat_out[start:start + ref.numel()], ref, tol.rtol)
        start += ref.numel()
    gate, atol, bad_start = verdict(totals, tol)
    index = None
    if bad_start is not None:
        k = [s for s, _ in totals.excess].index(bad_start)
        ref = pieces.piece(k).reshape(-1)
        offset = first_bad(flat_out[bad_start:bad_start + ref.numel()], ref, tol.rtol, atol)
        index = unravel(bad_start + (offset or 0), shape)
    return report_of(totals, tol, gate, atol, index, input_set)


def _form_gates(op: Op, spec: Spec, inputs: tuple, out: Any, tol: Tolerance, input_set: str) -> CheckReport | None:
    if not torch.is_tensor(out):
        return gate_failure("shape", f"output is a {type(out).__name__}, not a tensor", tol, input_set)
    want = op.out_dtype(spec).torch if hasattr(spec, "dtype") else out.dtype
    if out.dtype != want:
        return gate_failure("dtype", f"output dtype {str(out.dtype).removeprefix('torch.')} != expected "
                                     f"{str(want).removeprefix('torch.')}", tol, input_set)
    device = next((t.device for t in inputs if torch.is_tensor(t)), out.device)
    if out.device != device:
        return gate_failure("device", f"output on {out.device}, inputs on {device}", tol, input_set)
    return None


def check_output(op: Op, impl: Impl, spec: Spec, ctx: BuildContext, inputs: tuple, out: Any) -> CheckReport:
    """One output against the reference of `inputs` (no input fingerprints: see RowCheck)."""
    return compare_output(op, impl, spec, ctx, inputs, out)


class RowCheck:
    """The check of one row over its input sets. Create it before the first call (it takes the
    inputs' fingerprints then); `first(out)`, `special(fn)`, `timed(fn)` each return a report;
    `report` is the row's `check` record: the first failing set's report, else the first set's.

    seed: the row's seed (set "first"); sync: waits for the device (cuda synchronize).
    """

    def __init__(self, op: Op, impl: Impl, spec: Spec, ctx: BuildContext, inputs: tuple, seed: int,
                 sync: Callable[[], None] = lambda: None, chunk_elements: int = CHUNK_ELEMENTS,
                 observe: Callable[[str, Any], None] | None = None):
        self.op, self.impl, self.spec, self.ctx = op, impl, spec, ctx
        self.inputs, self.seed, self.sync, self.chunk_elements = inputs, seed, sync, chunk_elements
        self.observe = observe  # observe(set name, output) before each set's check (calibration)
        self.prints = self._fingerprints()
        self.reports: list[CheckReport] = []

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.reports)

    @property
    def report(self) -> CheckReport:
        chosen = next((r for r in self.reports if not r.passed), self.reports[0])
        return replace(chosen, sets_checked=[r.input_set for r in self.reports])

    def first(self, out: Any) -> CheckReport:
        return self._check("first", out)

    def special(self, fn: Callable[..., Any]) -> CheckReport | None:
        """The op's special-values set in the same tensors, then set "first" restored in place;
        None when the op declares no special set."""
        if self.op.fill_special(self.spec, self.inputs, self.seed) is None:
            return None
        report = self._call("special", fn)
        self.op.make_inputs(self.spec, self._device(), self.seed, out=self.inputs)
        self.prints = self._fingerprints()
        return report

    def timed(self, fn: Callable[..., Any]) -> CheckReport:
        """After timing: a second seeded set in the same tensors, one call, its check."""
        self.op.make_inputs(self.spec, self._device(), self.seed + SECOND_SEED_OFFSET, out=self.inputs)
        return self._call("timed", fn)

    def run_all(self, fn: Callable[..., Any], out: Any, timed_calls: int = 2,
                before_call: Callable[[], None] = lambda: None) -> CheckReport:
        """The engine's sequence without the timing: first (of `out`, released then), special,
        `timed_calls` calls on set "first" (each after before_call(), e.g. an L2 flush), then the
        timed set; stops at the first failing set. Returns `report`."""
        passed = self.first(out).passed
        del out
        if passed and (self.special(fn) or self.reports[-1]).passed:
            for _ in range(timed_calls):
                before_call()
                fn(*self.inputs)
            self.sync()
            self.timed(fn)
        return self.report

    # -- internals ----------------------------------------------------------------------------
    def _device(self) -> str:
        return str(next((t.device for t in self.inputs if torch.is_tensor(t)), self.ctx.device))

    def _fingerprints(self) -> list[torch.Tensor | None]:
        return [fingerprint(t) if torch.is_tensor(t) else None for t in self.inputs]

    def _call(self, name: str, fn: Callable[..., Any]) -> CheckReport:
        self.prints = self._fingerprints()
        out = fn(*self.inputs)
        self.sync()
        return self._check(name, out)

    def _check(self, name: str, out: Any) -> CheckReport:
        if self.observe is not None:
            self.observe(name, out)
        report = self._inputs_gate(name) or compare_output(
            self.op, self.impl, self.spec, self.ctx, self.inputs, out, input_set=name,
            chunk_elements=self.chunk_elements)
        self.reports.append(report)
        return report

    def _inputs_gate(self, name: str) -> CheckReport | None:
        for index, (before, t) in enumerate(zip(self.prints, self.inputs)):
            if before is None:
                continue
            block = first_changed_block(before, fingerprint(t))
            if block is not None:
                lo = block * BLOCK_ELEMENTS
                hi = min(lo + BLOCK_ELEMENTS, t.numel()) - 1
                return gate_failure("inputs", f"the implementation modified its input {index} of "
                                    f"{len(self.inputs)} (among flat elements {lo}..{hi}); the reference "
                                    f"is of the inputs as they were before the call", input_set=name)
        return None


def failure_text(report: CheckReport) -> str:
    """The row's `error` for a failed check: `check failed: <gate> gate (<set> inputs): ...`."""
    return "check failed: " + (report.detail or f"{report.gate} gate")
