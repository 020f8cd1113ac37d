"""Test-only op `crashy` whose implementations misbehave on purpose (loaded with --kernels).

    y = 2 x        x: (N,) -> y: (N,)        float32

manual: correct; manual_segv: segfaults (a NULL read) when N == 2; manual_hang: hangs in its
builder when N == 2; manual_spin: spins in Python there; manual_wrong: returns 3 x (the checker must catch it); manual_noisy:
prints to stdout and stderr from Python and from C (captured as Log events).
"""

from __future__ import annotations

import ctypes
import os
import sys
import time
from dataclasses import dataclass

import torch

from workbench.cost import Cost
from workbench.dtypes import DType
from workbench.registry import Op
from workbench.spec import Spec


@dataclass(frozen=True)
class CrashySpec(Spec):
    """x: (N,) -> (N,)."""

    N: int = 4
    dtype: DType = DType.float32


CRASHY = Op("crashy", CrashySpec, description="2x, with misbehaving implementations", dtypes=["float32"])


@CRASHY.inputs
def make_inputs(spec: CrashySpec, device: str, seed: int):
    gen = torch.Generator(device=device).manual_seed(seed)
    return (torch.randn(spec.N, generator=gen, device=device, dtype=torch.float32),)


@CRASHY.reference("default")
def reference(x):
    return 2.0 * x


@CRASHY.cost_model
def cost(spec: CrashySpec) -> Cost:
    return Cost(bytes_read=4 * spec.N, bytes_written=4 * spec.N, flops=spec.N)  # read x, write y, one mul each


@CRASHY.impl("manual")
def build_manual(spec, params, ctx):
    """Correct: 2 * x."""
    return lambda x: 2.0 * x


@CRASHY.impl("manual_segv")
def build_segv(spec, params, ctx):
    """Reads address 0 when N == 2: the process dies of SIGSEGV."""
    def run(x):
        if spec.N == 2:
            ctypes.string_at(0)
        return 2.0 * x
    return run


@CRASHY.impl("manual_hang")
def build_hang(spec, params, ctx):
    """Hangs in the builder when N == 2."""
    if spec.N == 2:
        time.sleep(3600)
    return lambda x: 2.0 * x


@CRASHY.impl("manual_spin")
def build_spin(spec, params, ctx):
    """Spins on the CPU in Python (no sleep, no GIL release) in the builder when N == 2: the
    PTX source map of a 46-kernel module did that for minutes on the H200."""
    while spec.N == 2:
        sum(i * i for i in range(1000))
    return lambda x: 2.0 * x


@CRASHY.impl("manual_wrong")
def build_wrong(spec, params, ctx):
    """Wrong on purpose: 3 * x."""
    return lambda x: 3.0 * x


@CRASHY.impl("manual_noisy")
def build_noisy(spec, params, ctx):
    """Prints from Python (stdout, stderr) and from C (fd 1 directly)."""
    print("noisy: python stdout")
    print("noisy: python stderr", file=sys.stderr)
    os.write(1, b"noisy: raw fd 1\n")
    return lambda x: 2.0 * x


# -- warm-worker probes (tests/test_engine_workers.py) ------------------------------------------
@CRASHY.impl("manual_pid")
def build_pid(spec, params, ctx):
    """Prints the worker's pid and the torch switches it finds (reset between rows?)."""
    print(f"pid {os.getpid()} dtype {torch.get_default_dtype()} grad {torch.is_grad_enabled()} "
          f"deterministic {torch.are_deterministic_algorithms_enabled()}")
    return lambda x: 2.0 * x


@CRASHY.impl("manual_state")
def build_state(spec, params, ctx):
    """Flips process-wide torch switches and leaves them flipped (the worker must reset them)."""
    torch.set_default_dtype(torch.float64)
    torch.set_grad_enabled(False)
    torch.use_deterministic_algorithms(True)
    return lambda x: 2.0 * x


@CRASHY.impl("manual_raise")
def build_raise(spec, params, ctx):
    """Raises a RuntimeError (as a CUDA error surfaces) when N == 2."""
    if spec.N == 2:
        raise RuntimeError("CUDA error: an illegal memory access was encountered (simulated)")
    return lambda x: 2.0 * x


@CRASHY.impl("manual_env")
def build_env(spec, params, ctx):
    """Sets CUDA_LAUNCH_BLOCKING, a switch read once: its worker must not run another row."""
    os.environ["CUDA_LAUNCH_BLOCKING"] = "1"
    return lambda x: 2.0 * x


@CRASHY.impl("manual_poison")
def build_poison(spec, params, ctx):
    """Breaks torch.arange for the rest of the process (the health probe must notice)."""
    torch.arange = lambda *a, **k: torch.zeros(4)
    return lambda x: 2.0 * x
