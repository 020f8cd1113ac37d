"""How workbench starts a Python interpreter of its own (the daemon, manifest_build, the
forkserver zygote): never with the working folder on sys.path, so a `numpy.py` or `yaml.py` in
the folder a user runs from is not imported in their name (issue #36). Python >= 3.11: `-P`
(safe path) for the command lines built here, PYTHONSAFEPATH=1 for the ones multiprocessing
builds (the forkserver's `python -c`, spawn's workers), which inherit the environment."""

from __future__ import annotations

import os
import sys


def isolated_python(*args: str) -> list[str]:
    """The command line `python -P ARGS...` with this interpreter."""
    return [sys.executable, "-P", *args]


def safe_path_for_children() -> None:
    """PYTHONSAFEPATH=1 in this process's environment: every Python started from it leaves the
    working folder off sys.path (an explicit PYTHONSAFEPATH set by the user is kept)."""
    os.environ.setdefault("PYTHONSAFEPATH", "1")


def die_with_parent() -> None:
    """For subprocess's preexec_fn: the child gets SIGKILL when the thread that started it ends
    (Linux PR_SET_PDEATHSIG), so a killed `--check` leaves no manifest_build behind."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL
    except (OSError, AttributeError):
        pass
