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
import threading
import time
import warnings
from typing import Any, Mapping

from workbench.engine.measure.capture import redirect_output

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
SIGKILL = 9
WATCH_S = 1.0


def die_with_parent(workbench_pid: int) -> None:
    """No worker outlives the workbench process `workbench_pid` (exited, killed, hung up):

    - Linux's parent-death signal kills this worker when the thread that started it goes (under
      spawn, the pool's starter thread in the workbench; under the forkserver, the zygote);
    - the zygote leaves once no process holds its "alive" pipe, but it hands that pipe to each
      child it forks (so children could fork through it too): a worker that kept it would keep
      the zygote, and so itself, alive after a SIGKILL of the workbench. It is closed here;
    - a watchdog thread ends the worker within WATCH_S when `workbench_pid` is gone (any
      platform, any start method);
    - the worker is a child subreaper (Linux): a plugin's grandchild that detaches (setsid,
      double fork) stays under it, and the pool kills every descendant with the worker."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, SIGKILL)
        # orphans of the worker's descendants (a plugin's detached, double-forked helper) become
        # its children, not init's: the pool kills them with it (workers.kill_descendants)
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1)
    except (OSError, AttributeError):  # not Linux: the watchdog below still ends the worker
        pass
    _close_zygote_pipe()
    threading.Thread(target=_watch, args=(workbench_pid,), name="workbench-watchdog", daemon=True).start()


def _close_zygote_pipe() -> None:
    from multiprocessing import forkserver

    server = getattr(forkserver, "_forkserver", None)
    fd = getattr(server, "_forkserver_alive_fd", None)  # CPython's forkserver (3.8+), if used
    if fd is not None:
        try:
            os.close(fd)
        except OSError:
            pass
        server._forkserver_alive_fd = None


def _watch(workbench_pid: int) -> None:
    while True:
        time.sleep(WATCH_S)
        try:
            os.kill(workbench_pid, 0)
        except ProcessLookupError:
            os._exit(1)
        except PermissionError:  # the pid now belongs to another user's process: ours is gone
            os._exit(1)


def set_environment(interpret: bool, env: Mapping[str, str]) -> None:
    """TRITON_INTERPRET on or off, then `env` (the core's choices: Inductor and Triton cache
    folders under workbench's cache directory, engine/plan.py), except a cache folder already
    set in this process's environment (the user's: USER_CACHE_VARS)."""
    from workbench.engine.options import USER_CACHE_VARS

    if interpret:
        os.environ["TRITON_INTERPRET"] = "1"  # before any kernel module is imported
        # numpy warns when an operation overflows to inf or makes a NaN (inf - inf); the kernels
        # rely on IEEE behaviour (GeLU's tanh through exp, kernels/gelu.py; the special inputs'
        # large magnitudes and infinities), which a GPU gives silently and the check judges, so
        # the warnings on interpreted rows are noise, not findings.
        warnings.filterwarnings("ignore", message="(overflow|invalid value) encountered in",
                                category=RuntimeWarning, module="triton.runtime.interpreter")
    else:  # compiled Triton (GPU, PTX) even when the caller's environment had it set
        os.environ.pop("TRITON_INTERPRET", None)
    os.environ.update({k: v for k, v in env.items() if not (k in USER_CACHE_VARS and os.environ.get(k))})
    from workbench.engine.worker.preload import refresh_inductor_config

    refresh_inductor_config()  # Inductor preloaded by the zygote read them before they were set


STACK_SIGNAL = signal.SIGUSR1


def worker_entry(log_path: str, interpret: bool, plugin_paths: tuple[str, ...], device: str,
                 env: Mapping[str, str], conn: Any, job_conn: Any, stop: Any, workbench_pid: int) -> None:
    """Redirect output, set the environment, warm up, then serve jobs (engine/worker.py)."""
    # Ctrl+C in a terminal reaches the whole process group: the parent cancels (stop flag, then
    # kill at 2 s); a worker that also took the SIGINT printed a half traceback into the log.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    redirect_output(log_path)
    faulthandler.enable()  # a segfault prints the Python stack into the log before dying
    # a row past its timeout: the supervisor asks for every thread's stack (into the log) before
    # the kill, so the row's error says where the worker was stuck (engine/supervisor.py)
    faulthandler.register(STACK_SIGNAL, all_threads=True)
    die_with_parent(workbench_pid)
    set_environment(interpret, env)
    from workbench.engine.worker.serve import serve

    serve(plugin_paths, device, interpret, conn, job_conn, stop)
