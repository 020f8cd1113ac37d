"""CUDA PTX through nvcc (MEASUREMENT.md P10): `nvcc -ptx` of the `.cu` gives the PTX, and ptxas,
run as `nvcc -cubin` runs it, the cubin and the `-v` log (registers, spills, shared memory per
kernel); for a row, only its kernels in its dtype are assembled (`compile_cu`: kernels, dtype).

The `.cu` beside an op file holds only `__global__` kernels and plain launchers, so nvcc compiles
it alone on any machine, GPU or not. Outputs are cached under the user cache directory by a hash
of the source (and the local headers it includes), the flags, the arch and the nvcc binary, so a
repeated call costs a few file reads."""

from __future__ import annotations

import functools
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from workbench.cuda_build import source_bundle
from workbench.errors import UnavailableError
from workbench.fileio import atomic_write_text, exclusive
from workbench.machine import find_nvcc
from workbench.ptx.counts import KernelText, split_kernels
from workbench.demangle import demangle_all
from workbench.ptx.tools import cache_key, default_cache_dir, run_tool, tool_identity
from workbench.trace import mark

# What torch's load_inline adds to every .cu it builds (torch.utils.cpp_extension.COMMON_NVCC_FLAGS;
# a test holds the two equal), so the pane compiles what runs: a __half operator the build refuses
# is refused here too (without them it compiled in the pane and failed in the run). The shipped kernels' PTX
# is the same with and without them (gelu.cu, softmax.cu: no line differs).
TORCH_NVCC_FLAGS = ("-D__CUDA_NO_HALF_OPERATORS__", "-D__CUDA_NO_HALF_CONVERSIONS__",
                    "-D__CUDA_NO_BFLOAT16_CONVERSIONS__", "-D__CUDA_NO_HALF2_OPERATORS__", "--expt-relaxed-constexpr")
# -O3 as cuda_build.load_cuda passes it; -lineinfo adds the .loc lines and line tables the source
# map reads (the SASS is the same with and without it: checked on gelu, softmax, matmul .cu)
BASE_FLAGS = ("-O3", "-lineinfo", *TORCH_NVCC_FLAGS)
# The C++ type a kernel template is instantiated with, per dtype (as the .cu files spell them).
CXX_TYPES = {"float32": ("float",), "float16": ("__half", "half"), "bfloat16": ("__nv_bfloat16", "nv_bfloat16")}


@dataclass(frozen=True)
class NvccOutput:
    """PTX text, cubin path and the `ptxas -v` log of one `.cu`, for one arch and flag set."""

    ptx: str
    cubin: Path
    ptxas_log: str
    arch: str
    flags: tuple[str, ...]
    cached: bool
    nvcc: str
    entries: tuple[str, ...] | None = None  # the entries the cubin holds (ptxas --entry); None: all


@functools.lru_cache(maxsize=4)
def nvcc_version(nvcc: str) -> str:
    """`release 13.0, V13.0.88` from `nvcc --version` ('' when it cannot be read)."""
    try:
        out = run_tool([nvcc, "--version"], timeout_s=30).stdout
    except Exception:
        return ""
    m = re.search(r"release [\d.]+, V[\d.]+", out)
    return m.group(0) if m else out.strip().splitlines()[-1] if out.strip() else ""


def compile_cu(cu_path: Path, arch: str = "sm_90", extra_flags: Iterable[str] = (),
               cache_dir: Path | None = None, kernels: Iterable[str] | None = None,
               dtype: str | None = None) -> NvccOutput:
    """PTX, cubin and ptxas log of `cu_path` for `arch`; cached. Raises UnavailableError without
    nvcc, ToolError (naming the nvcc error) when it fails to compile.

    Two steps, each cached: `nvcc -ptx` (the whole module's PTX), then ptxas with the command
    `nvcc -dryrun -cubin` names for the same flags, so the cubin is byte for byte what `nvcc
    -cubin` makes. kernels (CudaSource.kernels) and dtype: ptxas assembles only the entries
    `match_kernels` picks for them (`--entry`: each kernel's machine code is the same, checked
    section by section; for one dtype of softmax.cu 46 of 142 entries, ptxas 5.7 s instead of
    15.3 s on this 2-core machine). None, or a name matching nothing: every entry."""
    nvcc = find_nvcc()
    if nvcc is None:
        raise UnavailableError("nvcc not found: CUDA PTX needs the CUDA compiler (nvcc)")
    cu_path = Path(cu_path)
    flags = (*BASE_FLAGS, f"-arch={arch}", *extra_flags)
    key = cache_key(source_bundle(cu_path), "\0".join(flags), tool_identity(nvcc), nvcc_version(nvcc))
    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    final = root / f"{cu_path.stem}-{key}"
    wanted = None if kernels is None else tuple(kernels)
    if wanted is None and (final / "ok").exists():
        return _load(final, final, arch, flags, cached=True, nvcc=nvcc)
    # which entries (kernels, dtype) picked, kept beside the PTX: reading them back costs no
    # split of softmax.cu's 12 MB of PTX (0.4 s) and no demangler
    select = None if wanted is None else final / f"select-{cache_key(*wanted, str(dtype))}.txt"
    if select is not None and (final / "ptx.ok").exists() and select.is_file():
        entries = tuple(select.read_text().split()) or None
        folder = _entries_folder(final, entries)
        if (folder / "ok").exists():
            return _load(folder, final, arch, flags, cached=True, nvcc=nvcc, entries=entries)
    # one compile per key at a time (build-ahead and a row's PTX stage asked for softmax.cu's
    # 30 s compile at once on the H200): the second waits, then finds it cached
    mark(f"nvcc {cu_path.name}: waiting for its lock")
    with exclusive(root / f".{final.name}.lock"):
        cached = (final / "ptx.ok").exists()
        if not cached:
            mark(f"nvcc {cu_path.name}: -ptx")
            _nvcc_ptx(nvcc, cu_path, flags, final)
        mark(f"nvcc {cu_path.name}: picking entries")
        entries = _entries((final / "kernel.ptx").read_text(), wanted, dtype)
        if select is not None:
            atomic_write_text(select, " ".join(entries or ()))
        folder = _entries_folder(final, entries)
        if not (folder / "ok").exists():
            cached = False
            mark(f"nvcc {cu_path.name}: ptxas of {len(entries) if entries else 'every'} entries")
            _ptxas(nvcc, cu_path, flags, final / "kernel.ptx", folder, entries)
        mark(f"nvcc {cu_path.name}: done")
        return _load(folder, final, arch, flags, cached=cached, nvcc=nvcc, entries=entries)


def _entries_folder(final: Path, entries: tuple[str, ...] | None) -> Path:
    return final if entries is None else final / f"entries-{cache_key(*entries)}"


def _entries(ptx: str, wanted: tuple[str, ...] | None, dtype: str | None) -> tuple[str, ...] | None:
    """The mangled entries to assemble for `wanted` kernels in `dtype`; None for all of them."""
    if wanted is None:
        return None
    every = split_kernels(ptx)
    found, _ = match_kernels(ptx, wanted, dtype, entries=every)
    names = tuple(sorted({k.mangled for k in found}))
    return names if names and len(names) < len(every) else None


def _nvcc_ptx(nvcc: str, cu_path: Path, flags: tuple[str, ...], final: Path) -> None:
    """`nvcc -ptx` of the module into final/kernel.ptx (the PTX `nvcc -cubin -keep` leaves: the
    same bytes), marked done by final/ptx.ok."""
    final.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{cu_path.stem}-", dir=final.parent))
    try:
        run_tool([nvcc, "-ptx", *flags, str(cu_path.resolve()), "-o", str(work / "kernel.ptx")], cwd=work)
        os.replace(work / "kernel.ptx", final / "kernel.ptx")
        (final / "ptx.ok").write_text("")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def ptxas_command(nvcc: str, flags: tuple[str, ...], src: Path) -> list[str] | None:
    """The ptxas command line `nvcc -cubin` runs for `flags` (from `nvcc -dryrun`: -Xptxas,
    -maxrregcount, -lineinfo and the arch reach it as nvcc would pass them), its input PTX and
    output replaced by `{ptx}` and `{cubin}`; None where the dry run names no ptxas."""
    import shlex

    out = run_tool([nvcc, "-dryrun", "-cubin", *flags, "-Xptxas", "-v", str(src), "-o", "kernel.cubin"])
    lines = [line.removeprefix("#$ ").strip() for line in (out.stderr + out.stdout).splitlines()
             if line.startswith("#$ ")]
    # nvcc runs a bare `ptxas` from the PATH it sets (its own bin folder first): found the same way
    search = next((line[len("PATH="):] for line in lines if line.startswith("PATH=")), None)
    for line in lines:
        argv = shlex.split(line)
        if not argv or Path(argv[0]).name != "ptxas":
            continue
        if "-o" not in argv or sum(a.endswith(".ptx") for a in argv) != 1:
            return None
        if not os.path.isabs(argv[0]):
            argv[0] = (shutil.which(argv[0], path=search) if search else None) or argv[0]
        argv[argv.index("-o") + 1] = "{cubin}"
        return ["{ptx}" if a.endswith(".ptx") else a for a in argv]
    return None


def _ptxas(nvcc: str, cu_path: Path, flags: tuple[str, ...], ptx: Path, folder: Path,
           entries: tuple[str, ...] | None) -> None:
    """Assemble `ptx` (only `entries`, None: all) into folder/kernel.cubin with its `-v` log."""
    command = ptxas_command(nvcc, flags, cu_path.resolve())
    folder.mkdir(parents=True, exist_ok=True)
    cubin = folder / "kernel.cubin"
    if command is None:  # an nvcc whose dry run reads differently: the one-step compile, every entry
        proc = run_tool([nvcc, "-cubin", *flags, "-Xptxas", "-v", str(cu_path.resolve()), "-o", str(cubin)],
                        cwd=folder)
    else:
        argv = [str(ptx) if a == "{ptx}" else str(cubin) if a == "{cubin}" else a for a in command]
        if entries is not None:
            argv[1:1] = ["--entry", ",".join(entries)]
        proc = run_tool(argv, cwd=folder)
    (folder / "ptxas.log").write_text(proc.stderr + proc.stdout)
    (folder / "ok").write_text("")


def _load(folder: Path, ptx_folder: Path, arch: str, flags: tuple[str, ...], cached: bool, nvcc: str,
          entries: tuple[str, ...] | None = None) -> NvccOutput:
    return NvccOutput((ptx_folder / "kernel.ptx").read_text(), folder / "kernel.cubin",
                      (folder / "ptxas.log").read_text(), arch, flags, cached, nvcc, entries)


@dataclass(frozen=True)
class CudaKernel:
    """One kernel entry of the PTX matched to an implementation's kernel name."""

    wanted: str          # the name in CudaSource.kernels
    mangled: str         # the PTX entry name
    display: str         # demangled, without return type and parameters: `gelu_vec_kernel<float, 4>`
    entry: KernelText


def display_name(demangled: str) -> str:
    """`void gelu_vec_kernel<float, 4>(float const*, float*, long)` -> `gelu_vec_kernel<float, 4>`."""
    text = demangled.strip()
    if text.startswith("void "):
        text = text[5:]
    depth = 0
    for i, ch in enumerate(text):  # cut at the parameter list's '(' outside template brackets
        depth += (ch == "<") - (ch == ">")
        if ch == "(" and depth == 0:
            return text[:i]
    return text


def base_name(display: str) -> str:
    """`ns::gelu_vec_kernel<float, 4>` -> `gelu_vec_kernel`."""
    return display.split("<", 1)[0].split("::")[-1].strip()


def match_kernels(ptx: str, wanted: Iterable[str], dtype: str | None = None,
                  entries: list[KernelText] | None = None) -> tuple[list[CudaKernel], list[str]]:
    """The PTX entries of the kernels named in `wanted`, the instantiations for `dtype` first.

    Template instantiations of a wanted kernel for other dtypes are dropped when the dtype's
    C++ type (CXX_TYPES) appears in some instantiation's template arguments. Returns (kernels,
    notes).
    """
    entries = split_kernels(ptx)
    names = demangle_all(e.name for e in entries)
    notes: list[str] = []
    found: list[CudaKernel] = []
    for want in wanted:
        hits = [CudaKernel(want, e.name, display_name(names[e.name]), e) for e in entries
                if _is_named(e.name, display_name(names[e.name]), want)]
        if not hits:
            notes.append(f"kernel {want!r} not found in the PTX (entries: "
                         f"{', '.join(display_name(names[e.name]) for e in entries) or 'none'})")
            continue
        found += _for_dtype(hits, dtype)
    return found, notes


def _is_named(mangled: str, display: str, want: str) -> bool:
    if mangled == want or base_name(display) == want:
        return True
    return display == mangled and f"{len(want)}{want}" in mangled  # no demangler: Itanium length+name


def _for_dtype(hits: list[CudaKernel], dtype: str | None) -> list[CudaKernel]:
    types = CXX_TYPES.get(str(dtype), ())
    if not types:
        return hits
    def args(k: CudaKernel) -> list[str]:
        inner = k.display.partition("<")[2].rpartition(">")[0]
        return [a.strip() for a in inner.split(",")]
    all_types = {t for ts in CXX_TYPES.values() for t in ts}
    if not any(a in all_types for k in hits for a in args(k)):
        return hits
    mine = [k for k in hits if any(a in types for a in args(k))]
    return mine or hits
