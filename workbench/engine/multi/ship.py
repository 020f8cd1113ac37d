"""Plugin files shipped by content to another host (engine/ray_cluster.py): a node of a Ray
cluster has no view of this host's files, so each plugin path (a file, or a folder: every file
under it except caches and hidden ones) travels as bytes and is written under a folder of the
receiver's own; the paths the run uses there are mapped back to the sender's in the document.
Plain data, no torch, no Ray (tests/test_placement.py packs and unpacks it).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

SKIP_PARTS = ("__pycache__", ".git", ".ipynb_checkpoints")
MAX_BUNDLE_BYTES = 64 * 1024 * 1024  # a folder of plugins larger than this is not a plugin folder


@dataclass(frozen=True)
class Bundle:
    """paths: the plugin paths as the sender named them, in order; files: for each path, its
    files as (path relative to it, "" for a file itself; bytes); sha256: of everything."""

    paths: tuple[str, ...]
    files: tuple[tuple[tuple[str, bytes], ...], ...]
    sha256: str


def pack(paths: Sequence[str]) -> Bundle:
    """Read every plugin path. Raises FileNotFoundError naming a path that is not there, and
    ValueError when the files add up to more than MAX_BUNDLE_BYTES."""
    digest, total, files = hashlib.sha256(), 0, []
    for path in paths:
        root = Path(path)
        if not root.exists():
            raise FileNotFoundError(f"plugin path {path} does not exist")
        members = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file() and _kept(p, root))
        entry = []
        for member in members:
            data = member.read_bytes()
            rel = "" if member == root else member.relative_to(root).as_posix()
            total += len(data)
            digest.update(f"{path}\0{rel}\0".encode() + data)
            entry.append((rel, data))
        files.append(tuple(entry))
    if total > MAX_BUNDLE_BYTES:
        raise ValueError(f"plugin files add up to {total} bytes, more than {MAX_BUNDLE_BYTES} can be shipped")
    return Bundle(tuple(paths), tuple(files), digest.hexdigest())


def _kept(path: Path, root: Path) -> bool:
    parts = path.relative_to(root).parts
    return not any(p in SKIP_PARTS or p.startswith(".") for p in parts)


def unpack(bundle: Bundle, into: Path) -> dict[str, str]:
    """Write the bundle under `into` (one folder per path, keeping a file's own name, so a
    module imports under the name it has at home); returns {sender's path: receiver's path}."""
    mapping = {}
    for index, (path, entry) in enumerate(zip(bundle.paths, bundle.files)):
        base = Path(into) / str(index)
        name = Path(path).name
        for rel, data in entry:
            target = base / name / rel if rel else base / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        if not entry:  # an empty folder stays a folder
            (base / name).mkdir(parents=True, exist_ok=True)
        mapping[path] = str(base / name)
    return mapping


def mapped_back(paths: Sequence[str], mapping: Mapping[str, str]) -> list[str]:
    """Receiver's paths back to the sender's (paths not in the mapping unchanged)."""
    back = {v: k for k, v in mapping.items()}
    return [back.get(p, p) for p in paths]
