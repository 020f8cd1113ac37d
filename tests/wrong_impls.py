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


def _right(op: Op, spec, inputs: tuple, math: str) -> torch.Tensor:
    impl = next(i for i in op.impls.values() if i.math == math)
    return reference_output(op, impl, inputs).to(op.out_dtype(spec).torch)


def _zeros(op, spec, math):
    return lambda *inputs: torch.zeros_like(_right(op, spec, inputs, math))


def _half(op, spec, math):
    return lambda *inputs: 0.5 * _right(op, spec, inputs, math)


def _input(op, spec, math):
    return lambda *inputs: inputs[0]


def _overwrite(op, spec, math):
    def run(*inputs):
        right = _right(op, spec, inputs, math)
        first = inputs[0]
        if first.shape == right.shape and first.dtype == right.dtype and not torch.equal(first, right):
            return first.copy_(right)   # computed "in place": the input is gone
        first.zero_()                   # scratch space borrowed from an input and not restored
        return right
    return run


def _notail(op, spec, math):
    def run(*inputs):
        out = _right(op, spec, inputs, math)
        tail = min(TAIL_PACK, max(1, out.numel() // 2))
        out.view(-1)[out.numel() - tail:] = 0
        return out
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


KINDS: dict[str, Callable] = {"zeros": _zeros, "half": _half, "input": _input, "overwrite": _overwrite,
                              "notail": _notail, "ktail": _ktail, "nomax": _nomax, "once": _once,
                              "dtype": _dtype, "ptrcache": _ptrcache}
# The gate each kind must fail (a kind may fail an earlier gate on some ops: input's shape).
EXPECTED_GATES = {"zeros": {"elementwise+norm-wise", "elementwise"}, "half": {"elementwise+norm-wise"},
                  "input": {"shape", "dtype", "elementwise", "elementwise+norm-wise"}, "overwrite": {"inputs"},
                  "notail": {"elementwise", "elementwise+norm-wise"},
                  "ktail": {"elementwise", "elementwise+norm-wise"},
                  "nomax": {"elementwise", "elementwise+norm-wise"},
                  "once": {"elementwise", "elementwise+norm-wise"}, "dtype": {"dtype"},
                  "ptrcache": {"elementwise", "elementwise+norm-wise"}}


def shipped_ops(registry: Registry) -> list[Op]:
    return [op for op in registry.ops.values()
            if any(i.builder.__module__.startswith(SHIPPED_MODULE) for i in op.impls.values())]


def is_identity(op: Op) -> bool:
    """Whether the op's output is its first input (sleep): then returning it is right."""
    spec = op.make_spec(op.test_specs[0], op.dtypes[0])
    inputs = op.make_inputs(spec, "cpu", 0)
    math = next(iter(op.impls.values())).math
    return torch.equal(_right(op, spec, inputs, math), inputs[0])


def applicable(op: Op) -> list[str]:
    """The wrong kinds that are wrong for this op."""
    kinds = [k for k in KINDS if k not in ("input", "ktail", "nomax")]
    if not is_identity(op):
        kinds.append("input")
    if op.reduction_length and op.check_chunks is not None and op.check_chunks.kind == "rows":
        kinds.append("ktail")  # a reduction over the inputs' last axis (matmul, cdist)
    if op.sum_length:
        kinds.append("nomax")  # softmax
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
