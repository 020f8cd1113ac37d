"""SASS (the machine code ptxas produced) from a cubin, per kernel, where cuobjdump exists.

cuobjdump ships with the CUDA toolkit and with Triton's NVIDIA backend
(`triton/backends/nvidia/bin/cuobjdump`), and disassembles a cubin without a GPU.
"""

from __future__ import annotations

import re
from pathlib import Path

from workbench.ptx.tools import ToolError, cached_output, find_tool

# SASS opcode (before the first dot) -> the kind the UI filters on.
SASS_KINDS: dict[str, str] = {
    "LDG": "LDG", "STG": "STG", "LDS": "LDS", "STS": "STS", "LDSM": "LDSM", "STSM": "STSM",
    "SHFL": "SHFL", "BAR": "BAR", "HGMMA": "HGMMA", "HMMA": "HMMA", "LDGSTS": "LDGSTS",
    "UTMALDG": "UTMALDG", "UTMASTG": "UTMASTG", "LDL": "LDL", "STL": "STL",
}

_FUNCTION = re.compile(r"^\s*Function\s*:\s*([\w$.]+)\s*$")
_ENCODING = re.compile(r"\s*/\*\s*0x[0-9a-f]{16}\s*\*/\s*$")
_INSTRUCTION = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+(?:\{\s*)?(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)")


def clean_sass(text: str) -> str:
    """Drop the binary-encoding comments (`/* 0x000e22... */`) and the lines holding only them."""
    out = []
    for line in text.splitlines():
        stripped = _ENCODING.sub("", line)
        if stripped.strip() or not line.strip():
            out.append(stripped.rstrip())
    return "\n".join(out)


def split_functions(text: str) -> dict[str, str]:
    """Kernel name -> its SASS, from `cuobjdump -sass` output (one `Function : name` per kernel)."""
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        m = _FUNCTION.match(line)
        if m:
            current = found.setdefault(m.group(1), [])
            continue
        if current is not None and line.strip().startswith(".........."):
            current = None
        elif current is not None:
            current.append(line)
    return {name: clean_sass("\n".join(lines)).strip("\n") for name, lines in found.items()}


def disassemble(cubin: Path, cache_file: Path | None = None) -> dict[str, str]:
    """Kernel name (mangled) -> SASS of every kernel in the cubin; raises ToolError.

    cache_file: where the disassembly of this (immutable, content-addressed) cubin is kept.
    """
    tool = find_tool("cuobjdump")
    if tool is None:
        raise ToolError("cuobjdump not found (CUDA toolkit, or Triton's backends/nvidia/bin)")
    return split_functions(cached_output([tool, "-sass", str(cubin)], cache_file))


def sass_opcode(line: str) -> str | None:
    """The opcode of one SASS line (`@!P0 LDG.E.128.CONSTANT R8, ...` -> `LDG.E.128.CONSTANT`)."""
    m = _INSTRUCTION.match(line)
    return m.group(2) if m else None


def instruction_lines(text: str) -> int:
    """How many instructions the SASS text holds."""
    return sum(1 for line in text.splitlines() if sass_opcode(line))


def sass_counts(text: str) -> dict[str, int]:
    """Static counts of the SASS kinds in SASS_KINDS (only kinds present)."""
    counts: dict[str, int] = {}
    for line in text.splitlines():
        op = sass_opcode(line)
        kind = SASS_KINDS.get(op.split(".")[0]) if op else None
        if kind:
            counts[kind] = counts.get(kind, 0) + 1
    return counts
