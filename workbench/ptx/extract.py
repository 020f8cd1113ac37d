"""The engine's entry points: `ptx_record` (CONTRACTS `ptx`) and `launch_record` (CONTRACTS `launch`).

    record, texts = ptx_record(op, impl, spec, params)        # texts: kernel -> {"ptx", "sass", ...}
    launch = launch_record(op, impl, spec, params, ptx=record)

Per implementation kind:
- triton: the kernel that ran (`source: launched`, from the JIT's cache after a real launch on a
  GPU) or, before any launch or without a GPU, an ahead-of-time compile of the same launch
  (`source: aot`; see triton_aot);
- cuda: `nvcc -ptx` / `nvcc -cubin -Xptxas -v` of the `.cu` (`source: nvcc`);
- compiled: the Triton kernels Inductor generated, on a GPU (`source: inductor`);
- pytorch, manual: no kernel source (library kernels); an empty kernel list and a note.
A missing tool or a failed compile gives a record with a note saying why, never an exception;
the one exception is a process running Triton interpreted, which raises UnavailableError.
"""

from __future__ import annotations

import inspect
from typing import Any, Mapping

from workbench.errors import UnavailableError, WorkbenchError
from workbench.ptx import launch as geometry
from workbench.ptx.attach import map_cuda_kernel
from workbench.ptx.notes import NoteContext
from workbench.ptx.record import TritonArtifacts, kernel_entry, triton_kernel
from workbench.ptx.resources import Resources, parse_ptxas_log
from workbench.ptx.source_map import KernelSource, python_source
from workbench.ptx.tools import ToolError
from workbench.ptx.triton_aot import refuse_interpreter
from workbench.registry import REGISTRY, BuildContext, Impl, ImplKind, Op

NO_KERNEL_SOURCE = "no kernel source: calls library kernels"
Texts = dict[str, dict[str, Any]]


def triton_launch_of(impl: Impl, spec: Any, params: Mapping[str, Any], ctx: BuildContext | None = None) -> Any:
    """impl.triton_launch(spec, params), passing `ctx` where the launch takes one (a matmul's
    tl.dot input precision follows ctx.fp32_precision)."""
    try:
        accepts_ctx = "ctx" in inspect.signature(impl.triton_launch).parameters
    except (TypeError, ValueError):
        accepts_ctx = False
    if accepts_ctx and ctx is not None:
        return impl.triton_launch(spec, params, ctx=ctx)
    return impl.triton_launch(spec, params)


def _resolve(op: Op | str, impl: Impl | str) -> tuple[Op, Impl]:
    op = REGISTRY.op(op) if isinstance(op, str) else op
    impl = op.get_impl(impl) if isinstance(impl, str) else impl
    return op, impl


def _machine(machine: Any) -> Any:
    if machine is not None:
        return machine
    from workbench.machine import probe
    return probe()


def _record(target: str, source: str | None, kernels: list[dict], notes: list[str], **extra: Any) -> dict:
    return {"target": target, "source": source, "kernels": kernels, "notes": notes, **extra}


def _itemsize(spec: Any) -> int | None:
    dtype = getattr(spec, "dtype", None)
    return getattr(dtype, "itemsize", None)


def ptx_record(op: Op | str, impl: Impl | str, spec: Any, params: Mapping[str, Any] | None = None, *,
               target: Any = None, machine: Any = None, prefer_launched: bool = True,
               cache_dir: Any = None, ctx: BuildContext | None = None) -> tuple[dict, Texts]:
    """The `ptx` record and the texts of `impl` at `spec` with `params` (defaults where missing).

    target: "sm_90", 90, a GPUTarget (default: this GPU's arch, else sm_90); machine: a
    workbench.machine.Machine (default: probe()); prefer_launched: for Triton, report the kernel a
    real launch compiled when there is one; cache_dir: where nvcc outputs are cached (default: the
    user cache dir; also holds cuobjdump outputs of Triton cubins); ctx: the run's BuildContext
    (fp32_precision reaches a launch that takes `ctx`). Raises UnavailableError in a process where Triton runs interpreted.
    """
    op, impl = _resolve(op, impl)
    machine = _machine(machine)
    params = impl.resolve_params(params)
    kind = impl.kind
    refuse_interpreter()
    if kind in (ImplKind.pytorch, ImplKind.manual):
        return _record(target_name_or_default(target, machine), None, [], [NO_KERNEL_SOURCE]), {}
    if kind is ImplKind.triton or impl.triton_launch is not None:
        return _triton_record(op, impl, spec, params, target, machine, prefer_launched, cache_dir, ctx)
    if kind is ImplKind.cuda or impl.cuda_source is not None:
        return _cuda_record(op, impl, spec, params, target, machine, cache_dir)
    return _inductor_record(op, impl, spec, params, target, machine)


def _default_target(machine: Any) -> str:
    if getattr(machine, "has_cuda", False):
        import torch
        major, minor = torch.cuda.get_device_capability()
        return f"sm_{major}{minor}"
    return "sm_90"


# -- triton --------------------------------------------------------------------------------------
def _triton_record(op: Op, impl: Impl, spec: Any, params: dict, target: Any, machine: Any,
                   prefer_launched: bool, cache_dir: Any, build_ctx: BuildContext | None) -> tuple[dict, Texts]:
    from workbench.ptx import triton_aot as aot
    from workbench.ptx.triton_cache import launched_kernels

    name = target_name_or_default(target, machine)
    if impl.triton_launch is None:
        return _record(name, None, [], [f"{impl.name}: no triton_launch declared, so no PTX"]), {}
    try:
        import triton
    except ImportError:
        return _record(name, None, [], ["Triton is not installed"]), {}
    try:
        launch = triton_launch_of(impl, spec, params, build_ctx)
        build = aot.build_source(launch, aot.resolve_target(target, getattr(machine, "has_cuda", False)))
    except UnavailableError:
        raise
    except (WorkbenchError, Exception) as exc:  # never crash on API drift: say why
        return _record(name, "aot", [], [f"ahead-of-time compile not set up: {exc}"],
                       triton=triton.__version__), {}
    notes = [_config_note(build, launch)] + build.spec.notes
    source, compiled = "aot", None
    if prefer_launched and getattr(machine, "has_cuda", False):
        found = aot.find_launched(build)
        if found:
            compiled, how = found
            source = "launched"
            notes.append(f"the kernel a real launch compiled ({how})")
        elif launched_kernels(build.jit_fn):
            notes.append("launched kernels of this function exist, none with this launch's specialisation: "
                         "showing the ahead-of-time compile")
    if compiled is None:
        try:
            compiled = aot.aot_compile(build)
        except aot.AotError as exc:
            return _record(name, "aot", [], notes + [str(exc)], triton=triton.__version__,
                           config=build.config), {}
    art = TritonArtifacts.from_compiled(compiled)
    ctx = NoteContext(itemsize=_itemsize(spec), threads=launch.num_warps * 32,
                      block_elems=_block_elems(build.spec.constexprs),
                      expect_tensor_cores="tt.dot" in (art.asm.get("ttir") or "") or op.matmul_like)
    entry, texts, kernel_notes = triton_kernel(art, ctx, extra={"hash": getattr(compiled, "hash", None)},
                                               cache_dir=cache_dir, source=python_source(build.jit_fn))
    return _record(aot.target_name(build.target), source, [entry], notes + kernel_notes,
                   triton=triton.__version__, config=build.config), {entry["name"]: texts}


def target_name_or_default(target: Any, machine: Any) -> str:
    from workbench.ptx.triton_aot import target_name
    return target_name(target) if target is not None else _default_target(machine)


def _config_note(build: Any, launch: Any) -> str:
    cfg = ", ".join(f"{k}={v}" for k, v in build.config.items())
    return f"config: {cfg}" + (f" ({launch.note})" if launch.note else " (the implementation's TritonLaunch)")


def _block_elems(constexprs: Mapping[str, Any]) -> int | None:
    """The elements one program handles when a single BLOCK* constexpr says so (1-D kernels)."""
    if "BLOCK_SIZE" in constexprs:
        return int(constexprs["BLOCK_SIZE"])
    blocks = [v for k, v in constexprs.items() if k.startswith("BLOCK") and isinstance(v, int)]
    return blocks[0] if len(blocks) == 1 else None


# -- cuda ------------------------------------------------------------------------------------------
def _cuda_record(op: Op, impl: Impl, spec: Any, params: dict, target: Any, machine: Any,
                 cache_dir: Any) -> tuple[dict, Texts]:
    from workbench.ptx.nvcc import compile_cu, match_kernels, nvcc_version
    from workbench.ptx.sass import disassemble

    name = target_name_or_default(target, machine)
    source = impl.cuda_source
    if source is None:
        return _record(name, "nvcc", [], [f"{impl.name}: no cuda_source declared, so no PTX"]), {}
    try:
        out = compile_cu(source.path, name, source.extra_nvcc_flags, cache_dir=cache_dir)
    except (UnavailableError, ToolError, OSError) as exc:
        return _record(name, "nvcc", [], [str(exc)]), {}
    notes = [f"nvcc {' '.join(out.flags)} {source.path.name}" + (" (cached)" if out.cached else "")]
    kernels, match_notes = match_kernels(out.ptx, source.kernels, getattr(spec, "dtype", None))
    notes += match_notes
    resources = parse_ptxas_log(out.ptxas_log)
    try:
        sass = disassemble(out.cubin, out.cubin.with_name("sass.txt"))
    except ToolError as exc:
        sass = {}
        notes.append(f"no SASS: {exc}")
    ctx = NoteContext(itemsize=_itemsize(spec), expect_tensor_cores=op.matmul_like)
    entries, texts = [], {}
    for k in kernels:
        entry = kernel_entry(k.display, k.entry.text, resources=resources.get(k.mangled, Resources()),
                             resources_from="ptxas -v" if k.mangled in resources else None,
                             sass=sass.get(k.mangled), ctx=ctx, extra={"mangled": k.mangled})
        entries.append(entry)
        texts[k.display] = {"ptx": k.entry.text, "sass": sass.get(k.mangled)}
        notes += map_cuda_kernel(entry, texts[k.display], out, k, source.path)
    if entries:
        notes.append("shared_bytes is static shared memory: dynamic shared memory is set at launch")
    return _record(name, "nvcc", entries, notes, nvcc=nvcc_version(out.nvcc)), texts


# -- torch.compile -----------------------------------------------------------------------------------
def _inductor_record(op: Op, impl: Impl, spec: Any, params: dict, target: Any, machine: Any
                     ) -> tuple[dict, Texts]:
    from workbench.ptx.inductor import NO_GPU_NOTE, inductor_kernels

    name = target_name_or_default(target, machine)
    if not getattr(machine, "has_cuda", False):
        return _record(name, "inductor", [], [NO_GPU_NOTE]), {}
    if target is not None and name != _default_target(machine):
        return _record(name, "inductor", [], [f"{NO_GPU_NOTE} of {name} (this GPU is {_default_target(machine)})"]), {}
    ctx_build = BuildContext(device="cuda")
    try:
        inputs = op.make_inputs(spec, "cuda", 0)
        kernels, notes = inductor_kernels(lambda: impl.builder(spec, params, ctx_build), inputs)
    except Exception as exc:  # a compile failure is a finding, not a crash of the row
        return _record(name, "inductor", [], [f"Inductor kernels not collected: {type(exc).__name__}: {exc}"]), {}
    ctx = NoteContext(itemsize=_itemsize(spec), expect_tensor_cores=op.matmul_like)
    entries, texts = [], {}
    for k in kernels:
        if k.artifacts is None:
            notes.append(f"{k.name}: compiled kernel not found ({k.found_by})")
            continue
        entry, k_texts, k_notes = triton_kernel(k.artifacts, ctx, extra={"found_by": k.found_by},
                                                source=KernelSource(k.source, None) if k.source else None)
        entry["name"] = k.name
        entries.append(entry)
        texts[k.name] = {**k_texts, "source": k.source}
        notes += k_notes + k.artifacts.notes
    return _record(name, "inductor", entries, notes), texts


# -- launch geometry -------------------------------------------------------------------------------
def launch_record(op: Op | str, impl: Impl | str, spec: Any, params: Mapping[str, Any] | None = None,
                  sm_count: int | None = None, *, ptx: Mapping[str, Any] | None = None,
                  machine: Any = None, ctx: BuildContext | None = None) -> dict | None:
    """The `launch` record of `impl` at `spec`, or None where the geometry is not declared.

    Pure arithmetic (no compile; safe in an interpreted process): grid and threads from the
    TritonLaunch or CudaSource.launch; registers and shared memory from a `ptx` record's first
    kernel when given (occupancy otherwise counts threads and blocks only); sm_count: this GPU's
    when there is one, else 132 (H200).
    """
    op, impl = _resolve(op, impl)
    params = impl.resolve_params(params)
    if impl.triton_launch is not None:
        launch = triton_launch_of(impl, spec, params, ctx)
        grid, threads = tuple(launch.grid), int(launch.num_warps) * 32
    elif impl.cuda_source is not None and impl.cuda_source.launch is not None:
        grid, threads = impl.cuda_source.launch(spec, params)
    else:
        return None
    notes: list[str] = []
    if sm_count is None:
        sm_count, assumed = _sm_count(_machine(machine))
        if assumed:
            notes.append(f"no GPU: {sm_count} SMs assumed (H200)")
    kernel = (ptx or {}).get("kernels", [None])[0] if (ptx or {}).get("kernels") else None
    regs = kernel.get("registers") if kernel else None
    shared = kernel.get("shared_bytes") if kernel else None
    record = geometry.geometry_record(grid, threads, sm_count=sm_count, registers=regs, shared_bytes=shared)
    if kernel is None:
        notes.append("registers and shared memory unknown (no ptx record): occupancy from threads only")
    record["notes"] = notes + record["notes"]
    return record


def _sm_count(machine: Any) -> tuple[int, bool]:
    if machine is not None and getattr(machine, "has_cuda", False):
        import torch
        return torch.cuda.get_device_properties(0).multi_processor_count, False
    return geometry.H200_SM_COUNT, True

