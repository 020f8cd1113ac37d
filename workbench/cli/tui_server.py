"""The TUI's warm process, the server's side (issue #39; docs/engine.md, "The TUI's warm process").

    python -P -m workbench.cli.tui_server --dir FOLDER --key KEY [--idle-timeout-s S] [--start-delay-s S]

One per user, Python, workbench checkout and environment (the client's `server_key`; files
FOLDER/t-KEY.{sock,lock,json,log}, FOLDER private to the user). It waits `--start-delay-s`, takes
its lock (another server for KEY up: it leaves), imports Textual, the app and the command line,
and listens. For each client of its own uid (SO_PEERCRED; any other is refused and logged) it
reads one request (argv, working folder, environment; the client's stdin, stdout and stderr as
descriptors) and forks a TUI: a new session on those descriptors as fds 0-2, in the client's
folder and with its environment, running `cli.main(argv)`. The TUI tells its client its pid, then
its exit code, and hangs itself up when the client goes first. The server never runs anything
itself, holds no thread, and its children are reaped by the kernel (SIGCHLD ignored here,
default in the TUI).

It leaves after `--idle-timeout-s` without a request (default IDLE_TIMEOUT_S, or
WORKBENCH_DAEMON_IDLE_S), on SIGTERM or SIGHUP, when its socket file is removed or replaced, and
when a file it imported has changed since (a request then gets {"refused": ..., "restart": true}
and its client runs the TUI in its own process and starts a fresh server). `--daemon-stop` stops
it; `--daemon-list` lists it.
"""

from __future__ import annotations

import argparse
import gc
import io
import json
import os
import select
import signal
import socket
import sys
import threading
import time
import traceback
from pathlib import Path

from workbench import tui_client
from workbench.engine.daemon.folder import private_folder, try_lock
from workbench.results.provenance import utc_now_iso

IDLE_TIMEOUT_S = 3600.0  # an hour without a TUI start
WATCH_S = 1.0  # how often the loop looks at the idle clock and the socket file
REQUEST_S = 2.0  # a client's request must arrive within this after it connected
LOCK_WAIT_S = 3.0  # a server started to replace one that is leaving waits this long for its lock


def imported_files() -> dict[str, int]:
    """Every imported module's source file -> its mtime (ns): what a TUI forked here runs."""
    files = {}
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if isinstance(path, str):
            try:
                files[path] = os.stat(path).st_mtime_ns
            except OSError:
                continue
    return files


def changed_files(snapshot: dict[str, int]) -> list[str]:
    """The files of `snapshot` (imported_files) whose mtime is no longer the one recorded, or gone."""
    changed = []
    for path, mtime in snapshot.items():
        try:
            if os.stat(path).st_mtime_ns != mtime:
                changed.append(path)
        except OSError:
            changed.append(path)
    return changed


class Server:
    """One warm TUI server (module docstring)."""

    def __init__(self, folder: Path, key: str, idle_timeout_s: float):
        self.folder, self.key, self.idle_timeout_s = folder, key, idle_timeout_s
        self.files = tui_client.server_files(folder, key)
        self.snapshot: dict[str, int] = {}
        self.listener: socket.socket | None = None
        self.lock_fd: int | None = None
        self.last_request = time.monotonic()
        self.served = 0
        self.leaving = ""

    def serve(self, start_delay_s: float = 0.0) -> int:
        """Take the lock (waiting up to LOCK_WAIT_S for a server that is leaving), write the info
        file, wait `start_delay_s` (listed and stoppable meanwhile), import, serve until leaving."""
        private_folder(self.folder)
        deadline = time.monotonic() + LOCK_WAIT_S
        while (lock_fd := try_lock(self.files["lock"])) is None and time.monotonic() < deadline:
            time.sleep(0.05)
        if lock_fd is None:
            _say(f"another server holds {self.files['lock']}: leaving")
            return 0
        self.lock_fd = lock_fd
        _write_private_json(self.files["json"], {"pid": os.getpid(), "key": self.key, "python": sys.executable,
                                                 "started": utc_now_iso(), "idle_timeout_s": self.idle_timeout_s})
        signal.signal(signal.SIGTERM, self._leave)
        signal.signal(signal.SIGHUP, self._leave)
        delay_end = time.monotonic() + start_delay_s
        while not self.leaving and time.monotonic() < delay_end:
            time.sleep(min(0.05, max(0.0, delay_end - time.monotonic())))
        if self.leaving:
            self._close()
            _say(f"leaving before its start: {self.leaving}")
            return 0
        warm_imports()
        self.snapshot = imported_files()
        self.listener = self._listen()
        signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps the TUIs
        _say(f"pid {os.getpid()} serving {self.files['sock']} ({len(self.snapshot)} files imported; "
             f"idle timeout {self.idle_timeout_s:g} s)")
        gc.collect()
        gc.freeze()  # what every TUI shares stays out of its collections (and its pages unwritten)
        try:
            while not self.leaving:
                self._step()
        finally:
            self._close()
        _say(f"leaving: {self.leaving}")
        return 0

    def _listen(self) -> socket.socket:
        path = self.files["sock"]
        try:
            os.unlink(path)  # a dead server's: the lock is ours
        except FileNotFoundError:
            pass
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            listener.bind(str(path))
        finally:
            os.umask(old)
        listener.listen(16)
        self._inode = os.stat(path).st_ino
        return listener

    def _leave(self, signum: int, frame: object) -> None:
        self.leaving = signal.Signals(signum).name

    def _step(self) -> None:
        assert self.listener is not None
        try:
            readable, _, _ = select.select([self.listener], [], [], WATCH_S)
        except InterruptedError:
            return
        if readable:
            try:
                conn, _address = self.listener.accept()
            except OSError:
                return
            with conn:
                try:
                    self._serve(conn)
                except Exception as exc:  # one client's trouble (a fork that failed, a peer gone) ends only its start
                    _say(f"a start failed: {type(exc).__name__}: {exc}")
            self.last_request = time.monotonic()
            return
        try:
            if os.stat(self.files["sock"]).st_ino != self._inode:
                self.leaving = "its socket file was replaced"
        except FileNotFoundError:
            self.leaving = "its socket file was removed"
        if time.monotonic() - self.last_request > self.idle_timeout_s:
            self.leaving = f"idle for {self.idle_timeout_s:g} s"

    def _serve(self, conn: socket.socket) -> None:
        uid = tui_client.peer_uid(conn)
        if uid != os.getuid():
            _say(f"refused a connection from uid {uid}")
            return
        conn.settimeout(REQUEST_S)
        try:
            request, fds = tui_client.read_message(conn, with_fds=3)
        except (OSError, ValueError) as exc:
            _say(f"a client left or sent no request: {type(exc).__name__}: {exc}")
            return
        try:
            problem = self._problem(request, fds)
            if problem:
                _say(f"refused a request: {problem}")
                tui_client.send_message(conn, {"refused": problem, "restart": self.leaving != ""})
                return
            listening = None if self.listener is None else self.listener.fileno()
            pid = os.fork()
            if pid == 0:
                run_tui(conn, request, fds, close=[listening, self.lock_fd])  # never returns
            self.served += 1
        finally:
            for fd in fds:
                os.close(fd)

    def _problem(self, request: dict, fds: list[int]) -> str:
        """Why the request is not served here ("" when it is)."""
        if len(fds) != 3 or not (os.isatty(fds[0]) and os.isatty(fds[1])):
            return "no terminal came with the request (stdin, stdout and stderr: stdin and stdout terminals)"
        if request.get("key") != self.key:
            return f"the request is for server {request.get('key')!r}, this is {self.key}"
        if not (isinstance(request.get("argv"), list) and all(isinstance(a, str) for a in request["argv"])
                and isinstance(request.get("cwd"), str) and isinstance(request.get("env"), dict)):
            return "a malformed request"
        process = request.get("process")
        if not isinstance(process, dict):
            return "a malformed request (no process attributes)"
        if process.get("cgroup") != _own_cgroup():
            return "the command runs in another cgroup than the server"
        changed = changed_files(self.snapshot)
        if changed:
            self.leaving = f"{len(changed)} imported file(s) changed, {changed[0]} first"
            return self.leaving
        return ""

    def _close(self) -> None:
        if self.listener is not None:
            self.listener.close()
            try:
                if os.stat(self.files["sock"]).st_ino == self._inode:
                    os.unlink(self.files["sock"])
            except OSError:
                pass
        for path in (self.files["json"],):
            try:
                os.unlink(path)
            except OSError:
                pass


def warm_imports() -> None:
    """What a TUI's start would import before its first frame: the command line and the app."""
    import workbench.cli.main  # noqa: F401
    import workbench.screens.app  # noqa: F401


def run_tui(conn: socket.socket, request: dict, stdio: list[int], close: list[int | None]) -> None:
    """The forked TUI (module docstring): a session of its own on the client's stdin, stdout and
    stderr (`stdio`); never returns (os._exit with the command's code, which its client gets
    first). When the client's end of `conn` closes first (the client died), it sends itself
    SIGHUP: the app saves and leaves as on a lost terminal (screens/terminal.py)."""
    code = 1
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for fd in close:
            if fd is not None:
                os.close(fd)
        os.setsid()
        _name_process(b"workbench-tui")
        for target, fd in enumerate(stdio):
            os.dup2(fd, target)
        for fd in stdio:
            if fd > 2:
                os.close(fd)
        problem = apply_process_attributes(request["process"])
        if problem:
            tui_client.send_message(conn, {"refused": problem})
            os._exit(0)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update({str(k): str(v) for k, v in request["env"].items()})
        _stdio_on_terminal(str(request.get("encoding") or "utf-8"))
        sys.argv = ["workbench", *request["argv"]]
        try:
            tui_client.send_message(conn, {"pid": os.getpid()})
        except OSError:  # the client gave up waiting and runs the TUI itself
            os._exit(1)
        threading.Thread(target=_hang_up_without_client, args=(conn,), name="workbench-tui-client",
                         daemon=True).start()
        from workbench.cli.main import main

        code = main(request["argv"])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except Exception:
            pass
        try:
            conn.setblocking(True)
            tui_client.send_message(conn, {"rc": code})
        except Exception:
            pass
        os._exit(code)


def apply_process_attributes(process: dict) -> str:
    """Take on the client's umask, CPU affinity, nice value and resource limits
    (tui_client.process_attributes): a TUI runs as it would have in the client's process. Returns
    why that cannot be ("" when done): a lower nice value or a higher hard limit than the
    server's needs a privilege; the client then runs the TUI itself."""
    import resource

    try:
        os.umask(int(process["umask"]))
        os.sched_setaffinity(0, [int(cpu) for cpu in process["affinity"]])
        nice = int(process["nice"])
        if nice != os.getpriority(os.PRIO_PROCESS, 0):
            os.setpriority(os.PRIO_PROCESS, 0, nice)
        for name, (soft, hard) in process["rlimits"].items():
            which = getattr(resource, str(name), None)
            if which is not None and resource.getrlimit(which) != (soft, hard):
                resource.setrlimit(which, (int(soft), int(hard)))
    except (OSError, ValueError, TypeError, KeyError) as exc:
        return f"cannot run as the command would ({type(exc).__name__}: {exc})"
    return ""


def _name_process(name: bytes) -> None:
    """The process's name (`ps -o comm`, top, pgrep without -f; Linux prctl PR_SET_NAME, at most
    15 bytes): a forked TUI keeps the server's command line, not its name."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(15, ctypes.c_char_p(name[:15]), 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _own_cgroup() -> str:
    try:
        return Path("/proc/self/cgroup").read_text()
    except OSError:
        return ""


def _hang_up_without_client(conn: socket.socket) -> None:
    """SIGHUP to this process once the client's end of `conn` is closed (the client never sends
    after its request)."""
    try:
        conn.setblocking(True)
        while conn.recv(1 << 12):
            pass
    except OSError:
        pass
    os.kill(os.getpid(), signal.SIGHUP)


def _stdio_on_terminal(encoding: str) -> None:
    """sys's streams (and their __std*__ originals, which Textual's driver uses) on fds 0-2, now
    the TUI's terminal: the server's were its log."""
    streams = {"stdin": io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding=encoding),
               "stdout": io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding=encoding, line_buffering=True),
               "stderr": io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding=encoding,
                                          errors="backslashreplace", line_buffering=True)}
    for name, stream in streams.items():
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)


def _write_private_json(path: Path, data: dict) -> None:
    from workbench.engine.daemon.paths import write_private

    write_private(path, (json.dumps(data) + "\n").encode())


def _say(line: str) -> None:
    print(f"{utc_now_iso()} {line}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workbench.cli.tui_server")
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--idle-timeout-s", type=float,
                        default=float(os.environ.get("WORKBENCH_DAEMON_IDLE_S") or IDLE_TIMEOUT_S))
    parser.add_argument("--start-delay-s", type=float, default=0.0)
    parser.add_argument("--package", default="", help="the workbench folder the client imported (checked)")
    args = parser.parse_args(argv)
    if args.package and args.package != tui_client.package_folder():
        _say(f"the client imported workbench from {args.package}, this Python from {tui_client.package_folder()} "
             "(a checkout on the client's path through its working folder): not serving")
        return 0
    return Server(args.dir, args.key, args.idle_timeout_s).serve(max(0.0, args.start_delay_s))


if __name__ == "__main__":
    sys.exit(main())
