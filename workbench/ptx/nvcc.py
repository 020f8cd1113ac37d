"""CUDA PTX through nvcc (MEASUREMENT.md P10): `nvcc -cubin -Xptxas -v -keep` of the `.cu` gives the
cubin, the ptxas log (registers, spills, shared memory per kernel) and the PTX (`nvcc -ptx` output).

The `.cu` beside an op file holds only `__global__` kernels and plain launchers, so nvcc compiles
it alone on any machine, GPU or not. Outputs are cached under the user cache directory by a hash
of the source (and the local headers it includes), the flags, the arch and the nvcc binary, so a
repeated call costs a few file reads.
"""

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
from workbench.fileio import exclusive
from workbench.machine import find_nvcc
from workbench.ptx.counts import KernelText, split_kernels
from workbench.ptx.tools import cache_key, default_cache_dir, demangle, run_tool, tool_identity

# What torch's load_inline adds to every .cu it builds (torch.utils.cpp_extension.COMMON_NVCC_FLAGS;
# a test holds the two equal), so the pane compiles what runs: a __half operator the build refuses
# is refused here too (it compiled in the pane before: a new user's try). The shipped kernels' PTX
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
               cache_dir: Path | None = None) -> NvccOutput:
    """PTX, cubin and ptxas log of `cu_path` for `arch`; cached. Raises UnavailableError without
    nvcc, ToolError (naming the nvcc error) when it fails to compile."""
    nvcc = find_nvcc()
    if nvcc is None:
        raise UnavailableError("nvcc not found: CUDA PTX needs the CUDA compiler (nvcc)")
    cu_path = Path(cu_path)
    flags = (*BASE_FLAGS, f"-arch={arch}", *extra_flags)
    key = cache_key(source_bundle(cu_path), "\0".join(flags), tool_identity(nvcc), nvcc_version(nvcc))
    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    final = root / f"{cu_path.stem}-{key}"
    if (final / "ok").exists():
        return _load(final, arch, flags, cached=True, nvcc=nvcc)
    # one compile per key at a time (build-ahead and a row's PTX stage asked for softmax.cu's
    # 30 s compile at once on the H200): the second waits, then finds it cached
    with exclusive(root / f".{final.name}.lock"):
        if (final / "ok").exists():
            return _load(final, arch, flags, cached=True, nvcc=nvcc)
        return _compile(nvcc, cu_path, arch, flags, root, final)


def _compile(nvcc: str, cu_path: Path, arch: str, flags: tuple[str, ...], root: Path, final: Path) -> NvccOutput:
    work = Path(tempfile.mkdtemp(prefix=f".{cu_path.stem}-", dir=root))
    try:
        src = str(cu_path.resolve())
        # One compile: -keep leaves the PTX that ptxas assembled (`<stem>.ptx`) beside the cubin.
        proc = run_tool([nvcc, "-cubin", *flags, "-Xptxas", "-v", "-keep", "-keep-dir", str(work), src,
                         "-o", str(work / "kernel.cubin")], cwd=work)
        kept = work / f"{cu_path.stem}.ptx"
        if kept.is_file():
            kept.replace(work / "kernel.ptx")
        else:  # an nvcc that names intermediates differently: ask for the PTX alone
            run_tool([nvcc, "-ptx", *flags, src, "-o", str(work / "kernel.ptx")], cwd=work)
        for extra in work.iterdir():  # the other intermediates (.ii, .cudafe1.*) are not kept
            if extra.name not in ("kernel.ptx", "kernel.cubin"):
                extra.unlink()
        (work / "ptxas.log").write_text(proc.stderr + proc.stdout)
        (work / "ok").write_text("")
        try:
            os.replace(work, final)  # atomic; a concurrent writer of the same key may win
        except OSError:
            shutil.rmtree(work, ignore_errors=True)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return _load(final, arch, flags, cached=False, nvcc=nvcc)


def _load(folder: Path, arch: str, flags: tuple[str, ...], cached: bool, nvcc: str) -> NvccOutput:
    return NvccOutput((folder / "kernel.ptx").read_text(), folder / "kernel.cubin",
                      (folder / "ptxas.log").read_text(), arch, flags, cached, nvcc)


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


def match_kernels(ptx: str, wanted: Iterable[str], dtype: str | None = None) -> tuple[list[CudaKernel], list[str]]:
    """The PTX entries of the kernels named in `wanted`, the instantiations for `dtype` first.

    Template instantiations of a wanted kernel for other dtypes are dropped when the dtype's
    C++ type (CXX_TYPES) appears in some instantiation's template arguments. Returns (kernels,
    notes).
    """
    entries = split_kernels(ptx)
    names = demangle(e.name for e in entries)
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
