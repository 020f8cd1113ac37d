"""The TUI's warm process (workbench/tui_client.py, tui_server.py; issue #39): which command
lines it serves, its key, a TUI started through it on a real pseudo-terminal (keys, a resize,
the exit code, the client's folder and environment), the fallback that starts one, refusals
(another uid, changed code), the idle exit, and --daemon-list / --daemon-stop."""

from __future__ import annotations

import fcntl
import json
import os
import re
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from workbench import tui_client
from workbench.cli import tui_server
from workbench.cli.flags import OPTIONS

ROOT = Path(__file__).resolve().parent.parent
ANSI = re.compile(rb"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b[=>78]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")


@pytest.fixture
def folder():
    from conftest import daemon_folder

    path = daemon_folder()
    yield path
    tui_client.stop_servers(path)
    shutil.rmtree(path, ignore_errors=True)


def _client_env(folder: Path, tmp_path: Path) -> dict[str, str]:
    # not the suite's opt-out, nor pytest-xdist's COLUMNS=80 LINES=24 (Textual sizes the screen by them)
    env = {k: v for k, v in os.environ.items() if k not in ("WORKBENCH_DAEMON", "COLUMNS", "LINES")}
    env.update(WORKBENCH_DAEMON_DIR=str(folder), XDG_DATA_HOME=str(tmp_path / "data"), TERM="xterm-256color",
               WB_WARM_TEST_MARK="present")
    return env


def _start_server(folder: Path, env: dict[str, str], idle_s: float = 120.0) -> subprocess.Popen:
    key = tui_client.server_key(env)
    proc = subprocess.Popen([sys.executable, "-P", "-m", tui_client.SERVER_MODULE, "--dir", str(folder), "--key", key,
                             "--idle-timeout-s", str(idle_s)], env=env, cwd="/", stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait_for(lambda: tui_client.server_files(folder, key)["sock"].exists(), 60, "the server's socket")
    return proc


def _wait_for(predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} within {timeout_s} s")
        time.sleep(0.05)


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                status = (entry / "status").read_text()
            except OSError:
                continue
            if f"\nPPid:\t{pid}\n" in status:
                found.append(int(entry.name))
    return found


def _set_size(fd: int, cols: int, rows: int) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


class Terminal:
    """A pseudo-terminal the client runs on (its controlling terminal), read into `screen_bytes`."""

    def __init__(self, env: dict[str, str], argv: list[str], cwd: Path, setup=None):
        self.master, slave = os.openpty()
        _set_size(slave, 160, 45)

        def preexec() -> None:
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)
            if setup is not None:
                setup()

        self.proc = subprocess.Popen([sys.executable, "-m", "workbench", *argv], stdin=slave, stdout=slave,
                                     stderr=slave, env=env, cwd=cwd, start_new_session=True, preexec_fn=preexec)
        os.close(slave)
        self.data = b""

    def _read(self) -> bool:
        """Whatever the terminal shows within 0.1 s into `data`; False once it cannot be read."""
        if select.select([self.master], [], [], 0.1)[0]:
            try:
                self.data += os.read(self.master, 1 << 16)
            except OSError:
                return False
        return True

    def read_until(self, predicate, timeout_s: float) -> bytes:
        deadline = time.monotonic() + timeout_s
        while not predicate(ANSI.sub(b"", self.data)):
            if time.monotonic() > deadline:
                raise AssertionError(f"not seen within {timeout_s} s; the last output: {ANSI.sub(b'', self.data)[-600:]!r}")
            if not self._read():
                break
        return ANSI.sub(b"", self.data)

    def drain(self, timeout_s: float) -> int:
        """Read until the client exits (a TUI whose output nobody reads blocks); its exit code."""
        deadline = time.monotonic() + timeout_s
        while self.proc.poll() is None and time.monotonic() < deadline:
            self._read()
        if self.proc.poll() is None:
            raise AssertionError(f"not ended within {timeout_s} s; the last output: {ANSI.sub(b'', self.data)[-800:]!r}")
        return self.proc.wait(timeout=1)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        os.close(self.master)


# -- which command lines ---------------------------------------------------------------------
def test_the_tui_flags_are_the_tui_modes_options_but_the_opt_out_and_the_outputs():
    """TUI_FLAGS follows the options table: every option of the TUI's mode, but for those that
    keep a command line in its own process (the opt-out, --version, the output options)."""
    tui = {name for option in OPTIONS if "tui" in option.modes and not option.mode
           for name in option.names if name.startswith("-")}
    assert tui - tui_client.TUI_FLAGS == {"--no-daemon", "--strict", "--version", "--format", "-o", "--output"}
    assert tui_client.TUI_FLAGS <= tui


def test_the_daemon_switch_reads_as_the_replays_does():
    from workbench.cli.daemon import OFF_VALUES, ON_VALUES

    assert set(tui_client.DAEMON_ON) == {"", *ON_VALUES} and not set(OFF_VALUES) & set(tui_client.DAEMON_ON)


@pytest.mark.parametrize("argv, served", [
    ([], True), (["default-cpu"], True), (["s.yaml", "--watch", "--device=cpu", "--device", "cpu"], True),
    (["--replay", "s.yaml"], False), (["--rep", "s.yaml"], False), (["-h"], False), (["--no-daemon"], False),
    (["s.yaml", "-o", "x.json"], False), (["--version"], False), (["s.yaml", "--strict"], False)])
def test_only_a_tui_start_on_a_terminal_is_served(monkeypatch, argv, served):
    monkeypatch.setattr(tui_client.os, "isatty", lambda fd: True)
    assert tui_client.eligible(argv, {}) is served
    assert not tui_client.eligible(argv, {"WORKBENCH_DAEMON": "0"})
    assert not tui_client.eligible(argv, {"WORKBENCH_DAEMON": " Off"})
    assert tui_client.eligible(argv, {"WORKBENCH_DAEMON": "1"}) is served
    monkeypatch.setattr(tui_client.os, "isatty", lambda fd: fd != 1)
    assert not tui_client.eligible(argv, {})


@pytest.mark.slow
def test_interpreter_options_and_another_workbench_are_not_served(folder, tmp_path):
    """A Python run with -O, -X dev, -W ... is not served (the server's would not share them),
    and a server whose Python imports workbench from elsewhere than the client's leaves."""
    code = "from workbench import tui_client; print(tui_client.interpreter_options())"
    for option, shown in (("-O", "optimize"), ("-Xdev", "dev_mode"), ("-Werror", "-W error")):
        done = subprocess.run([sys.executable, option, "-c", code], capture_output=True, text=True, timeout=60)
        assert shown in done.stdout, (option, done.stdout, done.stderr)
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "[]"
    for variable, value in (("PYTHONWARNINGS", "ignore"), ("PYTHONOPTIMIZE", "1"), ("PYTHONDEVMODE", "1")):
        shared = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                                env={**os.environ, variable: value})  # the server gets the same environment
        assert shared.stdout.strip() == "[]", (variable, shared.stdout, shared.stderr)
    env = _client_env(folder, tmp_path)
    other = subprocess.run([sys.executable, "-P", "-m", tui_client.SERVER_MODULE, "--dir", str(folder), "--key",
                            "0123456789abcdef", "--package", str(tmp_path / "workbench")], env=env, cwd="/",
                           capture_output=True, text=True, timeout=60)
    assert other.returncode == 0 and "not serving" in other.stdout
    assert not list(folder.glob("t-*"))


def test_the_key_ignores_a_logins_own_variables_and_follows_the_rest():
    base = {"HOME": "/root", "TERM": "xterm-256color", "SSH_CONNECTION": "1 2 3 4", "TMUX_PANE": "%1"}
    assert tui_client.server_key(base) == tui_client.server_key({**base, "SSH_CONNECTION": "5 6 7 8", "PWD": "/x",
                                                                 "VSCODE_IPC_HOOK_CLI": "/run/a"})
    assert tui_client.server_key(base) != tui_client.server_key({**base, "TEXTUAL_ANIMATIONS": "none"})
    assert tui_client.server_key(base) != tui_client.server_key({**base, "TERM": "screen"})


def test_a_command_line_not_served_never_looks_for_a_server(monkeypatch, tmp_path):
    monkeypatch.setattr(tui_client.os, "isatty", lambda fd: True)
    env = {"WORKBENCH_DAEMON_DIR": str(tmp_path / "never")}
    assert tui_client.attach(["--replay", "s.yaml"], env) is None
    assert not (tmp_path / "never").exists()


# -- a TUI through the warm process ----------------------------------------------------------
@pytest.mark.slow
def test_a_tui_started_through_the_warm_process_keys_resize_and_exit(folder, tmp_path):
    """A TUI the server forked runs on the client's terminal: it shows its first frame, runs in
    the client's folder with its environment, follows a resize (the client's SIGWINCH passed
    on), answers a key, and quitting gives the client the TUI's exit code (0)."""
    env = _client_env(folder, tmp_path)
    server = _start_server(folder, env)
    cwd = tmp_path / "here"
    cwd.mkdir()
    cpu = min(os.sched_getaffinity(0))

    def setup() -> None:  # what the command's process carries besides its environment
        os.umask(0o027)
        os.nice(3)
        os.sched_setaffinity(0, {cpu})

    term = Terminal(env, ["default-cpu"], cwd, setup)
    try:
        term.read_until(lambda text: b"Quit" in text, 60)
        # its ops loaded (the run bar's "loading ops" gives way to "ready"): no status change
        # repaints the run bar behind the help screen later (see the q below)
        term.read_until(lambda text: b"ready" in ANSI.sub(b"", text), 60)
        (tui_pid,) = _children(server.pid)
        status = Path(f"/proc/{tui_pid}/status").read_text()
        assert "\nUmask:\t0027\n" in status and f"\nCpus_allowed_list:\t{cpu}\n" in status
        assert Path(f"/proc/{tui_pid}/stat").read_text().rsplit(")", 1)[1].split()[16] == "3"  # nice
        assert os.path.realpath(f"/proc/{tui_pid}/cwd") == str(cwd.resolve())
        assert b"WB_WARM_TEST_MARK=present" in Path(f"/proc/{tui_pid}/environ").read_bytes().split(b"\0")
        # on the client's own terminal, in a session of its own whose controlling terminal it is not
        for fd in (0, 1, 2):
            assert os.readlink(f"/proc/{tui_pid}/fd/{fd}") == os.readlink(f"/proc/{term.proc.pid}/fd/{fd}")
        assert os.getsid(tui_pid) == tui_pid
        assert Path(f"/proc/{tui_pid}/comm").read_text().strip() == "workbench-tui"
        assert Path(f"/proc/{tui_pid}/stat").read_text().rsplit(")", 1)[1].split()[4] == "0"  # tty_nr: none
        seen = len(term.data)
        _set_size(term.master, 120, 40)  # SIGWINCH to the client, the terminal's foreground job
        # a frame of the new size: its last cell drawn at row 40, column 120 (it was 45;160)
        term.read_until(lambda text: b"\x1b[40;120H" in term.data[seen:], 60)
        # the resize before ctrl+z: a SIGWINCH in the first moments after a SIGCONT can find
        # Textual's handler not back yet (it takes the size again when it resumes)
        os.kill(term.proc.pid, signal.SIGTSTP)  # ctrl+z at the command: the TUI stops, then the command
        _wait_for(lambda: _state(tui_pid) == "T" and _state(term.proc.pid) == "T", 30, "both stopped")
        os.kill(term.proc.pid, signal.SIGCONT)  # fg: the command goes on, then the TUI
        _wait_for(lambda: _state(tui_pid) in "SR" and _state(term.proc.pid) in "SR", 30, "both continued")
        seen = len(term.data)
        os.write(term.master, b"?")  # the help screen
        term.read_until(lambda text: len(term.data) > seen and b"Help" in ANSI.sub(b"", term.data[seen:]), 60)
        seen = len(term.data)
        os.write(term.master, b"\x1b")
        # the main screen back before the q: its footer's "Quit" with its run bar's "ready". A q
        # that reached the help screen closed it (q closes the help), and the app never quit (a
        # loaded box): "ready" alone came with a repaint of the run bar behind the help, while
        # the escape still waited to be read as a key, not a sequence's start.
        term.read_until(lambda text: all(word in ANSI.sub(b"", term.data[seen:]) for word in (b"ready", b"Quit")), 60)
        os.write(term.master, b"q")
        assert term.drain(30) == 0
        _wait_for(lambda: not Path(f"/proc/{tui_pid}").exists() or "Z" in Path(f"/proc/{tui_pid}/stat").read_text()
                  .rsplit(")", 1)[1].split()[0], 10, "the TUI's end")
        assert server.poll() is None  # the server stays for the next start
    finally:
        term.close()
        tui_client.stop_servers(folder)
        server.wait(timeout=10)


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in "ZX"
    except OSError:
        return True


@pytest.mark.slow
def test_a_killed_tui_or_a_killed_client_leaves_nothing_running(folder, tmp_path):
    """The TUI killed: its client says so, puts the terminal back (alternate screen left, cursor
    shown) and exits 1. The client killed: the TUI, its connection closed, hangs itself up."""
    env = _client_env(folder, tmp_path)
    server = _start_server(folder, env)
    try:
        term = Terminal(env, ["default-cpu"], tmp_path)
        try:
            term.read_until(lambda text: b"Quit" in text, 60)
            (tui_pid,) = _children(server.pid)
            seen = len(term.data)
            os.kill(tui_pid, 9)
            assert term.drain(20) == 1
            assert b"\x1b[?1049l" in term.data[seen:] and b"ended without an exit code" in term.data[seen:]
        finally:
            term.close()
        term = Terminal(env, ["default-cpu"], tmp_path)
        try:
            term.read_until(lambda text: b"Quit" in text, 60)
            (tui_pid,) = [pid for pid in _children(server.pid) if not _gone(pid)]
            term.proc.kill()
            term.proc.wait()
            _wait_for(lambda: _gone(tui_pid), 20, "the TUI's end after its client was killed")
        finally:
            term.close()
        assert server.poll() is None
    finally:
        tui_client.stop_servers(folder)
        server.wait(timeout=10)


@pytest.mark.slow
def test_without_a_server_the_tui_runs_here_and_one_is_started_for_next_time(folder, tmp_path, monkeypatch):
    monkeypatch.setattr(tui_client.os, "isatty", lambda fd: True)
    env = _client_env(folder, tmp_path)
    assert tui_client.attach(["default-cpu"], env) is None
    key = tui_client.server_key(env)
    _wait_for(lambda: tui_client.server_files(folder, key)["sock"].exists(), 60, "the started server")
    (listed,) = tui_client.list_servers(folder)
    assert listed["kind"] == "tui" and listed["key"] == key and tui_client.server_pid_verified(listed["pid"], folder)
    assert [s["pid"] for s in tui_client.stop_servers(folder)] == [listed["pid"]]
    assert tui_client.list_servers(folder) == []
    assert not tui_client.server_files(folder, key)["sock"].exists()


@pytest.mark.slow
def test_a_hung_server_is_killed_and_replaced_and_the_tui_runs_here(folder, tmp_path, monkeypatch, capfd):
    env = _client_env(folder, tmp_path)
    hung = _start_server(folder, env)
    os.kill(hung.pid, signal.SIGSTOP)  # accepts in the kernel's backlog, never answers
    monkeypatch.setattr(tui_client.os, "isatty", lambda fd: True)
    monkeypatch.setattr(tui_client, "REPLY_S", 1.0)
    try:
        assert tui_client.attach(["default-cpu"], env) is None
        assert hung.wait(timeout=10) == -signal.SIGKILL
        assert f"warm TUI process (pid {hung.pid}) did not answer in 1 s" in capfd.readouterr().err
        _wait_for(lambda: [s.get("pid") for s in tui_client.list_servers(folder)] not in ([], [None], [hung.pid]), 30,
                  "the fresh server")
    finally:
        if hung.poll() is None:
            hung.kill()
            hung.wait()
        tui_client.stop_servers(folder)


@pytest.mark.slow
def test_daemon_list_and_stop_name_the_warm_tui_process(folder, tmp_path):
    env = _client_env(folder, tmp_path)
    server = _start_server(folder, env)
    try:
        run = {**env, "WORKBENCH_DAEMON": "0"}
        listed = subprocess.run([sys.executable, "-m", "workbench", "--daemon-list"], env=run, capture_output=True,
                                text=True, timeout=60)
        assert listed.returncode == 0 and f"pid {server.pid}  warm TUI process" in listed.stdout, listed.stdout
        stopped = subprocess.run([sys.executable, "-m", "workbench", "--daemon-stop", "--format", "json"], env=run,
                                 capture_output=True, text=True, timeout=60)
        assert stopped.returncode == 0 and f'"pid": {server.pid}' in stopped.stdout
        assert server.wait(timeout=10) == 0
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()


@pytest.mark.slow
def test_an_idle_server_leaves_and_removes_its_socket(folder, tmp_path):
    env = _client_env(folder, tmp_path)
    server = _start_server(folder, env, idle_s=0.5)
    assert server.wait(timeout=30) == 0
    assert not tui_client.server_files(folder, tui_client.server_key(env))["sock"].exists()


# -- refusals --------------------------------------------------------------------------------
def test_the_server_serves_no_other_uid(folder, monkeypatch):
    """A connection whose peer is another uid gets nothing: no request is read, nothing forks."""
    server = tui_server.Server(folder, "0123456789abcdef", 60)
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    monkeypatch.setattr(tui_server.os, "getuid", lambda: os.geteuid() + 4242)
    monkeypatch.setattr(tui_server.os, "fork", lambda: pytest.fail("forked for another uid"))
    with mine, theirs:
        theirs.sendall(b"garbage")
        server._serve(mine)
        theirs.setblocking(False)
        with pytest.raises(BlockingIOError):  # nothing was answered
            theirs.recv(10)
    assert server.served == 0


def test_the_client_uses_no_server_of_another_uid(tmp_path, monkeypatch):
    path = tmp_path / "t.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(1)
    with listener:
        assert tui_client._connect(path) is not None
        monkeypatch.setattr(tui_client.os, "getuid", lambda: os.geteuid() + 4242)
        assert tui_client._connect(path) is None


def test_a_server_whose_imported_code_changed_refuses_and_leaves(folder, tmp_path):
    source = tmp_path / "mod.py"
    source.write_text("x = 1\n")
    server = tui_server.Server(folder, "0123456789abcdef", 60)
    server.snapshot = {str(source): source.stat().st_mtime_ns}
    master, slave = os.openpty()
    request = {"argv": [], "cwd": "/", "env": {}, "key": "0123456789abcdef", "process": tui_client.process_attributes()}
    try:
        stdio = [slave, slave, slave]
        assert server._problem(request, stdio) == ""
        os.utime(source, ns=(source.stat().st_atime_ns, source.stat().st_mtime_ns + 10**9))
        problem = server._problem(request, stdio)
        assert str(source) in problem and server.leaving == problem
        assert "is for server 'ffffffffffffffff'" in server._problem({**request, "key": "f" * 16}, stdio)
        assert server._problem(request, [slave]).startswith("no terminal came with the request")
        with open(source, "rb") as not_a_terminal:
            assert server._problem(request, [slave, not_a_terminal.fileno(), slave]).startswith("no terminal")
    finally:
        os.close(master)
        os.close(slave)
    assert tui_server.changed_files({str(tmp_path / "gone.py"): 1}) == [str(tmp_path / "gone.py")]


def test_a_start_that_fails_in_the_server_leaves_it_serving(folder, monkeypatch):
    """A fork that fails (or any one start's trouble) is logged; the server goes on."""
    server = tui_server.Server(folder, "0123456789abcdef", 60)
    server.listener = server._listen()
    master, slave = os.openpty()
    monkeypatch.setattr(tui_server.os, "fork", lambda: (_ for _ in ()).throw(OSError(12, "no memory")))
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        client.connect(str(server.files["sock"]))
        tui_client.send_message(client, {"argv": [], "cwd": "/", "env": {}, "key": "0123456789abcdef",
                                         "process": tui_client.process_attributes()},
                                [slave, slave, slave])
        server._step()
        assert server.leaving == "" and server.served == 0
        client.settimeout(2)
        assert client.recv(16) == b""  # its connection closed: the client runs the TUI itself
    finally:
        client.close()
        server._close()
        os.close(master)
        os.close(slave)


def test_a_removed_working_folder_runs_the_command_here(monkeypatch, folder):
    def gone() -> str:
        raise FileNotFoundError(2, "No such file or directory")

    monkeypatch.setattr(tui_client.os, "getcwd", gone)
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with mine, theirs:
        assert tui_client._run_attached(mine, [], {}, folder, "0123456789abcdef") is None
        theirs.setblocking(False)
        with pytest.raises(BlockingIOError):  # nothing was sent
            theirs.recv(10)


@pytest.mark.slow
def test_the_server_refuses_another_cgroup_and_a_tui_takes_the_commands_limits(folder):
    server = tui_server.Server(folder, "0123456789abcdef", 60)
    master, slave = os.openpty()
    process = tui_client.process_attributes()
    request = {"argv": [], "cwd": "/", "env": {}, "key": "0123456789abcdef", "process": process}
    try:
        assert server._problem(request, [slave] * 3) == ""
        assert "cgroup" in server._problem({**request, "process": {**process, "cgroup": "0::/elsewhere\n"}},
                                           [slave] * 3)
        assert "process attributes" in server._problem({k: v for k, v in request.items() if k != "process"},
                                                       [slave] * 3)
    finally:
        os.close(master)
        os.close(slave)
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    lower = {**process, "rlimits": {"RLIMIT_NOFILE": [min(soft, 512), min(hard, 1024)]}, "umask": 0o077}
    code = ("import os, resource, sys, json; from workbench.cli import tui_server as t; "
            "p = t.apply_process_attributes(json.loads(sys.argv[1])); "
            "print(p or 'ok', oct(os.umask(0)), resource.getrlimit(resource.RLIMIT_NOFILE))")
    done = subprocess.run([sys.executable, "-c", code, json.dumps(lower)], capture_output=True, text=True, timeout=60)
    assert done.stdout.split()[:2] == ["ok", "0o77"], done.stdout + done.stderr
    assert f"({min(soft, 512)}, {min(hard, 1024)})" in done.stdout
    if os.getuid() != 0:  # a lower nice value needs a privilege: refused, the client runs the TUI itself
        higher = {**process, "nice": process["nice"] - 1}
        done = subprocess.run([sys.executable, "-c", code, json.dumps(higher)], capture_output=True, text=True)
        assert done.stdout.startswith("cannot run as the command would")


@pytest.mark.slow
def test_a_server_replaced_for_changed_code_gives_way_to_a_fresh_one(folder, tmp_path):
    """The refused start asks for a fresh server while the old one is still leaving: the new one
    waits for its lock and then serves; a server in its start delay is listed and stopped."""
    env = _client_env(folder, tmp_path)
    old = _start_server(folder, env)
    key = tui_client.server_key(env)
    tui_client.start_server(folder, key, env, delay_s=0.0, replacing=True)
    time.sleep(0.5)
    old.terminate()
    assert old.wait(timeout=10) == 0
    _wait_for(lambda: [s.get("pid") for s in tui_client.list_servers(folder)] not in ([], [None], [old.pid]), 20,
              "the fresh server")
    _wait_for(lambda: tui_client.server_files(folder, key)["sock"].exists(), 60, "the fresh server's socket")
    assert len(tui_client.stop_servers(folder)) == 1
    delayed = subprocess.Popen([sys.executable, "-P", "-m", tui_client.SERVER_MODULE, "--dir", str(folder), "--key",
                                key, "--start-delay-s", "30"], env=env, cwd="/")
    try:
        _wait_for(lambda: [s.get("pid") for s in tui_client.list_servers(folder)] == [delayed.pid], 20,
                  "the delayed server listed")
        assert [s["pid"] for s in tui_client.stop_servers(folder)] == [delayed.pid]
        assert delayed.wait(timeout=10) == 0
    finally:
        if delayed.poll() is None:
            delayed.kill()
            delayed.wait()


def test_a_planted_pid_is_never_signalled(folder):
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        assert not tui_client.server_pid_verified(sleeper.pid, folder)
        assert not tui_client.server_pid_verified(os.getpid(), folder)
        assert not tui_client.server_pid_verified(True, folder)
    finally:
        sleeper.kill()
        sleeper.wait()


def test_messages_round_trip_with_a_descriptor():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    r, w = os.pipe()
    with a, b:
        tui_client.send_message(a, {"argv": ["x"], "n": 1}, [w])
        message, fds = tui_client.read_message(b, with_fds=1)
        assert message == {"argv": ["x"], "n": 1} and len(fds) == 1
        os.write(fds[0], b"!")
        assert os.read(r, 1) == b"!"
        for fd in (r, w, *fds):
            os.close(fd)
        a.sendall(struct.pack("!I", tui_client.MESSAGE_MAX + 1))
        with pytest.raises(ValueError, match="bytes"):
            tui_client.read_message(b)
