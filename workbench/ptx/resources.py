"""Registers, spills and shared memory per kernel, as the assembler reports them.

Two sources, both from ptxas's own numbers (never from `.reg` declarations, which count virtual
registers): the `ptxas -v` log (`nvcc -Xptxas -v`) and `cuobjdump -res-usage` on a cubin (what
the driver loads: Triton's `n_regs` is this REG, its `n_spills` is LOCAL / 4).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from workbench.ptx.tools import ToolError, cached_output, find_tool


@dataclass(frozen=True)
class Resources:
    """One kernel's assembler resources.

    registers: per thread; spill_bytes: bytes of spill stores per thread (ptxas), or local memory
    per thread where only that is known (cuobjdump LOCAL, Triton n_spills x 4); shared_bytes:
    static shared memory per block (dynamic shared memory is set at launch and not included);
    stack_bytes: stack frame per thread.
    """

    registers: int | None = None
    spill_bytes: int | None = None
    shared_bytes: int | None = None
    stack_bytes: int | None = None


_PTXAS_ENTRY = re.compile(r"(?:Compiling entry function|Function properties for) '?([\w$.]+)'?")
_PTXAS_REGS = re.compile(r"Used (\d+) registers")
_PTXAS_SMEM = re.compile(r"(\d+) bytes smem")
_PTXAS_SPILL = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_RES_FUNCTION = re.compile(r"^\s*Function ([\w$.]+):\s*$")
_RES_FIELD = re.compile(r"(\w+(?:\[\d+\])?):(\d+)")


def parse_ptxas_log(log: str) -> dict[str, Resources]:
    """Kernel name (mangled) -> Resources from a `ptxas -v` log (`ptxas info    : ...` lines)."""
    found: dict[str, dict] = {}
    current: str | None = None
    for line in log.splitlines():
        m = _PTXAS_ENTRY.search(line)
        if m:
            current = m.group(1)
            found.setdefault(current, {})
            continue
        if current is None:
            continue
        if (m := _PTXAS_SPILL.search(line)):
            found[current]["stack_bytes"] = int(m.group(1))
            found[current]["spill_bytes"] = int(m.group(2))
        if (m := _PTXAS_REGS.search(line)):
            found[current]["registers"] = int(m.group(1))
            sm = _PTXAS_SMEM.search(line)
            found[current]["shared_bytes"] = int(sm.group(1)) if sm else 0
    return {name: Resources(**fields) for name, fields in found.items()}


def parse_res_usage(text: str) -> dict[str, Resources]:
    """Kernel name -> Resources from `cuobjdump -res-usage` output (REG, STACK, SHARED, LOCAL)."""
    found: dict[str, Resources] = {}
    current: str | None = None
    for line in text.splitlines():
        m = _RES_FUNCTION.match(line)
        if m:
            current = m.group(1)
            continue
        if current and "REG:" in line:
            fields = {k: int(v) for k, v in _RES_FIELD.findall(line)}
            found[current] = Resources(registers=fields.get("REG"), spill_bytes=fields.get("LOCAL"),
                                       shared_bytes=fields.get("SHARED"), stack_bytes=fields.get("STACK"))
            current = None
    return found


def cubin_resources(cubin: Path, cache_file: Path | None = None) -> dict[str, Resources]:
    """Resources of every kernel in a cubin via `cuobjdump -res-usage`; raises ToolError.

    cache_file: where the output for this (content-addressed) cubin is kept.
    """
    tool = find_tool("cuobjdump")
    if tool is None:
        raise ToolError("cuobjdump not found (CUDA toolkit, or Triton's backends/nvidia/bin)")
    return parse_res_usage(cached_output([tool, "-res-usage", str(cubin)], cache_file))
