"""Kernel source line <-> PTX lines <-> SASS lines (and TTIR, TTGIR, LLIR for Triton).

    notes = annotate(entry, texts, source, module_ptx=ptx, sass_to_ptx=table)

fills one kernel's record entry (CONTRACTS `ptx.kernels[i]`) with

- `source_map`: `[{"source_line", "ptx_lines", "sass_lines", "ttir_lines", "ttgir_lines",
  "llir_lines", "counts", "sass_counts"}]`, sorted by `source_line`. All line numbers are
  1-based: `source_line` in the kernel's source file, the others in the texts the PTX pane shows
  (`texts["ptx"]`, `texts["sass"]`, ...). The IR keys appear only where that stage exists.
  `counts` / `sass_counts` are the static counts (CONTRACTS keys, non-zero only) of that line's
  PTX / SASS instructions. An instruction inlined from a helper in the kernel's own file counts
  for the helper's line and for the call's line;
- `stages`: the texts present, in compile order (`source`, `ttir`, `ttgir`, `llir`, `ptx`, `sass`);
- `source_file`: the kernel's source file as the compiler saw it;

and adds `texts["source"]` (the whole source file) for the TUI (texts stay strings). A line of an instruction is the kernel-file frame of its location
chain (lineinfo, irlocs): code inlined from `triton/language/standard.py` (`tl.max`) belongs to the
kernel line that called it.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from workbench.ptx.counts import count_instructions
from workbench.ptx.irlocs import llir_line_frames, mlir_line_frames
from workbench.ptx.lineinfo import Frames, kernel_file, ptx_line_frames, same_file, sass_addresses
from workbench.ptx.sass import sass_counts

IR_STAGES = ("ttir", "ttgir", "llir")
STAGE_ORDER = ("source", *IR_STAGES, "ptx", "sass")
_IR_PARSERS = {"ttir": mlir_line_frames, "ttgir": mlir_line_frames, "llir": llir_line_frames}


@dataclass(frozen=True)
class KernelSource:
    """A kernel's source file: its text and its path (None where it exists only as text, e.g.
    an Inductor kernel)."""

    text: str
    path: str | None


def python_source(fn: Any) -> KernelSource | None:
    """The source file of a Python (or `@triton.jit`: its `.fn`) function, None if unreadable."""
    fn = getattr(fn, "fn", fn)
    try:
        lines, _ = inspect.findsource(fn)
        path = inspect.getsourcefile(fn)
    except (OSError, TypeError):
        return None
    return KernelSource("".join(lines), path)


def file_source(path: Path | str) -> KernelSource | None:
    """A source file read from disk (a `.cu`), None if unreadable."""
    try:
        return KernelSource(Path(path).read_text(), str(path))
    except OSError:
        return None


def stages_of(texts: Mapping[str, Any]) -> list[str]:
    """The stages present in one kernel's texts, in compile order."""
    return [s for s in STAGE_ORDER if isinstance(texts.get(s), str) and texts[s].strip()]


def _kernel_lines(frames: Frames, file: str) -> set[int]:
    return {f.line for f in frames if same_file(f.path, file)}


def _add(table: dict[int, dict[str, set[int]]], lines: set[int], key: str, value: int) -> None:
    for line in lines:
        table.setdefault(line, {}).setdefault(key, set()).add(value)


def build_source_map(module_ptx: str, *, ptx_first_line: int = 1, ptx_last_line: int | None = None,
                     sass: str | None = None, sass_to_ptx: Mapping[int, int] | None = None,
                     irs: Mapping[str, str] | None = None,
                     module_frames: Mapping[int, Frames] | None = None) -> tuple[list[dict], str | None]:
    """(source_map, kernel file) of the kernel whose `.entry` spans module lines
    [ptx_first_line, ptx_last_line] of `module_ptx`; PTX lines in the map count from
    `ptx_first_line` (the entry's text, as the pane shows it). sass: that kernel's SASS listing;
    sass_to_ptx: its address -> module PTX line table (lineinfo.sass_ptx_lines); irs: stage ->
    text (TTIR, TTGIR, LLIR of the same compile); module_frames: `lineinfo.ptx_line_frames` of
    module_ptx when the caller maps several kernels of one module (nvcc: one PTX file of 46
    kernels took 194 s when each kernel parsed the whole module again)."""
    frames = ptx_line_frames(module_ptx) if module_frames is None else module_frames
    offset = ptx_first_line - 1
    span = {line: chain for line, chain in frames.items()
            if line > offset and (ptx_last_line is None or line <= ptx_last_line)}
    file = kernel_file(span)
    if file is None:
        return [], None
    table: dict[int, dict[str, set[int]]] = {}
    for line, chain in span.items():
        _add(table, _kernel_lines(chain, file), "ptx_lines", line - offset)
    if sass and sass_to_ptx:
        for address, sass_line in sass_addresses(sass).items():
            chain = frames.get(sass_to_ptx.get(address, -1), ())
            _add(table, _kernel_lines(chain, file), "sass_lines", sass_line)
    for stage, text in (irs or {}).items():
        if text and stage in _IR_PARSERS:
            for line, chain in _IR_PARSERS[stage](text).items():
                _add(table, _kernel_lines(chain, file), f"{stage}_lines", line)
    stages = [f"{s}_lines" for s in IR_STAGES if (irs or {}).get(s)]
    ptx_lines = module_ptx.splitlines()[offset:ptx_last_line]
    sass_lines = (sass or "").splitlines()
    return [_entry(line, table[line], stages, ptx_lines, sass_lines) for line in sorted(table)], file


def _entry(source_line: int, found: dict[str, set[int]], stages: list[str], ptx_lines: list[str],
           sass_lines: list[str]) -> dict:
    ptx = sorted(found.get("ptx_lines", ()))
    sass = sorted(found.get("sass_lines", ()))
    counts = count_instructions("\n".join(ptx_lines[i - 1] for i in ptx if i <= len(ptx_lines)))
    return {
        "source_line": source_line,
        "ptx_lines": ptx,
        "sass_lines": sass,
        **{key: sorted(found.get(key, ())) for key in stages},
        "counts": {k: v for k, v in counts.items() if v},
        "sass_counts": sass_counts("\n".join(sass_lines[i - 1] for i in sass)) if sass else {},
    }


def annotate(entry: dict, texts: dict, source: KernelSource | None, *, module_ptx: str | None,
             ptx_first_line: int = 1, ptx_last_line: int | None = None,
             sass_to_ptx: Mapping[int, int] | None = None,
             module_frames: Mapping[int, Frames] | None = None) -> list[str]:
    """Add `source_map`, `stages`, `source_file` to `entry` and the source to `texts` (see the
    module docstring); returns notes on what could not be mapped. Never raises on odd input."""
    notes: list[str] = []
    if source is not None:
        texts["source"] = source.text
    mapping, file = build_source_map(module_ptx or "", ptx_first_line=ptx_first_line,
                                     ptx_last_line=ptx_last_line, sass=texts.get("sass"),
                                     sass_to_ptx=sass_to_ptx, module_frames=module_frames,
                                     irs={s: texts.get(s) for s in IR_STAGES if texts.get(s)})
    entry["source_map"] = mapping
    entry["stages"] = stages_of(texts)
    entry["source_file"] = file
    if file is None:
        notes.append("no line information in the PTX (.loc): no source map")
    elif source is not None and source.path and Path(source.path).name != Path(file).name:
        # a different checkout of the same file is fine (Triton's cache is keyed by the source)
        notes.append(f"source map lines are of {file}; the source shown is {source.path}")
    if texts.get("sass") and not sass_to_ptx and file is not None:
        notes.append("SASS not mapped to source lines (nvdisasm -gp gave no PTX lines)")
    return notes
