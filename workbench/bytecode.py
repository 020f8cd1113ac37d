"""Whether the packages a worker imports at start-up have their bytecode (.pyc), and whether
Python may write it: where it has none and may not write it, every process compiles those
modules from source on every start.

    bytecode_report(("torch", "triton"))  # --doctor: per package, modules and those without .pyc
    slow_start_note()                     # one line for the daemon's start, or None

Why it matters: a worker imports torch, and for a torch.compile row torch._dynamo and
torch._inductor (~5,000 modules). `pip install` writes their bytecode (unless --no-compile), and
a Python that may write bytecode writes it on the first import. A box whose packages were copied
without their `__pycache__` (or installed with --no-compile) and that runs with
PYTHONDONTWRITEBYTECODE=1 (common in container images; the lent GPU boxes) pays the compile at
every start: there the warm daemon's first run of the five-way GeLU (4096^2 fp32) took 13.6 s
with torch's import 3.2 s, and 4.9 s (torch 1.0 s) in a later call that wrote the bytecode first
(docs/engine.md, "Where the first run's start-up goes"). The fix is the user's: `python -m compileall -q FOLDER` on the folders
`bytecode_report` names, once.

Torch-free: packages are found with importlib.util.find_spec, never imported (a dotted name's
parent packages are, which for torch's subpackages would import torch: only top-level names and
paths below them are looked at here).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

# the packages a worker's first rows import (torch.compile's Inductor pulls in sympy)
START_PACKAGES = ("torch", "triton", "sympy")
# a sample for the one-line check at a daemon's start: the modules a torch.compile row's start
# imports first (relative to torch's folder); their bytecode missing means most of it is
# a package counts as compiled at every start when this share of its modules has no bytecode (a
# few never have any: templates and files with syntax of another Python that compileall skips)
SLOW_SHARE = 0.1
SAMPLE = ("__init__.py", "_tensor.py", "_dynamo/__init__.py", "_inductor/compile_fx.py")


def _package_folder(name: str) -> Path | None:
    """The folder of top-level package `name`, without importing it; None when not installed."""
    if "." in name:
        raise ValueError(f"bytecode: {name!r} is not a top-level package name (no dots allowed)")
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    locations = list(spec.submodule_search_locations or ()) if spec is not None else []
    return Path(locations[0]) if locations else None


def _has_bytecode(source: Path) -> bool:
    try:
        return Path(importlib.util.cache_from_source(str(source))).is_file()
    except (NotImplementedError, ValueError):  # no cache tag (sys.implementation.cache_tag None)
        return True


def may_write(folder: Path) -> bool:
    """Whether an import under `folder` writes its bytecode: Python may (no -B,
    PYTHONDONTWRITEBYTECODE unset) and the cache folder (sys.pycache_prefix, else the package's
    own folder, where __pycache__ goes) can be written."""
    if sys.dont_write_bytecode:
        return False
    target = Path(sys.pycache_prefix) if sys.pycache_prefix else folder
    while not target.exists() and target != target.parent:
        target = target.parent
    return os.access(target, os.W_OK)


def bytecode_report(packages: tuple[str, ...] = START_PACKAGES) -> dict[str, Any]:
    """Per installed package in `packages` (top-level names): its folder, its .py modules, how
    many have no bytecode, and whether an import may write it; `slow_starts` lists the packages
    of which more than SLOW_SHARE of the modules have no bytecode and none is written: compiled
    from source at every start.
    Raises ValueError for a dotted name."""
    found: dict[str, Any] = {}
    for name in packages:
        folder = _package_folder(name)
        if folder is None:
            continue
        modules = missing = 0
        for base, _dirs, files in os.walk(folder):
            for file in files:
                if file.endswith(".py"):
                    modules += 1
                    missing += not _has_bytecode(Path(base) / file)
        found[name] = {"folder": str(folder), "modules": modules, "without_bytecode": missing,
                       "may_write": may_write(folder)}
    slow = [name for name, info in found.items()
            if info["without_bytecode"] > SLOW_SHARE * info["modules"] and not info["may_write"]]
    return {"dont_write_bytecode": bool(sys.dont_write_bytecode), "pycache_prefix": sys.pycache_prefix,
            "packages": found, "slow_starts": slow,
            "fix": _fix([found[name]["folder"] for name in slow]) if slow else None}


def _fix(folders: list[str]) -> str:
    return f"{sys.executable} -m compileall -q " + " ".join(folders)  # this Python, venv or not


def slow_start_note() -> str | None:
    """One line when torch's start-up modules (SAMPLE) have no bytecode and Python may not write
    it (every worker start compiles them from source: seconds); None otherwise, or without torch.
    Cheap: a handful of stat calls."""
    folder = _package_folder("torch")
    if folder is None or may_write(folder):
        return None
    missing = [rel for rel in SAMPLE if (folder / rel).is_file() and not _has_bytecode(folder / rel)]
    if not missing:
        return None
    why = "PYTHONDONTWRITEBYTECODE is set" if sys.dont_write_bytecode else f"{folder} is not writable"
    return (f"torch here has no bytecode (.pyc) and {why}: every worker start compiles it from source, "
            f"seconds each time. Once: {_fix([str(folder)])} (workbench --doctor lists the others)")
