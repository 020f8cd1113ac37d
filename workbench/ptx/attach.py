"""Source maps attached to the record entries the extractors build (one call per kernel).

    table = sass_table(cubin_path, cache_file, kernel_name, notes)   # nvdisasm -c -gp, cached
    notes += map_triton_kernel(entry, texts, table, source)          # Triton, Inductor
    shared = CudaModuleMaps(nvcc_output, cu_path)                     # nvcc: once per module
    notes += map_cuda_kernel(entry, texts, nvcc_output, kernel, cu_path, shared)

The SASS -> PTX line table comes from the cubin (`nvdisasm -c -gp`, cached beside the other tool
outputs of that cubin); then `source_map.annotate`. A missing nvdisasm costs the SASS column
of the map, never the PTX one; nothing here raises on a tool failure.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from workbench.ptx.launch_diff import ttir_specialisation
from workbench.ptx.lineinfo import ptx_line_frames, sass_ptx_lines
from workbench.ptx.source_map import KernelSource, annotate, file_source
from workbench.ptx.tools import ToolError

SASS_PTX_CACHE = "sass-ptx-lines.txt"


def sass_table(cubin: Path, cache_file: Path, name: str, notes: list[str]) -> dict[int, int] | None:
    """SASS address -> PTX line of kernel `name` in `cubin`, or None (with a note) on a tool failure."""
    tables = sass_tables(cubin, cache_file, notes)
    return None if tables is None else tables.get(name)


def sass_tables(cubin: Path, cache_file: Path, notes: list[str]) -> dict[str, dict[int, int]] | None:
    """Every kernel's SASS address -> PTX line table of `cubin`, or None (with a note) on a tool
    failure: parsed once for a module of many kernels."""
    try:
        return sass_ptx_lines(cubin, cache_file)
    except ToolError as exc:
        notes.append(f"SASS lines not mapped: {exc}")
        return None


def map_triton_kernel(entry: dict, texts: dict, sass_to_ptx: dict[int, int] | None,
                      source: KernelSource | None) -> list[str]:
    """Source map of one Triton kernel (`texts` holds its ptx, sass, ttir, ttgir, llir; sass_to_ptx
    from `sass_table`); also `entry["specialisation"]` from its TTIR (launch_diff)."""
    notes = annotate(entry, texts, source, module_ptx=texts.get("ptx"), sass_to_ptx=sass_to_ptx)
    entry["specialisation"] = ttir_specialisation(texts.get("ttir")) if texts.get("ttir") else None
    return notes


class CudaModuleMaps:
    """What every kernel of one nvcc module shares, parsed once: the module PTX's line frames and
    the cubin's SASS -> PTX line tables (a softmax.cu of 46 instantiated kernels: 194 s when each
    kernel parsed both again, on the 2-core CPU)."""

    def __init__(self, out: Any, cu_path: Path):
        self.source = file_source(cu_path)
        self.notes: list[str] = []
        self.frames = ptx_line_frames(out.ptx)
        self.tables = sass_tables(out.cubin, out.cubin.with_name(SASS_PTX_CACHE), self.notes)


def map_cuda_kernel(entry: dict, texts: dict, out: Any, kernel: Any, cu_path: Path,
                    shared: CudaModuleMaps | None = None) -> list[str]:
    """Source map of one nvcc kernel: `out` an nvcc.NvccOutput (module PTX, cubin), `kernel` an
    nvcc.CudaKernel (its `.entry` span in that PTX; `texts["ptx"]` is that entry's text);
    shared: the module's CudaModuleMaps when mapping several of its kernels."""
    shared = shared if shared is not None else CudaModuleMaps(out, cu_path)
    notes = list(shared.notes)
    table = None if shared.tables is None else shared.tables.get(kernel.mangled)
    notes += annotate(entry, texts, shared.source, module_ptx=out.ptx,
                      ptx_first_line=kernel.entry.first_line, ptx_last_line=kernel.entry.last_line,
                      sass_to_ptx=table, module_frames=shared.frames)
    return [f"{kernel.display}: {n}" for n in notes]
