"""The spawn target of every child. It imports only the standard library and engine/capture.py,
so that fds 1 and 2 are redirected, TRITON_INTERPRET is decided and the child is tied to its
parent's life before torch, Triton or any kernel module is imported: the job arrives pickled
as bytes and is unpickled (which imports them) only after that.
"""

from __future__ import annotations

import faulthandler
import os
import pickle
from typing import Any

from workbench.engine.capture import redirect_output

PR_SET_PDEATHSIG = 1
SIGKILL = 9


def die_with_parent() -> None:
    """Linux: the kernel kills this child if the thread that started it goes (a killed TUI)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, SIGKILL)
    except (OSError, AttributeError):  # not Linux: the parent's cleanup still kills children
        pass


def child_entry(job_bytes: bytes, log_path: str, interpret: bool, conn: Any, stop: Any) -> None:
    """Redirect output, set or clear TRITON_INTERPRET, then run the job (engine/child.py)."""
    redirect_output(log_path)
    faulthandler.enable()  # a segfault prints the Python stack into the log before dying
    die_with_parent()
    if interpret:
        os.environ["TRITON_INTERPRET"] = "1"  # before any kernel module is imported
    else:  # compiled Triton (GPU, PTX) even when the caller's environment had it set
        os.environ.pop("TRITON_INTERPRET", None)
    job = pickle.loads(job_bytes)
    from workbench.engine.child import child_main

    child_main(job, conn, stop)
