"""One kernel's entry in the `ptx` record, and its texts, from PTX, resources and SASS.

The entry (CONTRACTS.md): {"name", "counts", "registers", "spills", "shared_bytes", "notes"}, plus
extras: "resources_from" (which tool said so), "elements_per_thread", "sass_lines", "sass_counts",
and from the source map (attach.py): "source_map", "stages", "source_file", "specialisation".
`spills` is in bytes per thread (ptxas spill stores, or local memory where only that is known).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from workbench.ptx.attach import SASS_PTX_CACHE, map_triton_kernel, sass_table
from workbench.ptx.counts import split_kernels, summarize
from workbench.ptx.notes import NoteContext, elements_per_thread, kernel_notes
from workbench.ptx.resources import Resources, cubin_resources
from workbench.ptx.sass import disassemble, instruction_lines, sass_counts
from workbench.ptx.source_map import KernelSource
from workbench.ptx.tools import ToolError, cache_key, default_cache_dir

TRITON_IRS = ("ttir", "ttgir", "llir")


def kernel_entry(name: str, ptx: str, *, resources: Resources, resources_from: str | None,
                 sass: str | None, ctx: NoteContext, extra: Mapping[str, Any] | None = None) -> dict:
    """The record entry of one kernel from its PTX (the `.entry` text or a whole module)."""
    entries = split_kernels(ptx)
    body = next((e.text for e in entries if e.name == name), entries[0].text if len(entries) == 1 else ptx)
    summary = summarize(body)
    return {
        "name": name,
        "counts": summary.counts,
        "registers": resources.registers,
        "spills": resources.spill_bytes,
        "shared_bytes": resources.shared_bytes,
        "notes": kernel_notes(summary, registers=resources.registers, spills=resources.spill_bytes,
                              shared_bytes=resources.shared_bytes, ctx=ctx),
        "resources_from": resources_from,
        "elements_per_thread": elements_per_thread(summary, ctx.itemsize),
        "sass_lines": instruction_lines(sass) if sass else None,
        "sass_counts": sass_counts(sass) if sass else None,
        **dict(extra or {}),
    }


@dataclass
class TritonArtifacts:
    """What Triton produced for one kernel: IR texts and cubin (`asm`), metadata, and the driver's
    numbers when the kernel has been loaded on a GPU (registers, local bytes)."""

    name: str
    asm: dict[str, Any]
    metadata: dict[str, Any]
    loaded_registers: int | None = None
    loaded_local_bytes: int | None = None
    notes: list[str] = field(default_factory=list)

    @classmethod
    def from_compiled(cls, compiled: Any) -> "TritonArtifacts":
        from workbench.ptx.triton_cache import loaded_resources
        meta = compiled.metadata
        metadata = meta._asdict() if hasattr(meta, "_asdict") else dict(vars(meta))
        regs, local = loaded_resources(compiled)
        return cls(getattr(compiled, "name", metadata.get("name", "?")), dict(compiled.asm), metadata, regs, local)

    @classmethod
    def from_cache_files(cls, folder: Path, name: str) -> "TritonArtifacts":
        """From a Triton cache folder holding `{name}.ptx`, `.cubin`, `.json`, `.ttir`, ..."""
        import json
        asm: dict[str, Any] = {}
        for ext in ("ptx", *TRITON_IRS):
            path = folder / f"{name}.{ext}"
            if path.is_file():
                asm[ext] = path.read_text()
        if (folder / f"{name}.cubin").is_file():
            asm["cubin"] = (folder / f"{name}.cubin").read_bytes()
        meta_path = folder / f"{name}.json"
        metadata = json.loads(meta_path.read_text()) if meta_path.is_file() else {}
        return cls(name, asm, metadata)


def cubin_tools(cubin: bytes, name: str, cache_dir: Path | None, notes: list[str]
                ) -> tuple[Resources, str | None, dict[int, int] | None]:
    """(resources, SASS, SASS -> PTX line table) of kernel `name` in a Triton cubin, from
    cuobjdump and nvdisasm, whose outputs are cached under `cache_dir`/triton-<the cubin's
    sha256> (a repeat costs a file read: the build-ahead worker runs this for a row's `ptx`
    action so that the row finds them there, engine/build_ahead.py). A tool failure is a note."""
    sass, from_cubin, sass_to_ptx = None, Resources(), None
    cache = (Path(cache_dir) if cache_dir is not None else default_cache_dir()) / f"triton-{cache_key(cubin)}"
    with tempfile.TemporaryDirectory(prefix="wb-ptx-") as tmp:
        path = Path(tmp) / f"{name}.cubin"
        path.write_bytes(cubin)
        try:
            from_cubin = cubin_resources(path, cache / "res-usage.txt").get(name, Resources())
            sass = disassemble(path, cache / "sass.txt").get(name)
        except ToolError as exc:
            notes.append(f"no SASS or resources from the cubin: {exc}")
        sass_to_ptx = sass_table(path, cache / SASS_PTX_CACHE, name, notes)
    return from_cubin, sass, sass_to_ptx


def triton_kernel(art: TritonArtifacts, ctx: NoteContext, extra: Mapping[str, Any] | None = None,
                  cache_dir: Path | None = None, source: KernelSource | None = None
                  ) -> tuple[dict, dict[str, Any], list[str]]:
    """(entry, texts, notes) for one Triton kernel: resources from the loaded kernel where it ran,
    else from `cuobjdump -res-usage` on Triton's cubin; SASS from that cubin; the source map
    (attach.py) against `source`, the kernel's source file (it becomes texts["source"])."""
    notes: list[str] = []
    shared = art.metadata.get("shared")
    sass, from_cubin, sass_to_ptx = None, Resources(), None
    cubin = art.asm.get("cubin")
    if cubin:
        from_cubin, sass, sass_to_ptx = cubin_tools(cubin, art.name, cache_dir, notes)
    else:
        notes.append("no cubin: SASS and assembler resources unavailable")
    if art.loaded_registers is not None:
        resources = Resources(art.loaded_registers, art.loaded_local_bytes, shared, None)
        resources_from = "driver (n_regs, n_spills)"
    elif from_cubin.registers is not None:
        resources = Resources(from_cubin.registers, from_cubin.spill_bytes, shared, from_cubin.stack_bytes)
        resources_from = "cuobjdump -res-usage (Triton's cubin)"
    else:
        resources, resources_from = Resources(None, None, shared, None), None
    entry = kernel_entry(art.name, art.asm.get("ptx", ""), resources=resources,
                         resources_from=resources_from, sass=sass, ctx=ctx, extra=extra)
    texts = {"ptx": art.asm.get("ptx"), "sass": sass, **{k: art.asm.get(k) for k in TRITON_IRS}}
    notes += map_triton_kernel(entry, texts, sass_to_ptx, source)
    return entry, texts, notes
