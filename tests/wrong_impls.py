"""Known-wrong implementations of every shipped op (MEASUREMENT.md rule 6): each must fail the
check with a message naming the gate that caught it. Registered as `manual_wrong_<kind>` on the
shipped ops by the test plugin tests/plugins/known_wrong.py (so they never reach a registry that
did not load it); the tests generate their cases from `applicable(op)`.

Each is built from the float64 reference of the inputs it is given (so it is "right" where the
kind says nothing else), cast to the op's output dtype:
- zeros, half (0.5 x ref), input (its first input returned unchanged);
- overwrite: the right result, written into its first input (or, where that would not change it,
  the input zeroed);
- notail: the last 64 outputs (half of them, if fewer) left unwritten (zero), as a kernel that
  forgets its masked last block;
- ktail: the last K % 16 (or 16) terms of the reduction dropped (matmul-like ops and cdist);
- nomax: softmax without subtracting the row max, in float32 (overflows on the special set);
- once: right on the first call, then returns that first result without computing;
- dtype: the right values in another dtype (float64 for a float32 op, else float32);
- ptrcache: results cached by the inputs' data pointers.
Rule 13 (issue 38), each right in value whenever it computes:
- lazy: the right values in a torch.Tensor subclass (one that could compute when first read);
- global: one global buffer, overwritten by every call, returned each time;
- sniff: computes unless the engine's timed call (engine/measure/rotation.py) is on the call stack, then
  returns its last result;
- bytes: results cached by a sample of the inputs' bytes (their first element each).
fp8 ops (an op declaring an fp8 dtype: scaled_mm, quantize):
- scale2x: a scale applied twice (scaled_mm: the epilogue multiplies by sa * sb again; quantize:
  x / s / s);
- e5m2: e4m3 bits read as e5m2 (scaled_mm: its inputs; quantize: e5m2 bits written where e4m3
  is expected);
- fp16acc: the K-term sum accumulated in float16 (scaled_mm; float32 is what the tensor cores
  and the tolerance assume);
Saturation lost (inf or NaN instead of +-max) has no case: with quantize's own scales (row
amax / 448) no value passes 448 by more than float32 rounding, so a saturating and a
non-saturating cast give the same right result; what the check expects of an fp8 value past the
max (saturation) is tested in tests/test_fp8.py.
An op whose implementations return several tensors (Op.outputs_from_reference: quantize's
(q, scales)) gets the right outputs in that form, and each kind changes the first of them.
"""

from __future__ import annotations

from typing import Callable

import torch

from workbench.registry import Op, Registry
from workbench.check.row import reference_output

SHIPPED_MODULE = "workbench.kernels."
PREFIX = "manual_wrong_"
TAIL_PACK = 64
K_PACK = 16


def _right(op: Op, spec, inputs: tuple, math: str):
    impl = next(i for i in op.impls.values() if i.math == math)
    ref = reference_output(op, impl, inputs)
    if op.outputs_from_reference is not None:
        return op.outputs_from_reference(spec, ref)
    return ref.to(op.out_dtype(spec).torch)


def _first(out, fn):
    """fn applied to the output (or to the first of several), computed in float32 for fp8 and
    cast back."""
    if isinstance(out, tuple):
        return (_first(out[0], fn), *out[1:])
    if out.dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        return fn(out.float()).to(out.dtype)
    return fn(out)


def _zeros(op, spec, math):
    return lambda *inputs: _first(_right(op, spec, inputs, math), torch.zeros_like)


def _half(op, spec, math):
    return lambda *inputs: _first(_right(op, spec, inputs, math), lambda t: 0.5 * t)


def _input(op, spec, math):
    return lambda *inputs: inputs[0]


def _overwrite(op, spec, math):
    def run(*inputs):
        right = _right(op, spec, inputs, math)
        first, main = inputs[0], right[0] if isinstance(right, tuple) else right  # (q, scales): q
        if first.shape == main.shape and first.dtype == main.dtype and not torch.equal(first, main):
            first.copy_(main)           # computed "in place": the input is gone
            return right if isinstance(right, tuple) else first
        first.zero_()                   # scratch space borrowed from an input and not restored
        return right
    return run


def _notail(op, spec, math):
    def run(*inputs):
        def cut(t):
            tail = min(TAIL_PACK, max(1, t.numel() // 2))
            t = t.clone()
            t.view(-1)[t.numel() - tail:] = 0
            return t
        return _first(_right(op, spec, inputs, math), cut)
    return run


def _ktail(op, spec, math):
    def run(*inputs):
        first, second = inputs[0], inputs[1]
        k = first.shape[-1]
        kept = k - (k % K_PACK or min(K_PACK, k - 1))
        second = second[:kept] if op.matmul_like else second[..., :kept]
        return _right(op, spec, (first[..., :kept], second, *inputs[2:]), math)
    return run


def _nomax(op, spec, math):
    def run(x):
        e = torch.exp(x.float())
        return (e / e.sum(dim=-1, keepdim=True)).to(x.dtype)
    return run


def _once(op, spec, math):
    first: list[torch.Tensor] = []

    def run(*inputs):
        if not first:
            first.append(_right(op, spec, inputs, math))
        return first[0]
    return run


def _dtype(op, spec, math):
    def run(*inputs):
        right = _right(op, spec, inputs, math)
        if isinstance(right, tuple):  # (q, scales): q in float32
            return (right[0].float(), *right[1:])
        return right.to(torch.float64 if right.dtype == torch.float32 else torch.float32)
    return run


def _ptrcache(op, spec, math):
    cache: dict[tuple, torch.Tensor] = {}

    def run(*inputs):
        key = tuple(t.data_ptr() for t in inputs)
        if key not in cache:
            cache[key] = _right(op, spec, inputs, math)
        return cache[key]
    return run


class LazyTensor(torch.Tensor):
    """A subclass standing for one that computes when read (the check must not accept it)."""


def _lazy(op, spec, math):
    def run(*inputs):
        right = _right(op, spec, inputs, math)
        if isinstance(right, tuple):  # a two-output op: the first output lazy
            return (right[0].as_subclass(LazyTensor), *right[1:])
        return right.as_subclass(LazyTensor)
    return run


def _global(op, spec, math):
    buffer: list[torch.Tensor] = []

    def run(*inputs):
        right = _right(op, spec, inputs, math)
        outs = right if isinstance(right, tuple) else (right,)
        if len(buffer) != len(outs) or any(b.shape != o.shape for b, o in zip(buffer, outs)):
            buffer[:] = [torch.empty_like(o) for o in outs]
        kept = tuple(b.copy_(o) for b, o in zip(buffer, outs))
        return kept if isinstance(right, tuple) else kept[0]
    return run


def _sniff(op, spec, math):
    import sys

    last: list[torch.Tensor] = []

    def run(*inputs):
        frame, timed = sys._getframe(1), False
        while frame is not None and not timed:
            timed = frame.f_code.co_filename.endswith("rotation.py")
            frame = frame.f_back
        if not (timed and last):
            last[:] = [_right(op, spec, inputs, math)]
        return last[0]
    return run


def _bytes(op, spec, math):
    cache: dict[tuple, torch.Tensor] = {}

    def run(*inputs):
        key = tuple(bytes(t.reshape(-1)[:1].view(torch.uint8).cpu().tolist()) for t in inputs)
        if key not in cache:
            cache[key] = _right(op, spec, inputs, math)
        return cache[key]
    return run


def _scale2x(op, spec, math):
    def run(*inputs):
        if op.name == "quantize":
            x, = inputs
            q, s = _right(op, spec, inputs, math)
            return (x.double() / s / s).clamp(-448, 448).to(q.dtype), s
        a, b, sa, sb = inputs
        return (_right(op, spec, inputs, math).double() * sa * sb).to(torch.bfloat16)
    return run


def _e5m2(op, spec, math):
    def run(*inputs):
        if op.name == "quantize":
            q, s = _right(op, spec, inputs, math)
            return q.float().to(torch.float8_e5m2).view(torch.float8_e4m3fn), s
        a, b, *scales = inputs
        return _right(op, spec, (a.view(torch.float8_e5m2), b.view(torch.float8_e5m2), *scales), math)
    return run


def _fp16acc(op, spec, math):
    def run(a, b, sa, sb):
        # dequantised first (unscaled e4m3 products reach 448^2, past float16's 65504)
        a16, b16 = (a.float() * sa).to(torch.float16), (b.float() * sb).to(torch.float16)
        acc = torch.zeros((a.shape[0], b.shape[1]), dtype=torch.float16, device=a.device)
        for k in range(a.shape[1]):  # one rank-1 update at a time, rounded to float16
            acc += a16[:, k:k + 1] * b16[k:k + 1, :]
        return acc.to(torch.bfloat16)
    return run


KINDS: dict[str, Callable] = {"scale2x": _scale2x, "e5m2": _e5m2, "fp16acc": _fp16acc,
                              "zeros": _zeros, "half": _half, "input": _input, "overwrite": _overwrite,
                              "notail": _notail, "ktail": _ktail, "nomax": _nomax, "once": _once,
                              "dtype": _dtype, "ptrcache": _ptrcache, "lazy": _lazy, "global": _global,
                              "sniff": _sniff, "bytes": _bytes}
# The gate each kind must fail (a kind may fail an earlier gate on some ops: input's shape).
EXPECTED_GATES = {"zeros": {"elementwise+norm-wise", "elementwise"}, "half": {"elementwise+norm-wise"},
                  "input": {"ownership", "shape"},  # shape: a two-output op (quantize) given one tensor
                  "overwrite": {"inputs"},
                  "notail": {"elementwise", "elementwise+norm-wise"},
                  "ktail": {"elementwise", "elementwise+norm-wise"},
                  "nomax": {"elementwise", "elementwise+norm-wise"},
                  "once": {"elementwise", "elementwise+norm-wise", "timed outputs"}, "dtype": {"dtype"},
                  "ptrcache": {"elementwise", "elementwise+norm-wise", "timed outputs"},  # special: same pointers
                  "lazy": {"ownership"}, "global": {"timed outputs"}, "sniff": {"timed outputs"},
                  "bytes": {"elementwise", "elementwise+norm-wise", "timed outputs"},
                  "scale2x": {"elementwise", "elementwise+norm-wise"}, "e5m2": {"elementwise", "elementwise+norm-wise"},
                  "fp16acc": {"elementwise", "elementwise+norm-wise", "norm-wise"}}
FP8_KINDS = ("scale2x", "e5m2", "fp16acc")


def shipped_ops(registry: Registry) -> list[Op]:
    return [op for op in registry.ops.values()
            if any(i.builder.__module__.startswith(SHIPPED_MODULE) for i in op.impls.values())]


def is_identity(op: Op) -> bool:
    """Whether the op's output is its first input (sleep): then returning it is right."""
    spec = op.make_spec(op.test_specs[0], op.dtypes[0])
    inputs = op.make_inputs(spec, "cpu", 0)
    math = next(iter(op.impls.values())).math
    right = _right(op, spec, inputs, math)
    return not isinstance(right, tuple) and right.dtype == inputs[0].dtype and torch.equal(right, inputs[0])


def applicable(op: Op) -> list[str]:
    """The wrong kinds that are wrong for this op."""
    kinds = [k for k in KINDS if k not in ("input", "ktail", "nomax", *FP8_KINDS)]
    if not is_identity(op):
        kinds.append("input")
    if op.reduction_length and op.check_chunks is not None and op.check_chunks.kind == "rows":
        kinds.append("ktail")  # a reduction over the inputs' last axis (matmul, cdist)
    if op.sum_length:
        kinds.append("nomax")  # softmax
    if op.name == "scaled_mm":
        # not fp16acc: at the generated spec's K (257) an fp16 accumulator stays inside the fp8
        # tensor cores' own ~14-bit accumulation term (check/tolerance.py FP8_MMA_UNIT_ROUNDOFF);
        # tests/test_fp8.py and the fp8 GPU stage catch it at K=2048
        kinds += ["scale2x", "e5m2"]
    if op.name == "quantize":
        kinds += ["scale2x", "e5m2"]
    return kinds


def register(registry: Registry) -> None:
    """Add `manual_wrong_<kind>` to every shipped op of `registry` (once)."""
    for op in shipped_ops(registry):
        math = next(iter(op.impls.values())).math
        for kind in applicable(op):
            name = PREFIX + kind
            if name not in op.impls:
                factory = KINDS[kind]
                op.impl(name, math=math)(lambda spec, params, ctx, f=factory, o=op, m=math: f(o, spec, m))
