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
import shutil
import stat
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import workbench
# the folder's helpers, re-exported (their home imports only the standard library)
from workbench.engine.daemon.folder import DaemonError as DaemonError
from workbench.engine.daemon.folder import default_folder as default_folder
from workbench.engine.daemon.folder import lock_held as lock_held
from workbench.engine.daemon.folder import private_folder as private_folder
from workbench.engine.daemon.folder import try_lock as try_lock

# Environment variables a worker's behaviour depends on (prefixes, then whole names); the
# daemon's own switches are left out: they choose a daemon, not what it computes.
ENV_PREFIXES = ("CUDA_", "TRITON_", "TORCHINDUCTOR_", "TORCH_", "PYTORCH_", "WORKBENCH_", "NVIDIA_", "NCCL_",
                "CUBLAS_", "CUDNN_", "OMP_", "MKL_")
ENV_NAMES = ("HOME", "LD_LIBRARY_PATH", "PYTHONPATH", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME", "CC",
             "CXX")
# PATH counts through what it resolves: the programs a worker runs (builds, PTX, counters, names).
# Two logins whose PATHs differ elsewhere (a venv's bin, a tmux or IDE shell) share one daemon.
PATH_TOOLS = ("nvcc", "ninja", "c++", "g++", "cc", "gcc", "clang", "ptxas", "cuobjdump", "nvdisasm", "ncu", "nsys",
              "c++filt")
# WORKBENCH_ZYGOTE_GPU: set by a process's own first pool (engine/pool.start_context) from the GPU
# set, which the fingerprint holds already; a client that made a pool (--watch) must still match
ENV_IGNORED = ("WORKBENCH_DAEMON", "WORKBENCH_DAEMON_DIR", "WORKBENCH_DAEMON_IDLE_S", "WORKBENCH_ZYGOTE_GPU")
SOURCE_SUFFIXES = (".py", ".cu", ".cuh", ".h", ".yaml")
SOCKET_PATH_MAX = 100  # sun_path holds 108 bytes on Linux, 104 on macOS
AUTHKEY_BYTES = 32


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
    imported), the GPUs the driver lists, and the environment variables that matter
    (ENV_PREFIXES, ENV_NAMES) and, of PATH, where it finds the programs a worker runs (PATH_TOOLS:
    `tools`, name -> resolved path or None)."""
    env = {k: v for k, v in environ.items()
           if (k.startswith(ENV_PREFIXES) or k in ENV_NAMES) and k not in ENV_IGNORED}
    return {"python": sys.executable, "python_version": platform.python_version(),
            "workbench": workbench.__version__, "source": source_digest(), "torch": _version("torch"),
            "triton": _version("triton"), "gpus": gpu_set(), "env": dict(sorted(env.items())),
            "tools": path_tools(environ.get("PATH", os.defpath))}


def path_tools(path: str) -> dict[str, str | None]:
    """Where `path` (a PATH value) finds each of PATH_TOOLS, symlinks resolved (None: not found)."""
    found = {}
    for name in PATH_TOOLS:
        where = shutil.which(name, path=path)
        found[name] = os.path.realpath(where) if where else None
    return found


def gpu_set() -> list[str]:
    """The GPUs the driver lists (their PCI addresses, /proc/driver/nvidia/gpus; [] without one):
    a daemon started before a GPU came or went never serves the new set."""
    try:
        return sorted(os.listdir("/proc/driver/nvidia/gpus"))
    except OSError:
        return []


def fingerprint_hash(fp: Mapping) -> str:
    """16 hex characters of sha256 over the fingerprint's JSON (keys sorted)."""
    return hashlib.sha256(json.dumps(fp, sort_keys=True).encode()).hexdigest()[:16]


def fingerprint_difference(mine: Mapping, theirs: Mapping) -> list[str]:
    """The fingerprint's fields that differ ("env.CUDA_VISIBLE_DEVICES", "tools.nvcc", "source"), sorted."""
    nested = ("env", "tools")
    fields = [k for k in set(mine) | set(theirs) if k not in nested and mine.get(k) != theirs.get(k)]
    for group in nested:
        a, b = mine.get(group) or {}, theirs.get(group) or {}
        fields += [f"{group}.{k}" for k in set(a) | set(b) if a.get(k) != b.get(k)]
    return sorted(fields)


def read_private(path: Path, limit: int = 1 << 20) -> bytes:
    """The bytes of `path`, a regular file of this user's that others may not read or write,
    opened without following a symlink; raises DaemonError otherwise (a file planted in the
    folder is never trusted), FileNotFoundError when it is missing."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise DaemonError(f"{path}: cannot be read safely ({exc.strerror}); remove it") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
            raise DaemonError(f"{path}: not a private file of uid {os.getuid()} "
                              f"(owner {st.st_uid}, mode {stat.S_IMODE(st.st_mode):o}); remove it")
        return os.read(fd, limit)
    finally:
        os.close(fd)


def write_private(path: Path, data: bytes) -> None:
    """`data` into `path` (0600), written beside it and renamed into place: a symlink or file
    planted at `path` is replaced, never followed."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-")
    try:
        os.write(fd, data)
        os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def daemon_pid_verified(pid: object, folder: Path) -> bool:
    """Whether `pid` is a live workbench daemon of this user's serving `folder`: its real uid
    (/proc/PID/status) is ours and its command line is `python -m workbench.engine.daemon.server --dir
    FOLDER`. Only such a pid is ever signalled (a pid read from the folder could name anything)."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 1:
        return False
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    uids = next((line.split()[1:] for line in status.splitlines() if line.startswith("Uid:")), [])
    if not uids or int(uids[0]) != os.getuid():
        return False
    args = [a.decode(errors="replace") for a in argv]
    try:
        at = args.index("workbench.engine.daemon.server")
        given = args[args.index("--dir", at) + 1]
    except (ValueError, IndexError):
        return False
    return args[at - 1] == "-m" and os.path.realpath(given) == os.path.realpath(folder)


def authkey(folder: Path) -> bytes:
    """The folder's shared secret (file `authkey`, 0600, made once: written beside and linked
    into place, so a second client never reads it half written)."""
    path = folder / "authkey"
    if not os.path.lexists(path):
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".authkey-")
        try:
            os.write(fd, secrets.token_bytes(AUTHKEY_BYTES))
            os.close(fd)
            os.link(tmp, path)
        except FileExistsError:
            pass
        finally:
            os.unlink(tmp)
    key = read_private(path)
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
