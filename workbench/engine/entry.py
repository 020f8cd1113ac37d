"""The start of every worker process. It imports only the standard library, engine/capture.py and
engine/protocol.py, so that fds 1 and 2 are redirected, TRITON_INTERPRET is decided and the
worker is tied to its parent's life before any kernel module is imported. (Under the forkserver
start method, engine/supervisor.py, torch is already imported in the zygote the worker is forked
from, with no CUDA context: the environment switches set here are read by Triton when a kernel
module is imported, and by the CUDA runtime when CUDA starts, both later.) Then the worker warms
up (the registry, CUDA), says WARM and serves jobs until told to stop (engine/worker.py).
"""

from __future__ import annotations

import faulthandler
import os
import signal
import warnings
from typing import Any, Mapping

from workbench.engine.capture import redirect_output

PR_SET_PDEATHSIG = 1
SIGKILL = 9


def die_with_parent() -> None:
    """Linux: the kernel kills this worker if the thread that started it goes (a killed TUI; under
    the forkserver, the zygote, which itself leaves when the workbench process is gone)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, SIGKILL)
    except (OSError, AttributeError):  # not Linux: the parent's cleanup still kills workers
        pass


def set_environment(interpret: bool, env: Mapping[str, str]) -> None:
    """TRITON_INTERPRET on or off, then `env` (the core's choices: Inductor and Triton cache
    folders under workbench's cache directory, engine/plan.py)."""
    if interpret:
        os.environ["TRITON_INTERPRET"] = "1"  # before any kernel module is imported
        # numpy warns when exp overflows to inf; the kernels rely on it (GeLU's tanh through exp,
        # kernels/gelu.py), so the warning on every interpreted row is noise, not a finding.
        warnings.filterwarnings("ignore", message="overflow encountered in exp", category=RuntimeWarning,
                                module="triton.runtime.interpreter")
    else:  # compiled Triton (GPU, PTX) even when the caller's environment had it set
        os.environ.pop("TRITON_INTERPRET", None)
    os.environ.update(env)


def worker_entry(log_path: str, interpret: bool, plugin_paths: tuple[str, ...], device: str,
                 env: Mapping[str, str], conn: Any, job_conn: Any, stop: Any) -> None:
    """Redirect output, set the environment, warm up, then serve jobs (engine/worker.py)."""
    # Ctrl+C in a terminal reaches the whole process group: the parent cancels (stop flag, then
    # kill at 2 s); a worker that also took the SIGINT printed a half traceback into the log.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    redirect_output(log_path)
    faulthandler.enable()  # a segfault prints the Python stack into the log before dying
    die_with_parent()
    set_environment(interpret, env)
    from workbench.engine.worker import serve

    serve(plugin_paths, device, interpret, conn, job_conn, stop)
