"""What a warm worker puts back between rows, and the health probe that decides whether it may
take another row (DESIGN.md "The layers": state that must not leak is reset and checked).

Reset after every row: dynamo's caches (every compiled row compiles fresh, rule 8), the
float32 precision switches (torch matmul, cuDNN, reduced-precision reductions), the default
dtype, grad mode, deterministic-algorithm mode, the current CUDA stream, and the caching
allocator (garbage collected, cached blocks released, peak statistics reset).

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

# Environment variables that switch how CUDA, torch, Triton or the math libraries behave; they are
# read once (at CUDA start, at import, at the first kernel), so no reset can undo them. Names with
# a leading underscore are libraries' own bookkeeping (Inductor sets
# _TORCHINDUCTOR_PYOBJECT_TENSOR_DATA_PTR while it compiles) and are not switches.
SWITCH_PREFIXES = ("CUDA_", "CUBLAS", "CUDNN_", "NCCL_", "NVIDIA_", "TORCH", "PYTORCH_", "TRITON_",
                   "OMP_", "MKL_", "OPENBLAS_", "LD_")
# Cache folders a library writes into the environment for its own subprocesses (Inductor sets
# TORCHINDUCTOR_CACHE_DIR on first use): where caches live, not how kernels run.
NOT_SWITCHES = frozenset({"TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"})
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
        changed = self.env_changes()
        try:
            self.reset()
            problem = self.probe(kept_bytes)
        except Exception as exc:  # a poisoned CUDA context raises on the first call
            problem = f"health probe failed: {type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
        if changed:
            return f"the implementation changed process-wide switches ({', '.join(changed)})"
        return problem

    def env_changes(self) -> list[str]:
        """Switches (SWITCH_PREFIXES) set, changed or removed since the worker warmed up."""
        now = os.environ
        keys = {k for k in set(now) | set(self.env) if now.get(k) != self.env.get(k)
                and k.startswith(SWITCH_PREFIXES) and k not in NOT_SWITCHES}
        return sorted(keys)

    def reset(self) -> None:
        import torch

        import torch._dynamo

        torch._dynamo.reset()
        _write_switches(torch, self.switches)
        gc.collect()
        if self.device.startswith("cuda"):
            torch.cuda.set_stream(torch.cuda.default_stream(self.device))
            torch.cuda.synchronize(self.device)
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(self.device)

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
    torch.set_default_dtype(switches["default_dtype"])
    torch.set_grad_enabled(switches["grad_enabled"])
    torch.use_deterministic_algorithms(switches["deterministic"])
    matmul = torch.backends.cuda.matmul
    # The new fp32_precision API and the legacy switches must not be mixed (torch raises): write
    # the one that was read; float32_matmul_precision maps onto it in torch >= 2.9.
    if "matmul_fp32_precision" in switches:
        matmul.fp32_precision = switches["matmul_fp32_precision"]
    else:
        torch.set_float32_matmul_precision(switches["float32_matmul_precision"])
        matmul.allow_tf32 = switches["matmul_allow_tf32"]
    torch.backends.cudnn.benchmark = switches["cudnn_benchmark"]
    torch.backends.cudnn.deterministic = switches["cudnn_deterministic"]
    if "matmul_fp32_precision" not in switches:
        torch.backends.cudnn.allow_tf32 = switches["cudnn_allow_tf32"]
    matmul.allow_fp16_reduced_precision_reduction = switches["fp16_reduced"]
    matmul.allow_bf16_reduced_precision_reduction = switches["bf16_reduced"]
