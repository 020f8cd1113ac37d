"""The lecture's MLP benchmark (section 1.1): a stack of Linear + GeLU, forward and backward.

    h_0 = x,  h_{l+1} = gelu(h_l W_l^T + b_l)  for l < layers,  loss = sum(h_layers)
    x: (batch, dim), W: (layers, dim, dim), b: (layers, dim); each step runs forward and backward

dtypes: float32, float16, bfloat16. GeLU is the exact (erf) form, as the lecture's model uses
torch.nn.functional.gelu's default.
One call runs `steps` training steps (gradients set to None, forward, backward; no optimizer,
as the lecture's `run_mlp`) and returns the last step's [loss, ||dL/dW_0||] as float32: the loss
checks the forward, the norm of the first layer's weight gradient the whole backward (it
depends on every layer). Both are large positive aggregates, so the check is relative and
scale-free; an elementwise gradient check would sit under atol or fail on near-zero entries
depending on the shape. The loss is a sum (the lecture's is a mean), accumulated in float32.
Shape fields: batch, dim, layers, steps (timing should grow linearly with steps: a sanity check).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from workbench.cost import Cost
from workbench.dtypes import DType
from workbench.check.inputs import seeded_normal
from workbench.registry import BuildContext, Op
from workbench.spec import Spec


# FLOPs per element of the erf GeLU forward (x/sqrt2, erf counted as 1, 1+, *x, *0.5) and of
# its backward (the derivative Phi(x) + x phi(x): exp and erf as 1 each, about 8 in all).
GELU_FORWARD_FLOPS = 5
GELU_BACKWARD_FLOPS = 8


# -- spec ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MlpSpec(Spec):
    """x: (batch, dim) through `layers` Linear(dim, dim) + GeLU; `steps` forward+backward passes."""

    batch: int = 1024
    dim: int = 2048
    layers: int = 4
    steps: int = 2
    dtype: DType = DType.float32


MLP = Op(
    "mlp", MlpSpec,
    description="Linear + GeLU stack, forward and backward, `steps` times",
    test_specs=[{"batch": 8, "dim": 64, "layers": 2, "steps": 2}, {"batch": 33, "dim": 100, "layers": 3, "steps": 1}],
    # The signal passes `layers` products of length dim forward and back; measured errors on
    # CPU stay within a tenth of this tolerance in every dtype up to 1024 x 16 layers.
    reduction_length=lambda spec: spec.dim * spec.layers,
    matmul_like=True,
    # No check_chunks: both outputs depend on every input. The loss and the norm are float32
    # in every dtype (a half-precision sum would overflow).
    out_dtype=lambda spec: DType.float32,
)


# -- inputs and reference --------------------------------------------------------------------
@MLP.inputs
def make_inputs(spec: MlpSpec, device: str, seed: int, out=None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Seeded x (batch, dim), W (layers, dim, dim), b (layers, dim).

    W is normal with std sqrt(2/dim) (He initialisation), so activations keep an O(1) scale
    over tens of layers (nn.Linear's default shrinks them by ~3x per layer); at 64 layers the
    first layer's gradient still fades to ~1e-4, where its check falls under atol. b is normal
    with std 0.1. out: refill those tensors in place.
    """
    x, w, b = out or (None, None, None)
    dtype = spec.dtype.torch
    return (seeded_normal((spec.batch, spec.dim), dtype, device, seed, 0, out=x),
            seeded_normal((spec.layers, spec.dim, spec.dim), dtype, device, seed, 1,
                          scale=math.sqrt(2.0 / spec.dim), out=w),
            seeded_normal((spec.layers, spec.dim), dtype, device, seed, 2, scale=0.1, out=b))


def forward(x: torch.Tensor, weights: list[torch.Tensor], biases: list[torch.Tensor]) -> torch.Tensor:
    """The lecture's MLP.forward: x = gelu(layer(x)) for each layer (exact erf GeLU)."""
    for w, b in zip(weights, biases):
        x = F.gelu(F.linear(x, w, b))
    return x


def train_steps(fwd, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, steps: int) -> torch.Tensor:
    """Run `steps` training steps of `fwd` (grads to None, forward, sum, backward); return the
    last step's [loss, ||dL/dW_0||] in float32 (at least). The layers are leaf views of the
    stacked W and b (no copies)."""
    weights = [t.detach().requires_grad_() for t in w.unbind(0)]
    biases = [t.detach().requires_grad_() for t in b.unbind(0)]
    acc = torch.promote_types(x.dtype, torch.float32)  # a half-precision sum would overflow
    with torch.enable_grad():
        for _ in range(steps):
            for p in (*weights, *biases):
                p.grad = None  # as optimizer.zero_grad(set_to_none=True)
            loss = fwd(x, weights, biases).sum(dtype=acc)
            loss.backward()
    return torch.stack([loss.detach(), torch.linalg.vector_norm(weights[0].grad, dtype=acc)])


@MLP.reference("erf")
def reference(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """float64 [loss, ||dL/dW_0||] of one step (every step computes the same)."""
    return train_steps(forward, x, w, b, steps=1)


# -- cost model ------------------------------------------------------------------------------
@MLP.footprint
def footprint(spec: MlpSpec) -> int:
    """Bytes resident during a step: x, W and b with their gradients, and per layer the
    pre-activation and activation kept for the backward (autograd's saved tensors), plus two
    activation-sized gradients in flight. The traffic (cost below) re-reads W every step, so it
    is not the memory."""
    act = spec.batch * spec.dim
    params = spec.layers * (spec.dim * spec.dim + spec.dim)
    return (act + 2 * params + 2 * spec.layers * act + 2 * act) * spec.dtype.itemsize


@MLP.cost_model
def cost(spec: MlpSpec) -> Cost:
    size = spec.dtype.itemsize
    act = spec.batch * spec.dim  # one activation tensor
    per_layer_read = (
        2 * spec.dim * spec.dim      # W: read by the forward matmul and by the backward dX matmul
        + 3 * act                    # forward input (twice: matmul, then dW) and the pre-activation (GeLU backward)
        + 2 * act                    # upstream gradient: read by dX and dW matmuls
    )
    per_layer_written = (
        2 * act                      # pre-activation and activation, kept for the backward
        + 2 * act                    # gradient w.r.t. pre-activation and w.r.t. the layer input
        + spec.dim * spec.dim + spec.dim  # dW and db
    )
    per_layer_flops = (
        2 * spec.batch * spec.dim * spec.dim      # forward matmul
        + 4 * spec.batch * spec.dim * spec.dim    # backward: dX and dW matmuls
        + act                                     # bias add
        + act                                     # db: sum over the batch
        + (GELU_FORWARD_FLOPS + GELU_BACKWARD_FLOPS) * act
    )
    return Cost(
        bytes_read=spec.steps * spec.layers * per_layer_read * size,
        bytes_written=spec.steps * spec.layers * per_layer_written * size,
        flops=spec.steps * spec.layers * per_layer_flops,
    )


# -- implementations -------------------------------------------------------------------------
def _runner(fwd, spec: MlpSpec, ctx: BuildContext):
    steps = spec.steps

    def run(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return train_steps(fwd, x, w, b, steps)
    return run


@MLP.impl("pytorch", math="erf")
def build_pytorch(spec: MlpSpec, params, ctx: BuildContext):
    """Eager PyTorch: per layer, a cuBLAS matmul with bias and a GeLU kernel; autograd backward."""
    return _runner(forward, spec, ctx)


@MLP.impl("compiled", math="erf")
def build_compiled(spec: MlpSpec, params, ctx: BuildContext):
    """torch.compile(forward, dynamic=False): Inductor fuses bias + GeLU, AOTAutograd the backward."""
    return _runner(torch.compile(forward, dynamic=False), spec, ctx)
