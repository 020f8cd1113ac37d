"""This process's own temp folder, and the sweep of the ones killed processes left.

A leaf module (os, tempfile, shutil only): the pool, the zygote's log, multiprocessing's own temp
folder and the worker's `--strict` hand-over folders all live under `private_tmp()`, and the worker
side imports it without importing the pool (engine/pool imports the worker's entry point).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

_PRIVATE_TMP: dict[int, Path] = {}
PRIVATE_TMP_PREFIX = "workbench-run-"


def private_tmp() -> Path:
    """This process's own temp folder (mkdtemp: 0700, a fresh name), removed at exit; folders
    that killed processes of this user left are removed when the next one is made."""
    pid = os.getpid()
    if pid not in _PRIVATE_TMP:
        _sweep_private_tmp()
        _PRIVATE_TMP[pid] = Path(tempfile.mkdtemp(prefix=f"{PRIVATE_TMP_PREFIX}{pid}-"))
    return _PRIVATE_TMP[pid]


def _sweep_private_tmp() -> None:
    root = Path(tempfile.gettempdir())
    for folder in root.glob(f"{PRIVATE_TMP_PREFIX}*-*"):
        try:
            st = os.lstat(folder)
            pid = int(folder.name[len(PRIVATE_TMP_PREFIX):].split("-", 1)[0])
        except (OSError, ValueError):
            continue
        if st.st_uid != os.getuid() or not folder.is_dir() or folder.is_symlink() or _alive(pid):
            continue
        shutil.rmtree(folder, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_own_private_tmp() -> None:
    """Remove this process's folder (at exit; a killed process's is swept by the next start)."""
    own = _PRIVATE_TMP.pop(os.getpid(), None)
    if own is not None:
        shutil.rmtree(own, ignore_errors=True)
