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
import threading
import time
from pathlib import Path
from typing import Any, Callable, Mapping

from workbench.engine.daemon import wire
from workbench.engine.daemon.paths import (DaemonError, DaemonPaths, authkey, daemon_pid_verified, fingerprint,
                                           fingerprint_difference, known_daemons, lock_held, private_folder,
                                           read_private)
from workbench.bytecode import slow_start_note
from workbench.errors import WorkbenchError
from workbench.trace import mark

START_S = 60.0   # a daemon's start (imports, no torch) is ~1 s; a loaded box gets much longer
POLL_S = 0.1
STOP_WAIT_S = 15.0
DAEMON_KEYS = ("pid", "started", "runs", "fingerprint", "idle_timeout_s", "worker_starts")


CLIENT_HANDSHAKE_S = 2.5  # under the 3 s in which a signal must be honoured (the daemon allows 5 s)
REPLY_S = 30.0   # the first answer to RUN (a daemon finishing the last run waits up to 10 s for it)
STALL_S = 2.0    # during a run, how often a silent daemon is looked at (stopped? gone?)
CANCEL_WAIT_S = 2.5  # after CANCEL, the partial document must come within this (signals: 3 s)


class EarlyStart:
    """A daemon started by `start_early` before the session was read: its process and the line
    `connect` says when it connects to it (`note` once)."""

    def __init__(self, proc: subprocess.Popen, line: str):
        self.proc, self.line = proc, line


def start_early(folder: Path, environ: Mapping[str, str], idle_timeout_s: float) -> EarlyStart | None:
    """Start this user's daemon for `environ` now, without waiting for it, when none is running
    (its lock is free): a replay calls this before it reads and checks its session, so the
    daemon's start and its zygote's torch import overlap that work (issue #39). None when one
    runs already; raises DaemonError (an unsafe folder: the caller runs in process)."""
    paths = DaemonPaths.of(private_folder(folder), fingerprint(environ))
    if lock_held(paths.lock):
        return None
    superseded = _stop_superseded(paths, environ)
    proc = _start(paths, environ, idle_timeout_s)
    mark("client: daemon started early")
    return EarlyStart(proc, _started_line(proc.pid, superseded, idle_timeout_s))


def _started_line(pid: int, superseded: list[str], idle_timeout_s: float) -> str:
    why = f", replacing {', '.join(superseded)}" if superseded else ""
    return (f"started a workbench daemon (pid {pid}{why}; it leaves after {idle_timeout_s:g} s idle; "
            "--daemon-stop stops it now)")


def _say_started(note: Callable[[str], None], line: str) -> None:
    """The started line, and a second one when this Python compiles torch from source at every
    start (workbench/bytecode.py: no .pyc and none written): the daemon's first run pays it."""
    note(line)
    slow = slow_start_note()
    if slow:
        note(slow)


def run_in_daemon(session: Any, options: Any, *, on_event: Callable[[Any], None], stop: threading.Event,
                  folder: Path, environ: Mapping[str, str], idle_timeout_s: float,
                  note: Callable[[str], None], early: EarlyStart | None = None) -> dict | None:
    """The session run by a warm daemon (module docstring). note: one line for the user (busy,
    refused, started, replaced). Raises DaemonError when no daemon can be reached or started (the
    caller runs the session itself), WorkbenchError for what run_plan raised there (a plugin
    that fails to load) or a daemon that died, stopped or hung mid-run."""
    mark("client: connecting to the daemon")
    fp = fingerprint(environ)
    paths = DaemonPaths.of(private_folder(folder), fp)
    conn = connect(paths, start=True, environ=environ, idle_timeout_s=idle_timeout_s, note=note, stop=stop,
                   early=early)
    try:
        mark("client: connected, sending the session")
        wire.send(conn, wire.Kind.run, wire.RunRequest(session, options, os.getcwd(), fp))
        kind, payload = _first_answer(conn, stop)
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
    except wire.WireError as exc:
        raise DaemonError(f"the daemon at {paths.socket} speaks otherwise ({exc})") from None
    finally:
        conn.close()  # also when a second signal (Aborted) leaves early: the daemon cancels the run


def _first_answer(conn: wire.Channel, stop: threading.Event) -> tuple[wire.Kind, Any]:
    deadline = time.monotonic() + REPLY_S
    while not conn.poll(POLL_S):
        if stop.is_set():
            raise DaemonError("stopped before the daemon answered")
        if time.monotonic() > deadline or _stopped(conn.peer_pid):
            raise DaemonError(f"daemon {conn.peer_pid} did not answer within {REPLY_S:g} s")
    try:
        return wire.recv(conn, timeout=REPLY_S)
    except (EOFError, OSError) as exc:
        raise DaemonError(f"daemon {conn.peer_pid} closed the connection ({exc!r})") from None


def _stopped(pid: int) -> bool:
    """Whether process `pid` is stopped (SIGSTOP, a debugger) or gone: /proc/PID/stat's state."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return Path("/proc/self/stat").exists()  # gone (where /proc exists at all)
    state = text[text.rindex(")") + 2:].split(" ", 1)[0]
    return state in ("T", "t", "Z", "X")


def _relay(conn: Any, info: dict, on_event: Callable[[Any], None], stop: threading.Event,
           paths: DaemonPaths) -> dict:
    cancelled_at: float | None = None
    quiet_since = time.monotonic()
    pid = getattr(conn, "peer_pid", info.get("pid"))
    try:
        while True:
            if stop.is_set() and cancelled_at is None:
                wire.send(conn, wire.Kind.cancel)
                cancelled_at = time.monotonic()
            if not conn.poll(POLL_S):  # a poll with a timeout, so a signal's stop flag is seen
                now = time.monotonic()
                if cancelled_at is not None and now - cancelled_at > CANCEL_WAIT_S:
                    raise OSError(f"no answer to the cancel within {CANCEL_WAIT_S:g} s")
                if now - quiet_since > STALL_S:
                    quiet_since = now
                    if _stopped(pid):
                        raise OSError(f"daemon process {pid} is stopped (SIGSTOP?) or gone")
                continue
            quiet_since = time.monotonic()
            kind, payload = wire.recv(conn, timeout=REPLY_S)
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
            idle_timeout_s: float = 600.0, note: Callable[[str], None] | None = None,
            stop: threading.Event | None = None, early: EarlyStart | None = None) -> wire.Channel:
    """A verified connection to the daemon at `paths`: the peer is a process of this user
    (SO_PEERCRED) that knows the folder's authkey, and this client proves it too; every step
    under a timeout. With start, one is started when none is there (a stale socket, whose daemon
    died, is replaced by the new daemon; one that answers no handshake and is stopped (SIGSTOP)
    is killed once, after its pid is verified to be this user's daemon, and replaced), and
    note() says so in one line. Raises DaemonError (also when `stop` is set meanwhile, or for a
    daemon that is running but does not answer in time: the caller runs in process). early: the
    daemon `start_early` started for these paths (waited for as one started here)."""
    key = authkey(paths.folder)
    deadline = time.monotonic() + START_S
    proc = early.proc if early is not None else None
    if early is not None and note is not None:
        _say_started(note, early.line)
    replaced = False
    while True:
        if stop is not None and stop.is_set():
            raise DaemonError("stopped while connecting")
        try:
            return _handshake(paths, key)
        except (FileNotFoundError, ConnectionRefusedError):
            pass
        except _Hung as exc:  # killed and replaced only when stopped (a slow daemon is left alone)
            if not start or replaced or not _stopped(exc.pid) or not daemon_pid_verified(exc.pid, paths.folder):
                raise DaemonError(f"daemon socket {paths.socket}: {exc}") from None
            _signal(exc.pid, signal.SIGKILL)
            _wait_free(paths, 5.0)
            replaced = True
            if note is not None:
                note(f"workbench daemon {exc.pid} did not answer ({exc}): killed it, starting a fresh one")
            continue
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
            superseded = _stop_superseded(paths, environ or os.environ)
            proc = _start(paths, environ or os.environ, idle_timeout_s)
            if note is not None:
                _say_started(note, _started_line(proc.pid, superseded, idle_timeout_s))
        if time.monotonic() > deadline:
            raise DaemonError(f"no daemon answered at {paths.socket} within {START_S:g} s: {_log_tail(paths)}")
        time.sleep(POLL_S)


class _Hung(OSError):
    """A process of ours accepted the connection and then did not answer the handshake."""

    def __init__(self, pid: int, why: str):
        super().__init__(why)
        self.pid = pid


def _handshake(paths: DaemonPaths, key: bytes) -> wire.Channel:
    from multiprocessing import AuthenticationError

    sock = wire.connect_socket(str(paths.socket))
    conn = wire.Channel(sock)
    conn.default_timeout = CLIENT_HANDSHAKE_S
    try:
        if not wire.same_user(conn):
            raise DaemonError(f"daemon socket {paths.socket} is served by uid {conn.peer_uid} (pid {conn.peer_pid}), "
                              f"not by this user (uid {os.getuid()}): refused")
        try:
            wire.authenticate(conn, key, server=False)
        except TimeoutError:
            raise _Hung(conn.peer_pid, f"no handshake within {conn.default_timeout:g} s") from None
        except AuthenticationError as exc:
            raise DaemonError(f"daemon socket {paths.socket}: the authkey does not match ({exc})") from None
    except BaseException:
        conn.close()
        raise
    return conn


def _stop_superseded(paths: DaemonPaths, environ: Mapping[str, str]) -> list[str]:
    """Stop this folder's idle daemons that ran older code for the same environment (another
    workbench source, Python, torch, Triton or GPU set, the env and PATH's tools equal): what a fresh
    daemon replaces. Daemons for other environments (CUDA_VISIBLE_DEVICES=1, another nvcc on PATH
    ...) are left alone."""
    mine = fingerprint(environ)
    replaced = []
    for other in known_daemons(paths.folder):
        if other.hash == paths.hash:
            continue
        try:
            info, _pid = _ask(other, wire.Kind.status)
        except (DaemonError, EOFError, OSError, wire.WireError):
            continue
        theirs = info.get("fingerprint_fields") or {}
        if info.get("busy") or theirs.get("env") != mine.get("env") or theirs.get("tools") != mine.get("tools"):
            continue
        try:
            _ask(other, wire.Kind.stop)
        except (DaemonError, EOFError, OSError, wire.WireError):
            continue
        differs = fingerprint_difference(mine, theirs)
        replaced.append(f"daemon {info.get('pid')} (other {', '.join(differs) or 'version'})")
    return replaced


def _start(paths: DaemonPaths, environ: Mapping[str, str], idle_timeout_s: float) -> subprocess.Popen:
    """The daemon, detached: a session of its own (a closed terminal or SSH session does not
    reach it), stdin from /dev/null, stdout and stderr to its log (0600, no symlink followed),
    the client's environment, an interpreter that does not put the working folder on sys.path."""
    from workbench.helper_python import isolated_python

    fd = os.open(paths.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        return subprocess.Popen(isolated_python("-m", "workbench.engine.daemon.server", "--dir", str(paths.folder),
                                                "--expect", paths.hash, "--idle-timeout-s", str(idle_timeout_s)),
                                stdin=subprocess.DEVNULL, stdout=fd, stderr=fd, env=dict(environ),
                                start_new_session=True, close_fds=True, cwd="/")
    finally:
        os.close(fd)


def _log_tail(paths: DaemonPaths) -> str:
    try:
        lines = paths.log.read_text(errors="replace").splitlines()
    except OSError:
        return f"no log at {paths.log}"
    return (lines[-1] if lines else "its log is empty") + f" (log: {paths.log})"


def _ask(paths: DaemonPaths, kind: wire.Kind) -> tuple[dict, int]:
    """The daemon's answer (its info) and its pid as the kernel gives it (SO_PEERCRED)."""
    conn = connect(paths, start=False)
    try:
        wire.send(conn, kind)
        _kind, info = wire.recv(conn)
        if not isinstance(info, dict):
            raise wire.WireError(f"a status, not a {type(info).__name__}")
        return info, conn.peer_pid
    finally:
        conn.close()


def _checked_folder(folder: Path) -> Path | None:
    """`folder` after the owner check (private_folder, nothing created), None when missing."""
    if not os.path.lexists(folder):
        return None
    return private_folder(folder, create=False)


def list_daemons(folder: Path) -> list[dict]:
    """Every daemon of this user in `folder`: its status (Daemon.info), or for one that does not
    answer the pid from its info file and `state` "unresponsive". A dead daemon's files (its
    lock is free) are skipped: the next daemon for that fingerprint replaces its socket. Raises
    DaemonError for a folder that is not this user's private folder (nothing in it is read)."""
    if _checked_folder(folder) is None:
        return []
    found = []
    for paths in known_daemons(folder):
        try:
            info, _pid = _ask(paths, wire.Kind.status)
            info.pop("fingerprint_fields", None)
            found.append({**info, "state": "busy" if info.get("busy") else "idle"})
        except (DaemonError, EOFError, OSError, wire.WireError):
            if not lock_held(paths.lock):  # died: what it left is replaced by the next one
                continue
            found.append({**_read_info(paths), "fingerprint": paths.hash, "state": "unresponsive"})
    return found


def stop_daemons(folder: Path) -> list[dict]:
    """Stop every daemon of this user in `folder` and wait until each is gone (a STOP message;
    SIGTERM, then SIGKILL for one that does not leave within STOP_WAIT_S, each only to a pid
    verified to be this user's daemon of this folder); returns what each reported just before
    (its workers' and zygote's pids included). Raises DaemonError for a folder that is not this
    user's private folder."""
    if _checked_folder(folder) is None:
        return []
    stopped = []
    for paths in known_daemons(folder):
        try:
            info, pid = _ask(paths, wire.Kind.stop)
            info.pop("fingerprint_fields", None)
        except (DaemonError, EOFError, OSError, wire.WireError):
            info = {**_read_info(paths), "fingerprint": paths.hash}
            pid = info.get("pid")
            if not lock_held(paths.lock):
                continue
            _signal(pid, signal.SIGTERM, folder)
        if not _wait_free(paths, STOP_WAIT_S):
            _signal(pid, signal.SIGKILL, folder)
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


def _signal(pid: Any, signum: int, folder: Path | None = None) -> bool:
    """Signal `pid` only when it is this user's daemon (of `folder`, else of any folder it
    names): daemon_pid_verified. Returns whether it was signalled."""
    if folder is not None and not daemon_pid_verified(pid, folder):
        return False
    try:
        os.kill(pid, signum)
    except OSError:
        return False
    return True


def _read_info(paths: DaemonPaths) -> dict:
    try:
        data = json.loads(read_private(paths.info, 1 << 16))
    except (OSError, ValueError, DaemonError):
        return {}
    return data if isinstance(data, dict) else {}
