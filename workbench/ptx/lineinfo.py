"""Line information in PTX and SASS: which source lines each instruction came from.

PTX (Triton always, nvcc with `-lineinfo`) carries `.file N "path"` and `.loc N line col`
directives; a `.loc` holds for the instructions after it. Inlined code says where it was
inlined in one of two ways, both read here:

- Triton (LLVM's NVPTX printer) writes the whole chain in the comment after the directive:
  `.loc 2 191 40  // standard.py:191:40 @[ softmax.py:144:19 ]` (basenames, innermost first);
- nvcc writes the immediate caller in the directive itself:
  `.loc 2 708 1, function_name $L__info_string1, inlined_at 1 12 73`; the caller's own caller is
  taken from the latest earlier `.loc` at that location (a reconstruction: one call site per
  location is assumed).

SASS gets its lines from the PTX: `nvdisasm -c -gp` prints, before the instructions, the line of
the PTX text ptxas assembled (`//## File ".nv_debug_ptx_txt", line 67`), present whenever the
cubin was built with line info (ptxas `-lineinfo`, which Triton passes). Instructions are keyed by
their address (`/*01b0*/`), which cuobjdump's listing (the SASS the TUI shows) prints too.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from workbench.ptx.counts import iter_instructions


@dataclass(frozen=True)
class Frame:
    """One source location of an instruction: a file (path, or a basename where only that is
    known) and its 1-based line."""

    path: str
    line: int


Frames = tuple[Frame, ...]  # innermost first; the last frame is in the kernel function itself

_FILE = re.compile(r'^\s*\.file\s+(\d+)\s+"([^"]*)"')
_LOC = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)\s+(\d+)([^/]*)(?://(.*))?$")
_FUNCTION = re.compile(r"^\s*(?:\.\w+\s+)*\.(?:entry|func)\b")
_INLINED_AT = re.compile(r"inlined_at\s+(\d+)\s+(\d+)\s+(\d+)")
_CHAIN_FRAME = re.compile(r"([^\s@\[\]]+):(\d+):(\d+)")
_ADDRESS = re.compile(r"^\s*/\*([0-9a-fA-F]{4,})\*/")
_SECTION = re.compile(r"^\.text\.([\w$.]+):\s*$")
_GP_LINE = re.compile(r'^\s*//## File "([^"]*)", line (\d+)')
PTX_DEBUG_FILE = ".nv_debug_ptx_txt"


def same_file(a: str, b: str) -> bool:
    """Whether two file names denote the same file: equal paths, or equal basenames where one
    side is a bare name (Triton's inlining comments give basenames only)."""
    if os.path.isabs(a) and os.path.isabs(b):
        return os.path.normpath(a) == os.path.normpath(b)
    return os.path.basename(a) == os.path.basename(b)


def ptx_files(ptx: str) -> dict[int, str]:
    """`.file` index -> path, for a PTX module."""
    return {int(m.group(1)): m.group(2) for m in map(_FILE.match, ptx.splitlines()) if m}


def ptx_line_frames(ptx: str) -> dict[int, Frames]:
    """1-based line of every instruction under a `.loc` -> its source frames (innermost first).

    Instructions before any `.loc`, or under a `.loc` at line 0 (no line), are absent.
    """
    files = ptx_files(ptx)
    callers: dict[tuple[int, int, int], tuple[int, int, int]] = {}
    current: Frames = ()
    by_line: dict[int, Frames] = {}
    locs: dict[int, Frames] = {}
    for line_no, raw in enumerate(ptx.splitlines(), start=1):
        m = _LOC.match(raw)
        if m:
            locs[line_no] = current = _loc_frames(m, files, callers)
    current = ()
    instruction_lines = {ins.line for ins in iter_instructions(ptx) if ins.opcode[:1].isalpha()}
    for line_no, raw in enumerate(ptx.splitlines(), start=1):
        if line_no in locs:
            current = locs[line_no]
        elif _FUNCTION.match(raw):  # a .loc does not carry over into the next function
            current = ()
        elif line_no in instruction_lines and current:
            by_line[line_no] = current
    return by_line


def _loc_frames(m: re.Match, files: dict[int, str], callers: dict) -> Frames:
    file_index, line, col = int(m.group(1)), int(m.group(2)), int(m.group(3))
    if line == 0:
        return ()
    first = Frame(files.get(file_index, str(file_index)), line)
    chain = _CHAIN_FRAME.findall(m.group(5) or "")
    if len(chain) > 1:  # Triton: the comment holds the whole chain; its first frame is the directive
        return (first, *(Frame(name, int(ln)) for name, ln, _ in chain[1:]))
    at = _INLINED_AT.search(m.group(4) or "")
    if not at:
        return (first,)
    here, caller = (file_index, line, col), tuple(int(g) for g in at.groups())
    callers[here] = caller
    frames, seen = [first], {here}
    while caller is not None and caller not in seen and caller[1] != 0:
        seen.add(caller)
        frames.append(Frame(files.get(caller[0], str(caller[0])), caller[1]))
        caller = callers.get(caller)
    return tuple(frames)


def kernel_file(frames_by_line: dict[int, Frames], first_line: int = 1, last_line: int | None = None) -> str | None:
    """The kernel's own source file: the outermost frame of the first located instruction in
    [first_line, last_line] (the root of every inlining chain is the kernel function)."""
    for line_no in sorted(frames_by_line):
        if line_no >= first_line and (last_line is None or line_no <= last_line):
            return frames_by_line[line_no][-1].path
    return None


# -- SASS ----------------------------------------------------------------------------------------
def sass_addresses(sass: str) -> dict[int, int]:
    """Instruction address -> 1-based line, for one kernel's SASS listing (cuobjdump or nvdisasm)."""
    found: dict[int, int] = {}
    for line_no, raw in enumerate(sass.splitlines(), start=1):
        m = _ADDRESS.match(raw)
        if m:
            found.setdefault(int(m.group(1), 16), line_no)
    return found


def parse_sass_ptx_lines(nvdisasm_gp: str) -> dict[str, dict[int, int]]:
    """Kernel name -> {instruction address -> 1-based line of the PTX ptxas assembled}, from
    `nvdisasm -c -gp` output. Instructions whose line names another file are left out."""
    found: dict[str, dict[int, int]] = {}
    table: dict[int, int] | None = None
    ptx_line: int | None = None
    for raw in nvdisasm_gp.splitlines():
        section = _SECTION.match(raw)
        if section:
            table, ptx_line = found.setdefault(section.group(1), {}), None
            continue
        where = _GP_LINE.match(raw)
        if where:
            ptx_line = int(where.group(2)) if where.group(1) == PTX_DEBUG_FILE else None
            continue
        address = _ADDRESS.match(raw)
        if address and table is not None and ptx_line is not None:
            table[int(address.group(1), 16)] = ptx_line
    return found


def sass_ptx_lines(cubin: Path, cache_file: Path | None = None) -> dict[str, dict[int, int]]:
    """Kernel name -> {SASS address -> PTX line} of every kernel in `cubin` (`nvdisasm -c -gp`,
    cached in `cache_file`). Raises ToolError without nvdisasm or when it fails; an empty table
    for a kernel means the cubin has no `.nv_debug_line_sass` (built without line info)."""
    from workbench.ptx.tools import ToolError, cached_output, find_tool  # the TUI imports this module

    tool = find_tool("nvdisasm")
    if tool is None:
        raise ToolError("nvdisasm not found (CUDA toolkit, or Triton's backends/nvidia/bin)")
    return parse_sass_ptx_lines(cached_output([tool, "-c", "-gp", str(cubin)], cache_file))
