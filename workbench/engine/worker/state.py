"""What a warm worker puts back between rows, and the health probe that decides whether it may
take another row (DESIGN.md "The layers": state that must not leak is reset and checked).

Reset after every row: dynamo's caches (every compiled row compiles fresh, rule 8), the
float32 precision switches (torch matmul, cuDNN, reduced-precision reductions), the default
dtype, grad mode, deterministic-algorithm mode, the current CUDA stream, and the caching
allocator (young garbage collected, all of it only while device memory is still held; cached
blocks released, peak statistics reset).

The worker is replaced (it leaves after the row's Result) when:
- the health probe fails: a small computation with a known result, synchronised, must come back
  right (a CUDA error poisons the context: every later call fails, so the probe does too);
- the process environment changed (CUDA_LAUNCH_BLOCKING, TORCH_*, ...): such switches are read
  once, so no reset can undo them; the row that set them gets a flag saying so;
- device memory stayed allocated after the reset beyond LEAK_BYTES (something holds tensors:
  the next row's peak memory and free memory would be wrong).
"""

from __future__ import annotations

import gc
import os
from dataclasses import dataclass, field
from typing import Any

from workbench.trace import mark

# Environment variables that switch how CUDA, torch, Triton or the math libraries behave; they are
# read once (at CUDA start, at import, at the first kernel), so no reset can undo them. Names with
# a leading underscore are libraries' own bookkeeping (Inductor sets
# _TORCHINDUCTOR_PYOBJECT_TENSOR_DATA_PTR while it compiles) and are not switches.
SWITCH_PREFIXES = ("CUDA_", "CUBLAS", "CUDNN_", "NCCL_", "NVIDIA_", "TORCH", "PYTORCH_", "TRITON_",
                   "OMP_", "MKL_", "OPENBLAS_", "LD_")
# Cache folders a library writes into the environment for its own subprocesses (Inductor sets
# TORCHINDUCTOR_CACHE_DIR on first use): where caches live, not how kernels run.
NOT_SWITCHES = frozenset({"TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"})
# Tool paths a library sets for itself on first use, and sets again when asked: Inductor points
# Triton at torch's bundled ptxas (torch/_inductor/runtime/compile_tasks.py,
# `_set_triton_ptxas_path`, cached). After a row they are put back and Inductor's cache cleared,
# so the next compiled row sets them again, as in a fresh process, and a Triton row between them
# compiles with Triton's own ptxas, as in a fresh process. On the H200 every torch.compile row
# otherwise replaced its worker ("changed process-wide switches (TRITON_PTXAS_PATH)").
TOOL_PATHS = ("TRITON_PTXAS_PATH",)
LEAK_BYTES = 64 * 2**20   # device memory a row may leave allocated (module-level caches, cuBLAS)
PROBE_N = 4096            # the probe: sum(2 * arange(PROBE_N)) == PROBE_N * (PROBE_N - 1)


@dataclass
class Baseline:
    """The process state a worker had when it warmed up (captured once, restored after rows)."""

    device: str
    env: dict[str, str] = field(default_factory=dict)
    switches: dict[str, Any] = field(default_factory=dict)
    allocated_bytes: int = 0

    @classmethod
    def capture(cls, device: str) -> "Baseline":
        import torch

        base = cls(device=device, env=dict(os.environ), switches=_read_switches(torch))
        if device.startswith("cuda") and torch.cuda.is_available():
            base.allocated_bytes = torch.cuda.memory_allocated(device)
        return base

    def after_row(self, kept_bytes: int = 0) -> str | None:
        """Reset, then probe. kept_bytes: device memory the worker keeps on purpose (the L2 flush
        buffer). Returns why this worker must be replaced, or None."""
        self.restore_tool_paths()
        changed = self.env_changes()
        try:
            self.reset(kept_bytes)
            mark("after row: reset")
            problem = self.probe(kept_bytes)
            mark("after row: probed")
        except Exception as exc:  # a poisoned CUDA context raises on the first call
            problem = f"health probe failed: {type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
        if changed:
            return f"the implementation changed process-wide switches ({', '.join(changed)})"
        return problem

    def restore_tool_paths(self) -> None:
        """Put TOOL_PATHS back to the warm-up values; let Inductor set them again next time."""
        import sys

        for key in TOOL_PATHS:
            if os.environ.get(key) != self.env.get(key):
                if key in self.env:
                    os.environ[key] = self.env[key]
                else:
                    os.environ.pop(key, None)
        tasks = sys.modules.get("torch._inductor.runtime.compile_tasks")
        setter = getattr(tasks, "_set_triton_ptxas_path", None)
        if hasattr(setter, "cache_clear"):
            setter.cache_clear()

    def env_changes(self) -> list[str]:
        """Switches (SWITCH_PREFIXES) set, changed or removed since the worker warmed up."""
        now = os.environ
        keys = {k for k in set(now) | set(self.env) if now.get(k) != self.env.get(k)
                and k.startswith(SWITCH_PREFIXES) and k not in NOT_SWITCHES}
        return sorted(keys)

    def reset(self, kept_bytes: int = 0) -> None:
        import sys

        import torch

        if "torch._dynamo" in sys.modules:  # nothing to reset where nothing compiled (its import costs ~1.5 s)
            sys.modules["torch._dynamo"].reset()
            mark("after row: dynamo reset")
        _write_switches(torch, self.switches)
        if self.device.startswith("cuda"):
            torch.cuda.set_stream(torch.cuda.default_stream(self.device))
            torch.cuda.synchronize(self.device)
            # cuBLAS keeps a workspace per (handle, stream) in the caching allocator (32 MiB on
            # Hopper): 96 MiB after a matmul row on the H200, which replaced the worker as a leak.
            # Freed here; the next GEMM allocates it again during its warm-up, as in a fresh process.
            clear = getattr(torch._C, "_cuda_clearCublasWorkspaces", None)
            if clear is not None:
                clear()
            mark("after row: synchronised, cuBLAS workspaces freed")
            generation = self.collect(kept_bytes)  # after the workspaces: what is still allocated is the row's
            mark(f"after row: collected generations 0-{generation}")
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(self.device)

    def collect(self, kept_bytes: int = 0, collect: Any = gc.collect, allocated: Any = None) -> int:
        """Give back device memory that garbage holds: the young generations (cheap), then a
        full collection only while device memory beyond the baseline and `kept_bytes` is still
        allocated (garbage cycles that reached the oldest generation may hold tensors). A full
        pass on every row walked the whole heap each time, and the first one after Inductor's
        import (the first profile or torch.compile of a worker) took 4.4 s on the H200 box.
        Returns the generation collected last. collect / allocated: injectable for tests."""
        import torch

        allocated = allocated or (lambda: torch.cuda.memory_allocated(self.device))
        collect(1)
        if allocated() - self.allocated_bytes - kept_bytes <= 0:
            return 1
        collect(2)
        return 2

    def probe(self, kept_bytes: int = 0) -> str | None:
        """A known computation on the worker's device; why it failed, or None."""
        import torch

        x = torch.arange(PROBE_N, device=self.device, dtype=torch.float64)
        total = float((2 * x).sum().item())
        if total != PROBE_N * (PROBE_N - 1):
            return f"health probe failed: sum came back {total:g}, not {PROBE_N * (PROBE_N - 1)}"
        del x
        if self.device.startswith("cuda"):
            torch.cuda.synchronize(self.device)
            held = torch.cuda.memory_allocated(self.device) - self.allocated_bytes - kept_bytes
            if held > LEAK_BYTES:
                return f"{held / 2**20:.0f} MiB of device memory stayed allocated after the row"
        return None


def _read_switches(torch: Any) -> dict[str, Any]:
    """The process-wide torch switches an implementation may flip (and not put back)."""
    switches = {
        "default_dtype": torch.get_default_dtype(),
        "grad_enabled": torch.is_grad_enabled(),
        "deterministic": torch.are_deterministic_algorithms_enabled(),
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
        "cudnn_benchmark": torch.backends.cudnn.benchmark,
        "cudnn_deterministic": torch.backends.cudnn.deterministic,
        "fp16_reduced": torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
        "bf16_reduced": torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
    }
    matmul = torch.backends.cuda.matmul
    if hasattr(matmul, "fp32_precision"):
        switches["matmul_fp32_precision"] = matmul.fp32_precision
    else:
        switches["matmul_allow_tf32"] = matmul.allow_tf32
    return switches


def _write_switches(torch: Any, switches: dict[str, Any]) -> None:
    """Put back the switches that differ from `switches` (only those: setting some is not free,
    torch.use_deterministic_algorithms imports dynamo, ~2.5 s the first time)."""
    now = _read_switches(torch)
    changed = {k for k, v in switches.items() if now.get(k) != v}
    if not changed:
        return
    matmul = torch.backends.cuda.matmul
    setters = {
        "default_dtype": torch.set_default_dtype,
        "grad_enabled": torch.set_grad_enabled,
        "deterministic": torch.use_deterministic_algorithms,
        "float32_matmul_precision": torch.set_float32_matmul_precision,
        "cudnn_benchmark": lambda v: setattr(torch.backends.cudnn, "benchmark", v),
        "cudnn_deterministic": lambda v: setattr(torch.backends.cudnn, "deterministic", v),
        "cudnn_allow_tf32": lambda v: setattr(torch.backends.cudnn, "allow_tf32", v),
        "fp16_reduced": lambda v: setattr(matmul, "allow_fp16_reduced_precision_reduction", v),
        "bf16_reduced": lambda v: setattr(matmul, "allow_bf16_reduced_precision_reduction", v),
        "matmul_fp32_precision": lambda v: setattr(matmul, "fp32_precision", v),
        "matmul_allow_tf32": lambda v: setattr(matmul, "allow_tf32", v),
    }
    # The new fp32_precision API and the legacy switches must not be mixed (torch raises): where
    # the new one exists it is the one written, and it covers float32_matmul_precision.
    if "matmul_fp32_precision" in switches:
        changed -= {"float32_matmul_precision", "cudnn_allow_tf32"}
    for name in sorted(changed):
        setters[name](switches[name])
