"""`cuda`: CUDA C++ built with torch's load_inline (workbench/cuda_build.py) from the `.cu` beside
the op file (kernel_source.CudaSource).

Runs on a CUDA device with nvcc and ninja; its PTX needs only nvcc (`nvcc -ptx` of the `.cu`,
so it is there on a machine without a GPU).
"""

from __future__ import annotations

from workbench.backends.base import Backend, Need
from workbench.kernel_source import CudaSource

CUDA = Backend("cuda", "CUDA C++ through torch.utils.cpp_extension.load_inline", source_type=CudaSource,
               needs={Need.cuda_device, Need.nvcc, Need.ninja}, ptx_needs={Need.nvcc})
