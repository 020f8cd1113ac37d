"""The files a session's plugins are made of, and their content hashes (provenance, watch mode).

    plugin_files(Path("my_ops.py"))          # the op files a plugin path imports
    records = plugin_records(paths, registry) # [{"path": "/abs/my_ops.py", "sha256": "…"}, …]
    changed_files(doc["provenance"]["plugins"], records)   # what changed since a document was made

A plugin path (`--kernels PATH`, a session's `plugins:` entry) is an op file, a folder of op files
(every `*.py` not starting with `_`), or a package (a folder with `__init__.py`). The files it is
made of are the op files, every source file under a package's folder, and the kernel sources its
implementations declare (a CUDA `.cu` beside the op file). Torch-free: the TUI's file watcher and
replay's provenance check read these without importing the registry.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from workbench.errors import WorkbenchError

SOURCE_SUFFIXES = (".py", ".cu", ".cuh", ".h", ".hpp", ".cpp", ".c")
_HASHES: dict[tuple[str, int, int, int], str] = {}  # (path, inode, size, mtime_ns) -> sha256


def plugin_files(path: Path) -> list[Path]:
    """The op files a plugin path imports, resolved: the file, a package's `__init__.py`, or a
    folder's `*.py` not starting with `_`. Raises WorkbenchError for a path that does not exist."""
    path = Path(path)
    if not path.exists():
        raise WorkbenchError(f"--kernels {path}: no such file or folder")
    if path.is_file():
        if path.suffix != ".py":  # imported as Python it failed with "'NoneType' object has no attribute 'loader'"
            raise WorkbenchError(f"--kernels {path}: not a Python file; a plugin is a .py file, a package "
                                 "folder (with __init__.py) or a folder of .py op files")
        return [path.resolve()]
    if (path / "__init__.py").exists():
        return [(path / "__init__.py").resolve()]
    files = sorted(p.resolve() for p in path.glob("*.py") if not p.name.startswith("_"))
    if not files:
        raise WorkbenchError(f"--kernels {path}: a folder with no op files (no __init__.py, no .py file "
                             "whose name does not start with _)")
    return files


def source_files(paths: Iterable[str | Path]) -> list[Path]:
    """Every file the plugin paths are made of (op files; for a package, each source file under
    its folder), resolved, in order, without duplicates. A path that does not exist is skipped
    (it is reported where the plugins load)."""
    found: list[Path] = []
    for path in paths:
        try:
            files = plugin_files(Path(path))
        except WorkbenchError:
            continue
        for file in files:
            found += package_files(file.parent) if file.name == "__init__.py" else [file]
    return list(dict.fromkeys(found))


def package_files(folder: Path) -> list[Path]:
    """Every source file under a package's folder (Python, CUDA, C/C++ headers), sorted."""
    return sorted(p.resolve() for p in Path(folder).rglob("*")
                  if p.suffix in SOURCE_SUFFIXES and p.is_file() and "__pycache__" not in p.parts)


def declared_files(impl: Any) -> list[Path]:
    """Kernel source files an implementation declares (a CudaSource's `.cu`: `cuda_source.path`,
    or `source.path` where its declaration has one), resolved."""
    found = []
    for field in ("cuda_source", "source"):
        path = getattr(getattr(impl, field, None), "path", None)
        if isinstance(path, (str, os.PathLike)):
            found.append(Path(path).resolve())
    return found


def registry_files(paths: Iterable[str | Path], registry: Any) -> list[Path]:
    """`source_files(paths)` plus the kernel sources that the implementations those files
    registered declare (`registry.added`: source key -> (op, impl) pairs)."""
    files = source_files(paths)
    keys = {str(f) for f in files}
    ops = getattr(registry, "ops", {})
    for key, added in getattr(registry, "added", {}).items():
        if key not in keys:
            continue
        for op_name, impl_name in added:
            op = ops.get(op_name)
            impls = [] if op is None else (list(op.impls.values()) if impl_name is None
                                           else [op.impls[impl_name]] if impl_name in op.impls else [])
            files += [f for impl in impls for f in declared_files(impl)]
    return list(dict.fromkeys(files))


def plugin_path(plugin: str, base_dir: str | Path | None) -> Path:
    """A session's plugin entry as a path: `~` expanded, relative to the session's folder."""
    path = Path(plugin).expanduser()
    return path if path.is_absolute() or base_dir is None else Path(base_dir) / path


def with_resolved_plugins(session: Any, base_dir: str | Path | None) -> Any:
    """The session with its `plugins` (and `compare` sides' plugin files) as absolute paths (for
    run_plan, whose working folder is not the session's). Keep the original for saving: the file
    keeps its relative paths."""
    resolved = tuple(str(plugin_path(p, base_dir).resolve()) for p in session.plugins)
    runs = tuple(dataclasses.replace(run, compare=tuple(
        dataclasses.replace(side, plugin=str(plugin_path(side.plugin, base_dir).resolve())) if side.plugin else side
        for side in run.compare)) if getattr(run, "compare", None) else run for run in session.runs)
    return dataclasses.replace(session, plugins=resolved, runs=runs)


def compare_plugin_files(session: Any) -> tuple[str, ...]:
    """The plugin files of the session's A/B sides (`compare: [{name, plugin: other.py}, ...]`),
    as the session holds them (absolute after with_resolved_plugins): files the run uses too, so
    provenance records them beside `plugins`."""
    sides = (side for run in session.runs for side in (getattr(run, "compare", None) or ()))
    return tuple(dict.fromkeys(side.plugin for side in sides if getattr(side, "plugin", None)))


# -- content hashes --------------------------------------------------------------------------
def sha256_file(path: str | Path) -> str | None:
    """sha256 of the file's bytes (cached while its inode, size and mtime stay), or None when it
    cannot be read (gone, a folder)."""
    path = Path(path)
    try:
        st = path.stat()
        key = (str(path), st.st_ino, st.st_size, st.st_mtime_ns)
        if key not in _HASHES:
            _HASHES[key] = hashlib.sha256(path.read_bytes()).hexdigest()
        return _HASHES[key]
    except OSError:
        return None


def file_records(files: Iterable[str | Path]) -> list[dict[str, Any]]:
    """[{"path": absolute path, "sha256": hex or None (unreadable)}] in the order given."""
    return [{"path": str(Path(f).resolve()), "sha256": sha256_file(f)} for f in files]


def plugin_records(paths: Iterable[str | Path], registry: Any = None) -> list[dict[str, Any]]:
    """The results document's `provenance.plugins`: every file the plugin paths are made of
    (with the kernel sources their implementations declare, when `registry` is given)."""
    files = registry_files(paths, registry) if registry is not None else source_files(paths)
    return file_records(files)


@dataclass(frozen=True)
class FileChange:
    """A plugin file whose content differs: sha256 then (None: it was not used then) and now
    (None: it is gone or unreadable)."""

    path: str
    then: str | None
    now: str | None

    def __str__(self) -> str:
        if self.then is None:
            return f"{self.path} (not used then)"
        if self.now is None:
            return f"{self.path} (gone now; sha256 {self.then[:12]} then)"
        return f"{self.path} (sha256 {self.then[:12]} then, {self.now[:12]} now)"


def changed_files(recorded: Iterable[dict] | None, current: Iterable[dict]) -> list[FileChange]:
    """Files of `current` whose hash differs from `recorded` (a document's provenance.plugins),
    and recorded files no longer used. [] when `recorded` is None (an older document)."""
    if recorded is None:
        return []
    then = {r.get("path"): r.get("sha256") for r in recorded if isinstance(r, dict)}
    now = {r["path"]: r["sha256"] for r in current}
    changes = [FileChange(p, then.get(p), h) for p, h in now.items() if then.get(p) != h]
    changes += [FileChange(p, h, None) for p, h in then.items() if p not in now]
    return changes
