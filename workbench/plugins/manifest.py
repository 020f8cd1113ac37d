"""The registry's declarations without torch: a manifest cached by the plugin files' content.

The front end (--list, --check, the TUI, run_plan's planning) needs what ops and implementations
*declare* (names, spec fields and defaults, dtypes, params, needs), not their code. Op files
import torch, so a manifest of each plugin source is built once in a subprocess
(workbench/plugins/manifest_build.py imports the plugins) and cached as JSON under
`cache_dir/manifest/`, keyed by the source's files' content (sha256) and the versions of
workbench, torch, triton and Python. A source is an entry point of the `workbench.ops` group (a
package: every file under its folder) or a --kernels / session plugin path.

`declare(paths, cache_dir=...)` returns a `Registry` of real `Op`/`Impl` objects whose builders,
inputs and references are stand-ins that raise (they run only in a worker), so the session
checks and availability rules work on it unchanged. What only plugin code knows (an op's own
`Spec.check` rules, cost models) is asked of a worker when rows are planned (engine/plan.py).
A declared op also says which references (math variants) it has and whether it registers its
input factory and cost model (`declared_references`, `declared_inputs`, `declared_cost`: what
--check refuses without), and each implementation's code digest (`op.code_digests`:
workbench/plugins/code_digest.py, watch mode's fingerprints); `registry.added` records what each
source declared.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.metadata
import importlib.util
import json
import platform
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import workbench
from workbench.plugins.code_digest import impl_digest
from workbench.dtypes import DType
from workbench.trace import mark
from workbench.errors import WorkbenchError
from workbench.kernel_source import source_from_plain
from workbench.plugins.sources import package_files, plugin_files
from workbench.registry import REGISTRY, Op, Registry, op_entry_points
from workbench.spec import Spec

# (sources in load order, the keys wanted) -> key -> manifest, or None (then: the subprocess)
Builder = Callable[[list["Source"], set[str]], "dict[str, dict] | None"]
MANIFEST_VERSION = 4  # 2: implementations carry their source (kernel_source.plain); 3: references, code digests;
# 4: written unsorted (params in their declared order; version 3 files had them sorted)
BUILD_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class Source:
    """One plugin source: key as the registry names it ('entry point lecture', or a file path),
    how to load it (an entry point's name, or a path), and the files whose content keys it."""

    key: str
    load: str
    entry_point: bool
    files: tuple[Path, ...]


def versions() -> dict[str, str | None]:
    """What else a manifest depends on: a new torch or Triton may change what plugins declare."""
    def version(name: str) -> str | None:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            return None
    return {"manifest": str(MANIFEST_VERSION), "workbench": workbench.__version__, "torch": version("torch"),
            "triton": version("triton"), "python": platform.python_version()}


def sources(paths: Iterable[str | Path] = (), *, entry_points: bool = True) -> list[Source]:
    """The plugin sources in load order (entry points, then paths), without importing them.
    Raises WorkbenchError for a path that does not exist."""
    found = []
    if entry_points:
        for ep in op_entry_points():
            found.append(Source(f"entry point {ep.name}", ep.name, True, _module_files(ep.module)))
    for path in paths:
        for file in plugin_files(Path(path)):
            if any(source.key == str(file) for source in found):
                continue  # the same file reached twice (--kernels X --kernels X, or a folder and a file in it)
            files = _tree(file.parent) if file.name == "__init__.py" else (file,)
            found.append(Source(str(file), str(file), False, files))
    return found


def _module_files(module: str) -> tuple[Path, ...]:
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        spec = None
    if spec is None or spec.origin is None:
        return ()
    if spec.submodule_search_locations:
        return tuple(f for loc in spec.submodule_search_locations for f in _tree(Path(loc)))
    return (Path(spec.origin),)


def _tree(folder: Path) -> tuple[Path, ...]:
    return tuple(package_files(folder))


def digest(source: Source, env: dict | None = None) -> str:
    """sha256 of the source's files (paths and contents) and `versions()`."""
    return hash_files(source.files, hashlib.sha256(json.dumps(env or versions(), sort_keys=True).encode())).hexdigest()


def hash_files(files: Iterable[Path], h: Any = None) -> Any:
    """`h` (a new sha256 by default) updated with each file's path and content, in order."""
    h = h if h is not None else hashlib.sha256()
    for file in files:
        h.update(str(file).encode() + b"\0")
        try:
            h.update(Path(file).read_bytes())
        except OSError:
            h.update(b"(unreadable)")
    return h


def sources_digest(paths: Iterable[str | Path] = ()) -> str:
    """One digest over every source (entry points and paths): a worker's WorkerKey.sources."""
    env = versions()
    return hashlib.sha256("".join(digest(s, env) for s in sources(paths)).encode()).hexdigest()[:20]


# -- the cache -------------------------------------------------------------------------------
def manifests(found: list[Source], cache_dir: Path | None, build: Builder | None = None) -> dict[str, dict]:
    """Source key -> its manifest: from the cache where fresh, else from `build` (watch mode: a
    warm worker that reloaded the edited files in place, engine/reload.py) when it answers for
    every missing source, else built in one subprocess."""
    env = versions()
    folder = Path(cache_dir) / "manifest" if cache_dir else None
    out, missing = {}, []
    for source in found:
        path = folder / f"{digest(source, env)}.json" if folder else None
        cached = _read(path) if path else None
        if cached is not None:
            out[source.key] = cached
        else:
            missing.append((source, path))
    if missing:
        # every source up to the last missing one is loaded (a plugin may add implementations to
        # an op an earlier source declares); only the missing ones are described
        last = max(found.index(s) for s, _ in missing)
        wanted = {s.key for s, _ in missing}
        built = build(found[:last + 1], wanted) if build is not None else None
        errors = [m["error"] for m in (built or {}).values() if m.get("error")]
        if errors:  # the new text failed to import in the worker: as the subprocess would say
            raise WorkbenchError(errors[0])
        if built is None or not wanted <= set(built):
            built = build_in_subprocess(found[:last + 1], wanted)
        for source, path in missing:
            out[source.key] = built[source.key]
            if path is not None and built[source.key].get("error") is None:
                _write(path, built[source.key])
    return out


def _read(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("version") == MANIFEST_VERSION else None


def _write(path: Path, data: dict) -> None:
    from workbench.fileio import atomic_write_text

    try:
        atomic_write_text(path, json.dumps(data))  # unsorted: params keep the order they were declared in
    except OSError:  # a read-only cache folder: the next start builds it again
        pass


def build_in_subprocess(found: list[Source], wanted: set[str]) -> dict[str, dict]:
    """Import the sources in order in a fresh interpreter (workbench/plugins/manifest_build.py); returns
    key -> manifest for the `wanted` ones. Raises WorkbenchError when the interpreter itself
    fails (a plugin that crashes it)."""
    request = [{"key": s.key, "load": s.load, "entry_point": s.entry_point, "describe": s.key in wanted}
               for s in found]
    try:
        from workbench.helper_python import die_with_parent, isolated_python

        proc = subprocess.run(isolated_python("-m", "workbench.plugins.manifest_build"), input=json.dumps(request),
                              preexec_fn=die_with_parent,
                              capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise WorkbenchError(f"loading the plugins took more than {BUILD_TIMEOUT_S:g} s: "
                             f"{', '.join(s.key for s in found)}") from None
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise WorkbenchError(f"loading the plugins failed (exit {proc.returncode}) for "
                             f"{', '.join(s.key for s in found if s.key in wanted)}: {tail}")
    return json.loads(lines[-1])


# -- declarations -> a Registry --------------------------------------------------------------
def declare(paths: Iterable[str | Path] = (), *, entry_points: bool = True, registry: Registry | None = None,
            cache_dir: Path | None = None, build: Builder | None = None) -> Registry:
    """Like registry.discover, from manifests: a Registry of declared ops (see the module
    docstring); build: see `manifests`. Raises WorkbenchError naming a path that does not exist
    or a plugin that failed."""
    registry = registry if registry is not None else Registry()
    registry.declared = True  # session.py loads later plugins into it the same way
    cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    # sources declared into this registry before (a session's plugins come after the entry
    # points and --kernels) are loaded first when a manifest is built: a plugin may extend them
    earlier = list(getattr(registry, "declared_sources", []))
    found = [s for s in sources(paths, entry_points=entry_points) if s.key not in registry.loaded_sources]
    registry.declared_sources = earlier + found
    mark("manifest: declaring " + ", ".join(s.key for s in found))
    built = manifests(earlier + found, cache_dir, build) if found else {}
    mark("manifest: declared")
    for source in found:
        data = built[source.key]
        if data.get("error"):
            raise WorkbenchError(data["error"])
        for op in data["ops"]:
            _declare_op(registry, op)
        registry.added[source.key] = [(op["name"], None) for op in data["ops"] if op["new"]] + [
            (op["name"], impl["name"]) for op in data["ops"] if not op["new"] for impl in op["impls"]]
        registry.loaded_sources.append(source.key)
    return registry


def empty_sources(registry: Registry) -> list[str]:
    """The keys of the plugin sources declared into `registry` that loaded but register no op
    and no implementation (an empty file, the wrong file)."""
    return [key for key in getattr(registry, "loaded_sources", ()) if not registry.added.get(key)]


def empty_source_note(key: str) -> str:
    """What --list, --check, --replay and the TUI say of one (empty_sources)."""
    return f"{key}: loaded, but it registers no op and no implementation"


def default_cache_dir() -> Path:
    """platformdirs' user cache folder "workbench" (the engine's default too)."""
    import platformdirs

    return Path(platformdirs.user_cache_dir("workbench"))


def _declare_op(registry: Registry, data: dict) -> None:
    if data["name"] in registry:
        if data["new"]:
            raise WorkbenchError(f"op {data['name']!r} is registered twice")
        op = registry.op(data["name"])
    else:
        op = Op(data["name"], spec_class(data["spec"]), description=data["description"], dtypes=data["dtypes"],
                test_specs=data["test_specs"], matmul_like=data["matmul_like"], registry=registry)
        op.own_spec_check = data["spec"]["own_check"]
        op.declared = True  # no inputs, references or cost model here: those run in a worker
        op.declared_references = tuple(data.get("references") or ())
        op.declared_inputs, op.declared_cost = data.get("inputs", True), data.get("cost", True)
        op.code_digests = {}
    if not data["new"]:  # a plugin's references added to an op an earlier source declared
        op.declared_references = tuple(dict.fromkeys([*getattr(op, "declared_references", ()),
                                                      *(data.get("references") or ())]))
    for impl in data["impls"]:
        options = {k: impl[k] for k in ("math", "params", "needs", "dtypes", "tolerance_scale", "description")}
        options["source"] = source_from_plain(impl["source"])
        op.impl(impl["name"], **options)(_worker_only(f"{op.name}/{impl['name']}"))
        getattr(op, "code_digests", {})[impl["name"]] = impl.get("code")


def spec_class(data: dict) -> type[Spec]:
    """A Spec subclass with the declared fields, defaults and NON_NEGATIVE set."""
    fields = [(name, int, dataclasses.field(default=default)) for name, default in data["fields"]]
    if data["dtype"] is not None:
        fields.append(("dtype", DType, dataclasses.field(default=DType(data["dtype"]))))
    cls = dataclasses.make_dataclass(data["name"], fields, bases=(Spec,), frozen=True)
    cls.NON_NEGATIVE = frozenset(data["non_negative"])
    return cls


def _worker_only(name: str):
    def builder(*_args: Any) -> Any:
        raise WorkbenchError(f"{name}: a declaration from the manifest; it is built in a worker")
    return builder


def describe_registry(registry: Registry = REGISTRY, before: dict[str, set[str]] | None = None) -> list[dict]:
    """The declarations of `registry` as manifest data; before: op -> impl names that an earlier
    source declared (only what was added since is described)."""
    before = before or {}
    out = []
    for name, op in registry.ops.items():
        added = [i for n, i in op.impls.items() if n not in before.get(name, set())]
        if name in before and not added:
            continue
        out.append(_describe_op(op, added, new=name not in before))
    return out


def describe_source(registry: Registry, key: str) -> dict:
    """The manifest of one loaded source, from what loading it registered (registry.registered:
    a warm worker after an in-place reload, engine/reload_worker.py); what describe_registry
    gives for it when the sources are imported in order."""
    registered = registry.registered[key]
    by_op: dict[str, list[str]] = {}
    for op_name, impl_name in registered.impls:
        by_op.setdefault(op_name, []).append(impl_name)
    ops = [*registered.ops, *(name for name in by_op if name not in registered.ops)]
    described = [_describe_op(registry.op(name), [registry.op(name).impls[i] for i in by_op.get(name, [])],
                              new=name in registered.ops) for name in ops if name in registry]
    return {"version": MANIFEST_VERSION, "ops": described, "error": None}


def _describe_op(op: Op, impls: list, new: bool) -> dict:
    return {"name": op.name, "new": new, "description": op.description,
            "dtypes": [d.value for d in op.dtypes], "test_specs": [dict(s) for s in op.test_specs],
            "matmul_like": op.matmul_like, "spec": _describe_spec(op.spec),
            "references": op.references, "inputs": op.has_inputs, "cost": op.has_cost,
            "impls": [{**_describe_impl(i), "code": impl_digest(op, i)} for i in impls]}


def _describe_spec(spec: type[Spec]) -> dict:
    fields = [(f.name, f.default) for f in dataclasses.fields(spec) if f.name != "dtype"]
    dtype = next((f.default for f in dataclasses.fields(spec) if f.name == "dtype"), None)
    return {"name": spec.__name__, "fields": fields, "dtype": None if dtype is None else str(dtype),
            "non_negative": sorted(spec.NON_NEGATIVE), "own_check": spec.check is not Spec.check}


def _describe_impl(impl: Any) -> dict:
    """Impl.describe() (plain data: kind, math, params, dtypes, needs, the source's plain form)
    and the tolerance factor."""
    return {**impl.describe(),
            "tolerance_scale": dict(impl.tolerance_scale) if isinstance(impl.tolerance_scale, Mapping)
            else impl.tolerance_scale}
