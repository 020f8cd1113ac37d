"""`manual` (a hand-written PyTorch formula) and `pytorch` (the built-in op): library kernels.

They run wherever torch runs (CPU or GPU) and declare no kernel source (`Impl.source` is None):
the PTX view says so, and the profiler's kernel table shows which ATen/cuBLAS kernels ran.
"""

from __future__ import annotations

from workbench.backends.base import Backend

MANUAL = Backend("manual", "hand-written PyTorch formula (eager ATen kernels)")
PYTORCH = Backend("pytorch", "the built-in PyTorch op (ATen, cuBLAS)")
