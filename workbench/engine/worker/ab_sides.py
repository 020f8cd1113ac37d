"""Where an A/B side's implementation comes from: this registry, another plugin file, or the
source file that defines it as of a git revision (session_compare.py, engine/ab.py).

A `plugin` or `rev` side is imported privately, in the A/B worker only, so that it never clashes
with the registry the rest of the run uses:
- ops the file creates go to a fresh Registry (`workbench.registry.REGISTRY` is swapped for the
  import; `Op(...)` registers into that module global);
- implementations it adds to existing ops (a plugin's `@GELU.impl("triton_mine")`) are taken out
  of those ops again after the import and kept for this side only.
A revision is read with `git archive REV <folder>` (the defining file's folder, so a `.cu` file
beside it comes from the same revision) into a temporary folder. Its module is imported under the
package of the current file, so relative imports (`from .matmul import ...`) reach the CURRENT
siblings: only the defining file and its data files are from REV.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import inspect
import io
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import workbench.registry as registry_module
from workbench.errors import WorkbenchError
from workbench.registry import Impl, Op, Registry
from workbench.variants import split_variant


@dataclass(frozen=True)
class ResolvedSide:
    """op and impl to build for one side; mode: its timing mode ("eager" | "graph");
    source: "registry", the plugin file, or "git:REV:path"."""

    op: Op
    impl: Impl
    mode: str
    source: str


def resolve_side(side: Any, op_name: str, registry: Registry, scratch: Path) -> ResolvedSide:
    """The op/impl of an ABSide. scratch: a folder for extracted revisions. Raises
    WorkbenchError naming the side, the file or the revision when it cannot be found."""
    name, mode = split_variant(side.name)
    mode = mode or "eager"
    if side.plugin:
        op, impl = _from_file(Path(side.plugin), None, op_name, name, registry)
        return ResolvedSide(op, impl, mode, side.plugin)
    if side.rev:
        current = registry.op(op_name).get_impl(name)
        file, package = _at_revision(current, side.rev, scratch)
        op, impl = _from_file(file, package, op_name, name, registry)
        return ResolvedSide(op, impl, mode, f"git:{side.rev}:{Path(inspect.getsourcefile(current.builder)).name}")
    op = registry.op(op_name)
    return ResolvedSide(op, op.get_impl(name), mode, "registry")


def _from_file(file: Path, package: str | None, op_name: str, impl_name: str, registry: Registry) -> tuple[Op, Impl]:
    if not file.is_file():
        raise WorkbenchError(f"compare: plugin {file}: no such file")
    private = _SideRegistry(registry)
    with _private_import(registry, private) as added:
        _import(file, package)
    own = private.op(op_name).impls if private.owns(op_name) else {}
    if impl_name in own:
        return private.op(op_name), own[impl_name]
    if impl_name in added.get(op_name, {}):
        return registry.op(op_name), added[op_name][impl_name]
    found = sorted({*added.get(op_name, {}), *own})
    raise WorkbenchError(f"compare: {file} registers no implementation {impl_name!r} of {op_name} "
                         f"(it registers: {', '.join(found) or 'none'})")


class _SideRegistry(Registry):
    """Ops a side's file creates live here (shadowing the run's ops of the same name); ops it
    looks up (`REGISTRY.op("gelu")` to add an implementation) come from the run's registry."""

    def __init__(self, fallback: Registry):
        super().__init__()
        self._fallback = fallback

    def add(self, op: Op) -> None:
        self._ops[op.name] = op

    def op(self, name: str) -> Op:
        return self._ops[name] if name in self._ops else self._fallback.op(name)

    def owns(self, name: str) -> bool:
        return name in self._ops


@contextlib.contextmanager
def _private_import(registry: Registry, private: "_SideRegistry") -> Iterator[dict[str, dict[str, Impl]]]:
    """During the block new ops go to `private` and impls added to `registry`'s ops are caught;
    afterwards every op of `registry` is as before. Yields {op name: {impl name: Impl}}."""
    saved_global = registry_module.REGISTRY
    saved = {name: op._impls for name, op in registry.ops.items()}  # noqa: SLF001 - our own registry
    for op in registry.ops.values():
        op._impls = {}  # an impl of the same name as the live one must not clash with it
    added: dict[str, dict[str, Impl]] = {}
    registry_module.REGISTRY = private
    try:
        yield added
    finally:
        registry_module.REGISTRY = saved_global
        for name, op in registry.ops.items():
            if op._impls:
                added[name] = dict(op._impls)
            op._impls = saved[name]


def _import(file: Path, package: str | None) -> None:
    digest = hashlib.sha256(str(file.resolve()).encode()).hexdigest()[:10]
    base = f"_ab_{file.stem}_{digest}"
    name = f"{package}.{base}" if package else f"workbench_side_{base}"
    spec = importlib.util.spec_from_file_location(name, file)
    module = importlib.util.module_from_spec(spec)
    if package:
        module.__package__ = package
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except WorkbenchError:
        raise
    except Exception as exc:
        raise WorkbenchError(f"compare: {file} failed to load: {type(exc).__name__}: {exc}") from exc
    finally:
        sys.modules.pop(name, None)


def _at_revision(impl: Impl, rev: str, scratch: Path) -> tuple[Path, str | None]:
    """(the defining file of `impl` extracted at `rev`, the package to import it under)."""
    source = Path(inspect.getsourcefile(impl.builder)).resolve()
    top = _git(source.parent, "rev-parse", "--show-toplevel").decode().strip()
    folder = source.parent.relative_to(top)
    archive = _git(Path(top), "archive", "--format=tar", rev, "--", str(folder))
    target = scratch / hashlib.sha256(f"{rev}:{folder}".encode()).hexdigest()[:12]
    safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}  # Python >= 3.11.4
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(target, **safe)
    file = target / folder / source.name
    if not file.is_file():
        raise WorkbenchError(f"compare: {folder / source.name} does not exist at revision {rev!r}")
    module = inspect.getmodule(impl.builder)
    return file, getattr(module, "__package__", None) or None


def _git(cwd: Path, *args: str) -> bytes:
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise WorkbenchError(f"compare: git {' '.join(args)} failed: {exc}") from exc
    if done.returncode != 0:
        message = done.stderr.decode(errors="replace").strip().splitlines()
        raise WorkbenchError(f"compare: git {' '.join(args[:2])}: {message[0] if message else 'failed'}")
    return done.stdout
