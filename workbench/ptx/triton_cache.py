"""What Triton's JIT has compiled in this process: the kernels a real launch left in a
JITFunction's device cache, and the resources a loaded kernel reports.

Read-only inspection of `JITFunction.device_caches` (Triton 3.3+: per device a tuple whose first
item is the kernel cache); an asynchronously compiled entry is a future whose `result()` is the
CompiledKernel.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from workbench.errors import WorkbenchError


# The device keys under which ptx/triton_aot.py's stand-in driver caches its compiles.
AOT_DEVICE_PREFIX = "workbench-aot-"


class NotJitError(WorkbenchError):
    """The object is not a @triton.jit function (nor a wrapper of one)."""


def unwrap_jit(kernel: Any) -> Any:
    """The JITFunction under autotune/heuristics wrappers (each keeps the wrapped one as `.fn`)."""
    seen = 0
    while type(kernel).__name__ != "JITFunction" and hasattr(kernel, "fn") and seen < 8:
        kernel, seen = kernel.fn, seen + 1
    if type(kernel).__name__ != "JITFunction":
        raise NotJitError(f"{kernel!r} is not a @triton.jit function")
    return kernel


# -- kernels a real launch compiled ---------------------------------------------------------------
@dataclass(frozen=True)
class LaunchedKernel:
    """A kernel the JIT compiled for a real launch: device, cache key, the CompiledKernel."""

    device: Any
    key: Any
    compiled: Any

    @property
    def ptx(self) -> str | None:
        asm = getattr(self.compiled, "asm", None) or {}
        return asm.get("ptx") if hasattr(asm, "get") else None


def launched_kernels(jit_fn: Any) -> list[LaunchedKernel]:
    """Every kernel a real launch left in a JITFunction's device cache (`device_caches`, Triton
    3.3+), without the ahead-of-time compiles made against the stand-in driver (ptx/triton_aot.py,
    cached under device keys starting with AOT_DEVICE_PREFIX)."""
    jit_fn = unwrap_jit(jit_fn)
    found: list[LaunchedKernel] = []
    for device, entry in list(jit_fn.device_caches.items()):
        if str(device).startswith(AOT_DEVICE_PREFIX):
            continue
        kernel_cache = entry[0] if isinstance(entry, tuple) else entry
        for key, kernel in list(kernel_cache.items()):
            if not hasattr(kernel, "asm") and hasattr(kernel, "result"):  # async compile: a future
                kernel = kernel.result()
            found.append(LaunchedKernel(device, key, kernel))
    return found


def launched_ptx(jit_fn: Any) -> dict[str, str]:
    """PTX of every kernel a real launch of `jit_fn` compiled, keyed by its compile hash."""
    out: dict[str, str] = {}
    for lk in launched_kernels(jit_fn):
        if lk.ptx is not None:
            out[str(getattr(lk.compiled, "hash", lk.key))] = lk.ptx
    return out


def loaded_resources(compiled: Any) -> tuple[int | None, int | None]:
    """(registers, local bytes) from a kernel the driver has loaded (n_regs, n_spills x 4), else Nones."""
    if getattr(compiled, "module", None) is None:
        return None, None
    n_regs, n_spills = getattr(compiled, "n_regs", None), getattr(compiled, "n_spills", None)
    return n_regs, (n_spills * 4 if n_spills is not None else None)  # driver.c: LOCAL_SIZE_BYTES / 4
