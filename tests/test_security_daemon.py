"""Issue #36, the daemon's findings: one owner check for everything that reads the daemon folder,
JSON (never pickles) on its socket, the peer's uid by SO_PEERCRED, pids signalled only when
verified, a daemon that survives bad clients and clients that never hang on it, the runtime
folder chosen only when the daemon is used. Two-user tests create a user (root only) and skip
with a reason elsewhere."""

from __future__ import annotations

import json
import os
import pickle
import pwd
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from workbench.engine.daemon import client as daemon_client
from workbench.engine.daemon import wire
from workbench.engine.daemon.paths import (DaemonError, DaemonPaths, authkey, daemon_pid_verified, fingerprint,
                                           private_folder, read_private, try_lock)

OTHER_USER = "wbsecurity"


@pytest.fixture
def folder():
    from conftest import daemon_folder

    path = daemon_folder()
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def other_user():
    """A second local user (created once; root only)."""
    if os.getuid() != 0:
        pytest.skip("needs root to create a second user (useradd)")
    try:
        pwd.getpwnam(OTHER_USER)
    except KeyError:
        done = subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", OTHER_USER],
                              capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"useradd failed: {done.stderr.strip()}")
    return pwd.getpwnam(OTHER_USER)


@pytest.fixture
def sleeper():
    """A harmless process of this user (not a daemon): what a planted pid would name."""
    proc = subprocess.Popen(["sleep", "60"])
    yield proc
    proc.kill()
    proc.wait()


# -- High 1: the folder, the files in it, the pid ----------------------------------------------
def test_list_and_stop_refuse_a_folder_others_may_enter_or_a_symlink(folder, tmp_path):
    (folder / "d-0123456789abcdef.lock").write_text("")
    os.chmod(folder, 0o755)
    for call in (daemon_client.list_daemons, daemon_client.stop_daemons):
        with pytest.raises(DaemonError, match="755"):
            call(folder)
    os.chmod(folder, 0o700)
    link = tmp_path / "link"
    link.symlink_to(folder)
    for call in (daemon_client.list_daemons, daemon_client.stop_daemons):
        with pytest.raises(DaemonError, match="not a folder owned by"):
            call(link)
    assert daemon_client.list_daemons(tmp_path / "missing") == []  # nothing created, nothing read


def test_list_and_stop_refuse_another_users_folder(other_user, tmp_path):
    squatted = tmp_path / "runtime"
    squatted.mkdir(mode=0o700)
    (squatted / "authkey").write_bytes(b"k" * 32)
    (squatted / "d-0123456789abcdef.lock").write_text("")
    os.chown(squatted, other_user.pw_uid, other_user.pw_gid)
    for call in (daemon_client.list_daemons, daemon_client.stop_daemons):
        with pytest.raises(DaemonError, match=f"owned by uid {os.getuid()}"):
            call(squatted)


def test_planted_files_in_the_folder_are_not_trusted(folder, tmp_path):
    target = tmp_path / "secret"
    target.write_bytes(b"s" * 32)
    (folder / "authkey").symlink_to(target)
    with pytest.raises(DaemonError, match="cannot be read safely"):
        authkey(folder)
    (folder / "authkey").unlink()
    (folder / "authkey").write_bytes(b"k" * 32)
    os.chmod(folder / "authkey", 0o644)
    with pytest.raises(DaemonError, match="not a private file"):
        read_private(folder / "authkey")


def test_a_planted_pid_is_never_signalled(folder, sleeper, monkeypatch):
    """A lock held (here, by this test) and an info file naming another process: --daemon-stop
    finds no daemon answering and must not signal the pid it read."""
    paths = DaemonPaths(folder, "0123456789abcdef")
    fd = try_lock(paths.lock)
    paths.info.write_text(json.dumps({"pid": sleeper.pid}))
    os.chmod(paths.info, 0o600)
    monkeypatch.setattr(daemon_client, "STOP_WAIT_S", 0.2)
    monkeypatch.setattr(daemon_client, "_wait_free", lambda paths, seconds: False)
    try:
        assert not daemon_pid_verified(sleeper.pid, folder)
        daemon_client.stop_daemons(folder)
        time.sleep(0.2)
        assert sleeper.poll() is None, "a pid read from the folder was signalled"
    finally:
        os.close(fd)


def test_only_this_users_daemon_of_this_folder_is_verified(folder, sleeper):
    assert not daemon_pid_verified(sleeper.pid, folder)
    assert not daemon_pid_verified(os.getpid(), folder)
    assert not daemon_pid_verified(1, folder) and not daemon_pid_verified("12", folder)
    assert not daemon_pid_verified(10 ** 7, folder)


@pytest.mark.slow
def test_a_process_of_another_user_is_never_verified(other_user, folder):
    proc = subprocess.Popen(["runuser", "-u", OTHER_USER, "--", "sleep", "30"])
    try:
        time.sleep(0.3)
        assert not daemon_pid_verified(proc.pid, folder)
    finally:
        proc.kill()
        proc.wait()


def test_the_wire_is_json_and_a_pickle_is_never_loaded(tmp_path):
    class Boom:
        def __reduce__(self):
            return (Path.touch, (tmp_path / "pwned",))

    a, b = socket.socketpair()
    left, right = wire.Channel(a), wire.Channel(b)
    left.send_bytes(pickle.dumps((wire.PROTOCOL, "info", Boom())))
    with pytest.raises(wire.WireError, match="not JSON"):
        wire.recv(right)
    assert not (tmp_path / "pwned").exists()
    with pytest.raises(wire.WireError, match="cannot send"):
        wire.send(left, wire.Kind.info, Boom())
    left.close()
    right.close()


def test_a_session_options_and_events_travel_as_json():
    from workbench.engine.options import RunOptions
    from workbench.events import Checked, Result, Samples
    from workbench.session.api import load_session
    from workbench.session.paths import shipped_path

    session = load_session(shipped_path("default-cpu"))
    options = RunOptions(device="cpu", kernels=("a.py",), cache_dir=Path("/tmp/c"), devices=("cuda:0",),
                         done={(0, "gelu/pytorch", None): {"status": "ok"}, (1, "x", 64): {"status": "ok"}})
    for value in (wire.RunRequest(session, options, "/", {"env": {"A": "1"}}),
                  Samples((0, "gelu/pytorch", None), (1.0, 2.5), "cuda_event"),
                  Checked((0, "a", 128), {"ok": True, "max_abs": float("inf")}),
                  Result((0, "a", None), {"status": "ok", "__t__": 1, "shape": (1, 2)})):
        a, b = socket.socketpair()
        wire.send(wire.Channel(a), wire.Kind.event, value)
        assert wire.recv(wire.Channel(b)) == (wire.Kind.event, value)
        a.close()
        b.close()


def test_the_socket_peer_must_be_this_user(monkeypatch):
    a, b = socket.socketpair()
    channel = wire.Channel(a)
    assert channel.peer_uid == os.getuid() and channel.peer_pid == os.getpid() and wire.same_user(channel)
    monkeypatch.setattr(wire.os, "getuid", lambda: os.geteuid() + 4242)
    assert not wire.same_user(channel)
    a.close()
    b.close()


@pytest.mark.slow
def test_a_socket_served_by_another_user_is_refused(other_user, tmp_path):
    """The client checks the peer's uid before it says anything (the other user's server would
    otherwise learn an HMAC answer, and before #36 its pickled reply was loaded)."""
    open_folder = Path(f"/tmp/wbsec-{os.getpid()}")
    open_folder.mkdir(mode=0o777, exist_ok=True)
    os.chmod(open_folder, 0o777)
    paths = DaemonPaths(open_folder, "0123456789abcdef")
    server = ("import socket,time; s=socket.socket(socket.AF_UNIX); s.bind(%r); s.listen(1); "
              "c,_=s.accept(); time.sleep(5)" % str(paths.socket))
    proc = subprocess.Popen(["runuser", "-u", OTHER_USER, "--", "python3", "-c", server])
    try:
        deadline = time.monotonic() + 10
        while not paths.socket.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        with pytest.raises(DaemonError, match=f"served by uid {other_user.pw_uid}"):
            daemon_client._handshake(paths, b"k" * 32)
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(open_folder, ignore_errors=True)


# -- Medium 3: bad clients, hung daemons -------------------------------------------------------
@pytest.fixture
def served(folder, monkeypatch):
    import workbench.engine.plan as plan
    from workbench.engine.daemon.server import Daemon

    monkeypatch.setattr(wire, "HANDSHAKE_S", 0.5)
    monkeypatch.setattr(plan, "run_plan", lambda session, **kw: {"results": [], "cancelled": False})
    monkeypatch.setattr(plan, "new_pool", lambda options: type("Pool", (), {"workers": lambda self: [], "close": lambda self: None})())
    monkeypatch.setattr(os, "chdir", lambda path: None)
    daemon = Daemon(folder, idle_timeout_s=60)
    thread = threading.Thread(target=daemon.serve, daemon=True)
    thread.start()
    assert daemon.listening.wait(10)
    yield daemon
    daemon.stop("test over")
    thread.join(timeout=15)


def _session():
    from workbench.session.model import RunSpec, Session

    return Session(name="s", runs=(RunSpec(op="gelu"),))


def _status(daemon):
    conn = daemon_client.connect(daemon.paths, start=False)
    try:
        wire.send(conn, wire.Kind.status)
        return wire.recv(conn)[1]
    finally:
        conn.close()


def test_the_daemon_survives_clients_that_close_say_nothing_or_send_garbage(served):
    path = str(served.paths.socket)
    for _ in range(3):  # connect and close at once (the accept thread died of this before #36)
        wire.connect_socket(path).close()
    silent = wire.connect_socket(path)  # connects and never answers the challenge
    garbage = wire.connect_socket(path)
    garbage.sendall(b"\xff" * 64)
    huge = wire.connect_socket(path)
    huge.sendall(b"\x7f\xff\xff\xff")
    assert _status(served)["pid"] == os.getpid()
    time.sleep(1.0)  # past the handshake timeout: the silent one was dropped, the daemon is fine
    assert _status(served)["runs"] == 0
    doc = daemon_client.run_in_daemon(_session(), None, on_event=lambda e: None, stop=threading.Event(),
                                      folder=served.paths.folder, environ=os.environ, idle_timeout_s=60,
                                      note=lambda line: None)
    assert doc["provenance"]["daemon"]["runs"] == 1
    for s in (silent, garbage, huge):
        s.close()


def test_a_daemon_that_accepts_and_never_answers_does_not_hang_the_client(folder, monkeypatch):
    """A hung daemon: the kernel completes the connect, nothing answers. The client gives up
    within its handshake timeout (under the 3 s of signals); the process (this test's) is
    neither stopped nor a verified daemon, so nothing is killed: the caller runs in process."""
    monkeypatch.setattr(daemon_client, "CLIENT_HANDSHAKE_S", 0.3)
    paths = DaemonPaths.of(private_folder(folder), fingerprint(os.environ))
    authkey(folder)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(paths.socket))
    listener.listen(4)
    fd = try_lock(paths.lock)
    start = time.monotonic()
    try:
        with pytest.raises(DaemonError, match="no handshake within"):
            daemon_client.connect(paths, start=True)
        assert time.monotonic() - start < 5
    finally:
        listener.close()
        os.close(fd)


def test_a_stopped_process_is_seen_as_stopped(sleeper):
    assert not daemon_client._stopped(sleeper.pid)
    os.kill(sleeper.pid, signal.SIGSTOP)
    try:
        deadline = time.monotonic() + 5
        while not daemon_client._stopped(sleeper.pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert daemon_client._stopped(sleeper.pid)
    finally:
        os.kill(sleeper.pid, signal.SIGCONT)


def test_a_stop_flag_ends_the_connect_loop(folder):
    paths = DaemonPaths.of(private_folder(folder), fingerprint(os.environ))
    fd = try_lock(paths.lock)  # "a daemon is starting": the client would wait up to START_S
    stop = threading.Event()
    stop.set()
    try:
        with pytest.raises(DaemonError, match="stopped"):
            daemon_client.connect(paths, start=True, stop=stop)
    finally:
        os.close(fd)


def test_a_changed_authkey_falls_back_in_process_with_one_line(served, capsys, monkeypatch):
    from rich.console import Console

    from workbench.cli.daemon import DaemonChoice, run_engine

    (served.paths.folder / "authkey").unlink()
    authkey(served.paths.folder)  # another key now: the daemon holds the old one
    err = Console(stderr=True, width=1000)
    ran_here = []
    import workbench.engine.plan as plan

    monkeypatch.setattr(plan, "run_plan", lambda session, **kw: ran_here.append(1) or {"results": []})
    choice = DaemonChoice(True, 60.0, {**os.environ, "WORKBENCH_DAEMON_DIR": str(served.paths.folder)})
    run_engine(_session(), on_event=lambda e: None, stop=threading.Event(), options=None, choice=choice, err=err)
    assert ran_here == [1]
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and "running in this process" in lines[0], lines


# -- Medium 5: the runtime folder only when the daemon is used ---------------------------------
def test_no_daemon_never_looks_at_the_runtime_folder(monkeypatch):
    import argparse

    from workbench.cli import daemon as cli_daemon
    from workbench.engine.daemon import paths as daemon_paths

    def boom(environ):
        raise AssertionError("the runtime folder was looked at")

    monkeypatch.setattr(daemon_paths, "default_folder", boom)
    choice = cli_daemon.daemon_choice(argparse.Namespace(no_daemon=True, daemon=False), {})
    assert not choice.use and choice.why_not == "--no-daemon"
    assert not cli_daemon.daemon_choice(argparse.Namespace(), {"WORKBENCH_DAEMON": "0"}).use
    assert not cli_daemon.daemon_choice(argparse.Namespace(strict=True, daemon=False), {}).use
    assert cli_daemon.daemon_choice(argparse.Namespace(strict=True, daemon=True), {}).use
    assert cli_daemon.daemon_choice(argparse.Namespace(), {}).use  # the default
    with pytest.raises(Exception, match="WORKBENCH_DAEMON='maybe'"):
        cli_daemon.daemon_choice(argparse.Namespace(), {"WORKBENCH_DAEMON": "maybe"})


def test_an_unsafe_runtime_folder_falls_back_in_process_with_one_line(tmp_path, capsys, monkeypatch):
    from rich.console import Console

    import workbench.engine.plan as plan
    from workbench.cli.daemon import DaemonChoice, run_engine

    unsafe = tmp_path / "runtime"
    unsafe.mkdir(mode=0o777)
    os.chmod(unsafe, 0o777)
    monkeypatch.setattr(plan, "run_plan", lambda session, **kw: {"results": [], "here": True})
    choice = DaemonChoice(True, 60.0, {**os.environ, "WORKBENCH_DAEMON_DIR": str(unsafe)})
    doc = run_engine(_session(), on_event=lambda e: None, stop=threading.Event(), options=None, choice=choice,
                     err=Console(stderr=True, width=1000))
    assert doc["here"]
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and "777" in lines[0] and "running in this process" in lines[0], lines
    assert list(unsafe.iterdir()) == []  # nothing written into it


def test_an_idle_timeout_asked_of_a_running_daemon_that_keeps_another_is_said(monkeypatch):
    import argparse

    from workbench.cli import daemon as cli_daemon

    said: list[str] = []
    doc = {"provenance": {"daemon": {"pid": 41, "idle_timeout_s": 5.0}}}
    asked = cli_daemon.daemon_choice(argparse.Namespace(daemon_idle=900.0), {})
    assert asked.idle_asked
    cli_daemon._note_kept_idle(doc, asked, said.append)
    assert len(said) == 1 and "daemon 41 keeps its idle timeout of 5 s (asked: 900 s)" in said[0]
    said.clear()
    by_env = cli_daemon.daemon_choice(argparse.Namespace(), {"WORKBENCH_DAEMON_IDLE_S": "5"})
    cli_daemon._note_kept_idle(doc, by_env, said.append)  # the same timeout: nothing to say
    default = cli_daemon.daemon_choice(argparse.Namespace(), {})
    assert not default.idle_asked
    cli_daemon._note_kept_idle(doc, default, said.append)  # not asked: nothing to say
    cli_daemon._note_kept_idle({"provenance": {}}, asked, said.append)  # ran in process
    assert said == []
