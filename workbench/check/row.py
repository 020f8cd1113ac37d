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
fails there. Before that set, "timed calls" (rule 13, issue 38): outputs of the TIMED calls,
one per batch chosen at random and kept (engine/measure/rotation.py), whose inputs rotated between set
"first" and a second set in separate tensors (`rotation_sets`), checked after timing and after a
later call (`timed_calls`: its failure is the "timed outputs" gate).

Ownership ("ownership" gate, every set): an output must be a plain torch.Tensor, sharing no
memory with an input (unless Op.output_aliases_input) or with an output still held.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Sequence

import torch

from workbench.check.chunks import CHUNK_ELEMENTS
from workbench.check.compare import CheckReport, gate_failure, judge_chunks
from workbench.check.inputs import BLOCK_ELEMENTS, first_changed_block, fingerprint
from workbench.registry import BuildContext, Impl, Need, Op, OutputForm
from workbench.spec import Spec
from workbench.check.tolerance import FP8_MMA_UNIT_ROUNDOFF, Tolerance, tolerance

SECOND_SEED_OFFSET = 7919  # the timed set's seed: row seed + this (any fixed offset would do)
ROTATE_SEED_OFFSET = 104729  # the timed calls' second input set (separate tensors): row seed + this
ROTATE_MAX_BYTES = 2 << 30   # above this many input bytes the timed calls use set "first" only


SHIPPED_MODULE = "workbench.kernels."  # where the shipped ops and implementations live
# A plugin implementation's tolerance_scale above this is allowed but named (rule 13, issue 38:
# with ~1.9 a K-tail bug passed unseen). The shipped scales go far higher (GeLU's and softmax's
# unfused forms: up to 8192 in bfloat16, each reasoned in its builder's docstring and reviewed);
# a plugin's is not reviewed: above 16 (a choice: 4 bits of precision given away) the row says so.
TOLERANCE_SCALE_CAP = 16.0
TRUST_PREFIX = "trust: "


def _shipped(fn: Any) -> bool:
    return getattr(fn, "__module__", "").startswith(SHIPPED_MODULE)


def trust_flags(op: Op, impl: Impl, spec: Spec) -> list[str]:
    """The record's `trust: ...` flags (rule 13): what about this row's check plugin code decided.
    A plugin implementation whose tolerance_scale for the row's dtype exceeds TOLERANCE_SCALE_CAP;
    a row graded against a reference variant that plugin code added to a shipped op."""
    flags = []
    factor = impl.tolerance_factor(spec.dtype) if hasattr(spec, "dtype") else 1.0
    if factor > TOLERANCE_SCALE_CAP and not _shipped(impl.builder):
        flags.append(f"{TRUST_PREFIX}tolerance_scale {factor:g} declared by plugin code is above the cap "
                     f"{TOLERANCE_SCALE_CAP:g}: the check's tolerances are {factor:g}x the dtype's")
    if _shipped(op._inputs):
        ref = op.reference_fn(impl.math)
        if not _shipped(ref):
            flags.append(f"{TRUST_PREFIX}graded against reference variant {impl.math!r} of the shipped op "
                         f"{op.name!r}, added by plugin code ({getattr(ref, '__module__', '?')}), not a shipped reference")
    return flags


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
                     truncating=ctx.interpret and Need.triton in impl.needs and rounding == "bfloat16",
                     accumulation_u=FP8_MMA_UNIT_ROUNDOFF if str(getattr(spec, "dtype", "")).startswith("float8")
                     and op.reduction_length else None)


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
                   input_set: str = "first", chunk_elements: int = CHUNK_ELEMENTS,
                   judge: Any = None) -> CheckReport:
    """The shape, dtype, device and value gates of `out` against the reference of `inputs`.
    judge: --strict's workbench.check.strict.Judge (the value gates in a clean process), else None."""
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
    piece = _FirstKept(first, pieces.piece)
    if judge is not None:  # --strict: the values judged in a clean process (workbench/check/strict.py)
        return judge.compare(out.reshape(-1), piece, pieces.count, shape, tol, input_set)
    return judge_chunks(out.reshape(-1), piece, pieces.count, shape, tol, input_set)


class _FirstKept:
    """`piece(k)` with the first chunk (already computed for the shape) given out once more
    without recomputing it."""

    def __init__(self, first: torch.Tensor, piece: Callable[[int], torch.Tensor]):
        self.first, self.piece = first, piece

    def __call__(self, k: int) -> torch.Tensor:
        if k == 0 and self.first is not None:
            first, self.first = self.first, None
            return first
        return self.piece(k)


def storage_span(t: torch.Tensor) -> tuple[str, int, int]:
    """(device, first byte, one past the last byte) of the memory under `t` (its whole storage)."""
    storage = t.untyped_storage()
    start = storage.data_ptr()
    return str(t.device), start, start + storage.nbytes()


def aliases(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether the storages under a and b share any byte (empty storages share none)."""
    da, a0, a1 = storage_span(a)
    db, b0, b1 = storage_span(b)
    return da == db and a0 < a1 and b0 < b1 and a0 < b1 and b0 < a1


def ownership_failure(op: Op, out: Any, inputs: tuple, held: Sequence[tuple[str, Any]] = ()) -> str | None:
    """Why `out` is not an output the call owns (rule 13), or None: it must be a plain
    torch.Tensor (a subclass may compute when read, or not at all when timed), not sharing memory
    with an input (unless the op's output is its input: Op.output_aliases_input) nor with any
    output still held (`held`: (name, tensor) pairs), as one global buffer would."""
    if type(out) is not torch.Tensor:
        return f"the output is a {type(out).__module__}.{type(out).__qualname__}, not a plain torch.Tensor"
    for index, t in enumerate(inputs):
        if torch.is_tensor(t) and aliases(out, t):
            if op.output_aliases_input:  # the output IS its input (sleep): no copy of its own to hold
                return None
            return f"the output shares memory with input {index} of {len(inputs)}"
    for name, other in held:
        if torch.is_tensor(other) and aliases(out, other):
            return f"the output shares memory with {name}, still held"
    return None


def _form_gates(op: Op, spec: Spec, inputs: tuple, out: Any, tol: Tolerance, input_set: str) -> CheckReport | None:
    if not torch.is_tensor(out):
        return gate_failure("shape", f"output is a {type(out).__name__}, not a tensor", tol, input_set)
    owned = ownership_failure(op, out, inputs)
    if owned is not None:
        return gate_failure("ownership", owned, tol, input_set)
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

    seed: the row's seed (set "first"); sync: waits for the device (cuda synchronize); judge:
    --strict's workbench.check.strict.Judge (every value comparison judged in a clean process).
    """

    def __init__(self, op: Op, impl: Impl, spec: Spec, ctx: BuildContext, inputs: tuple, seed: int,
                 sync: Callable[[], None] = lambda: None, chunk_elements: int = CHUNK_ELEMENTS,
                 observe: Callable[[str, Any], None] | None = None, judge: Any = None):
        self.op, self.impl, self.spec, self.ctx, self.judge = op, impl, spec, ctx, judge
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

    def rotation_sets(self, max_bytes: int = ROTATE_MAX_BYTES) -> list[tuple]:
        """The input sets the timed calls rotate among (engine/measure/rotation.py): set "first" (the
        row's own tensors) and a second seeded set in SEPARATE tensors, made here with its
        fingerprints; only set "first" where the inputs take more than `max_bytes` (memory: the
        second set doubles them) or, on CUDA, more than half the free device memory. Call after
        `special` (set "first" is restored by then)."""
        first = self.inputs
        size = sum(t.numel() * t.element_size() for t in first if torch.is_tensor(t))
        device = torch.device(self._device())
        free = torch.cuda.mem_get_info(device)[0] if device.type == "cuda" else None
        if size > max_bytes or (free is not None and 2 * size > free):  # the row's estimate has no second set
            self.extra_sets = []
            return [first]
        second = self.op.make_inputs(self.spec, self._device(), self.seed + ROTATE_SEED_OFFSET)
        self.extra_sets = [(second, [fingerprint(t) if torch.is_tensor(t) else None for t in second])]
        return [first, second]

    def timed_calls(self, fn: Callable[..., Any], kept: Sequence[Any], sets: Sequence[tuple],
                    replayed: bool = False) -> CheckReport | None:
        """The outputs kept from the timed calls (engine/rotation.Kept: batch, sample, set_index,
        out), checked after timing and after one LATER call on set "first" (an output sharing a
        buffer with a later one is overwritten by then): each must be owned (a plain tensor not
        sharing memory with an input of any set, another kept output or the later one) and right
        for the input set it was given; every set's inputs must be as they were. A failure is the
        "timed outputs" gate (set "timed calls"). None when nothing was kept (not timed).
        replayed: a CUDA graph replay (engine/graph_mode.py), whose one captured output every
        replay rewrites: kept outputs may share it."""
        if not kept:
            return None
        name = "timed calls"
        later = fn(*self.inputs)
        self.sync()
        report = self._inputs_gate(name)
        for (second, prints) in getattr(self, "extra_sets", []):
            report = report or self._inputs_gate(name, second, prints)
        if report is not None:
            self.reports.append(report)
            return report
        all_inputs = tuple(t for s in sets for t in s)
        first_report = None
        for k in kept:
            where = (f"the output of timed batch {k.batch}, sample {k.sample + 1} "
                     f"(input set {k.set_index + 1} of {len(sets)})")
            held = [] if replayed else [("the output of a later call", later)] + [
                (f"the output of timed batch {o.batch}, sample {o.sample + 1}", o.out) for o in kept if o is not k]
            if torch.is_tensor(k.out):
                owned = ownership_failure(self.op, k.out, all_inputs, held)
                if owned is not None:
                    report = gate_failure("timed outputs", f"{where}: ownership: {owned}", input_set=name)
                    break
            inner = self._compare_nudged(sets[k.set_index], k, name)
            if not inner.passed:
                reason = (inner.detail or f"{inner.gate} gate").split(": ", 1)[-1]
                report = replace(inner, gate="timed outputs",
                                 detail=f"timed outputs gate ({name} inputs): {where} failed the "
                                        f"{inner.gate} gate: {reason}")
                break
            first_report = first_report or inner
        report = report or first_report
        del later
        self.reports.append(report)
        return report

    def _compare_nudged(self, inputs: tuple, kept: Any, name: str) -> CheckReport:
        """A kept output against the reference of its set as it was at its call (its nudge
        re-applied for the comparison, then undone: engine/measure/rotation.py)."""
        from workbench.engine.measure.rotation import apply_nudge, undo_nudge

        original = apply_nudge(inputs, kept.nudge) if kept.nudge else None
        try:
            return compare_output(self.op, self.impl, self.spec, self.ctx, inputs, kept.out,
                                  input_set=name, chunk_elements=self.chunk_elements, judge=self.judge)
        finally:
            if kept.nudge:
                undo_nudge(inputs, kept.nudge, original)

    def run_all(self, fn: Callable[..., Any], out: Any, timed_calls: int = 2,
                before_call: Callable[[], None] = lambda: None) -> CheckReport:
        """The engine's sequence without the timing: first (of `out`, released then), special,
        `timed_calls` calls as the engine's timed calls (engine/rotation.Rotation: rotated input
        sets, each call a batch of one, so each kept; each after before_call(), e.g. an L2 flush) and
        their check (set "timed calls"), then the timed set; stops at the first failing set.
        Returns `report`."""
        from workbench.engine.measure.rotation import check_rotation, row_rotation

        passed = self.first(out).passed
        del out
        if passed and (self.special(fn) or self.reports[-1]).passed:
            rotation = row_rotation(fn, self)
            for _ in range(timed_calls):
                rotation.start_batch(1)
                rotation.before_sample()
                before_call()
                rotation.after_sample(rotation())
            self.sync()
            if check_rotation(self, fn, rotation).passed:
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
            chunk_elements=self.chunk_elements, judge=self.judge)
        self.reports.append(report)
        return report

    def _inputs_gate(self, name: str, inputs: tuple | None = None, prints: list | None = None) -> CheckReport | None:
        inputs = self.inputs if inputs is None else inputs
        prints = self.prints if prints is None else prints
        for index, (before, t) in enumerate(zip(prints, inputs)):
            if before is None:
                continue
            block = first_changed_block(before, fingerprint(t))
            if block is not None:
                lo = block * BLOCK_ELEMENTS
                hi = min(lo + BLOCK_ELEMENTS, t.numel()) - 1
                return gate_failure("inputs", f"the implementation modified its input {index} of "
                                    f"{len(inputs)} (among flat elements {lo}..{hi}); the reference "
                                    f"is of the inputs as they were before the call", input_set=name)
        return None


def failure_text(report: CheckReport) -> str:
    """The row's `error` for a failed check: `check failed: <gate> gate (<set> inputs): ...`."""
    return "check failed: " + (report.detail or f"{report.gate} gate")
