"""Where the warm daemon lives and which clients it may serve (torch-free; docs/engine.md,
"Warm daemon").

    fp = fingerprint(os.environ)            # what must match for a daemon to serve a client
    paths = DaemonPaths.of(folder, fp)      # folder/d-<fingerprint hash>.{sock,lock,json,log}

The folder is private to the user: created 0700, refused when another user owns it or others may
read it (`private_folder`). The socket's name carries the fingerprint's hash, so a client with
another Python, another workbench source, other torch/Triton versions or other settings in the
environment (CUDA_VISIBLE_DEVICES, TRITON_*, TORCHINDUCTOR_*, WORKBENCH_*, ...) finds its own
daemon and never one whose workers would behave differently.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import os
import platform
import secrets
import stat
import sys
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import workbench
from workbench.errors import WorkbenchError

# Environment variables a worker's behaviour depends on (prefixes, then whole names); the
# daemon's own switches are left out: they choose a daemon, not what it computes.
ENV_PREFIXES = ("CUDA_", "TRITON_", "TORCHINDUCTOR_", "TORCH_", "PYTORCH_", "WORKBENCH_", "NVIDIA_", "NCCL_",
                "CUBLAS_", "CUDNN_", "OMP_", "MKL_")
ENV_NAMES = ("PATH", "HOME", "LD_LIBRARY_PATH", "PYTHONPATH", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME")
ENV_IGNORED = ("WORKBENCH_DAEMON", "WORKBENCH_DAEMON_DIR", "WORKBENCH_DAEMON_IDLE_S")
SOURCE_SUFFIXES = (".py", ".cu", ".cuh", ".h", ".yaml")
SOCKET_PATH_MAX = 100  # sun_path holds 108 bytes on Linux, 104 on macOS
AUTHKEY_BYTES = 32


class DaemonError(WorkbenchError):
    """The daemon cannot be used (its folder, its socket, its start); the client says why and
    runs in its own process instead."""


@functools.lru_cache(maxsize=1)
def source_digest() -> str:
    """sha256 (hex, 20 characters) over the workbench package's source files (relative path and
    bytes): a daemon started before an edit of workbench itself never serves the edited code."""
    root = Path(workbench.__file__).resolve().parent
    h = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.suffix in SOURCE_SUFFIXES and "__pycache__" not in p.parts):
        h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:20]


def _version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def fingerprint(environ: Mapping[str, str]) -> dict:
    """What a daemon and its client must share: the Python executable and version, workbench's
    version and source digest, torch's and Triton's versions (package metadata: nothing is
    imported), and the environment variables that matter (ENV_PREFIXES, ENV_NAMES)."""
    env = {k: v for k, v in environ.items()
           if (k.startswith(ENV_PREFIXES) or k in ENV_NAMES) and k not in ENV_IGNORED}
    return {"python": sys.executable, "python_version": platform.python_version(),
            "workbench": workbench.__version__, "source": source_digest(), "torch": _version("torch"),
            "triton": _version("triton"), "env": dict(sorted(env.items()))}


def fingerprint_hash(fp: Mapping) -> str:
    """16 hex characters of sha256 over the fingerprint's JSON (keys sorted)."""
    return hashlib.sha256(json.dumps(fp, sort_keys=True).encode()).hexdigest()[:16]


def fingerprint_difference(mine: Mapping, theirs: Mapping) -> list[str]:
    """The fingerprint's fields that differ ("env.CUDA_VISIBLE_DEVICES", "source"), sorted."""
    fields = [k for k in set(mine) | set(theirs) if k != "env" and mine.get(k) != theirs.get(k)]
    env_a, env_b = mine.get("env") or {}, theirs.get("env") or {}
    fields += [f"env.{k}" for k in set(env_a) | set(env_b) if env_a.get(k) != env_b.get(k)]
    return sorted(fields)


def default_folder(environ: Mapping[str, str]) -> Path:
    """WORKBENCH_DAEMON_DIR, else platformdirs' user runtime folder `workbench` (XDG_RUNTIME_DIR,
    else /run/user/UID, else its /tmp fallback), else TMPDIR/workbench-UID."""
    given = environ.get("WORKBENCH_DAEMON_DIR")
    if given:
        return Path(given).expanduser()
    try:
        import platformdirs

        with warnings.catch_warnings():  # "XDG_RUNTIME_DIR is not set, falling back to ...": fine
            warnings.simplefilter("ignore")
            return Path(platformdirs.user_runtime_dir("workbench", appauthor=False))
    except ImportError:
        return Path(tempfile.gettempdir()) / f"workbench-{os.getuid()}"


def private_folder(folder: Path) -> Path:
    """`folder`, created 0700 if missing; raises DaemonError when it is not a folder of this
    user's or others may enter it (a socket there would be theirs to reach)."""
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = os.lstat(folder)
    except OSError as exc:
        raise DaemonError(f"daemon folder {folder}: cannot be created ({exc})") from None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        raise DaemonError(f"daemon folder {folder}: not a folder owned by uid {os.getuid()}; "
                          "set WORKBENCH_DAEMON_DIR to a private folder")
    if st.st_mode & 0o077:
        raise DaemonError(f"daemon folder {folder}: mode {stat.S_IMODE(st.st_mode):o}, others may enter it; "
                          "chmod 700 it or set WORKBENCH_DAEMON_DIR")
    return folder


def authkey(folder: Path) -> bytes:
    """The folder's shared secret (file `authkey`, 0600, made once: written beside and linked
    into place, so a second client never reads it half written)."""
    path = folder / "authkey"
    if not path.exists():
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".authkey-")
        try:
            os.write(fd, secrets.token_bytes(AUTHKEY_BYTES))
            os.close(fd)
            os.link(tmp, path)
        except FileExistsError:
            pass
        finally:
            os.unlink(tmp)
    key = path.read_bytes()
    if len(key) != AUTHKEY_BYTES:
        raise DaemonError(f"{path}: {len(key)} bytes, expected {AUTHKEY_BYTES}; remove it")
    return key


@dataclass(frozen=True)
class DaemonPaths:
    """The files of one daemon: socket, lock (held for its whole life), info (JSON), log."""

    folder: Path
    hash: str

    @classmethod
    def of(cls, folder: Path, fp: Mapping) -> "DaemonPaths":
        paths = cls(Path(folder), fingerprint_hash(fp))
        if len(str(paths.socket)) > SOCKET_PATH_MAX:
            raise DaemonError(f"daemon socket {paths.socket}: {len(str(paths.socket))} characters, a Unix socket's "
                              f"path holds at most {SOCKET_PATH_MAX}; set WORKBENCH_DAEMON_DIR to a shorter folder")
        return paths

    def _file(self, suffix: str) -> Path:
        return self.folder / f"d-{self.hash}.{suffix}"

    socket = property(lambda self: self._file("sock"))
    lock = property(lambda self: self._file("lock"))
    info = property(lambda self: self._file("json"))
    log = property(lambda self: self._file("log"))


def known_daemons(folder: Path) -> list[DaemonPaths]:
    """Every daemon that has files in `folder` (a lock file each), by hash."""
    if not folder.is_dir():
        return []
    return [DaemonPaths(folder, p.name[2:-5]) for p in sorted(folder.glob("d-*.lock"))]


def try_lock(path: Path) -> int | None:
    """An exclusive flock on `path` (created 0600), as an open fd to keep; None when another
    process holds it (a live daemon: the kernel drops the lock when its holder dies)."""
    import fcntl

    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def lock_held(path: Path) -> bool:
    """Whether a live process holds the lock at `path` (a daemon is up or starting)."""
    fd = try_lock(path)
    if fd is None:
        return True
    os.close(fd)
    return False
