"""Worker side of an in-place plugin reload (the parent side: engine/reload.py).

A warm worker records the content of each plugin file it imported. Asked to reload
(protocol.Reload), it finds the plugin sources whose files changed since, and re-imports each
of them and every plugin source after it in load order (a later source may extend an op an
earlier one declares) into its registry:

- what the old import registered (ops, implementations, references: workbench/plugins/registrations.py)
  is withdrawn, the old module leaves `sys.modules` (with a package's submodules) and its
  bytecode cache and linecache entry are dropped (an edit of the same size within the same
  second would otherwise import the old bytecode, and Triton would read the old source);
- the new text is imported into a new module object: its globals start empty; nothing of the
  old module is reachable from the registry, so the rows of the new code use only the new code;
- a source that fails to import (SyntaxError, ImportError, an exception at import) is reported
  as `plugin PATH failed to load: PATH:LINE: ...` (registry._load_once), and everything is put
  back as it was: the worker still serves its old key, and a later good edit reloads from there.

Only plugin paths are reloaded; a changed installed op package (a `workbench.ops` entry
point, such as the shipped kernels) retires the worker. The answer (protocol.Reloaded) carries the new sources digest, which becomes the worker's
WorkerKey.sources, and the manifests of the sources asked for (workbench/plugins/manifest.py's format),
so the front end needs no manifest subprocess. The digest is taken before and after the
reload: a file saved again meanwhile makes the reload count as failed (the worker is retired).
"""

from __future__ import annotations

import importlib.util
import linecache
import sys
from pathlib import Path
from typing import Any

from workbench.engine.protocol import Reload, Reloaded
from workbench.errors import WorkbenchError
from workbench.plugins.sources import package_files, plugin_files
from workbench.plugins.registrations import restore, snapshot, withdraw


def source_files_of(key: str) -> list[Path]:
    """The files a path source's content is: the op file, or every source file of its package."""
    file = Path(key)
    return package_files(file.parent) if file.name == "__init__.py" else [file]


def content_hash(key: str) -> str:
    from workbench.plugins.manifest import hash_files

    return hash_files(source_files_of(key)).hexdigest()


class Reloader:
    """The plugin paths a worker imports, and the content of each file when it did. Made before
    the first import (a file saved meanwhile then counts as changed: reloaded once more, never
    missed); `registry` is set once discovery is done (None: it failed, nothing is reloaded)."""

    def __init__(self, plugin_paths: tuple[str, ...]):
        from workbench.plugins.manifest import sources_digest

        self.registry: Any = None
        self.paths = tuple(plugin_paths)
        self.installed = sources_digest(())  # the `workbench.ops` entry points: never reloaded
        try:
            self.hashes = {key: content_hash(key) for key in self._keys()}
        except WorkbenchError:  # a path that does not exist: discovery fails and reports it
            self.hashes = {}

    def _keys(self) -> list[str]:
        return [str(file) for path in self.paths for file in plugin_files(Path(path))]

    def reload(self, job: Reload) -> Reloaded:
        """Re-import what changed (see the module docstring) and describe `job.describe`."""
        from workbench.plugins.manifest import sources_digest

        if self.registry is None:
            return Reloaded(False, reason="the worker's plugins did not load")
        try:
            before, keys = sources_digest(self.paths), self._keys()
        except WorkbenchError as exc:  # a plugin path is gone: the front end reports it
            return Reloaded(False, reason=str(exc))
        if set(keys) != set(self.hashes):
            return Reloaded(False, reason="plugin files were added or removed")
        if sources_digest(()) != self.installed:
            return Reloaded(False, reason="an installed op package (a workbench.ops entry point) changed")
        changed = [k for k in keys if content_hash(k) != self.hashes[k]]
        if changed:
            redo = keys[min(keys.index(k) for k in changed):]
            hashes = {k: content_hash(k) for k in redo}
            failed = reimport(self.registry, redo)
            if failed is not None:
                key, error = failed
                return Reloaded(False, manifests={key: _error_manifest(error)}, reason=error, keep=True)
            self.hashes.update(hashes)
        if sources_digest(self.paths) != before:
            return Reloaded(False, reason="a plugin file changed during the reload")
        return Reloaded(True, sources=before, manifests=self._describe(job.describe), reloaded=tuple(changed))

    def _describe(self, keys: tuple[str, ...]) -> dict[str, dict]:
        from workbench.plugins.manifest import describe_source

        return {key: describe_source(self.registry, key) for key in keys if key in self.registry.registered}


def reimport(registry: Any, keys: list[str]) -> tuple[str, str] | None:
    """Withdraw then re-import the path sources `keys` (in load order). Returns None, or (the
    source that failed, its one-line error) with the registry and modules as they were."""
    from workbench.registry import _import_file, _load_once

    saved = [_take_out(registry, key) for key in reversed(keys)]
    done: list[str] = []
    for key in keys:
        before = snapshot(registry)
        try:
            _load_once(registry, key, lambda k=key: _import_file(Path(k)))  # type: ignore[misc]
        except WorkbenchError as exc:
            from workbench.plugins.registrations import registered_since

            withdraw(registry, registered_since(registry, before))  # what the failed import left
            for other in reversed(done):
                _take_out(registry, other)
            for item in reversed(saved):
                _put_back(registry, *item)
            return key, str(exc).splitlines()[0]
        done.append(key)
    return None


def _take_out(registry: Any, key: str) -> tuple:
    from workbench.registry import plugin_module_name

    registered = registry.registered.pop(key, None)
    withdrawn = withdraw(registry, registered) if registered is not None else None
    if key in registry.loaded_sources:
        registry.loaded_sources.remove(key)
    name = plugin_module_name(Path(key))
    modules = {m: sys.modules.pop(m) for m in list(sys.modules) if m == name or m.startswith(name + ".")}
    for file in source_files_of(key):
        linecache.cache.pop(str(file), None)
        if file.suffix == ".py":
            try:
                Path(importlib.util.cache_from_source(str(file))).unlink(missing_ok=True)
            except (NotImplementedError, OSError):  # no bytecode cache here, or a read-only folder
                pass
    return key, registered, withdrawn, modules


def _put_back(registry: Any, key: str, registered: Any, withdrawn: Any, modules: dict) -> None:
    if withdrawn is not None:
        restore(registry, withdrawn)
        registry.registered[key] = registered
    registry.loaded_sources.append(key)
    sys.modules.update(modules)


def _error_manifest(error: str) -> dict:
    from workbench.plugins.manifest import MANIFEST_VERSION

    return {"version": MANIFEST_VERSION, "ops": [], "error": error}
