"""How an implementation's kernel source is found for PTX and launch geometry.

A Triton implementation declares `triton_launch(spec, params) -> TritonLaunch`: the JIT
function and exactly the signature, constexprs, num_warps and grid its builder launches with,
so the ahead-of-time PTX is the PTX of the real launch. A CUDA implementation declares a
`CudaSource`: the `.cu` file beside the op file (only `__global__` kernels and plain launchers,
so `nvcc -ptx` compiles it alone) and the kernel names it launches.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping


@dataclass(frozen=True)
class TritonLaunch:
    """One Triton launch, as the builder performs it.

    kernel: the `@triton.jit` function; signature: argument name -> Triton type string
    ("*fp32", "*bf16", "i32", "fp32", "constexpr"); constexprs: meta-parameter values
    (BLOCK_SIZE, ...); grid: programs per axis; note: where the config came from
    (e.g. "autotune: first config, nothing cached"); scalars: the values of the integer
    arguments the builder passes (n_elements, strides), so the ahead-of-time compile
    specialises them as the launch does (a multiple of 16 gets `tt.divisibility`, which lets
    masked loads vectorize; 1 becomes a constant). An integer argument left out is compiled
    unspecialised, which can turn 16-byte vector loads into scalar ones.
    """

    kernel: Any
    signature: Mapping[str, str]
    constexprs: Mapping[str, Any]
    grid: tuple[int, ...]
    num_warps: int = 4
    num_stages: int = 3
    note: str = ""
    scalars: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class CudaSource:
    """A `.cu` file and the `__global__` kernels an implementation launches from it.

    launch: optional (spec, params) -> (grid, block_threads) for the launch geometry.
    """

    path: Path
    kernels: tuple[str, ...]
    launch: Callable[[Any, Mapping[str, Any]], tuple[tuple[int, ...], int]] | None = None
    extra_nvcc_flags: tuple[str, ...] = field(default_factory=tuple)


TRITON_DTYPE = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}


def triton_ptr(dtype: object) -> str:
    """Triton signature string for a pointer to `dtype` (a DType or its name): '*fp32'."""
    return "*" + TRITON_DTYPE[str(dtype)]
