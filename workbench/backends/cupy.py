"""`cupy`: a CUDA kernel compiled by CuPy (NVRTC, `cupy.RawKernel`), launched on torch's stream.

The second way to run a `.cu` kernel: no load_inline, no C++ binding, no ninja. CuPy compiles the
device code when the builder runs (and caches the binary on disk); the timed call wraps the torch
tensors as CuPy arrays (`__cuda_array_interface__`, no copy) and launches on torch's current
stream, so CUDA events and the profiler see it as any other kernel. Its `.cu` holds device code
only (NVRTC has no host headers), so the PTX view compiles the same file with nvcc
(kernel_source.CudaSource): the PTX shows here without a GPU or CuPy.

CuPy is on the GPU box; where it is not installed the implementation is unavailable, saying so.
"""

from __future__ import annotations

import functools
import importlib.util
from typing import Any, Callable

from workbench.backends.base import Action, Backend, Need
from workbench.errors import UnavailableError
from workbench.kernel_source import CudaSource

CUPY = Backend("cupy", "a CUDA kernel compiled by CuPy (NVRTC RawKernel), launched on torch's stream",
               source_type=CudaSource, needs={Need.cuda_device}, ptx_needs={Need.nvcc})
INSTALL_HINT = "CuPy is not installed (pip install cupy-cuda13x, matching the CUDA runtime)"


@functools.lru_cache(maxsize=1)
def cupy_installed() -> bool:
    """Whether `cupy` can be imported here (found, not imported: importing it initialises CUDA)."""
    return importlib.util.find_spec("cupy") is not None


@CUPY.reason
def _cupy_missing(impl, action, machine, dtype, device):
    """check/bench/profile need CuPy itself; the PTX comes from nvcc."""
    if action is Action.ptx or cupy_installed():
        return None
    return INSTALL_HINT


def raw_kernel(source: CudaSource, name: str, options: tuple[str, ...] = ("--std=c++17",)) -> Callable[..., None]:
    """The CuPy RawKernel `name` of `source.path`, compiled now (the builder's untimed work), as
    launch(grid, block, *args): torch tensors are passed as device pointers, Python ints as
    64-bit integers and bools as 32-bit ints, on torch's current CUDA stream.
    Raises UnavailableError without CuPy."""
    try:
        import cupy
    except ImportError as exc:
        raise UnavailableError(INSTALL_HINT) from exc
    import numpy
    import torch

    kernel = cupy.RawKernel(source.path.read_text(), name, options=options)
    kernel.compile()
    stream = cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)

    def as_arg(value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            return cupy.asarray(value)
        if isinstance(value, bool):
            return numpy.int32(value)
        return numpy.int64(value) if isinstance(value, int) else value

    def launch(grid: tuple[int, ...], block: tuple[int, ...], *args: Any) -> None:
        with stream:
            kernel(grid, block, tuple(as_arg(a) for a in args))
    return launch
