"""Peers: Liger-Kernel's Triton forward kernels attached to workbench's softmax and RMSNorm ops,
so that ours are compared with a public kernel library in one command:

    pip install liger-kernel            # 0.8.5 works with torch 2.11 / Triton 3.6 (pure Python wheel)
    workbench --replay examples/liger.yaml

Implementations (`triton_liger`: Triton kernels, from liger_kernel):
- softmax `triton_liger`: `liger_kernel.ops.softmax._softmax_forward(x)`, the forward of
  `LigerSoftmaxFunction` (one program per row; a single-block kernel where the row fits
  Liger's block, else its multi-block loop), no autograd bookkeeping;
- rmsnorm `triton_liger`: `liger_kernel.ops.rms_norm.rms_norm_forward(X, W, eps, offset=0.0,
  casting_mode="gemma", row_mode=None)`, the forward of `LigerRMSNormFunction`. "gemma" casting
  computes the whole row in float32 and rounds once to the output dtype, the same arithmetic as
  examples/rmsnorm.py's formula and its check (Liger's default "llama" mode rounds x * rstd to
  the input dtype before the weight multiply: a second rounding); offset 0 (y = x * rstd * w).
  The rmsnorm op comes from examples/rmsnorm.py: list it before this file in `plugins`.

Where liger_kernel is not installed the implementations are still listed (`--list` and the TUI
describe them with "unavailable here: liger_kernel is not installed ..."), and their rows are
`unavailable` with that reason (the builder raises UnavailableError). Liger's kernels need a CUDA
GPU (declared: `needs=["cuda_device"]`): on a machine without one, or with device cpu, their rows
are `unavailable` ("needs a CUDA GPU (none here)") whatever their size.
"""

from __future__ import annotations

import importlib.util

from workbench.errors import UnavailableError
from workbench.registry import REGISTRY

INSTALL = "pip install liger-kernel (0.8.5 works with torch 2.11 and Triton 3.6)"
EPS = 1e-6  # examples/rmsnorm.py's eps (Llama's)
NAME = "triton_liger"
# Liger's kernels run on a CUDA GPU only: declared, so that a row on a machine without one is
# `unavailable` before it is sized (the CPU's estimate skipped the session's shapes as too slow
# first, hiding why they could never run here).
NEEDS = ["cuda_device"]


def missing() -> str | None:
    """Why Liger's kernels cannot be imported here (None: they can)."""
    if importlib.util.find_spec("liger_kernel") is None:
        return f"liger_kernel is not installed: {INSTALL}"
    return None


def _forward(module: str, ctx):
    """The liger_kernel module, or UnavailableError saying why not (not installed, no GPU)."""
    why = missing()
    if why is None and (ctx.interpret or not ctx.is_cuda):
        why = "Liger-Kernel's kernels need a CUDA GPU (they do not run under the Triton interpreter)"
    if why:
        raise UnavailableError(why)
    return importlib.import_module(module)


def _described(builder, text: str):
    """The builder with its --list description, which says when it cannot run here."""
    why = missing()
    builder.__doc__ = text + (f" (unavailable here: {why})" if why else "")
    return builder


# -- softmax ---------------------------------------------------------------------------------
SOFTMAX = REGISTRY.op("softmax")


def build_softmax(spec, params, ctx):
    ops = _forward("liger_kernel.ops.softmax", ctx)
    forward = getattr(ops, "_softmax_forward", None)
    if forward is not None:
        return lambda x: forward(x)[0]
    function = ops.LigerSoftmaxFunction  # a release without the bare forward: its autograd Function
    return lambda x: function.apply(x)


SOFTMAX.impl(NAME, needs=NEEDS)(_described(build_softmax, "Liger-Kernel's Triton softmax forward "
                                             "(liger_kernel.ops.softmax._softmax_forward)"))


# -- rmsnorm (examples/rmsnorm.py) -----------------------------------------------------------
def _attach_rmsnorm() -> bool:
    """Register `liger` on rmsnorm when that op is loaded (examples/rmsnorm.py listed first)."""
    rmsnorm = REGISTRY.ops.get("rmsnorm")
    if rmsnorm is None:  # the session did not load examples/rmsnorm.py (first)
        return False
    if NAME in rmsnorm.impls:
        return True

    def build_rmsnorm(spec, params, ctx):
        forward = _forward("liger_kernel.ops.rms_norm", ctx).rms_norm_forward
        return lambda x, w: forward(x, w, EPS, 0.0, "gemma", None)[0]

    rmsnorm.impl(NAME, needs=NEEDS)(_described(build_rmsnorm, "Liger-Kernel's Triton RMSNorm forward (rms_norm_forward, "
                                                 "casting \"gemma\": float32, one rounding)"))
    return True


RMSNORM_ATTACHED = _attach_rmsnorm()
