"""One `ptx` record per kind of kernel source (workbench.kernel_source), as ptx/extract.py
dispatches them (`EXTRACTORS`: source type -> extractor):

- `TritonLaunch`: the kernel that ran (`source: launched`, from the JIT's cache after a real
  launch on a GPU) or, before any launch or without a GPU, the launch's own compile through
  `JITFunction.warmup` (`source: aot`; see triton_aot);
- `CudaSource`: `nvcc -ptx` / `nvcc -cubin -Xptxas -v` of the `.cu` (`source: nvcc`);
- `InductorKernels`: the Triton kernels Inductor generated, on a GPU (`source: inductor`).

A missing tool or a failed compile gives a record with a note saying why, never an exception.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from workbench.error_location import locate
from workbench.errors import UnavailableError
from workbench.fileio import atomic_write_text, exclusive
from workbench.kernel_source import CudaSource, InductorKernels, TritonLaunch
from workbench.ptx.attach import CudaModuleMaps, map_cuda_kernel
from workbench.ptx.notes import NoteContext
from workbench.ptx.record import TritonArtifacts, kernel_entry, triton_kernel
from workbench.ptx.resources import Resources, parse_ptxas_log
from workbench.ptx.source_map import KernelSource, python_source
from workbench.ptx.tools import ToolError, cache_key
from workbench.registry import BuildContext, Impl, Op

Texts = dict[str, dict[str, Any]]


@dataclass
class PtxJob:
    """One ptx_record call: the resolved op, impl, spec and params, the backend's kernel source,
    and the options (see ptx/extract.ptx_record)."""

    op: Op
    impl: Impl
    spec: Any
    params: dict
    source: Any
    target: Any
    machine: Any
    prefer_launched: bool
    cache_dir: Any
    ctx: BuildContext | None

    @property
    def has_cuda(self) -> bool:
        return bool(getattr(self.machine, "has_cuda", False))

    @property
    def target_name(self) -> str:
        from workbench.ptx.triton_aot import target_name
        return target_name(self.target) if self.target is not None else default_target(self.has_cuda)

    @property
    def itemsize(self) -> int | None:
        return getattr(getattr(self.spec, "dtype", None), "itemsize", None)


def default_target(has_cuda: bool) -> str:
    """This GPU's arch, else sm_90 (H200)."""
    if has_cuda:
        import torch
        major, minor = torch.cuda.get_device_capability()
        return f"sm_{major}{minor}"
    return "sm_90"


def record(target: str, source: str | None, kernels: list[dict], notes: list[str], **extra: Any) -> dict:
    """A CONTRACTS `ptx` record (`error`: the compile failed, and why; the row is flagged or,
    with ptx its only action, failed: engine/ptx_stage.py)."""
    return {"target": target, "source": source, "kernels": kernels, "notes": notes, **extra}


# -- triton --------------------------------------------------------------------------------------
def _kernel_files(launch: TritonLaunch) -> tuple[str, ...]:
    """The file of the launch's @triton.jit function (a CompilationError's line counts from it)."""
    code = getattr(getattr(launch.kernel, "fn", None), "__code__", None)
    return (code.co_filename,) if code is not None else ()


def triton_record(job: PtxJob) -> tuple[dict, Texts]:
    import triton

    from workbench.ptx import triton_aot as aot
    from workbench.ptx.triton_cache import launched_kernels

    launch: TritonLaunch = job.source
    try:
        build = aot.build_source(launch, aot.resolve_target(job.target, job.has_cuda))
        # prefer_launched=False: an ahead-of-time compile even on the GPU (the stand-in driver)
        compiled, launched = aot.compile_launch(build, stand_in=None if job.prefer_launched else True)
    except UnavailableError:
        raise
    except Exception as exc:  # never crash on API drift or a failed compile: say why (and where)
        where = locate(exc, _kernel_files(launch))
        failed = f"ahead-of-time compile failed{f' at {where}' if where else ''}: {exc}"
        return record(job.target_name, "aot", [], [failed], triton=triton.__version__, error=failed), {}
    notes = [config_note(build.config, launch.note)] + build.notes
    if launched:
        notes.append("the kernel a real launch compiled (found in the JIT cache)")
    elif job.prefer_launched and job.has_cuda and launched_kernels(build.jit_fn):
        notes.append("launched kernels of this function exist, none with this launch's specialisation: "
                     "showing the ahead-of-time compile")
    art = TritonArtifacts.from_compiled(compiled)
    ctx = NoteContext(itemsize=job.itemsize, threads=launch.num_warps * 32,
                      block_elems=block_elems(launch.constexprs),
                      expect_tensor_cores="tt.dot" in (art.asm.get("ttir") or "") or job.op.matmul_like)
    entry, texts, kernel_notes = triton_kernel(art, ctx, extra={"hash": getattr(compiled, "hash", None)},
                                               cache_dir=job.cache_dir, source=python_source(build.jit_fn))
    return record(aot.target_name(build.target), "launched" if launched else "aot", [entry],
                  notes + kernel_notes, triton=triton.__version__, config=build.config), {entry["name"]: texts}


def config_note(config: Mapping[str, Any], launch_note: str) -> str:
    cfg = ", ".join(f"{k}={v}" for k, v in config.items())
    return f"config: {cfg}" + (f" ({launch_note})" if launch_note else " (the implementation's TritonLaunch)")


def block_elems(constexprs: Mapping[str, Any]) -> int | None:
    """The elements one program handles when a single BLOCK* constexpr says so (1-D kernels)."""
    if "BLOCK_SIZE" in constexprs:
        return int(constexprs["BLOCK_SIZE"])
    blocks = [v for k, v in constexprs.items() if k.startswith("BLOCK") and isinstance(v, int)]
    return blocks[0] if len(blocks) == 1 else None


# -- cuda ------------------------------------------------------------------------------------------
def cuda_record(job: PtxJob) -> tuple[dict, Texts]:
    """The record of a CudaSource: nvcc's outputs (compile_cu, cached), then the kernels matched,
    counted and mapped to their source lines. That second part is pure Python over the module's
    PTX and took 7 s for softmax.cu's 46 entries of one dtype on the H200 (11 s on a 2-core
    CPU), after the compile itself had been built ahead: so the finished record and texts are
    cached too, beside the cubin (record_cache_path), and the build-ahead worker, which makes
    them first, leaves the timing worker a JSON read (0.06 s for softmax.cu's 9 MB)."""
    from workbench.ptx.nvcc import compile_cu

    name, source = job.target_name, job.source
    try:
        # the row's module flags (CudaSource.build_flags): the PTX of exactly what the run built
        out = compile_cu(source.path, name, source.nvcc_flags(job.spec, job.params), cache_dir=job.cache_dir,
                         kernels=source.kernels, dtype=getattr(job.spec, "dtype", None))
    except UnavailableError as exc:  # no nvcc: a note (admission already names it), not a failed compile
        return record(name, "nvcc", [], [str(exc)]), {}
    except (ToolError, OSError) as exc:  # the .cu did not compile: the record says why, the row fails
        return record(name, "nvcc", [], [str(exc)], error=str(exc)), {}
    first = f"nvcc {' '.join(out.flags)} {source.path.name}" + (" (cached)" if out.cached else "")
    path = record_cache_path(out, job, name)
    # one computation at a time: a row that arrives while the build-ahead worker is mapping the
    # same kernels waits for its record instead of starting over beside it
    with exclusive(path.with_name(f".{path.name}.lock")):
        cached = _read_record(path)
        if cached is not None:
            found, texts = cached
            found = {**found, "notes": [first, *found["notes"][1:]]}
        else:
            found, texts = _cuda_record(job, out, name, first)
            try:
                atomic_write_text(path, json.dumps([found, texts]))
            except OSError:  # a cache that cannot be written costs the next row the same work, no more
                pass
    try:
        found = launched_first(found, job.source.launched_kernel(job.spec, job.params, job.ctx))
    except Exception as exc:  # a choice that cannot be made here: the record keeps its order and says why
        found = {**found, "notes": [*found.get("notes", []),
                                    f"which kernel the run launches is unknown here: {type(exc).__name__}: {exc}"]}
    order = [k.get("name") for k in found.get("kernels") or []]
    return found, {**{n: texts[n] for n in order if n in texts}, **texts}  # the texts in the record's order


def launched_first(found: dict, launched: str | None) -> dict:
    """`found` (a cuda `ptx` record) with the kernel the run launches first: the entry whose name
    is `launched` (spaces, namespaces and the demangler's casts ignored: `(int)4` reads 4,
    `(bool)0` false), then the other entries of its base name; a note says which. Where the exact
    instantiation is found the record also gets `launched` (its name as the PTX has it), which
    the diagnosis reads instead of every kernel of the module. The record's other kernels keep
    their order (it is cached per module and dtype, not per tuned choice)."""
    if not launched:
        return found
    from workbench.ptx.nvcc import base_name

    exact, base = plain_kernel_name(launched), base_name(launched)
    ranked = [(0 if plain_kernel_name(name) == exact else 1 if base_name(name) == base else 2, k)
              for k in found.get("kernels") or [] for name in [str(k.get("name", ""))]]
    kernels = [k for _, k in sorted(ranked, key=lambda pair: pair[0])]  # stable: ties keep the record's order
    out = {**found, "kernels": kernels}
    if any(r == 0 for r, _ in ranked):
        out["launched"] = kernels[0].get("name")
        note = f"the run launches {launched}: listed first"
    elif any(r == 1 for r, _ in ranked):
        note = (f"the run launches {launched}; that instantiation is not among the kernels matched in the PTX, "
                f"so the other {base} kernels are listed first")
    else:
        note = f"the run launches {launched}, which is not among the kernels matched in the PTX"
    return {**out, "notes": [*found.get("notes", []), note]}


_CAST = re.compile(r"\((?:unsigned|signed)?(?:int|long|longlong|short|char)\)(-?\d+)")


def plain_kernel_name(name: str) -> str:
    """A kernel name compared without spaces, namespaces or the casts some demanglers print:
    `onepass::k<float, (int)4, (bool)1>` and `k<float, 4, true>` both read `k<float,4,true>`."""
    flat = name.replace(" ", "").replace("(bool)0", "false").replace("(bool)1", "true")
    head, sep, args = _CAST.sub(r"\1", flat).partition("<")
    return head.split("::")[-1] + sep + args


def record_cache_path(out: Any, job: PtxJob, target: str) -> Path:
    """Where the finished record of `out` (compile_cu's NvccOutput: its folder is keyed by the
    .cu bundle, flags, nvcc and the entries assembled) is kept for this dtype's kernels: keyed
    also by the target, kernel names, dtype, item size, the op's tensor-core expectation, the
    .cu's path (records name it) and the code that makes records (ptx_code_digest)."""
    key = cache_key(target, str(getattr(job.spec, "dtype", None)), "\0".join(job.source.kernels or ()),
                    str(job.itemsize), str(bool(job.op.matmul_like)), str(job.source.path), ptx_code_digest())
    return Path(out.cubin).parent / f"record-{key}.json"


@functools.cache
def ptx_code_digest() -> str:
    """sha256 of workbench's version and the files of workbench/ptx (what makes a record):
    a record cached by an older workbench is made again."""
    import hashlib

    import workbench

    h = hashlib.sha256(workbench.__version__.encode())
    for file in sorted(Path(__file__).parent.glob("*.py")):
        h.update(file.name.encode() + b"\0" + file.read_bytes())
    return h.hexdigest()


def _read_record(path: Path) -> tuple[dict, Texts] | None:
    try:
        found, texts = json.loads(path.read_text())
    except (OSError, ValueError, TypeError):  # none yet, or unreadable: made again
        return None
    return (found, texts) if isinstance(found, dict) and isinstance(texts, dict) else None


def _cuda_record(job: PtxJob, out: Any, name: str, first: str) -> tuple[dict, Texts]:
    from workbench.ptx.nvcc import match_kernels, nvcc_version
    from workbench.ptx.sass import disassemble

    source = job.source
    notes = [first]
    if out.entries is not None:
        notes.append(f"ptxas assembled the {len(out.entries)} entries shown (--entry), not the whole module")
    kernels, match_notes = match_kernels(out.ptx, source.kernels, getattr(job.spec, "dtype", None))
    row_flags = source.nvcc_flags(job.spec, job.params)[len(source.extra_nvcc_flags):]
    if row_flags:  # a build of the row's kernels only (CudaSource.build_flags): the others are absent by design
        notes.append(f"built for this row ({' '.join(row_flags)}): the kernels it may launch, not all of "
                     f"{Path(source.path).name}")
        match_notes = [n for n in match_notes if not kernels or "not found in the PTX" not in n]
    notes += match_notes
    resources = parse_ptxas_log(out.ptxas_log)
    try:
        sass = disassemble(out.cubin, out.cubin.with_name("sass.txt"))
    except ToolError as exc:
        sass = {}
        notes.append(f"no SASS: {exc}")
    ctx = NoteContext(itemsize=job.itemsize, expect_tensor_cores=job.op.matmul_like)
    entries, texts = [], {}
    shared = CudaModuleMaps(out, source.path) if kernels else None
    for k in kernels:
        entry = kernel_entry(k.display, k.entry.text, resources=resources.get(k.mangled, Resources()),
                             resources_from="ptxas -v" if k.mangled in resources else None,
                             sass=sass.get(k.mangled), ctx=ctx, extra={"mangled": k.mangled})
        entries.append(entry)
        texts[k.display] = {"ptx": k.entry.text, "sass": sass.get(k.mangled)}
        notes += map_cuda_kernel(entry, texts[k.display], out, k, source.path, shared)
    if entries:
        notes.append("shared_bytes is static shared memory: dynamic shared memory is set at launch")
    return record(name, "nvcc", entries, notes, nvcc=nvcc_version(out.nvcc)), texts


# -- torch.compile -----------------------------------------------------------------------------------
def inductor_record(job: PtxJob) -> tuple[dict, Texts]:
    from workbench.ptx.inductor import NO_GPU_NOTE, inductor_kernels

    name, here = job.target_name, default_target(job.has_cuda)
    if not job.has_cuda:
        return record(name, "inductor", [], [NO_GPU_NOTE]), {}
    if job.target is not None and name != here:
        return record(name, "inductor", [], [f"{NO_GPU_NOTE} of {name} (this GPU is {here})"]), {}
    ctx_build = job.ctx if job.ctx is not None and job.ctx.is_cuda else BuildContext(device="cuda")
    try:
        inputs = job.op.make_inputs(job.spec, "cuda", 0)
        kernels, notes = inductor_kernels(lambda: job.impl.builder(job.spec, job.params, ctx_build), inputs)
    except Exception as exc:  # a compile failure is a finding, not a crash of the row
        return record(name, "inductor", [], [f"Inductor kernels not collected: {type(exc).__name__}: {exc}"]), {}
    ctx = NoteContext(itemsize=job.itemsize, expect_tensor_cores=job.op.matmul_like)
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
    return record(name, "inductor", entries, notes), texts


EXTRACTORS: dict[type, Callable[[PtxJob], tuple[dict, Texts]]] = {
    TritonLaunch: triton_record,
    CudaSource: cuda_record,
    InductorKernels: inductor_record,
}
