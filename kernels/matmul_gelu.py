"""GeLU of a matrix product, fused (the lecture's section 7: when writing your own GEMM pays).

    Y = gelu(A @ B),  gelu(c) = 0.5 c (1 + tanh(sqrt(2/pi) (c + 0.044715 c^3)))
    A: (M, K), B: (K, N) -> Y: (M, N)

dtypes: float16, bfloat16 (the tensor-core dtypes this fusion is for); float32 accumulation.
`manual` runs the product and then the activation: two kernels, C written to HBM and read back.
`triton` applies GeLU in the matmul's epilogue while the tile is still in registers, saving
that 2MN round trip: the fusion cuBLAS cannot offer (the lecture's closing advice).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from workbench.cost import Cost
from workbench.dtypes import DType
from workbench.check.chunks import CheckChunks
from workbench.kernel_source import TritonLaunch, TritonSource
from workbench.registry import BuildContext, Op

from ._gemm import GEMM_TEST_SPECS, TRITON_PARAMS, GemmSpec, gemm_builder, gemm_cost, gemm_k, matmul_launch
from .gelu import FLOPS_PER_ELEMENT as GELU_FLOPS_PER_ELEMENT, reference_tanh as gelu_reference
from .matmul import make_inputs as matmul_inputs, special_inputs as matmul_special_inputs


# -- spec ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MatmulGeluSpec(GemmSpec):
    """A: (M, K) @ B: (K, N), then GeLU -> (M, N)."""


MATMUL_GELU = Op(
    "matmul_gelu", MatmulGeluSpec,
    description="gelu(A @ B), tanh GeLU fused into the matmul epilogue",
    dtypes=[DType.float16, DType.bfloat16],
    test_specs=GEMM_TEST_SPECS,
    reduction_length=gemm_k,
    matmul_like=True,
    check_chunks=CheckChunks.rows(0),
)


# -- inputs and reference --------------------------------------------------------------------
@MATMUL_GELU.inputs
def make_inputs(spec: MatmulGeluSpec, device: str, seed: int, out=None) -> tuple[torch.Tensor, torch.Tensor]:
    """Seeded standard-normal A (M, K) and B (K, N), as matmul's (at K = 64 a third of the
    outputs lie in GeLU's curved region |c| < 3); out: refill those."""
    return matmul_inputs(spec, device, seed, out=out)


MATMUL_GELU.special_inputs(matmul_special_inputs)  # matmul's: A * 2^s, B * 2^-s, -0 columns


@MATMUL_GELU.reference("tanh")
def reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """float64 tanh GeLU of A @ B."""
    return gelu_reference(a @ b)


# -- cost model ------------------------------------------------------------------------------
@MATMUL_GELU.cost_model
def cost(spec: MatmulGeluSpec) -> Cost:
    """The product's (A and B read once, Y written once, 2MNK) plus GeLU on each output (kernels/gelu.py)."""
    return gemm_cost(spec, epilogue_flops_per_element=GELU_FLOPS_PER_ELEMENT)


def unfused_bytes_moved(spec: MatmulGeluSpec) -> int:
    """Traffic of the two kernels `manual` launches: the matmul's, then GeLU's own round trip."""
    size = spec.dtype.itemsize
    return (
        cost(spec).bytes                   # A and B read, a product written (by the matmul)
        + spec.M * spec.N * size           # C read back by the GeLU kernel
        + spec.M * spec.N * size           # Y written by the GeLU kernel
    )


# -- implementations -------------------------------------------------------------------------
def matmul_then_gelu(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Two kernels: cuBLAS matmul, then the fused ATen GeLU."""
    return F.gelu(a @ b, approximate="tanh")


# The product rounds to the dtype before GeLU, whose slope amplifies that rounding where GeLU is
# small (c < 0): relative errors up to ~4 u in bfloat16 (CPU: least passing factors 128 float16
# and 512 bfloat16 over K = 1 .. 4097, seeds 0-2; small K is the worst, where the accumulation
# term is small; benchmarks/calibrate_check.py). Factors with a 2x margin:
UNFUSED_FACTOR = {"float16": 256.0, "bfloat16": 1024.0}


@MATMUL_GELU.impl("manual", math="tanh", moved_bytes=unfused_bytes_moved, tolerance_scale=UNFUSED_FACTOR)
def build_manual(spec: MatmulGeluSpec, params, ctx: BuildContext):
    """Matmul then GeLU: two kernels, the product round-trips through HBM.

    Tolerance factor UNFUSED_FACTOR (the product is rounded to the dtype before GeLU)."""
    return matmul_then_gelu


@MATMUL_GELU.impl("compiled", math="tanh", tolerance_scale=UNFUSED_FACTOR)
def build_compiled(spec: MatmulGeluSpec, params, ctx: BuildContext):
    """torch.compile(manual, dynamic=False): cuBLAS plus an Inductor GeLU kernel unless autotuned.

    Tolerance factor UNFUSED_FACTOR, as manual's (the product is rounded before the GeLU kernel)."""
    return torch.compile(matmul_then_gelu, dynamic=False)


def _triton_launch(spec: MatmulGeluSpec, params, ctx: BuildContext | None = None) -> TritonLaunch:
    return matmul_launch(spec, params, activation="gelu", ctx=ctx, op_name="matmul_gelu")


@MATMUL_GELU.impl("triton", math="tanh", params=TRITON_PARAMS,
                  source=TritonSource(_triton_launch, interpreter_dtypes=("float16",)))
def build_triton(spec: MatmulGeluSpec, params, ctx: BuildContext):
    """Triton matmul (kernels/_gemm.py: the tuned TMA kernel in 16-bit dtypes) with GeLU applied to
    the tile in its epilogue, tuned on its own (the epilogue changes the best tile)."""
    return gemm_builder(spec, params, ctx, "gelu", "matmul_gelu", matmul_inputs)
