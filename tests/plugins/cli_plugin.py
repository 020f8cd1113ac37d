"""A user's op file for the CLI tests, loaded only through `--kernels` or a session's `plugins`
(in a subprocess, so the test process's registry stays as shipped).

    y = 2 x        x: (N,) -> y: (N,)

Adds the op `cli_scale` (manual, pytorch) and an implementation `pytorch_cliplugin` of the
shipped `gelu` (plugins may add implementations to shipped ops: CONTRACTS.md "Plugins").
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from workbench.cost import Cost
from workbench.dtypes import DType
from workbench.registry import REGISTRY, Op, discover
from workbench.spec import Spec


@dataclass(frozen=True)
class ScaleSpec(Spec):
    N: int = 1024
    dtype: DType = DType.float32


SCALE = Op("cli_scale", ScaleSpec, description="y = 2x (a test plugin)")


@SCALE.inputs
def make_inputs(spec: ScaleSpec, device: str, seed: int):
    gen = torch.Generator(device=device).manual_seed(seed)
    return (torch.randn(spec.N, generator=gen, device=device).to(spec.dtype.torch),)


@SCALE.reference()
def reference(x):
    return 2 * x


@SCALE.cost_model
def cost(spec: ScaleSpec) -> Cost:
    size = spec.N * spec.dtype.itemsize
    return Cost(bytes_read=size, bytes_written=size, flops=spec.N)


@SCALE.impl("manual")
def build_manual(spec, params, ctx):
    """x + x."""
    return lambda x: x + x


@SCALE.impl("pytorch")
def build_pytorch(spec, params, ctx):
    """torch.mul."""
    return lambda x: torch.mul(x, 2)


discover()  # the shipped ops first, so that gelu exists to extend
GELU = REGISTRY.op("gelu")


@GELU.impl("pytorch_cliplugin", math="tanh")
def build_gelu(spec, params, ctx):
    """F.gelu (tanh), registered by a plugin."""
    return lambda x: F.gelu(x, approximate="tanh")
