"""What this machine can run: a CUDA device, nvcc, Triton (compiled or interpreter only).

Availability is per action (CONTRACTS.md, "Results"): without a GPU a `cuda` implementation
cannot check, bench or profile, but its PTX comes from nvcc where nvcc exists; a Triton
implementation runs under the interpreter (marked, never presented as GPU speed).
"""

from __future__ import annotations

import functools
import importlib.util
import shutil
from dataclasses import dataclass
from pathlib import Path

from workbench.dtypes import DType
from workbench.backends import Action
from workbench.registry import Impl

NVCC_FALLBACKS = ("/usr/local/cuda/bin/nvcc", "/usr/local/bin/nvcc")


@dataclass(frozen=True)
class Machine:
    """Facts about this machine that decide availability.

    has_cuda: torch sees a CUDA device; device_name: its name; nvcc: path or None;
    triton: Triton importable; ninja: ninja importable or on PATH (load_inline needs it).
    """

    has_cuda: bool
    device_name: str | None
    nvcc: str | None
    triton: bool
    ninja: bool

    @property
    def triton_interpreted(self) -> bool:
        """Triton kernels run on CPU tensors under TRITON_INTERPRET here (no GPU)."""
        return self.triton and not self.has_cuda


def find_nvcc() -> str | None:
    """Path of nvcc: on PATH, else the usual install locations; None if absent."""
    found = shutil.which("nvcc")
    if found:
        return found
    return next((p for p in NVCC_FALLBACKS if Path(p).exists()), None)


@functools.lru_cache(maxsize=1)
def probe() -> Machine:
    """Probe once per process (imports torch; does not initialise CUDA beyond the query)."""
    import torch

    has_cuda = torch.cuda.is_available()
    return Machine(
        has_cuda=has_cuda,
        device_name=torch.cuda.get_device_name(0) if has_cuda else None,
        nvcc=find_nvcc(),
        triton=importlib.util.find_spec("triton") is not None,
        ninja=importlib.util.find_spec("ninja") is not None or shutil.which("ninja") is not None,
    )


def unavailable_reason(impl: Impl, action: Action | str, machine: Machine,
                       dtype: DType | None = None, device: str = "auto") -> str | None:
    """Why `impl` cannot do `action` here, or None when it can: its backend's answer
    (workbench.backends.base.Backend.unavailable).

    device: the session's device setting ("auto", "cpu", "cuda", "cuda:N").
    """
    return impl.backend.unavailable(impl, action, machine, dtype, device)


def note(impl: Impl, machine: Machine, device: str = "auto") -> str:
    """A short marker for what runs, e.g. 'Triton interpreter only' (empty when nothing to say)."""
    interpreter = impl.backend.interpreter
    if interpreter and (device == "cpu" or not machine.has_cuda):
        return f"{interpreter} only (not GPU speed)"
    return ""
