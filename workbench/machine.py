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

    has_cuda: NVML sees a CUDA device (the worker's torch decides where rows run); device_name: its name; nvcc: path or None;
    triton: Triton importable; ninja: ninja importable or on PATH (load_inline needs it);
    capability: the first GPU's compute capability as 10*major + minor (90 on Hopper; None: no GPU
    or NVML could not say).
    """

    has_cuda: bool
    device_name: str | None
    nvcc: str | None
    triton: bool
    ninja: bool
    capability: int | None = None

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


@dataclass(frozen=True)
class GpuFacts:
    """What NVML says about GPU `index` without torch: name, memory, driver (None: no GPU or
    no NVML). The worker's torch view (engine/protocol.WorkerFacts) is the one rows run on."""

    name: str
    memory_bytes: int | None
    driver: str | None
    capability: int | None = None


def nvml_gpus() -> list[GpuFacts]:
    """Every GPU NVML sees (nvidia-ml-py; empty without a driver or the package)."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # no NVML library, no driver, no package: no GPU for us
        return []
    try:
        driver = _text(pynvml.nvmlSystemGetDriverVersion())
        gpus = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            memory = pynvml.nvmlDeviceGetMemoryInfo(handle).total
            gpus.append(GpuFacts(_text(pynvml.nvmlDeviceGetName(handle)), int(memory), driver, _capability(pynvml, handle)))
        return gpus
    except Exception:  # a GPU NVML cannot describe: count what was described
        return []
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass


def _capability(pynvml, handle) -> int | None:
    try:
        major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
        return 10 * int(major) + int(minor)
    except Exception:  # an older driver or binding: unknown
        return None


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@functools.lru_cache(maxsize=1)
def probe() -> Machine:
    """Probe once per process, without torch: NVML for the GPU (nvidia-ml-py), the PATH for
    nvcc and ninja, the import system (not an import) for Triton and ninja."""
    gpus = nvml_gpus()
    return Machine(
        has_cuda=bool(gpus),
        device_name=gpus[0].name if gpus else None,
        nvcc=find_nvcc(),
        triton=importlib.util.find_spec("triton") is not None,
        ninja=importlib.util.find_spec("ninja") is not None or shutil.which("ninja") is not None,
        capability=gpus[0].capability if gpus else None,
    )


def unavailable_reason(impl: Impl, action: Action | str, machine: Machine,
                       dtype: DType | None = None, device: str = "auto") -> str | None:
    """Why `impl` cannot do `action` here, or None when it can: its backend's answer
    (workbench.backends.base.Backend.unavailable).

    device: the session's device setting ("auto", "cpu", "cuda", "cuda:N"). The `counters`
    action runs the implementation as a check does (what it needs beyond that, ncu and a GPU,
    the row's `measured.reason` says: engine/counters_run.py).
    """
    action = "check" if action == "counters" else action
    return impl.backend.unavailable(impl, action, machine, dtype, device)


def note(impl: Impl, machine: Machine, device: str = "auto") -> str:
    """A short marker for what runs, e.g. 'Triton interpreter only' (empty when nothing to say)."""
    interpreter = impl.backend.interpreter
    if interpreter and (device == "cpu" or not machine.has_cuda):
        return f"{interpreter} only (not GPU speed)"
    return ""
