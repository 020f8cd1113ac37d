"""The one C++ demangler: Itanium-mangled names (`_Z...`, which CUDA kernels use too) to C++.

In-process through the `cxxfilt` package (libstdc++'s `abi::__cxa_demangle` over ctypes: no
binutils needed, no process per batch), else one run of the CUDA toolkit's `cu++filt` or
binutils' `c++filt` (workbench/ptx/tools.find_demangler), else the names as given. Torch-free:
the TUI's kernel tables (screens/panes/kernel_names.py) and PTX extraction (workbench/ptx) both call
`demangle_all`.
"""

from __future__ import annotations

import functools
from typing import Iterable


def demangle(name: str) -> str:
    """One name demangled; anything that is not an Itanium mangled name unchanged."""
    return demangle_all([name])[name]


def demangle_all(names: Iterable[str]) -> dict[str, str]:
    """Name -> demangled for each distinct name (itself where it is not mangled, or no demangler
    here reads it)."""
    names = list(dict.fromkeys(names))
    mangled = tuple(sorted(n for n in names if n.startswith("_Z")))
    found = _demangled(mangled) if mangled else {}
    return {n: found.get(n, n) for n in names}


@functools.lru_cache(maxsize=64)
def _demangled(names: tuple[str, ...]) -> dict[str, str]:
    found = in_process(names)
    rest = tuple(n for n in names if n not in found)
    return {**found, **(with_tool(rest) if rest else {})}


def in_process(names: Iterable[str]) -> dict[str, str]:
    """What the `cxxfilt` package demangles of `names` ({} where it is not installed or cannot
    load libstdc++); a name it refuses is left out."""
    try:
        import cxxfilt
    except (ImportError, OSError):  # not installed, or its ctypes could not find libstdc++
        return {}
    out = {}
    for name in names:
        try:
            text = cxxfilt.demangle(name)
        except Exception:  # cxxfilt.InvalidName, or a library it could not call
            continue
        if text and text != name:
            out[name] = text
    return out


def with_tool(names: tuple[str, ...]) -> dict[str, str]:
    """One cu++filt / c++filt run over `names` ({} where neither exists or the run fails)."""
    from workbench.ptx.tools import ToolError, find_demangler, run_tool

    tool = find_demangler()
    if not tool or not names:
        return {}
    try:
        out = run_tool([tool], input_text="\n".join(names) + "\n", timeout_s=10).stdout.splitlines()
    except (ToolError, OSError):
        return {}
    return dict(zip(names, out)) if len(out) == len(names) else {}


def which() -> str:
    """The demangler this process uses: "cxxfilt (in-process)", the tool's path, or "none"."""
    if in_process(["_Z1fv"]):
        return "cxxfilt (in-process)"
    from workbench.ptx.tools import find_demangler

    return find_demangler() or "none"
