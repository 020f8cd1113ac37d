"""Built implementations kept by a warm worker, keyed by everything a build depends on.

Key: (op, implementation, params, spec shape, dtype, device, interpret, source digest). The
source digest hashes the file that defines the builder and the implementation's `.cu` file, so a
row never reuses a build of other source. (A plugin file that changes gets a fresh worker, engine/protocol.py WorkerKey.sources, or in
watch mode is re-imported in the same one, engine/reload.py: then only the changed files' builds
miss, by this digest.)
`compiled` implementations are not cached: every row starts from torch._dynamo.reset() (rule 8),
which drops compiled graphs; a recompile in a warm worker costs tens of ms (Inductor's caches).
"""

from __future__ import annotations

import functools
import hashlib
import inspect
from collections import OrderedDict
from pathlib import Path
from typing import Any, Callable, Hashable

MAX_BUILDS = 64  # builds kept per worker (least recently used go first)


def _freeze(mapping: Any) -> tuple:
    return tuple(sorted((str(k), repr(v)) for k, v in dict(mapping or {}).items()))


@functools.lru_cache(maxsize=256)
def _file_digest(path: str, mtime_ns: int, size: int) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]


def source_digest(impl: Any) -> str:
    """Digest of the builder's source file and the implementation's `.cu` file with the local
    headers it includes ('' if unknown)."""
    paths = []
    try:
        paths.append(inspect.getsourcefile(impl.builder))
    except TypeError:  # a builtin or a C callable: no file to hash
        pass
    digests = []
    for path in paths:
        if not path or not Path(path).is_file():
            continue
        stat = Path(path).stat()
        digests.append(_file_digest(str(path), stat.st_mtime_ns, stat.st_size))
    cu_path = getattr(getattr(impl, "source", None), "path", None)  # a CudaSource: the .cu and the headers it includes
    if cu_path is not None and Path(cu_path).is_file():
        from workbench.cuda_build import source_bundle

        digests.append(hashlib.sha256(source_bundle(Path(cu_path)).encode()).hexdigest()[:16])
    return "-".join(digests)


def build_key(row: Any, impl: Any, spec: Any, params: dict, interpret: bool) -> tuple:
    """What a build depends on (see the module docstring)."""
    return (row.op, row.impl, _freeze(params), _freeze(spec.shape), str(getattr(spec, "dtype", "")),
            row.device, bool(interpret), row.settings.fp32_precision, source_digest(impl))


class BuildCache:
    """A small LRU map of build key -> the built callable."""

    def __init__(self, max_builds: int = MAX_BUILDS):
        self.max_builds = max_builds
        self._builds: OrderedDict[Hashable, Callable[..., Any]] = OrderedDict()
        self.hits = self.misses = 0

    def get(self, key: Hashable) -> Callable[..., Any] | None:
        fn = self._builds.get(key)
        if fn is None:
            self.misses += 1
            return None
        self.hits += 1
        self._builds.move_to_end(key)
        return fn

    def put(self, key: Hashable, fn: Callable[..., Any]) -> None:
        self._builds[key] = fn
        self._builds.move_to_end(key)
        while len(self._builds) > self.max_builds:
            self._builds.popitem(last=False)

    def __len__(self) -> int:
        return len(self._builds)
