"""`triton`: a `@triton.jit` kernel launched through its `TritonLaunch` (kernel_source.TritonSource).

Without a GPU its kernels run on CPU tensors under the Triton interpreter (never GPU speed), for
the dtypes the interpreter can do (numpy has no bfloat16 arithmetic: `interpreter_dtypes`); its
PTX comes from an ahead-of-time compile of the same launch (workbench/ptx/triton_aot.py).
"""

from __future__ import annotations

from workbench.backends.base import Action, Backend, Need
from workbench.kernel_source import TritonSource

TRITON = Backend("triton", "a Triton kernel (@triton.jit), launched through its TritonLaunch",
                 source_type=TritonSource, needs={Need.triton}, ptx_needs={Need.triton},
                 interpreter="Triton interpreter")


@TRITON.reason
def _interpreter_dtype(impl, action, machine, dtype, device):
    """On CPU the interpreter runs only the dtypes the implementation says it can; PTX needs the
    launch declared (`source=TritonSource(launch)`: without it there is nothing to compile)."""
    if action is Action.ptx:
        return TRITON.no_source() if impl.source is None or impl.source.launch is None else None
    if dtype is None or not (device == "cpu" or not machine.has_cuda):
        return None
    allowed = impl.source.interpreter_dtypes if impl.source is not None else None
    if allowed is not None and dtype not in allowed and dtype.value.startswith("float8"):
        return (f"the Triton interpreter cannot write {dtype.value} here (Triton's interpreter, as measured on 3.6, converts "
                f"float32 to fp8 wrongly: 500 -> 256, 1e-3 -> 0, errors of half a value); its fp8 kernels "
                f"need a GPU with fp8 tensor cores (sm_89+)")
    if allowed is not None and dtype not in allowed:
        return f"the Triton interpreter cannot run {dtype.value} here (CPU numpy has no {dtype.value} arithmetic)"
    return None


@TRITON.source
def _launch(impl, spec, params, ctx):
    return impl.source.launch_for(spec, params, ctx) if impl.source is not None else None
