"""The warm processes' private folder, found and checked with the standard library only (the
TUI's client, workbench/tui_client.py, reads it before anything else of the command is
imported; workbench/engine/daemon/paths.py re-exports these).

    folder = private_folder(default_folder(os.environ))   # DaemonError: not this user's, or open to others
    fd = try_lock(folder / "d-HASH.lock")                  # None: a live process holds it
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Mapping

from workbench.errors import WorkbenchError


class DaemonError(WorkbenchError):
    """The daemon cannot be used (its folder, its socket, its start); the client says why and
    runs in its own process instead."""


def default_folder(environ: Mapping[str, str]) -> Path:
    """WORKBENCH_DAEMON_DIR, else platformdirs' user runtime folder `workbench` (XDG_RUNTIME_DIR,
    else /run/user/UID, else its /tmp fallback), else TMPDIR/workbench-UID."""
    given = environ.get("WORKBENCH_DAEMON_DIR")
    if given:
        return Path(given).expanduser()
    try:
        import warnings

        import platformdirs

        with warnings.catch_warnings():  # "XDG_RUNTIME_DIR is not set, falling back to ...": fine
            warnings.simplefilter("ignore")
            return Path(platformdirs.user_runtime_dir("workbench", appauthor=False))
    except ImportError:
        import tempfile

        return Path(tempfile.gettempdir()) / f"workbench-{os.getuid()}"


def private_folder(folder: Path, create: bool = True) -> Path:
    """`folder`, created 0700 if missing (create); raises DaemonError when it is not a folder of
    this user's (a symlink included: os.lstat) or others may enter it (a socket or file there
    would be theirs to plant). Everything that reads the daemon folder checks it first:
    --replay's client, the daemon, --daemon-list and --daemon-stop."""
    try:
        if create:
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
