"""The warm daemon's parts that start no process (engine/daemon_paths.py, daemon_wire.py, and a
Daemon served from a thread of this process with run_plan replaced): fingerprint, socket path,
private folder, message framing, relay of events, busy, refusal and cancel on disconnect.
The real daemon, through the CLI: tests/test_daemon_cli.py (slow)."""

from __future__ import annotations

import multiprocessing
import os
import threading
import time

import pytest

from workbench.engine.daemon import wire
from workbench.engine.daemon.paths import (DaemonError, DaemonPaths, authkey, fingerprint, fingerprint_difference,
                                           fingerprint_hash, known_daemons, lock_held, private_folder, try_lock)
from workbench.events import Log, Result

BASE = {"PATH": "/usr/bin", "HOME": "/home/k", "CUDA_VISIBLE_DEVICES": "0"}


@pytest.fixture
def folder():
    """A short private folder under /tmp (a Unix socket's path holds ~100 characters)."""
    from conftest import daemon_folder

    path = daemon_folder()
    yield path
    for child in path.iterdir():
        child.unlink()
    path.rmdir()


def test_the_fingerprint_follows_what_changes_a_workers_behaviour():
    same = fingerprint_hash(fingerprint(BASE))
    assert fingerprint_hash(fingerprint(dict(BASE))) == same
    for name, value in [("CUDA_VISIBLE_DEVICES", "1"), ("TRITON_INTERPRET", "1"), ("TORCHINDUCTOR_MAX_AUTOTUNE", "1"),
                        ("WORKBENCH_SOMETHING", "x"), ("XDG_CACHE_HOME", "/elsewhere"), ("CXX", "clang++")]:
        assert fingerprint_hash(fingerprint({**BASE, name: value})) != same, name
    # what differs between two SSH logins, and the daemon's own switches, choose no other daemon
    for name, value in [("TERM", "xterm"), ("SSH_TTY", "/dev/pts/3"), ("XDG_SESSION_ID", "7"),
                        ("WORKBENCH_DAEMON", "1"), ("WORKBENCH_DAEMON_DIR", "/tmp/x"), ("WORKBENCH_DAEMON_IDLE_S", "5")]:
        assert fingerprint_hash(fingerprint({**BASE, name: value})) == same, name


def _tool(folder, name):
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return folder


def test_path_counts_through_the_programs_it_finds(tmp_path):
    """Two logins whose PATHs differ only elsewhere (a venv's bin first) share a daemon; a PATH
    that finds another nvcc gets its own, and the difference is named."""
    cuda12, cuda13 = _tool(tmp_path / "cuda12", "nvcc"), _tool(tmp_path / "cuda13", "nvcc")
    venv = _tool(tmp_path / "venv", "python-only")
    base = {**BASE, "PATH": f"{cuda13}:/usr/bin"}
    same = fingerprint_hash(fingerprint(base))
    assert fingerprint(base)["tools"]["nvcc"] == str((cuda13 / "nvcc").resolve())
    assert fingerprint_hash(fingerprint({**base, "PATH": f"{venv}:{cuda13}:/usr/bin"})) == same
    other = fingerprint({**base, "PATH": f"{cuda12}:/usr/bin"})
    assert fingerprint_hash(other) != same
    assert fingerprint_difference(fingerprint(base), other) == ["tools.nvcc"]


def test_the_fingerprint_names_what_differs():
    mine, theirs = fingerprint(BASE), fingerprint({**BASE, "CUDA_VISIBLE_DEVICES": "1", "TRITON_DEBUG": "1"})
    theirs["torch"] = "0.0.1"
    assert fingerprint_difference(mine, theirs) == ["env.CUDA_VISIBLE_DEVICES", "env.TRITON_DEBUG", "torch"]
    assert fingerprint_difference(mine, fingerprint(BASE)) == []
    assert {"python", "source", "torch", "triton", "workbench"} <= set(mine)


def test_the_socket_is_named_by_the_fingerprint_and_must_fit(folder):
    paths = DaemonPaths.of(folder, fingerprint(BASE))
    assert paths.socket == folder / f"d-{fingerprint_hash(fingerprint(BASE))}.sock"
    assert paths.lock.name.endswith(".lock") and paths.info.name.endswith(".json") and paths.log.name.endswith(".log")
    assert DaemonPaths.of(folder, fingerprint({**BASE, "CUDA_VISIBLE_DEVICES": "1"})).socket != paths.socket
    with pytest.raises(DaemonError, match="WORKBENCH_DAEMON_DIR"):
        DaemonPaths.of(folder / ("x" * 90), fingerprint(BASE))


def test_the_folder_is_private(folder):
    inner = private_folder(folder / "made")
    assert inner.is_dir() and (os.stat(inner).st_mode & 0o777) == 0o700
    os.chmod(inner, 0o755)
    with pytest.raises(DaemonError, match="755"):
        private_folder(inner)
    os.chmod(inner, 0o700)
    key = authkey(inner)
    assert len(key) == 32 and authkey(inner) == key and (os.stat(inner / "authkey").st_mode & 0o777) == 0o600
    for child in inner.iterdir():
        child.unlink()
    inner.rmdir()


def test_a_held_lock_is_seen_and_known_daemons_are_listed(folder):
    paths = DaemonPaths(folder, "0123456789abcdef")
    assert known_daemons(folder) == [] and not lock_held(paths.lock)
    fd = try_lock(paths.lock)
    assert fd is not None and lock_held(paths.lock) and try_lock(paths.lock) is None
    os.close(fd)
    assert not lock_held(paths.lock) and known_daemons(folder) == [paths]


def test_messages_round_trip_and_anything_else_is_refused():
    a, b = multiprocessing.Pipe()
    request = wire.RunRequest(session={"name": "s"}, options=None, cwd="/tmp", fingerprint={"python": "x"})
    wire.send(a, wire.Kind.run, request)
    assert wire.recv(b) == (wire.Kind.run, request)
    wire.send(a, wire.Kind.event, Log(("k",), "a line"))
    assert wire.recv(b) == (wire.Kind.event, Log(("k",), "a line"))
    import json
    import pickle

    for bad, match in [(pickle.dumps(("x",)), "not JSON"), (b'"hello"', "not a daemon message"),
                       (b'[99, "run", null]', "protocol 99"),
                       (json.dumps([wire.PROTOCOL, "dance", None]).encode(), "unknown daemon message kind"),
                       (json.dumps([wire.PROTOCOL, "run", {"__dc__": "os:system", "f": {}}]).encode(), "workbench"),
                       (json.dumps([wire.PROTOCOL, "run", {"__dc__": "workbench.engine.daemon.paths:fingerprint",
                                                           "f": {}}]).encode(), "not a dataclass")]:
        a.send_bytes(bad)
        with pytest.raises(wire.WireError, match=match):
            wire.recv(b)
    a.close()
    with pytest.raises(EOFError):
        wire.recv(b)


# -- a Daemon served from a thread, run_plan replaced ----------------------------------------
class FakeEngine:
    """run_plan's stand-in: one Log and one Result per call, then waits for `release` (or the
    stop flag) before returning the document; records whether it was stopped."""

    def __init__(self):
        self.release, self.running, self.stopped = threading.Event(), threading.Event(), []

    def run_plan(self, session, *, on_event, stop, options, workers):
        on_event(Log(("r",), "hello"))
        on_event(Result(("r",), {"status": "ok"}))
        self.running.set()
        while not self.release.is_set() and not stop.is_set():
            time.sleep(0.01)
        self.stopped.append(stop.is_set())
        return {"provenance": {"session": session.name}, "results": [{"status": "ok"}], "cancelled": stop.is_set()}


@pytest.fixture
def served(folder, monkeypatch):
    import workbench.engine.plan as plan
    from workbench.engine.daemon.server import Daemon

    engine = FakeEngine()
    monkeypatch.setattr(plan, "run_plan", engine.run_plan)
    monkeypatch.setattr(plan, "new_pool", lambda options: None)
    monkeypatch.setattr(os, "chdir", lambda path: None)  # the daemon's thread is this test process
    daemon = Daemon(folder, idle_timeout_s=60)
    thread = threading.Thread(target=daemon.serve, daemon=True)
    thread.start()
    # the socket's file appears at bind, before listen: a connect then was refused (CI)
    assert daemon.listening.wait(10)
    yield daemon, engine
    engine.release.set()
    daemon.stop("test over")
    thread.join(timeout=15)
    assert not thread.is_alive()


def Session():
    from workbench.session.model import RunSpec
    from workbench.session.model import Session as RealSession

    return RealSession(name="fake", runs=(RunSpec(op="gelu"),))


def test_a_run_ends_its_reader_before_the_connection_can_be_closed(folder, monkeypatch):
    """The thread that reads the client's side during a run (cancel, or a closed connection) was
    still blocked in recv() when the run's connection was closed; the descriptor's number went to
    the next client, whose handshake that reader then read ('bad message length', CI). With a
    client that keeps its end open, the reader must have ended when the run returns, and the
    client still gets the document."""
    import workbench.engine.plan as plan
    from workbench.engine.daemon.server import Daemon

    engine = FakeEngine()
    engine.release.set()
    monkeypatch.setattr(plan, "run_plan", engine.run_plan)
    monkeypatch.setattr(plan, "new_pool", lambda options: None)
    monkeypatch.setattr(os, "chdir", lambda path: None)
    daemon = Daemon(folder, idle_timeout_s=60)
    ours, theirs = multiprocessing.Pipe()  # a socket pair; `theirs` stays open, saying nothing
    request = wire.RunRequest(Session(), None, str(folder), daemon.fingerprint)
    daemon._run(ours, request)
    readers = [t for t in threading.enumerate() if t.name == "workbench-daemon-cancel"]
    assert readers == [], "the reader still blocks on the connection the caller closes next"
    kinds = []
    while theirs.poll(1):
        try:
            kinds.append(wire.recv(theirs)[0])
        except EOFError:
            break
    assert kinds[0] == wire.Kind.accepted and kinds[-1] == wire.Kind.doc
    ours.close()
    theirs.close()


@pytest.mark.parametrize("options, replaced", [({}, False), ({"start_method": "spawn"}, True),
                                               ({"warm_spare": False}, True)])
def test_a_prewarmed_pool_serves_the_first_run_its_options_fit_and_is_replaced_otherwise(folder, monkeypatch,
                                                                                          options, replaced):
    """Issue #39: a daemon started by a client makes its pool (and zygote) before the session
    comes; the first run uses it when the run's options would make the same pool, else a fresh
    one (the prewarmed one closed)."""
    import workbench.engine.plan as plan
    import workbench.engine.pool as pool_module
    from workbench.engine.daemon.server import Daemon
    from workbench.engine.options import RunOptions

    made, used = [], []

    class FakePool:
        def __init__(self, options):
            self.options, self.closed = options, False
            made.append(self)

        def close(self):
            self.closed = True

        def workers(self):
            return []

    class NoForkserver:  # the zygote's start is the forkserver's: not in this test process
        @staticmethod
        def get_start_method():
            return "spawn"

    engine = FakeEngine()
    engine.release.set()

    def run_plan(session, *, workers, **kwargs):
        used.append(workers)
        return engine.run_plan(session, workers=workers, **kwargs)

    monkeypatch.setattr(plan, "new_pool", FakePool)
    monkeypatch.setattr(plan, "run_plan", run_plan)
    monkeypatch.setattr(pool_module, "start_context", lambda method=None: NoForkserver)
    monkeypatch.setattr(os, "chdir", lambda path: None)
    daemon = Daemon(folder, idle_timeout_s=60, prewarm=True)
    daemon._prewarm()  # what serve() starts in a thread once it listens
    assert made and daemon.pool is made[0] and made[0].options == RunOptions()
    for run_options in (RunOptions(**options), RunOptions(start_method="spawn")):
        ours, theirs = multiprocessing.Pipe()  # (a run shuts its connection down at the end)
        daemon._run(ours, wire.RunRequest(Session(), run_options, str(folder), daemon.fingerprint))
        ours.close()
        theirs.close()
    assert used[0] is made[-1] and len(made) == (2 if replaced else 1)
    assert made[0].closed is replaced
    assert used[1] is used[0]  # after the first run the pool stays, whatever the options (as before)


def _run(daemon, stop=None, notes=None):
    from workbench.engine.daemon.client import run_in_daemon

    events = []
    doc = run_in_daemon(Session(), None, on_event=events.append, stop=stop or threading.Event(),
                        folder=daemon.paths.folder, environ=os.environ, idle_timeout_s=60,
                        note=(notes if notes is not None else []).append)
    return doc, events


def test_a_run_relays_its_events_and_the_document_records_the_daemon(served):
    daemon, engine = served
    engine.release.set()
    doc, events = _run(daemon)
    assert [type(e).__name__ for e in events] == ["Log", "Result"]
    assert doc["results"] == [{"status": "ok"}] and doc["cancelled"] is False
    assert doc["provenance"]["daemon"]["pid"] == os.getpid() and doc["provenance"]["daemon"]["runs"] == 1
    assert _run(daemon)[0]["provenance"]["daemon"]["runs"] == 2


def test_a_client_arriving_while_a_run_is_finishing_waits_for_it(served, monkeypatch):
    """The document went to the client before the run let go of the daemon (its reader thread
    ending, the lock released), so a replay started right after another was told `busy` and ran
    cold (CI: the second run of one test got None). Held here: the first run's end is slowed."""
    import workbench.engine.daemon.server as daemon_module

    daemon, engine = served
    engine.release.set()
    real_end = daemon_module._end_reader

    def slow_end(conn, reader, wait_s=10.0):
        time.sleep(0.5)
        real_end(conn, reader, wait_s)
    monkeypatch.setattr(daemon_module, "_end_reader", slow_end)
    first, _ = _run(daemon)
    notes = []
    second, _ = _run(daemon, notes=notes)
    assert first["provenance"]["daemon"]["runs"] == 1 and second is not None, notes
    assert second["provenance"]["daemon"]["runs"] == 2


def test_a_second_client_while_busy_is_told_so_and_runs_itself(served):
    daemon, engine = served
    box = {}
    first = threading.Thread(target=lambda: box.update(doc=_run(daemon)[0]))
    first.start()
    assert engine.running.wait(10)
    notes = []
    assert _run(daemon, notes=notes)[0] is None
    assert len(notes) == 1 and "busy" in notes[0] and "running in this process" in notes[0]
    engine.release.set()
    first.join(10)
    assert box["doc"]["cancelled"] is False


def test_stop_cancels_the_run_and_the_partial_document_comes_back(served):
    daemon, engine = served
    stop = threading.Event()
    threading.Timer(0.3, stop.set).start()
    doc, events = _run(daemon, stop=stop)
    assert doc["cancelled"] is True and engine.stopped == [True] and len(events) == 2


def test_a_client_that_disconnects_mid_run_cancels_it_and_the_daemon_serves_the_next(served):
    from workbench.engine.daemon.client import connect

    daemon, engine = served
    conn = connect(daemon.paths, start=False)
    wire.send(conn, wire.Kind.run, wire.RunRequest(Session(), None, "/", fingerprint(os.environ)))
    assert wire.recv(conn)[0] == wire.Kind.accepted
    assert engine.running.wait(10)
    conn.close()  # as a killed client's socket closes
    deadline = time.monotonic() + 10
    while daemon.busy_since is not None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert engine.stopped == [True] and daemon.busy_since is None
    engine.release.set()
    assert _run(daemon)[0]["provenance"]["daemon"]["runs"] == 2


def test_a_client_of_another_fingerprint_is_refused(served):
    from workbench.engine.daemon.client import connect

    daemon, _engine = served
    conn = connect(daemon.paths, start=False)
    wire.send(conn, wire.Kind.run, wire.RunRequest(Session(), None, "/", {**fingerprint(os.environ), "torch": "0"}))
    kind, text = wire.recv(conn)
    assert kind == wire.Kind.refused and "torch" in text
    conn.close()


def test_removing_the_socket_file_stops_the_daemon(served):
    daemon, _engine = served
    daemon.paths.socket.unlink()
    assert daemon.shutdown.wait(5) and "socket" in daemon.reason


def test_a_finished_run_is_not_logged_as_cancelled_when_the_client_closes_at_once(tmp_path, monkeypatch, capsys):
    """A fresh user's daemon logs read "run N done (cancelled)" for runs that finished: the client
    closes as soon as it has the document, and the cancel watcher set the stop flag before the line."""
    import threading

    from workbench.engine.daemon import server as daemon_module
    from workbench.engine.daemon import wire
    from workbench.engine import plan

    monkeypatch.setattr(plan, "run_plan", lambda session, **kwargs: {"cancelled": False, "results": []})
    monkeypatch.chdir(tmp_path)  # the daemon changes to the client's folder: restored after the test
    daemon = daemon_module.Daemon(tmp_path)
    daemon.pool = type("Pool", (), {"workers": lambda self: []})()  # run_plan is replaced: no workers
    closed = threading.Event()

    class Conn:  # the client: it closes the moment the document has been sent
        def send_bytes(self, data):
            import json

            if json.loads(data)[1] == wire.Kind.doc.value:
                daemon.current_stop.set()
                closed.set()

        def recv_bytes(self):
            closed.wait(5)
            raise EOFError

    request = wire.RunRequest(Session(), None, str(tmp_path), daemon.fingerprint)
    daemon._run(Conn(), request)
    out = capsys.readouterr().out
    assert "done" in out and "(cancelled)" not in out, out


def test_a_daemon_of_older_code_for_the_same_environment_is_replaced(served, monkeypatch):
    """Issue #39: when a client starts a daemon for new code, the folder's idle daemons whose
    fingerprint differs outside the environment (another source digest) are stopped; one for
    another environment (CUDA_VISIBLE_DEVICES) is left alone."""
    from workbench.engine.daemon import client as daemon_client
    from workbench.engine.daemon.paths import DaemonPaths

    daemon, engine = served
    newer = {**fingerprint(os.environ), "source": "0" * 20}
    monkeypatch.setattr(daemon_client, "fingerprint", lambda environ: newer)
    mine = DaemonPaths.of(daemon.paths.folder, newer)
    assert daemon_client._stop_superseded(mine, os.environ) == [f"daemon {os.getpid()} (other source)"]
    assert daemon.shutdown.wait(5)


def test_a_daemon_for_another_environment_is_kept(served, monkeypatch):
    from workbench.engine.daemon import client as daemon_client
    from workbench.engine.daemon.paths import DaemonPaths

    daemon, engine = served
    other = fingerprint({**os.environ, "CUDA_VISIBLE_DEVICES": "7"})
    monkeypatch.setattr(daemon_client, "fingerprint", lambda environ: other)
    assert daemon_client._stop_superseded(DaemonPaths.of(daemon.paths.folder, other), os.environ) == []
    assert not daemon.shutdown.is_set()


def test_before_its_first_run_a_daemon_waits_at_least_the_grace(folder):
    """A replay starts the daemon before it reads its session; a short --daemon-idle must not end
    it before its own client comes (CI's loaded cores took longer than 4 s)."""
    from workbench.engine.daemon import server

    daemon = server.Daemon(folder, idle_timeout_s=4)
    assert daemon._idle_limit_s() == server.FIRST_RUN_GRACE_S
    daemon.runs = 1
    assert daemon._idle_limit_s() == 4
    assert server.Daemon(folder, idle_timeout_s=900)._idle_limit_s() == 900
