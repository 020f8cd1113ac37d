"""Parent side: worker processes and the pool that keeps them warm (engine/worker.py runs inside).

A `WorkerPool` holds, per `WorkerKey` (device, TRITON_INTERPRET choice, plugin paths, plugin
source digest), at most one idle warm worker, reused for every job of every run, and at most one
spare started ahead of need (to replace a worker after a fault, or for the next job's key). A
worker that ended its job with anything but DONE (a fault, a timeout, a crash, strict mode) is
never reused: it is killed and the next job gets the spare or a fresh one. An idle worker whose
plugin files changed may be reloaded in place and filed under its new key (engine/reload.py).

Start method: "forkserver" (Linux, the default): a zygote process imports torch once (no CUDA
context: forking after CUDA starts is unsafe) and forks each worker from it, so a replacement
costs a fork and the plugins' import instead of a whole torch import (engine/zygote.py).
"spawn": every worker is a fresh interpreter. Processes are started from the pool's own
long-lived thread, because Linux's parent-death signal (entry.die_with_parent) fires when the
*thread* that started a process ends: a worker started from a TUI run's thread would die with it.

No worker outlives its pool: `close()` stops and kills them (run_plan's private pool in a
`finally`, the TUI's when it exits, any pool at interpreter exit); a killed parent takes the
zygote with it (it leaves when its pipe to the parent closes) and each worker ends itself
(parent-death signal from the zygote, and a watchdog on the workbench's pid: entry.py).
"""

from __future__ import annotations

import atexit
import concurrent.futures
import multiprocessing
import os
import signal
import tempfile
import threading
import weakref
from collections import Counter
from pathlib import Path
from typing import Any, Mapping

from workbench.engine.measure.capture import LogTail
from workbench.engine.worker.entry import worker_entry
from workbench.engine.private_tmp import private_tmp, remove_own_private_tmp
from workbench.engine.worker.preload import GPU_MODULES, ZYGOTE_GPU
from workbench.engine.worker.preload import modules as preload_modules
from workbench.engine.protocol import STOP, Message, WorkerFacts, WorkerKey
from workbench.helper_python import safe_path_for_children
from workbench.trace import mark

START_METHODS = ("forkserver", "spawn")
# Idle workers kept per device (the least recently used beyond this are stopped): each holds a
# process, its imports and on a GPU a CUDA context; a daemon kept one per code version it served.
MAX_IDLE_PER_DEVICE = 2
ZYGOTE_PRELOAD = ["workbench.engine.worker.zygote"]

# How workers were obtained in this process ("cold", "reused", "spare_started", "spare_taken",
# "spare_discarded", "replaced"; engine/reload.py: "reloaded", "reload_unchanged", "reload_failed"):
# what tests and benchmarks read to see reuse and spares.
STARTS: Counter = Counter()
_POOLS: "weakref.WeakSet[WorkerPool]" = weakref.WeakSet()


def start_context(method: str | None = None) -> Any:
    """A multiprocessing context for workers: forkserver with the zygote preload where Linux
    offers it, else spawn. Raises ValueError for an unknown method."""
    method = method or ("forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn")
    if method not in START_METHODS:
        raise ValueError(f"worker start method must be one of {', '.join(START_METHODS)}, got {method!r}")
    context = multiprocessing.get_context(method)
    safe_path_for_children()  # the zygote's `python -c` and spawn's workers: no cwd on sys.path
    # multiprocessing's own temp folder (the forkserver's socket; else a /tmp/pymp-* that a kill
    # leaves behind) inside ours: removed at exit, swept after a kill
    multiprocessing.current_process()._config.setdefault("tempdir", str(private_tmp()))  # type: ignore[attr-defined]
    _tracker_deaf_to_hangups()
    if method == "forkserver":
        context.set_forkserver_preload(ZYGOTE_PRELOAD)
        os.environ["WORKBENCH_ZYGOTE_LOG"] = str(zygote_log_path())  # read by engine/zygote.py (not a parent's)
        # with WORKBENCH_ZYGOTE_PRELOAD=all the zygote preloads Triton, dynamo and Inductor where a GPU
        # is seen (engine/worker/preload.py); decided once per process, as the zygote starts once
        os.environ.setdefault(ZYGOTE_GPU, "1" if _gpu_seen() else "0")
    return context


def _gpu_seen() -> bool:
    from workbench.machine import probe  # NVML, no CUDA

    try:
        return probe().has_cuda
    except Exception:  # noqa: BLE001 - no preload of the GPU modules: workers import them as before
        return False


def zygote_interprets_wrong(context: Any, key: WorkerKey, environ: Mapping[str, str] | None = None) -> bool:
    """Whether a worker for `key` must not fork from the zygote: it interprets Triton, and the
    zygote imported Triton compiled (engine/worker/preload.py). Such a worker is spawned."""
    environ = os.environ if environ is None else environ
    return (key.interpret and context.get_start_method() == "forkserver"
            and bool(set(GPU_MODULES) & set(preload_modules(environ))))


def kill_descendants(pid: int) -> list[int]:
    """SIGKILL every live descendant of `pid` (from /proc's parent links; Linux), deepest
    first; returns their pids. Nothing elsewhere (no /proc): []."""
    parents: dict[int, int] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for name in entries:
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    parents[int(name)] = int(f.read().rsplit(b")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    found, frontier = [], [pid]
    while frontier:
        frontier = [child for child, parent in parents.items() if parent in frontier and child not in found]
        found += frontier
    for child in reversed(found):
        try:
            os.kill(child, signal.SIGKILL)
        except OSError:
            pass
    return found


def _tracker_deaf_to_hangups() -> None:
    """Start multiprocessing's resource tracker with SIGHUP blocked (a blocked signal stays
    blocked across its fork and exec). It ignores SIGINT and SIGTERM itself, not SIGHUP: when a
    closed SSH session hangs up the whole process group, an unblocked tracker dies mid-run and its
    successor prints "process died unexpectedly" and a KeyError traceback for each semaphore the
    workers release. The run itself still stops on SIGHUP (cli/stopping.py)."""
    hup = getattr(signal, "SIGHUP", None)
    if hup is None or not hasattr(signal, "pthread_sigmask"):
        return
    from multiprocessing import resource_tracker

    old = signal.pthread_sigmask(signal.SIG_BLOCK, {hup})
    try:
        resource_tracker.ensure_running()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def zygote_log_path() -> Path:
    """Where the zygote's (and its children's early) stdout and stderr go: a file in this
    process's private temp folder, removed at exit (engine/zygote.py opens it O_NOFOLLOW)."""
    return private_tmp() / "zygote.log"


class WorkerProcess:
    """One started worker: warming up, idle, or running a job. Its log file lives as long as it."""

    def __init__(self, context: Any, key: WorkerKey, env: Mapping[str, str], prestarted: bool = False):
        self.key, self.prestarted = key, prestarted
        fd, log_path = tempfile.mkstemp(prefix="worker-", suffix=".log", dir=private_tmp())  # swept if we are killed
        os.close(fd)
        self.log_path = Path(log_path)
        self.tail = LogTail(self.log_path)
        self.conn, child_conn = context.Pipe(duplex=False)      # worker -> parent: messages
        job_recv, self.job_conn = context.Pipe(duplex=False)    # parent -> worker: jobs
        self.stop = context.Event()
        self.facts: WorkerFacts | None = None
        self.jobs = 0
        args = (log_path, key.interpret, key.plugin_paths, key.device, dict(env), child_conn, job_recv, self.stop,
                os.getpid())
        self.proc = context.Process(target=worker_entry, args=args, name="workbench-worker", daemon=False)
        mark(f"pool: starting a worker for {key.device}" + (" (spare)" if prestarted else ""))
        try:
            self.proc.start()  # raises in an unguarded __main__ under spawn, before anything runs
        except BaseException:
            self.close()
            raise
        finally:
            child_conn.close()
            job_recv.close()

    def give(self, job_bytes: bytes) -> None:
        """Send a job without blocking this thread (a worker still importing reads it later)."""
        def send() -> None:
            try:
                self.job_conn.send_bytes(job_bytes)
            except (OSError, ValueError):  # the worker died or was discarded: its run reports that
                pass
        threading.Thread(target=send, name="workbench-job-send", daemon=True).start()

    def alive(self) -> bool:
        return self.proc.is_alive()

    def close(self, grace_s: float = 0.0) -> None:
        """Kill what the worker started (its descendants: a plugin's helpers, detached ones
        included, entry.py), ask the worker to leave (grace_s > 0), kill it if still there,
        release pipes and log."""
        if self.proc.pid is not None and self.proc.is_alive():
            kill_descendants(self.proc.pid)
            if grace_s > 0:
                try:
                    self.job_conn.send_bytes(STOP)
                except (OSError, ValueError):
                    pass
                self.proc.join(timeout=grace_s)
            if self.proc.is_alive():
                self.proc.kill()
        if self.proc.pid is not None:
            self.proc.join(timeout=1.0)
        for conn in (self.conn, self.job_conn):
            conn.close()
        self.log_path.unlink(missing_ok=True)

    def note(self, kind: Message, payload: Any) -> None:
        """Record what a message says about the worker itself (WARM carries its facts)."""
        if kind == Message.warm:
            self.facts = payload
            mark(f"pool: worker {getattr(payload, 'pid', '?')} warm")


class WorkerPool:
    """Warm workers by key (see the module docstring). spares: start a spare ahead of need
    (False: never; the caller decides, e.g. not while CPU rows are timed on shared cores);
    start_method: "forkserver" | "spawn" | None (the platform's best); env: set in every worker
    before anything is imported (TORCHINDUCTOR_CACHE_DIR, TRITON_CACHE_DIR: engine/plan.py)."""

    def __init__(self, *, spares: bool = True, start_method: str | None = None,
                 env: Mapping[str, str] | None = None, context: Any = None):
        self.context = context or start_context(start_method)
        self.spares_enabled = spares
        self.env = dict(env or {})
        self.idle: dict[WorkerKey, WorkerProcess] = {}
        self.spare: WorkerProcess | None = None
        self.lock = threading.RLock()
        self._starter = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="workbench-starter")
        self.closed = False
        _POOLS.add(self)

    def start_zygote(self) -> bool:
        """Start the forkserver now, in the background, so that its preload (the zygote's
        `import torch`) runs while the caller does other work, and the first worker forks from
        a ready zygote (the TUI: while the catalog loads, which on a fresh machine is a
        subprocess importing torch and every kernel too). Returns whether one was asked for
        (False under spawn, or once the pool is closed). A worker started meanwhile waits for
        the same server (the forkserver's own lock)."""
        if self.closed or self.context.get_start_method() != "forkserver":
            return False
        from multiprocessing import forkserver

        threading.Thread(target=forkserver.ensure_running, name="workbench-zygote-start", daemon=True).start()
        return True

    def _start(self, key: WorkerKey, prestarted: bool = False) -> WorkerProcess:
        context = multiprocessing.get_context("spawn") if zygote_interprets_wrong(self.context, key) else self.context
        return self._starter.submit(WorkerProcess, context, key, self.env, prestarted).result()

    def take(self, key: WorkerKey, fresh: bool = False) -> WorkerProcess:
        """The idle worker for `key`, else the spare when it fits, else a fresh one. fresh (strict
        mode): a process that has run no job: the spare if it has not, else a new one (an idle
        worker stays idle for the runs after)."""
        with self.lock:
            worker = None if fresh else self.idle.pop(key, None)
            if worker is not None and worker.alive():
                STARTS["reused"] += 1
                return worker
            if worker is not None:
                worker.close()
            spare, self.spare = self.spare, None
            if spare is not None and spare.key == key and spare.alive() and not (fresh and spare.jobs):
                STARTS["spare_taken"] += 1
                return spare
            if spare is not None:  # died while waiting, or set up for another key: replaced
                STARTS["spare_discarded"] += 1
                spare.close()
            STARTS["cold"] += 1
            return self._start(key)

    def give_back(self, worker: WorkerProcess) -> None:
        """A worker that ended its job with DONE: idle until the next job with its key."""
        with self.lock:
            if self.closed or not worker.alive():
                worker.close()
                return
            old = self.idle.pop(worker.key, None)
            if old is not None and old is not worker:
                old.close(grace_s=0.5)
            self.idle[worker.key] = worker  # the most recently used last
            same_device = [k for k in self.idle if k.device == worker.key.device]
            for stale in same_device[:-MAX_IDLE_PER_DEVICE]:  # e.g. a daemon serving edit after edit
                self.idle.pop(stale).close(grace_s=0.5)

    def retire(self, worker: WorkerProcess) -> None:
        """A worker that must not run again (fault, timeout, strict mode): killed."""
        STARTS["replaced"] += 1
        worker.close()

    def keep_warm(self, key: WorkerKey | None) -> None:
        """Have a worker for `key` ready or starting (None: none needed). Nothing is started
        when an idle worker for `key` is there, or spares are off."""
        if not self.spares_enabled or key is None:
            return
        with self.lock:
            if self.closed or (key in self.idle and self.idle[key].alive()):
                return
            if self.spare is not None and self.spare.key == key and self.spare.alive():
                return
            if self.spare is not None:
                STARTS["spare_discarded"] += 1
                self.spare.close()
            self.spare = None
            self.spare = self._start(key, prestarted=True)
            STARTS["spare_started"] += 1

    def prestart(self, key: WorkerKey) -> None:
        """Start a worker for `key` now, idle until its first job (a front end opening a session:
        nothing is timed yet, so it shares no cores with a measurement)."""
        with self.lock:
            if self.closed or (key in self.idle and self.idle[key].alive()):
                return
            STARTS["cold"] += 1
            self.idle[key] = self._start(key)

    def workers(self) -> list[WorkerProcess]:
        with self.lock:
            return [*self.idle.values(), *([self.spare] if self.spare else [])]

    def close(self) -> None:
        """Stop every idle worker and the spare (no worker outlives the pool)."""
        with self.lock:
            self.closed = True
            workers, self.idle, self.spare = self.workers(), {}, None
        for worker in workers:
            worker.close(grace_s=0.2)
        self._starter.shutdown(wait=False)

    def __enter__(self) -> "WorkerPool":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


@atexit.register
def _close_all_pools() -> None:
    """At interpreter exit: every pool's workers, then the zygote. The zygote would leave by
    itself once its pipe to this process closes, a moment after this process is gone, taking
    ~1 s to tear torch down; waiting for that made exit slow enough for a second SIGTERM to find
    the default handler back (tests/test_cli_stop.py), so it is killed: its workers are gone."""
    for pool in list(_POOLS):
        pool.close()
    remove_own_private_tmp()  # the zygote keeps its open log file until it is killed below
    from multiprocessing import forkserver

    server = getattr(forkserver, "_forkserver", None)
    pid, stop = getattr(server, "_forkserver_pid", None), getattr(server, "_stop", None)  # CPython 3.8+
    if pid is None or not callable(stop):
        return
    try:
        os.kill(pid, signal.SIGKILL)
        stop()  # closes the pipe, reaps the zygote, removes its socket
    except (OSError, ChildProcessError):
        pass
