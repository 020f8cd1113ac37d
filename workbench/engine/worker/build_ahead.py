"""Building ahead: compile the next rows' kernels into the shared on-disk caches while the
current row is timed, so their builds in the timing worker only load what is already built.

A separate worker (WorkerKey role "build", same cache folders) gets the run's exec rows as a
Mode.build job and, per row, compiles without launching anything on the GPU:
- a TritonSource: `JITFunction.warmup(...)`, Triton's public compile-only call, with the
  launch's exact signature, constexprs, scalars and num_warps (ptx/triton_aot.py's warmup call:
  pointer arguments as dtypes, so no device memory is touched) -> TRITON_CACHE_DIR; for a row
  with the `ptx` action also the cubin's cuobjdump and nvdisasm outputs the PTX view reads
  (ptx/record.cubin_tools: 1.1-1.9 s a Triton row's PTX view waited for on the H200) -> the PTX cache;
  then the same for each other config the builder's autotuner will time (the source's
  `candidates`, while no choice is cached): the tuning loads them, and the tuned kernel's PTX
  view is ready whichever config wins;
- a CudaSource (load_inline, CuPy's NVRTC): the builder itself, which compiles and loads the
  module and launches nothing (BuildContext.tune=False: an autotuning builder does not time its
  candidates here; on the H200 it did, beside the row being timed, and the timing worker then
  took the choice from the cache) -> the build folder the timing worker's build finds up to date;
  for a row with the `ptx` action also the row's whole PTX record (its own nvcc compile with
  `-lineinfo`, a cubin, its SASS and line tables, then the kernels matched, counted and mapped
  to source lines) -> the PTX cache (softmax.cu: ~15 s of nvcc, ptxas and nvdisasm, then 7 s of
  mapping, on the H200 that the row no longer waits for).
torch.compile is not built ahead: Inductor traces with real inputs at the first call, which
runs on the device. Nothing runs on the GPU, but compilers take host cores: a row whose kernel
is estimated launch-bound (LAUNCH_BOUND_S) is timed with nothing compiling beside it, so no
build-ahead starts for a run that has one, and none on a CPU device (timing shares the cores).
"""

from __future__ import annotations

from typing import Any

from workbench.kernel_source import CudaSource, TritonSource
from workbench.registry import BuildContext

BUILD_THREADS = 4                # CUDA builds side by side (each is nvcc / ninja subprocesses)
LAUNCH_BOUND_S = 100e-6          # below this estimated call time a row counts as launch-bound
DEVICE_BYTES_PER_S = 3.0e12      # optimistic (fast) H200-class figures: more rows count as small
DEVICE_FLOPS_PER_S = 400e12


def likely_launch_bound(cost: Any) -> bool:
    """Whether one call is estimated below LAUNCH_BOUND_S on a fast GPU (cost: a Cost)."""
    return max(cost.moved / DEVICE_BYTES_PER_S, cost.flops / DEVICE_FLOPS_PER_S) < LAUNCH_BOUND_S


def worth_building_ahead(rows: list[Any], registry: Any) -> bool:
    """A run's exec rows may be built ahead: on CUDA, none launch-bound, some with a Triton or
    CUDA source (what prebuild compiles)."""
    if not rows or not all(r.device.startswith("cuda") for r in rows):
        return False
    compiles = False
    for row in rows:
        op = registry.op(row.op)
        impl = op.get_impl(row.impl)
        compiles = compiles or isinstance(impl.source, (TritonSource, CudaSource))
        try:
            if likely_launch_bound(impl.cost(op, op.make_spec(row.shape, row.dtype))):
                return False
        except Exception:  # no cost known: not built ahead (timing is what must not suffer)
            return False
    return compiles


def builds_in_thread(registry: Any, row: Any) -> bool:
    """Whether `row`'s build is a CudaSource's (subprocesses, safe beside other threads); Triton
    warmups stay on the worker's main thread."""
    try:
        return isinstance(registry.op(row.op).get_impl(row.impl).source, CudaSource)
    except Exception:  # an unknown op or impl: prebuild says so on the main thread
        return False


def thread_tasks(registry: Any, rows: list[Any]) -> list[tuple[Any, str]]:
    """The (row, part) compiles of `rows` that go to the build threads (CudaSource rows: the
    module, and with the `ptx` action the PTX view's compile as a task of its own), in the order
    to submit them: each distinct compile first, then the ones that repeat a compile already
    asked for (gelu's `cuda_naive` and `cuda` are one module and one PTX compile of gelu.cu: the
    repeats only wait on its lock and then find it built, and in session order they held two
    of the four threads while softmax.cu, the longest compile, had not started)."""
    first: list[tuple[Any, str]] = []
    repeats: list[tuple[Any, str]] = []
    seen: set = set()
    for row in rows:
        if not builds_in_thread(registry, row):
            continue
        for part in (("build", "ptx") if "ptx" in row.actions else ("all",)):
            key = compile_key(registry, row, part)
            (repeats if key in seen else first).append((row, part))
            seen.add(key)
    return first + repeats


def compile_key(registry: Any, row: Any, part: str) -> tuple:
    """What a build thread's task compiles: the `.cu` and its nvcc flags (and for the module,
    the op whose binding builds it), so that two tasks with one key do one compile."""
    try:
        source = registry.op(row.op).get_impl(row.impl).source
        where = (str(source.path), tuple(source.extra_nvcc_flags))
    except Exception:  # an unknown op or impl: a task of its own (prebuild says what is wrong)
        return (part, row.op, row.impl)
    return ("ptx", *where) if part == "ptx" else ("module", row.op, *where)


def prebuild(registry: Any, row: Any, interpret: bool, build_dir: str | None, cache_dir: str | None = None,
             part: str = "all") -> str:
    """Compile `row`'s kernel into the on-disk caches without launching; returns what was done
    ("triton warmup", "cuda build", "cuda build + ptx", "ptx", "nothing"). cache_dir: the run's
    cache folder (the PTX view's nvcc outputs go to its `ptx/`); part: for a CudaSource row,
    "build" (the module only), "ptx" (the PTX view's compile only: the two can run side by
    side) or "all". Raises what the compiler raises."""
    from pathlib import Path

    op = registry.op(row.op)
    impl = op.get_impl(row.impl)
    spec = op.make_spec(row.shape, row.dtype)
    params = impl.resolve_params(row.params)
    if interpret:
        return "nothing"
    # tune=False: a builder here compiles and loads, never times candidates on the GPU the
    # timing worker is measuring on (its tuner would, and cache a choice timed under contention)
    ctx = BuildContext(device=row.device, fp32_precision=row.settings.fp32_precision, interpret=False,
                       build_dir=Path(build_dir) if build_dir else None, tune=False)
    if isinstance(impl.source, CudaSource):
        done = []
        if part in ("all", "build"):
            impl.builder(spec, params, ctx)
            done.append("cuda build")
        if part in ("all", "ptx") and "ptx" in row.actions and cache_dir is not None:
            cuda_ptx_ahead(op, impl, spec, params, ctx, Path(cache_dir) / "ptx")
            done.append("ptx")
        return " + ".join(done) or "nothing"
    if isinstance(impl.source, TritonSource) and impl.source.launch is not None:
        chosen = impl.source.launch_for(spec, params, ctx)
        compiled = _warmup(chosen)
        ptx = "ptx" in row.actions and cache_dir is not None and _triton_tool_outputs(compiled, Path(cache_dir) / "ptx")
        done = "triton warmup" + (" + ptx" if ptx else "")
        others = [launch for launch in impl.source.candidate_launches(spec, params, ctx)
                  if _launch_key(launch) != _launch_key(chosen)]
        built = 0
        for launch in others:  # the tuner's other configs: its timing then loads, not compiles
            try:
                more = _warmup(launch)
                if ptx:  # whichever wins, its PTX view's tool outputs are cached
                    _triton_tool_outputs(more, Path(cache_dir) / "ptx")
                built += 1
            except Exception:  # noqa: BLE001 - a config the tuner will skip itself
                pass
        if others:
            done += f" + {built} of {len(others)} other tuning candidate(s)"
        return done
    return "nothing"


def _launch_key(launch: Any) -> tuple:
    """What makes two launches one compile: the kernel, its constexprs, warps and stages."""
    return (getattr(launch.kernel, "__name__", id(launch.kernel)), tuple(sorted(launch.constexprs.items())),
            int(launch.num_warps), int(launch.num_stages))


def _triton_tool_outputs(compiled: Any, cache_dir: Any) -> bool:
    """The cubin tool outputs (cuobjdump's resources and SASS, nvdisasm's line table) the PTX
    record of a Triton kernel reads (ptx/record.cubin_tools), built into the same cache: ~1 s a
    kernel that the row's PTX view no longer waits for. False where the kernel has no cubin."""
    from workbench.ptx.record import TritonArtifacts, cubin_tools

    art = TritonArtifacts.from_compiled(compiled)
    if not art.asm.get("cubin"):
        return False
    cubin_tools(art.asm["cubin"], art.name, cache_dir, [])
    return True


def cuda_ptx_ahead(op: Any, impl: Any, spec: Any, params: Any, ctx: Any, cache_dir: Any) -> None:
    """The PTX record of a CudaSource row, made as the row's own PTX stage makes it
    (ptx/extract.ptx_record, this machine's target) into the same cache (`cache_dir`: the run's
    `ptx/` folder): nvcc's PTX and cubin, the SASS listing and line table, and the finished
    record and texts (ptx/extractors.cuda_record caches them: softmax.cu's took 7 s of the
    row's time on the H200 after its compile had been built ahead). Raises RuntimeError with
    the compiler's words when the .cu does not compile (the row reports it itself)."""
    from workbench.ptx.extract import ptx_record
    from workbench.trace import mark

    found, _texts = ptx_record(op, impl, spec, params, target=None, cache_dir=cache_dir, ctx=ctx)
    mark(f"ptx record {impl.name} {getattr(spec, 'dtype', '')}: made")
    if found.get("error"):
        raise RuntimeError(found["error"])


def _warmup(launch: Any, has_cuda: bool = True) -> Any:
    """Compile `launch` without running it (ptx/triton_aot.py: the same warmup call as the PTX
    view's, on the real driver when this GPU is the target); returns the CompiledKernel."""
    from workbench.ptx.triton_aot import build_source, compile_launch, resolve_target

    return compile_launch(build_source(launch, resolve_target(has_cuda=has_cuda)))[0]
