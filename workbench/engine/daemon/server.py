"""The warm daemon: a background process that owns a WorkerPool (zygote, warm workers, spare)
and runs the engine part of `--replay --daemon` for clients of the same fingerprint
(docs/engine.md, "Warm daemon"; the client: engine/daemon_client.py).

    python -m workbench.engine.daemon.server --dir FOLDER --expect HASH --idle-timeout-s 600

The boundary is `run_plan`: a client sends the session and its RunOptions (wire.RunRequest), the
daemon calls `run_plan(..., workers=its pool)` and sends every event as it comes, then the
document; the client keeps its journal, -o, signals, rendering and exit codes. One run at a time:
a client that comes while a run is going gets BUSY (and runs in its own process). A client that
disconnects (killed, closed) or sends CANCEL stops its run through run_plan's stop flag, and the
daemon stays up for the next one.

Lifetime: the daemon holds an exclusive flock on its lock file for its whole life (a second
daemon for the same fingerprint exits at once; a client that finds the lock free knows a socket
left there is stale). It exits after `idle_timeout_s` without a run (before its first run: at least FIRST_RUN_GRACE_S), on SIGTERM, SIGHUP or
SIGINT, on a client's STOP, and when its socket file is removed or replaced; on the way out the
pool closes every worker and the zygote is killed (engine/workers.py), so none outlives it.

Prewarm (issue #39): a daemon started by `main` starts the workers' zygote (which imports torch)
once it holds its lock, before it binds its socket, and makes its pool as soon as it listens,
while the client that started it reads, connects and sends its session: the first run's worker forks from a zygote already importing instead of one started
after the session came (on the 2-core CPU box the zygote's start moved ~0.5 s earlier; on a GPU
host torch's import is the larger part of a first run). The pool is made for default options; a
first run whose options ask for another pool (start method, spares, cache folder) replaces it.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from workbench.engine.daemon import wire
from workbench.engine.daemon.paths import (DaemonPaths, authkey, fingerprint, fingerprint_hash, private_folder, try_lock,
                                           write_private)
from workbench.results.provenance import utc_now_iso
from workbench.trace import mark

DEFAULT_IDLE_TIMEOUT_S = 600.0
WATCH_S = 0.5          # how often the main thread looks at the idle clock and the socket file
SHUTDOWN_WAIT_S = 10.0  # a run in progress gets this long to finish cancelling before the pool closes
# A run whose client already has its answer (document or error) is only finishing (its reader thread
# ending, the lock released): a client that comes in then waits this long for it instead of being
# told the daemon is busy (a replay right after another ran cold, and CI saw `busy` on a second
# run of the same test).
FINISHING_WAIT_S = 10.0
# Until its first run a daemon waits at least this long: a replay starts it before it reads its
# session, and on a loaded host (CI's two busy cores) reading, checking and connecting took longer
# than a short --daemon-idle, so the daemon left before its own client came.
FIRST_RUN_GRACE_S = 60.0


class Daemon:
    """One daemon (module docstring). folder: its private folder; idle_timeout_s: seconds
    without a run before it exits (> 0)."""

    def __init__(self, folder: Path, idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S, prewarm: bool = False):
        self.fingerprint = fingerprint(os.environ)
        self.paths = DaemonPaths.of(private_folder(folder), self.fingerprint)
        self.idle_timeout_s = float(idle_timeout_s)
        self.started = utc_now_iso()
        self.runs = 0
        self.busy_since: float | None = None
        self.last_active = time.monotonic()
        self.shutdown = threading.Event()
        self.reason = ""
        self.run_lock = threading.Lock()
        self.finishing = threading.Event()  # set once the run holding run_lock has answered its client
        self.listening = threading.Event()  # set once the socket accepts connections (its file appears at bind)
        self.current_stop: threading.Event | None = None
        self.pool: Any = None
        self.pool_lock = threading.Lock()
        self.prewarm = prewarm
        self._prewarmed_for: tuple | None = None  # pool_key of the prewarmed pool until its first run
        self._zygote_asked = False
        self._inode: int | None = None
        self._lock_fd: int | None = None
        self._key = b""

    # -- status --------------------------------------------------------------------------
    def info(self) -> dict:
        """What --daemon-list shows and provenance.daemon records: pid, started, fingerprint,
        runs served (the one going included), busy, idle_s, the warm workers and their pids."""
        from workbench.engine.pool import STARTS

        busy = self.busy_since is not None
        workers = self.pool.workers() if self.pool is not None else []
        return {"pid": os.getpid(), "started": self.started, "fingerprint": self.paths.hash,
                "socket": str(self.paths.socket), "log": str(self.paths.log), "runs": self.runs, "busy": busy,
                "busy_s": round(time.monotonic() - self.busy_since, 1) if busy else None,
                "idle_s": None if busy else round(time.monotonic() - self.last_active, 1),
                "idle_timeout_s": self.idle_timeout_s,
                "workers": [{"device": w.key.device, "interpret": w.key.interpret, "role": w.key.role or "run",
                             "pid": w.proc.pid, "spare": w is getattr(self.pool, "spare", None)} for w in workers],
                "zygote_pid": _zygote_pid(), "worker_starts": dict(STARTS),
                "python": self.fingerprint["python"], "package": _package_root(),
                "fingerprint_fields": self.fingerprint}

    # -- life ----------------------------------------------------------------------------
    def serve(self) -> int:
        """Take the lock, listen, serve until a reason to stop; 0 also when another daemon
        already serves this fingerprint (it holds the lock)."""
        self._lock_fd = try_lock(self.paths.lock)
        if self._lock_fd is None:
            print(f"another daemon holds {self.paths.lock}; leaving", flush=True)
            return 0
        if self.prewarm:  # before it binds: a first run waits for the zygote's imports, while the client
            self._start_zygote()  # that started this daemon is still reading its session (0.2 s on an H100)
        self.paths.socket.unlink(missing_ok=True)  # a dead daemon's (the lock was free)
        self._key = authkey(self.paths.folder)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old_umask = os.umask(0o177)  # the socket file is 0600 from its first moment
        try:
            listener.bind(str(self.paths.socket))
        finally:
            os.umask(old_umask)
        listener.listen(16)
        self._inode = os.stat(self.paths.socket).st_ino
        self._write_info()
        self.listening.set()
        mark("daemon: listening")
        if self.prewarm:
            threading.Thread(target=self._prewarm, name="workbench-daemon-prewarm", daemon=True).start()
        if threading.current_thread() is threading.main_thread():  # (a test serves from a thread)
            for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
                signal.signal(signum, lambda n, _f: self.stop(f"signal {signal.Signals(n).name}"))
        threading.Thread(target=self._accept, args=(listener,), name="workbench-daemon-accept", daemon=True).start()
        print(f"{utc_now_iso()} daemon {os.getpid()} serving {self.paths.socket} "
              f"(idle timeout {self.idle_timeout_s:g} s)", flush=True)
        try:
            while not self.shutdown.wait(WATCH_S):
                self._watch()
        finally:
            self._close(listener)
        return 0  # the lock's fd stays open: the kernel drops it when the process is gone, after
        # the atexit handler has killed the zygote, so a client waiting for it sees no process left

    def _start_zygote(self) -> None:
        """The workers' zygote, started now, without the planner's imports: it is the process-wide
        forkserver that every pool of the default start method forks from (module docstring)."""
        if self._zygote_asked:
            return
        self._zygote_asked = True
        try:
            from multiprocessing import forkserver

            from workbench.engine.pool import start_context

            if start_context(None).get_start_method() == "forkserver":
                forkserver.ensure_running()
                mark("daemon: prewarm, the zygote is starting")
        except Exception as exc:  # noqa: BLE001 - the first run starts it as before
            print(f"{utc_now_iso()} the zygote's early start failed: {type(exc).__name__}: {exc}", flush=True)

    def _prewarm(self) -> None:
        """The pool for default options, made now (module docstring); the zygote was started
        before the daemon listened (`_start_zygote`; again here where it was not)."""
        try:
            self._start_zygote()  # (ensure_running: nothing to do when it runs)
            from workbench.engine.options import RunOptions
            from workbench.engine.plan import new_pool

            options = RunOptions()
            pool = new_pool(options)
            with self.pool_lock:
                if self.pool is None and not self.shutdown.is_set():
                    self.pool, self._prewarmed_for, pool = pool, pool_key(options), None
            if pool is not None:  # a run made its own meanwhile, or the daemon is leaving
                pool.close()
        except Exception as exc:  # noqa: BLE001 - the first run makes its pool as before
            print(f"{utc_now_iso()} prewarm failed: {type(exc).__name__}: {exc}", flush=True)

    def stop(self, reason: str) -> None:
        if not self.shutdown.is_set():
            self.reason = reason
            self.shutdown.set()

    def _watch(self) -> None:
        try:
            moved = os.stat(self.paths.socket).st_ino != self._inode
        except OSError:
            moved = True
        if moved:
            self.stop("its socket file was removed or replaced")
        elif self.busy_since is None and time.monotonic() - self.last_active > self._idle_limit_s():
            self.stop(f"idle for {self._idle_limit_s():g} s")

    def _idle_limit_s(self) -> float:
        """idle_timeout_s, and before the first run at least FIRST_RUN_GRACE_S."""
        return self.idle_timeout_s if self.runs else max(self.idle_timeout_s, FIRST_RUN_GRACE_S)

    def _close(self, listener: socket.socket) -> None:
        print(f"{utc_now_iso()} daemon {os.getpid()} exiting: {self.reason}", flush=True)
        if self.current_stop is not None:
            self.current_stop.set()
        if self.run_lock.acquire(timeout=SHUTDOWN_WAIT_S):
            self.run_lock.release()
        try:
            listener.shutdown(socket.SHUT_RDWR)  # wakes the accept thread (close alone does not)
        except OSError:
            pass
        listener.close()
        try:  # no other daemon binds it while we hold the lock
            if os.stat(self.paths.socket).st_ino == self._inode:
                self.paths.socket.unlink()
        except OSError:  # removed already (one of the reasons to leave)
            pass
        with self.pool_lock:
            pool, self.pool = self.pool, None
        if pool is not None:
            pool.close()
        self.paths.info.unlink(missing_ok=True)

    def _write_info(self) -> None:
        info = {"pid": os.getpid(), "started": self.started, "fingerprint": self.paths.hash,
                "idle_timeout_s": self.idle_timeout_s, "python": self.fingerprint["python"]}
        write_private(self.paths.info, (json.dumps(info) + "\n").encode())

    # -- clients -------------------------------------------------------------------------
    def _accept(self, listener: socket.socket) -> None:
        """Accept connections until the daemon leaves; each is handled (peer check, handshake,
        first message: each under a timeout) in a thread of its own, so no client, however it
        behaves, keeps the next from being served."""
        while not self.shutdown.is_set():
            try:
                sock, _address = listener.accept()
            except OSError as exc:  # the listener closed (we are leaving), or a transient error
                if self.shutdown.is_set():
                    return
                print(f"{utc_now_iso()} accept failed: {type(exc).__name__}: {exc}", flush=True)
                time.sleep(0.05)
                continue
            threading.Thread(target=self._serve_client, args=(sock,), name="workbench-daemon-client",
                             daemon=True).start()

    def _serve_client(self, sock: socket.socket) -> None:
        try:
            conn = wire.Channel(sock)
        except OSError as exc:
            print(f"{utc_now_iso()} refused a connection: {exc}", flush=True)
            sock.close()
            return
        try:
            if not wire.same_user(conn):
                print(f"{utc_now_iso()} refused a connection from uid {conn.peer_uid} (pid {conn.peer_pid})", flush=True)
                return
            wire.authenticate(conn, self._key, server=True)
            self._serve_messages(conn)
        except Exception as exc:  # a bad authkey, a timeout, garbage, a client that left: its own affair
            print(f"{utc_now_iso()} client pid {conn.peer_pid} left or was refused: {type(exc).__name__}: {exc}",
                  flush=True)
        finally:
            conn.close()

    def _serve_messages(self, conn: Any) -> None:
        kind, payload = wire.recv(conn)
        if kind == wire.Kind.status:
            wire.send(conn, wire.Kind.info, self.info())
        elif kind == wire.Kind.stop:
            wire.send(conn, wire.Kind.info, self.info())
            self.stop("asked to stop (--daemon-stop)")
        elif kind == wire.Kind.run:
            if not isinstance(payload, wire.RunRequest):
                raise wire.WireError(f"a run request, not a {type(payload).__name__}")
            conn.default_timeout = None  # from here the run's own pace: the reader waits for cancel or close
            self._run_for(conn, payload)

    def _run_for(self, conn: Any, request: wire.RunRequest) -> None:
        from workbench.engine.daemon.paths import fingerprint_difference

        differs = fingerprint_difference(self.fingerprint, request.fingerprint)
        if differs:
            wire.send(conn, wire.Kind.refused, f"daemon {os.getpid()} runs with other {', '.join(differs)}")
            return
        if self.shutdown.is_set() or not self._take_run_lock():
            wire.send(conn, wire.Kind.busy, self.info())
            return
        try:
            self.finishing.clear()
            self.runs += 1
            self.busy_since = time.monotonic()
            self._run(conn, request)
        finally:
            self.busy_since, self.current_stop = None, None
            self.last_active = time.monotonic()
            self.run_lock.release()

    def _take_run_lock(self) -> bool:
        """The run lock, at once when free; while the run holding it is only finishing (its
        client answered), after waiting up to FINISHING_WAIT_S for it; else False (busy)."""
        if self.run_lock.acquire(blocking=False):
            return True
        return self.finishing.is_set() and self.run_lock.acquire(timeout=FINISHING_WAIT_S)

    def _answer(self, conn: Any, kind: Any, payload: Any) -> None:
        """The run's last message to its client (document or error): the run is finishing."""
        self.finishing.set()
        wire.send(conn, kind, payload)

    def _run(self, conn: Any, request: wire.RunRequest) -> None:
        stop = self.current_stop = threading.Event()
        wire.send(conn, wire.Kind.accepted, self.info())
        reader = threading.Thread(target=_cancel_on_close, args=(conn, stop), name="workbench-daemon-cancel",
                                  daemon=True)
        reader.start()
        try:
            self._run_plan(conn, request, stop)
        finally:
            _end_reader(conn, reader)

    def _run_plan(self, conn: Any, request: wire.RunRequest, stop: threading.Event) -> None:
        from workbench.engine.plan import new_pool, run_plan
        from workbench.errors import WorkbenchError

        def on_event(event: Any) -> None:
            try:
                wire.send(conn, wire.Kind.event, event)
            except wire.WireError as exc:  # one event the wire cannot carry: logged, the run goes on
                print(f"{utc_now_iso()} an event was not sent: {exc}", flush=True)
            except (OSError, ValueError):  # the client has gone: its run is cancelled
                stop.set()

        mark("daemon: run received")
        print(f"{utc_now_iso()} run {self.runs}: session {request.session.name!r} from {request.cwd}", flush=True)
        try:
            os.chdir(request.cwd)  # relative paths in plugin code mean the client's folder
        except OSError:
            pass
        try:
            with self.pool_lock:
                if self._prewarmed_for is not None and self._prewarmed_for != pool_key(request.options):
                    old, self.pool = self.pool, None  # prewarmed for other options: replaced before its first run
                    print(f"{utc_now_iso()} the prewarmed pool does not fit the run's options: replaced", flush=True)
                    old.close()
                self._prewarmed_for = None
                if self.pool is None:
                    self.pool = new_pool(request.options)
            doc = run_plan(request.session, on_event=on_event, stop=stop, options=request.options, workers=self.pool)
        except WorkbenchError as exc:
            self._answer(conn, wire.Kind.error, str(exc))
            return
        except Exception as exc:  # an engine bug: the client says so, the daemon stays up
            traceback.print_exc()
            self._answer(conn, wire.Kind.error, f"the daemon's run failed: {type(exc).__name__}: {exc} "
                                                f"(traceback in {self.paths.log})")
            return
        cancelled = bool(doc.get("cancelled")) or stop.is_set()  # read before the client closes (it sets stop)
        try:
            self._answer(conn, wire.Kind.doc, (doc, self.info()))
        except wire.WireError as exc:  # a value the wire cannot carry: an engine bug, said as such
            self._answer(conn, wire.Kind.error, f"the daemon cannot send the document: {exc}")
        print(f"{utc_now_iso()} run {self.runs} done{' (cancelled)' if cancelled else ''}", flush=True)


def pool_key(options: Any) -> tuple:
    """What a pool is made from (engine/plan.new_pool): start method, spares, cache folder."""
    from workbench.engine.options import RunOptions
    from workbench.engine.plan import default_cache_dir

    options = options or RunOptions()
    return (options.start_method, options.warm_spare, str(options.cache_dir or default_cache_dir()))


def _end_reader(conn: Any, reader: threading.Thread, wait_s: float = 10.0) -> None:
    """Wake the run's reader thread and wait for it, before the connection is closed. Closed
    under a reader blocked in recv(), the descriptor's number went to the next accepted
    connection, and the old reader read that client's handshake ('bad message length', seen in
    CI). shutdown() wakes the read with an end of file and frees no descriptor number;
    what was sent (the document) still reaches the client."""
    import socket

    try:
        with socket.socket(fileno=os.dup(conn.fileno())) as duplicate:  # the same socket, our own fd
            duplicate.shutdown(socket.SHUT_RDWR)
    except (OSError, ValueError, AttributeError):  # closed or shut already, or no descriptor to shut
        pass
    reader.join(wait_s)


def _cancel_on_close(conn: Any, stop: threading.Event) -> None:
    """Read the client's side during a run: CANCEL or a closed connection stops the run."""
    try:
        while not stop.is_set():
            kind, _payload = wire.recv(conn, timeout=None)
            if kind == wire.Kind.cancel:
                break
    except (EOFError, OSError, wire.WireError):
        pass
    stop.set()


def _package_root() -> str:
    """The folder holding the `workbench` package this daemon runs (a checkout or site-packages):
    --daemon-list tells two checkouts' daemons apart by it."""
    import workbench

    return str(Path(workbench.__file__).resolve().parent.parent)


def _zygote_pid() -> int | None:
    from multiprocessing import forkserver

    return getattr(getattr(forkserver, "_forkserver", None), "_forkserver_pid", None)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workbench.engine.daemon.server", description=__doc__.split("\n")[0])
    parser.add_argument("--dir", type=Path, required=True, help="the daemon folder (private, 0700)")
    parser.add_argument("--expect", default=None, help="the fingerprint hash the starting client computed")
    parser.add_argument("--idle-timeout-s", type=float, default=DEFAULT_IDLE_TIMEOUT_S)
    args = parser.parse_args(argv)
    mark("daemon: process up")
    daemon = Daemon(args.dir, args.idle_timeout_s, prewarm=True)
    if args.expect and args.expect != fingerprint_hash(daemon.fingerprint):
        print(f"fingerprint {fingerprint_hash(daemon.fingerprint)} here, the client expected {args.expect}",
              flush=True)
        return 3
    return daemon.serve()


if __name__ == "__main__":
    sys.exit(main())
