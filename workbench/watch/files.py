"""Watching files for saved edits: poll (inode, size, mtime), then compare content hashes.

    watcher = FileWatcher([session_path, *plugin_files])
    changed = watcher.wait(stop)          # blocks; the paths whose content changed, or None

Polling a handful of files every 0.05 s costs nothing and needs no dependency (watchfiles and
inotify would add one, and inotify misses files on some network mounts); the content hash means
a save that changes nothing (`:w` twice, `touch`) starts no run. Editors save in patterns
(write in chunks, write a temporary file and rename it over the original, or move the original
away and write a new one: vim's backupcopy, JetBrains' safe write), so a change is reported only
once the file has been quiet for `settle_s`, and a file that vanished is waited for up to
`gone_s` before it counts as deleted. A folder is watched by its listing (a plugin folder that
gains an op file). Torch-free; used by `workbench --replay FILE --watch` and the TUI.
"""

from __future__ import annotations

import hashlib
import threading
import time
from pathlib import Path
from typing import Callable, Iterable

from workbench.plugins.sources import sha256_file

# A save is seen within POLL_S and reported SETTLE_S after its last write: ~0.1-0.15 s of watch
# mode's save -> result time (0.2 s at 0.1 / 0.15). Editors write a buffer in one call or in
# chunks microseconds apart; 0.1 s of quiet still covers a slow write, and 20 stat()s a second of
# a few files cost nothing.
POLL_S = 0.05    # how often the files are stat()ed
SETTLE_S = 0.1   # a file must be quiet this long after its last change (editors write in steps)
GONE_S = 1.0     # a file that vanished (rename-over in progress) is waited for this long

Stat = tuple[int, int, int] | None  # (inode, size, mtime_ns), None: missing


def content_hash(path: Path) -> str | None:
    """sha256 of a file's bytes, of a folder's sorted listing, or None when it is missing."""
    if path.is_dir():
        try:
            names = sorted(p.name for p in path.iterdir() if not p.name.startswith("."))
        except OSError:
            return None
        return "dir:" + hashlib.sha256("\n".join(names).encode()).hexdigest()
    return sha256_file(path)


def _stat(path: Path) -> Stat:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


class FileWatcher:
    """Reports saved content changes of a set of paths (files or folders).

    poll_s, settle_s, gone_s: see the module docstring; clock: time source (tests); hash_fn:
    path -> content hash or None.
    """

    def __init__(self, paths: Iterable[str | Path] = (), *, poll_s: float = POLL_S, settle_s: float = SETTLE_S,
                 gone_s: float = GONE_S, clock: Callable[[], float] = time.monotonic,
                 hash_fn: Callable[[Path], str | None] = content_hash) -> None:
        self.poll_s, self.settle_s, self.gone_s = poll_s, settle_s, gone_s
        self._clock, self._hash_fn = clock, hash_fn
        self._hashes: dict[Path, str | None] = {}
        self._stats: dict[Path, Stat] = {}
        self._pending: dict[Path, float] = {}  # path -> when its stat last changed
        self.set_paths(paths)

    @property
    def paths(self) -> list[Path]:
        return list(self._hashes)

    def set_paths(self, paths: Iterable[str | Path]) -> None:
        """Watch exactly `paths` from now on. A path already watched keeps its last seen content
        (an edit made meanwhile is still reported); a new one starts from what it holds now."""
        wanted = [Path(p).absolute() for p in paths]
        self._hashes = {p: self._hashes[p] if p in self._hashes else self._hash_fn(p) for p in wanted}
        self._stats = {p: self._stats[p] if p in self._stats else _stat(p) for p in wanted}
        self._pending = {p: t for p, t in self._pending.items() if p in self._hashes}

    def poll(self) -> list[Path]:
        """One look: the paths whose content changed and has settled (empty list: none yet)."""
        now = self._clock()
        for path in self._hashes:
            stat = _stat(path)
            if stat != self._stats[path]:
                self._stats[path] = stat
                self._pending[path] = now
        if not self._pending or now - max(self._pending.values()) < self.settle_s:
            return []
        changed = []
        for path, since in list(self._pending.items()):
            if self._stats[path] is None and now - since < self.gone_s:
                continue  # renamed away mid-save: the new file is about to appear
            del self._pending[path]
            digest = self._hash_fn(path)
            if digest != self._hashes[path]:
                self._hashes[path] = digest
                changed.append(path)
        return changed

    def wait(self, stop: threading.Event, timeout_s: float | None = None) -> list[Path] | None:
        """Block until a watched path's content changed (the changed paths), or return None when
        `stop` is set or `timeout_s` passed first."""
        deadline = None if timeout_s is None else self._clock() + timeout_s
        while not stop.is_set():
            changed = self.poll()
            if changed:
                return changed
            if deadline is not None and self._clock() >= deadline:
                return None
            stop.wait(self.poll_s)
        return None
