"""The client side of the warm daemon (engine/daemon.py; docs/engine.md, "Warm daemon").

    doc = run_in_daemon(session, options, on_event=..., stop=..., folder=..., environ=os.environ)
    # None: the daemon was busy or refused; the caller runs the session itself

A compatible daemon (same fingerprint: engine/daemon_paths.py) is used, or started detached
(its own session, stdio to its log); events reach `on_event` from the calling thread, as from
run_plan, and the document gains `provenance.daemon` (pid, started, runs served, fingerprint,
the pool's worker_starts counter). When `stop` is set the run is cancelled and the partial
document still comes back. `list_daemons` and `stop_daemons` are --daemon-list/--daemon-stop.
Torch-free.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from multiprocessing.connection import Client
from pathlib import Path
from typing import Any, Callable, Mapping

from workbench.engine.daemon import wire
from workbench.engine.daemon.paths import (DaemonError, DaemonPaths, authkey, fingerprint, known_daemons, lock_held,
                                           private_folder)
from workbench.errors import WorkbenchError

START_S = 60.0   # a daemon's start (imports, no torch) is ~1 s; a loaded box gets much longer
POLL_S = 0.1
STOP_WAIT_S = 15.0
DAEMON_KEYS = ("pid", "started", "runs", "fingerprint", "idle_timeout_s", "worker_starts")


def run_in_daemon(session: Any, options: Any, *, on_event: Callable[[Any], None], stop: threading.Event,
                  folder: Path, environ: Mapping[str, str], idle_timeout_s: float,
                  note: Callable[[str], None]) -> dict | None:
    """The session run by a warm daemon (module docstring). note: one line for the user (busy,
    refused). Raises DaemonError when no daemon can be reached or started, WorkbenchError for
    what run_plan raised there (a plugin that fails to load) or a daemon that died mid-run."""
    fp = fingerprint(environ)
    paths = DaemonPaths.of(private_folder(folder), fp)
    conn = connect(paths, start=True, environ=environ, idle_timeout_s=idle_timeout_s, note=note)
    try:
        wire.send(conn, wire.Kind.run, wire.RunRequest(session, options, os.getcwd(), fp))
        kind, payload = wire.recv(conn)
        if kind == wire.Kind.busy:
            note(f"workbench daemon {payload['pid']} is busy with another run ({payload['busy_s']} s so far): "
                 "running in this process")
            return None
        if kind == wire.Kind.refused:
            note(f"workbench daemon refused the run ({payload}): running in this process")
            return None
        if kind != wire.Kind.accepted:
            raise DaemonError(f"unexpected first answer {kind.value!r} from the daemon")
        return _relay(conn, payload, on_event, stop, paths)
    finally:
        conn.close()  # also when a second signal (Aborted) leaves early: the daemon cancels the run


def _relay(conn: Any, info: dict, on_event: Callable[[Any], None], stop: threading.Event,
           paths: DaemonPaths) -> dict:
    cancelled = False
    try:
        while True:
            if stop.is_set() and not cancelled:
                wire.send(conn, wire.Kind.cancel)
                cancelled = True
            if not conn.poll(POLL_S):  # a poll with a timeout, so a signal's stop flag is seen
                continue
            kind, payload = wire.recv(conn)
            if kind == wire.Kind.event:
                on_event(payload)
            elif kind == wire.Kind.doc:
                doc, info = payload
                doc.setdefault("provenance", {})["daemon"] = {k: info.get(k) for k in DAEMON_KEYS}
                return doc
            elif kind == wire.Kind.error:
                raise WorkbenchError(payload)
    except (EOFError, OSError, wire.WireError) as exc:
        why = f"{type(exc).__name__}: {exc}" if str(exc) else "its connection closed"
        raise WorkbenchError(f"the workbench daemon {info.get('pid')} was lost during the run ({why}); its log: "
                             f"{paths.log}; with -o PATH the rows that finished are in "
                             "PATH's journal (--resume PATH runs the rest)") from None


def connect(paths: DaemonPaths, *, start: bool, environ: Mapping[str, str] | None = None,
            idle_timeout_s: float = 600.0, note: Callable[[str], None] | None = None) -> Any:
    """A connection to the daemon at `paths`; with start, one is started when none is there (a
    stale socket, whose daemon died, is replaced by the new daemon), and note() says so: a
    background process now exists. Raises DaemonError."""
    key = authkey(paths.folder)
    deadline = time.monotonic() + START_S
    proc = None
    while True:
        try:
            return Client(str(paths.socket), "AF_UNIX", authkey=key)
        except (FileNotFoundError, ConnectionRefusedError):
            pass
        except (ConnectionResetError, BrokenPipeError, EOFError) as exc:
            # a daemon that is starting (or leaving) drops the handshake: retried until START_S
            if time.monotonic() > deadline:
                raise DaemonError(f"daemon socket {paths.socket}: {exc!r}") from None
        except OSError as exc:
            raise DaemonError(f"daemon socket {paths.socket}: {exc}") from None
        if not start:
            raise DaemonError(f"no daemon at {paths.socket}")
        if proc is not None and proc.poll() is not None:
            raise DaemonError(f"the daemon exited with {proc.returncode} while starting: {_log_tail(paths)}")
        if proc is None and not lock_held(paths.lock):
            proc = _start(paths, environ or os.environ, idle_timeout_s)
            if note is not None:
                note(f"started a workbench daemon (pid {proc.pid}; it leaves after {idle_timeout_s:g} s idle; "
                     "--daemon-stop stops it now)")
        if time.monotonic() > deadline:
            raise DaemonError(f"no daemon answered at {paths.socket} within {START_S:g} s: {_log_tail(paths)}")
        time.sleep(POLL_S)


def _start(paths: DaemonPaths, environ: Mapping[str, str], idle_timeout_s: float) -> subprocess.Popen:
    """The daemon, detached: a session of its own (a closed terminal or SSH session does not
    reach it), stdin from /dev/null, stdout and stderr to its log, the client's environment."""
    with open(paths.log, "ab") as log:
        return subprocess.Popen([sys.executable, "-m", "workbench.engine.daemon.server", "--dir", str(paths.folder),
                                 "--expect", paths.hash, "--idle-timeout-s", str(idle_timeout_s)],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=dict(environ),
                                start_new_session=True, close_fds=True)


def _log_tail(paths: DaemonPaths) -> str:
    try:
        lines = paths.log.read_text(errors="replace").splitlines()
    except OSError:
        return f"no log at {paths.log}"
    return (lines[-1] if lines else "its log is empty") + f" (log: {paths.log})"


def _ask(paths: DaemonPaths, kind: wire.Kind) -> dict:
    conn = connect(paths, start=False)
    try:
        wire.send(conn, kind)
        _kind, info = wire.recv(conn)
        return info
    finally:
        conn.close()


def list_daemons(folder: Path) -> list[dict]:
    """Every daemon of this user in `folder`: its status (Daemon.info), or for one that does not
    answer the pid from its info file and `state` "unresponsive". A dead daemon's files (its
    lock is free) are skipped: the next daemon for that fingerprint replaces its socket."""
    found = []
    for paths in known_daemons(folder):
        try:
            info = _ask(paths, wire.Kind.status)
            found.append({**info, "state": "busy" if info.get("busy") else "idle"})
        except (DaemonError, EOFError, OSError, wire.WireError):
            if not lock_held(paths.lock):  # died: what it left is replaced by the next one
                continue
            found.append({**_read_info(paths), "fingerprint": paths.hash, "state": "unresponsive"})
    return found


def stop_daemons(folder: Path) -> list[dict]:
    """Stop every daemon of this user in `folder` and wait until each is gone (a STOP message;
    SIGTERM, then SIGKILL for one that does not leave within STOP_WAIT_S); returns what each
    reported just before (its workers' and zygote's pids included)."""
    stopped = []
    for paths in known_daemons(folder):
        try:
            info = _ask(paths, wire.Kind.stop)
        except (DaemonError, EOFError, OSError, wire.WireError):
            info = {**_read_info(paths), "fingerprint": paths.hash}
            if not lock_held(paths.lock):
                continue
            _signal(info.get("pid"), signal.SIGTERM)
        if not _wait_free(paths, STOP_WAIT_S):
            _signal(info.get("pid"), signal.SIGKILL)
            _wait_free(paths, 5.0)
        stopped.append(info)
    return stopped


def _wait_free(paths: DaemonPaths, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while lock_held(paths.lock):
        if time.monotonic() > deadline:
            return False
        time.sleep(POLL_S)
    return True


def _signal(pid: Any, signum: int) -> None:
    if isinstance(pid, int) and pid > 0:
        try:
            os.kill(pid, signum)
        except OSError:
            pass


def _read_info(paths: DaemonPaths) -> dict:
    try:
        return json.loads(paths.info.read_text())
    except (OSError, ValueError):
        return {}
