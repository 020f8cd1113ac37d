"""Writing files without damaging what a path points at: the project's one atomic writer.

- `atomic_write_text` / `atomic_write_bytes`: a regular file is replaced atomically (a temporary
  file in the same folder, fsync, os.replace): either the whole new text is there or the old file
  is untouched, and no temporary file is left behind on error (CONTRACTS.md, "Session file":
  saved atomically). A symlink is followed: its target is replaced, the link stays a link.
- `write_output`: what `-o PATH` does. A regular file (or a path that does not exist yet) is
  written atomically as above; anything else that exists (a device node such as /dev/full or
  /dev/null, a FIFO, a socket, /dev/stdout and the /proc/self/fd/N links behind it) is written
  through and never replaced.
- `output_problem`: why a path cannot be written, found before any work (empty, a folder, a
  read-only folder, a file system that refuses new files such as /sys), or None.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
import tempfile
from pathlib import Path
from typing import Iterator

# Paths that name one of this process's open file descriptors: written to that descriptor, so
# `-o /dev/stdout >> log` appends to the log instead of truncating it by reopening.
_FD_PATH = re.compile(r"^/(?:dev/fd|proc/(self|\d+)/fd)/(\d+)$")
_STD_NAMES = {"/dev/stdout": 1, "/dev/stderr": 2}
_MAX_LINKS = 40  # as the kernel's ELOOP limit


@contextlib.contextmanager
def exclusive(lock_path: str | Path) -> Iterator[bool]:
    """Hold an exclusive advisory `fcntl.flock` on `lock_path` (created; blocking, the GIL
    released while waiting) for the `with` body; the kernel drops it when the holder dies, so
    a killed holder never leaves it taken. Yields True, or False where fcntl is missing (not
    POSIX: no lock)."""
    try:
        import fcntl
    except ImportError:
        yield False
        return
    Path(lock_path).parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def atomic_write_text(path: str | Path, text: str, *, encoding: str = "utf-8") -> Path:
    """Write `text` to `path` atomically; return the path written (a symlink's target).

    The new file keeps the old file's permission bits, or gets 0o666 minus the umask when new.
    Raises OSError (the original file, if any, is unchanged).
    """
    return atomic_write_bytes(path, text.encode(encoding))


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    """Write `data` to `path` atomically (see atomic_write_text)."""
    path = Path(os.path.realpath(path)) if os.path.islink(path) else Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    folder.mkdir(parents=True, exist_ok=True)
    mode = _target_mode(path)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return path


def is_stream(path: str | Path) -> bool:
    """True when `path` exists and is not a regular file or folder (device node, FIFO, socket,
    a terminal behind /dev/stdout), or names one of this process's descriptors: written through."""
    if _own_fd(path) is not None:
        return True
    try:
        mode = os.stat(path).st_mode  # follows symlinks
    except (FileNotFoundError, NotADirectoryError):
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def write_output(path: str | Path, data: bytes) -> Path:
    """Write `data` to `path` as `-o` does: through a stream target, atomically to a file.
    Returns the path written. Raises OSError (ENOSPC from /dev/full, EPIPE from a FIFO ...)."""
    fd = _own_fd(path)
    if fd is not None:
        _write_all(fd, data)
        return Path(path)
    if is_stream(path):
        fd = _open_stream(path)  # no O_CREAT, no O_TRUNC: the node stays what it is
        try:
            _write_all(fd, data)
        finally:
            os.close(fd)
        return Path(path)
    return atomic_write_bytes(path, data)


FIFO_WAIT_S = 10.0  # how long -o FIFO waits for a reader to open it


def _open_stream(path: str | Path) -> int:
    """A stream target opened for writing. A FIFO is opened without blocking, retried until a
    reader opens it, at most FIFO_WAIT_S: a FIFO with no reader would block the command in open()
    past SIGTERM, and the rows would be lost. Raises OSError (ENXIO: no reader)."""
    import time

    if not stat.S_ISFIFO(os.stat(path).st_mode):
        return os.open(path, os.O_WRONLY)
    deadline = time.monotonic() + FIFO_WAIT_S
    while True:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno != errno.ENXIO:
                raise
            if time.monotonic() >= deadline:
                raise OSError(errno.ENXIO, f"no reader opened the FIFO within {FIFO_WAIT_S:g} s") from None
            time.sleep(0.05)
            continue
        os.set_blocking(fd, True)  # a reader is there: write as to a pipe
        return fd


JOURNAL_SUFFIX = ".journal.jsonl"  # `out.json` -> `out.json.journal.jsonl` (workbench/results/journal.py)


def output_clash(path: str, inputs: "tuple[str | Path, ...]") -> str | None:
    """Why writing `path` would destroy one of the run's own input files (the session, a kernels
    file, the baseline), or None. Compared by real path, so a link or `./` does not hide it."""
    if not path or is_stream(path):
        return None
    target = os.path.realpath(path)
    for source in inputs:
        if source and os.path.isfile(source) and os.path.realpath(source) == target:
            return f"is {source}, an input of this run; it would be replaced by the results"
    if _is_session_file(target):
        return "is a session file; it would be replaced by the results (choose another -o path, e.g. results.json)"
    return None


def _is_session_file(path: str) -> bool:
    """Whether `path` is an existing YAML session (a top-level `runs:` or `schema_version:` line in
    its first 64 KiB; a results document is JSON or CSV and has neither)."""
    try:
        with open(path, "rb") as f:
            head = f.read(65536)
    except OSError:
        return False
    return any(line.startswith((b"runs:", b"schema_version:")) for line in head.splitlines())


def output_problem(path: str, example: str = "results.json") -> str | None:
    """Why `path` cannot be written, or None; checked before any work is done. `example`: the
    file name a folder's refusal suggests in it (--plot's is a figure).

    A file target is probed by creating (and removing) a temporary file in its folder, or in the
    nearest existing folder above when folders are missing (they are created when written)."""
    if not path:
        return "an empty path; give a file path, or leave -o out to write to stdout"
    if is_stream(path):
        return None if os.access(path, os.W_OK) else "not writable"
    if path.endswith(("/", os.sep)):
        return f"ends with {path[-1]!r}, so it names a folder; give a file path (e.g. {Path(path) / example})"
    if path.endswith(JOURNAL_SUFFIX):
        return f"ends with {JOURNAL_SUFFIX!r}, the suffix of a run's journal (workbench/results/journal.py); choose another name"
    target = Path(os.path.realpath(path))
    if target.is_dir():
        return f"is a folder; give a file path (e.g. {Path(path) / example})"
    if target.exists() and not os.access(target, os.W_OK):
        return "the file is not writable"
    existing = target.parent
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return f"{existing} is a file, not a folder"
    return _probe(existing, missing=target.parent if target.parent != existing else None)


def _probe(folder: Path, missing: Path | None = None) -> str | None:
    """None if a file can be made in `folder`; missing: the folder under it the path needs
    (named: `-o /proc/nope/x.json` said only that /proc takes no new file)."""
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".workbench-probe.")
    except OSError as exc:
        needed = f"; {missing} does not exist and cannot be made there" if missing is not None else ""
        return f"folder {folder} takes no new file (creating one there failed: {exc.strerror or exc}){needed}"
    os.close(fd)
    os.unlink(tmp)
    return None


def _own_fd(path: str | Path) -> int | None:
    """The descriptor number when `path`, or a link on its way, names one of ours."""
    current = os.path.abspath(path)
    for _ in range(_MAX_LINKS):
        if current in _STD_NAMES:
            return _STD_NAMES[current]
        match = _FD_PATH.match(current)
        if match and match.group(1) in (None, "self", str(os.getpid())):
            return int(match.group(2))
        if not os.path.islink(current):
            return None
        current = os.path.join(os.path.dirname(current), os.readlink(current))
        current = os.path.abspath(current)
    return None


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _target_mode(path: Path) -> int:
    try:
        return path.stat().st_mode & 0o7777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask
