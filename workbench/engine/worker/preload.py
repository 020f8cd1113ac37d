"""What the zygote imports once, before it forks any worker (issue #39: a first run's start-up).
Standard library and workbench/trace.py only.

By default the row runner (engine/worker/serve.py, execute.py, registry.py), which every worker
imports when it warms up. With WORKBENCH_ZYGOTE_PRELOAD=all, on a GPU host (ZYGOTE_GPU=1:
engine/pool.start_context sets it where NVML sees a GPU), also Triton, torch._dynamo, Inductor
and torch.utils.cpp_extension, which a worker's first Triton, compiled or CUDA row otherwise
imports on that row's clock. Not by default: measured on an H100 host (gVisor; daemon_default
stage, 2026-12-06), dynamo took 3.5-3.7 s and Inductor 2.3-2.5 s in the zygote, the five-way
GeLU's first run was no faster for it (13.9 s; the imports only moved from the compiled row to
the zygote, on the same critical path), and every first run without a compiled row would wait
~6 s longer for its first worker. WORKBENCH_ZYGOTE_PRELOAD=0 turns the preload off (torch and
the worker's entry only). The rules that keep the preload safe:

- nothing here may start CUDA: a zygote with CUDA started makes every child's CUDA fail. The
  modules are imported, nothing is called; meanwhile PYTORCH_NVML_BASED_CUDA_CHECK=1, so a
  `torch.cuda.is_available()` run by an import asks NVML instead of starting the driver; and
  `libcuda_mapped()` says afterwards whether the driver library was loaded anyway, as a trace
  mark (WORKBENCH_TRACE). On the H100 it was, after the full list, and every row still ran.
- `triton.jit` makes Triton's own library functions interpreted or compiled when Triton is
  imported (TRITON_INTERPRET is read then), so the GPU modules are imported with TRITON_INTERPRET
  unset, as for the compiled-Triton workers forked from here; a worker that interprets Triton (a
  CPU row on a GPU host) is then started by spawn instead (engine/pool.py).
- Inductor reads two settings once, at import, that a worker's environment sets afterwards
  (engine/plan.worker_env): its compile threads (1: no pool of compile subprocesses) and the CPU
  ISA check switch. `refresh_inductor_config` reads them again in the worker (engine/entry.py).

Then one collection and `gc.freeze()`: the preloaded modules' objects are out of every forked
worker's collections (its own settle_heap collection walked all of them after the fork).
"""

from __future__ import annotations

import gc
import importlib
import os
from typing import Any, Mapping, MutableMapping

from workbench.trace import mark

ZYGOTE_GPU = "WORKBENCH_ZYGOTE_GPU"
ZYGOTE_PRELOAD = "WORKBENCH_ZYGOTE_PRELOAD"
NVML_CHECK = "PYTORCH_NVML_BASED_CUDA_CHECK"  # torch.cuda.is_available() through NVML: no driver start
ROW_RUNNER = ("workbench.engine.worker.serve", "workbench.engine.worker.execute", "workbench.registry")
GPU_MODULES = ("triton", "triton.language", "torch._dynamo", "torch._inductor.compile_fx",
               "torch.utils.cpp_extension")


def modules(environ: Mapping[str, str]) -> tuple[str, ...]:
    """The modules `preload` imports under `environ` (module docstring)."""
    choice = environ.get(ZYGOTE_PRELOAD, "").strip().lower()
    if choice in ("0", "off", "no", "false"):
        return ()
    return ROW_RUNNER + (GPU_MODULES if choice == "all" and environ.get(ZYGOTE_GPU) == "1" else ())


def preload(environ: MutableMapping[str, str]) -> list[str]:
    """Import `modules(environ)` (TRITON_INTERPRET unset meanwhile), then freeze the heap; returns
    the modules imported. A module that fails to import is skipped (the worker meets it again)."""
    names = modules(environ)
    if not names:
        mark("zygote: preload off")
        return []
    done = []
    interpret = environ.pop("TRITON_INTERPRET", None)
    nvml_check = environ.get(NVML_CHECK)
    environ[NVML_CHECK] = "1"  # a torch.cuda.is_available() during an import asks NVML, not the driver
    try:
        for name in names:
            try:
                importlib.import_module(name)
            except Exception as exc:  # noqa: BLE001 - the worker imports it again and reports
                mark(f"zygote: {name} not preloaded ({type(exc).__name__})")
                continue
            done.append(name)
            mark(f"zygote: {name} imported")
    finally:
        if interpret is not None:
            environ["TRITON_INTERPRET"] = interpret
        if nvml_check is None:
            environ.pop(NVML_CHECK, None)
        else:
            environ[NVML_CHECK] = nvml_check
    if libcuda_mapped():
        mark("zygote: libcuda is mapped after the preload (CUDA may be unusable in workers)")
    gc.collect()
    gc.freeze()
    mark("zygote: preloaded")
    return done


def libcuda_mapped(maps: str = "/proc/self/maps") -> bool:
    """Whether the CUDA driver library is loaded in this process (False where /proc is missing)."""
    try:
        with open(maps, encoding="utf-8", errors="replace") as f:
            return any("libcuda.so" in line for line in f)
    except OSError:
        return False


def refresh_inductor_config(environ: Mapping[str, str] | None = None) -> bool:
    """In a worker whose environment is set: Inductor's import-time settings read again from it,
    where the zygote imported Inductor before (module docstring). Returns whether it had."""
    import sys

    config: Any = sys.modules.get("torch._inductor.config")  # a module with attributes set at import
    if config is None:
        return False
    environ = os.environ if environ is None else environ
    threads = environ.get("TORCHINDUCTOR_COMPILE_THREADS")
    if threads:
        config.compile_threads = int(threads)
    isa = environ.get("TORCHINDUCTOR_VEC_ISA_OK")
    config.cpp.vec_isa_ok = True if isa == "1" else False if isa == "0" else None
    return True
