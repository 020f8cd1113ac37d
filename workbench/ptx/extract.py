"""The engine's entry points: `ptx_record` (CONTRACTS `ptx`) and `launch_record` (CONTRACTS `launch`).

    record, texts = ptx_record(op, impl, spec, params)        # texts: kernel -> {"ptx", "sass", ...}
    launch = launch_record(op, impl, spec, params, ptx=record)

Both ask the implementation's backend where its kernel comes from (`Backend.kernel_source`) and
dispatch on the type of the answer, never on the kind's name: a `TritonLaunch`, a `CudaSource` or
`INDUCTOR` gets its extractor (ptx/extractors.py); None (library kernels: pytorch, manual) gets an
empty kernel list and a note. A missing tool or a failed compile gives a record with a note
saying why, never an exception; the one exception is a process running Triton interpreted, which
raises UnavailableError.
"""

from __future__ import annotations

from typing import Any, Mapping

from workbench.errors import UnavailableError
from workbench.ptx import launch as geometry
from workbench.ptx.extractors import EXTRACTORS, PtxJob, Texts, record
from workbench.ptx.triton_aot import refuse_interpreter
from workbench.registry import REGISTRY, BuildContext, Impl, Op

NO_KERNEL_SOURCE = "no kernel source: calls library kernels"


def _resolve(op: Op | str, impl: Impl | str) -> tuple[Op, Impl]:
    op = REGISTRY.op(op) if isinstance(op, str) else op
    impl = op.get_impl(impl) if isinstance(impl, str) else impl
    return op, impl


def _machine(machine: Any) -> Any:
    if machine is not None:
        return machine
    from workbench.machine import probe
    return probe()


def ptx_record(op: Op | str, impl: Impl | str, spec: Any, params: Mapping[str, Any] | None = None, *,
               target: Any = None, machine: Any = None, prefer_launched: bool = True,
               cache_dir: Any = None, ctx: BuildContext | None = None) -> tuple[dict, Texts]:
    """The `ptx` record and the texts of `impl` at `spec` with `params` (defaults where missing).

    target: "sm_90", 90, a GPUTarget (default: this GPU's arch, else sm_90); machine: a
    workbench.machine.Machine (default: probe()); prefer_launched: for Triton on its GPU, report the
    kernel the run compiled (`launched`; False: always an ahead-of-time compile); cache_dir: where nvcc outputs are
    cached (default: the user cache dir; also holds cuobjdump outputs of Triton cubins); ctx: the
    run's BuildContext (fp32_precision reaches a launch that takes `ctx`). Raises
    UnavailableError in a process where Triton runs interpreted.
    """
    op, impl = _resolve(op, impl)
    job = PtxJob(op, impl, spec, impl.resolve_params(params), None, target, _machine(machine),
                 prefer_launched, cache_dir, ctx)
    refuse_interpreter()
    try:
        job.source = impl.backend.kernel_source(impl, spec, job.params, ctx)
    except UnavailableError:
        raise
    except Exception as exc:  # a launch that refuses this spec (LimitError), or API drift: say why
        return record(job.target_name, None, [], [f"kernel source not set up: {type(exc).__name__}: {exc}"]), {}
    if job.source is None:
        why = NO_KERNEL_SOURCE if impl.backend.source_type is None else f"{impl.name}: no source= declared, so no PTX"
        return record(job.target_name, None, [], [why]), {}
    for source_type, extractor in EXTRACTORS.items():
        if isinstance(job.source, source_type):
            return extractor(job)
    return record(job.target_name, None, [], [f"no PTX extractor for a {type(job.source).__name__}"]), {}


# -- launch geometry -------------------------------------------------------------------------------
def launch_record(op: Op | str, impl: Impl | str, spec: Any, params: Mapping[str, Any] | None = None,
                  sm_count: int | None = None, *, ptx: Mapping[str, Any] | None = None,
                  machine: Any = None, ctx: BuildContext | None = None) -> dict | None:
    """The `launch` record of `impl` at `spec`, or None where the geometry is not declared.

    Pure arithmetic (no compile; safe in an interpreted process): grid and threads from the
    kernel source's `geometry` (TritonLaunch, CudaSource.launch); registers and shared memory from
    a `ptx` record's first kernel when given (occupancy otherwise counts threads and blocks only);
    sm_count: this GPU's when there is one, else 132 (H200).
    """
    op, impl = _resolve(op, impl)
    params = impl.resolve_params(params)
    source = impl.backend.kernel_source(impl, spec, params, ctx)
    found = source.geometry(spec, params, ctx) if source is not None else None
    if found is None:
        return None
    grid, threads = found
    notes: list[str] = []
    if sm_count is None:
        sm_count, assumed = _sm_count(_machine(machine))
        if assumed:
            notes.append(f"no GPU: {sm_count} SMs assumed (H200)")
    kernel = (ptx or {}).get("kernels", [None])[0] if (ptx or {}).get("kernels") else None
    regs = kernel.get("registers") if kernel else None
    shared = kernel.get("shared_bytes") if kernel else None
    out = geometry.geometry_record(grid, threads, sm_count=sm_count, registers=regs, shared_bytes=shared)
    if kernel is None:
        notes.append("registers and shared memory unknown (no ptx record): occupancy from threads only")
    out["notes"] = notes + out["notes"]
    return out


def _sm_count(machine: Any) -> tuple[int, bool]:
    if machine is not None and getattr(machine, "has_cuda", False):
        import torch
        return torch.cuda.get_device_properties(0).multi_processor_count, False
    return geometry.H200_SM_COUNT, True
