"""The TUI's warm process, the client's side (issue #39; docs/engine.md, "The TUI's warm process").

`workbench [FILE]` on a terminal asks this user's warm TUI server (workbench/cli/tui_server.py: a
process that has imported Textual and the app) for a TUI, handing it this process's stdin, stdout
and stderr (SCM_RIGHTS). The server forks one that runs on those descriptors: the user's terminal
itself, with no relay between them (a TUI in a session of its own, whose controlling terminal
this terminal is not, reads, writes and sets its modes without job control's checks). This
process stays the terminal's foreground job and waits: the signals it gets as such go on to the
TUI (SIGWINCH: Textual reads the new size from the terminal; SIGINT, SIGTERM, SIGHUP, SIGQUIT:
the TUI leaves as it would in this process, its edits saved and the screen restored) and it exits
with the TUI's code. When this process dies first, the TUI hangs itself up (it watches the
connection). The new TUI skips what the server imported (~0.3 s of Textual, ~0.2 s of the app's
modules on the 2-core CPU box) and starts at the app's compose; everything else it does as a TUI
started in this process would: it runs `cli.main` with this argv, working folder and environment.

    code = attach(argv, os.environ)   # the TUI's exit code; None: run the command in this process

This module imports only the standard library and the folder's checks (it runs before anything
else of the command). `attach` returns None, and the caller runs the command itself, when: stdin
or stdout is not a terminal; argv holds anything but FILE and the TUI's own options (a mode such
as --replay, --help, -o, an abbreviation, --no-daemon, or --strict: no warm process for
untrusted plugin code); WORKBENCH_DAEMON is off; the host is not Linux; the daemon folder is not
private; or no server of this user's serves this Python, this workbench checkout and this
environment (`server_key`). In the last case it starts one in the background (`start_server`)
for the next start. A server that answers as another uid is never used (SO_PEERCRED), nor one
whose code changed since it imported it (the server says so and leaves; a fresh one is started).
"""

from __future__ import annotations

import hashlib
import json
import os
import select
import signal
import socket
import struct
import sys
import termios
import time
from pathlib import Path
from typing import Mapping

# the TUI's own options (flags.OPTIONS whose modes include "tui"; tests/test_tui_warm.py keeps
# this in step): a command line with any other "-..." token is not served here
TUI_FLAGS = frozenset({"--device", "--devices", "--cluster", "--trace-dir", "--kernels", "--trust-plugins", "--watch",
                       "-v", "--verbose"})
# WORKBENCH_DAEMON values that leave the warm processes on (cli/daemon.py's ON_VALUES, and unset);
# any other runs the command in process (which refuses a value that is neither on nor off)
DAEMON_ON = ("", "1", "on", "yes", "true")
# variables that differ between two logins of one user (or two panes of one terminal) and that
# nothing reads while importing: left out of the server's key, so a new login finds the warm
# server; the TUI itself gets the client's whole environment
ENV_VOLATILE = frozenset({"_", "OLDPWD", "PWD", "SHLVL", "SSH_CLIENT", "SSH_CONNECTION", "SSH_TTY", "SSH_AUTH_SOCK",
                          "TMUX", "TMUX_PANE", "STY", "WINDOW", "WINDOWID", "TERM_SESSION_ID", "ITERM_SESSION_ID",
                          "KITTY_WINDOW_ID", "WEZTERM_PANE", "ALACRITTY_WINDOW_ID", "XDG_SESSION_ID", "XDG_VTNR",
                          "GPG_TTY", "KRB5CCNAME", "MOTD_SHOWN", "LINES", "COLUMNS", "WORKBENCH_DAEMON_IDLE_S",
                          "PS1", "PS2", "PS3", "PS4", "PROMPT_COMMAND", "DISPLAY", "XAUTHORITY", "HISTFILE"})
ENV_VOLATILE_PREFIXES = ("VSCODE_",)
CONNECT_S = 1.0   # connect and send; the server answers a live request in milliseconds
REPLY_S = 5.0     # the forked TUI's first word (its pid) or the server's refusal
SIGNAL_GRACE_S = 5.0  # a TUI given this process's SIGTERM (SIGHUP, SIGINT) has this long to leave
# what this process gets as the terminal's foreground job and passes on to the TUI (SIGTSTP
# through _suspend: the TUI stops first, this process after it; the SIGCONT that ends it goes on
# from there, once: Textual takes the terminal again at each)
FORWARDED = (signal.SIGWINCH, signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGTSTP)
ENDING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)  # the TUI is expected to leave
TSTP_WAIT_S = 0.5  # ctrl+z: how long the TUI has to stop itself on SIGTSTP before it gets SIGSTOP
# a TUI killed mid-frame leaves the alternate screen, mouse reporting and a hidden cursor on
TERMINAL_RESET = b"\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1006l\x1b[?1015l\x1b[?2004l\x1b[?1004l\x1b[<u\x1b[?1049l\x1b[?25h"
START_DELAY_S = 2.0  # a server started by a TUI start imports after this: not beside its first frame
SERVER_MODULE = "workbench.cli.tui_server"
STOP_WAIT_S = 5.0  # --daemon-stop: SIGTERM, then SIGKILL after this
HEADER = struct.Struct("!I")
MESSAGE_MAX = 1 << 24


def eligible(argv: list[str], environ: Mapping[str, str]) -> bool:
    """Whether this command line is a TUI start the warm server may run (module docstring)."""
    if sys.platform != "linux" or environ.get("WORKBENCH_DAEMON", "").strip().lower() not in DAEMON_ON:
        return False
    if not (os.isatty(0) and os.isatty(1)) or interpreter_options(environ):
        return False
    return all(not arg.startswith("-") or arg.split("=", 1)[0] in TUI_FLAGS for arg in argv)


# interpreter flags and the environment variable that also sets each: set through the
# environment, a server started with that environment shares them
FLAG_VARIABLES = {"optimize": "PYTHONOPTIMIZE", "dev_mode": "PYTHONDEVMODE", "verbose": "PYTHONVERBOSE",
                  "debug": "PYTHONDEBUG", "inspect": "PYTHONINSPECT", "no_user_site": "PYTHONNOUSERSITE",
                  "ignore_environment": "", "isolated": ""}


def interpreter_options(environ: Mapping[str, str] | None = None) -> list[str]:
    """The options this Python runs with that a server started as `python -P` with the same
    environment would not share: command-line -O, -X dev, -W, -X ..., -v, -d, -i, -E, -s, -I
    (their PYTHON* variables are shared; `environ`: os.environ). A command with any runs in
    process."""
    environ = os.environ if environ is None else environ
    given = [name for name, variable in FLAG_VARIABLES.items()
             if getattr(sys.flags, name, 0) and not (variable and environ.get(variable))]
    from_env = [w for w in environ.get("PYTHONWARNINGS", "").split(",") if w]
    from_env += ["default"] if environ.get("PYTHONDEVMODE") else []  # dev mode's own filter
    return (given + [f"-W {w}" for w in sys.warnoptions if w not in from_env]
            + [f"-X {x}" for x in sys._xoptions])


def server_key(environ: Mapping[str, str]) -> str:
    """16 hex characters of sha256 over what a warm server must share with its client: the Python
    executable and prefix, where workbench is imported from, and the environment but for
    ENV_VOLATILE (Textual and the app read some of it while importing)."""
    env = {k: v for k, v in environ.items() if k not in ENV_VOLATILE and not k.startswith(ENV_VOLATILE_PREFIXES)}
    what = {"python": sys.executable, "prefix": sys.prefix, "package": package_folder(), "env": env}
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:16]


def package_folder() -> str:
    """The folder of the workbench package this process imported (a checkout on sys.path through
    the working folder may shadow the installed one: the server, started as `python -P` from /,
    checks it imports the same)."""
    return str(Path(__file__).resolve().parent)


def server_files(folder: Path, key: str) -> dict[str, Path]:
    """The server's files in the daemon folder: socket, lock (held for its life), info (JSON), log."""
    return {suffix: folder / f"t-{key}.{suffix}" for suffix in ("sock", "lock", "json", "log")}


def attach(argv: list[str], environ: Mapping[str, str]) -> int | None:
    """Run the TUI for `argv` (the command's arguments) from this user's warm server, on this
    process's terminal; its exit code, or None when the command is to run in this process (module
    docstring; a server is then started for the next start when none is up)."""
    if not eligible(argv, environ):
        return None
    from workbench.engine.daemon.folder import DaemonError, default_folder, private_folder

    try:
        folder = private_folder(default_folder(environ))
    except DaemonError:
        return None  # the in-process TUI runs; --replay's client says what is wrong with the folder
    key = server_key(environ)
    files = server_files(folder, key)
    sock = _connect(files["sock"])
    if sock is None:
        start_server(folder, key, environ)
        return None
    with sock:
        return _run_attached(sock, argv, environ, folder, key)


def _connect(path: Path) -> socket.socket | None:
    """A connection to the server at `path`, its peer checked to be this user; None when no
    server of this user's answers there."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(CONNECT_S)
    try:
        sock.connect(str(path))
        if peer_uid(sock) != os.getuid():
            raise ConnectionRefusedError(f"{path} is served by another user")
    except OSError:
        sock.close()
        return None
    return sock


def peer_uid(sock: socket.socket) -> int:
    """The uid of the process at the other end of a Unix socket (Linux SO_PEERCRED)."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[1]


def send_message(sock: socket.socket, message: dict, fds: list[int] | None = None) -> None:
    """One JSON message, length-prefixed; `fds` travel with it (SCM_RIGHTS)."""
    data = json.dumps(message).encode()
    frame = HEADER.pack(len(data)) + data
    if fds:
        sent = socket.send_fds(sock, [frame], fds)
        frame = frame[sent:]
    sock.sendall(frame)


def read_message(sock: socket.socket, with_fds: int = 0) -> tuple[dict, list[int]]:
    """One message of `send_message` (and up to `with_fds` descriptors); ConnectionError when the
    other end closed first, ValueError for a frame that is not one."""
    if with_fds:
        head, fds, _flags, _addr = socket.recv_fds(sock, HEADER.size, with_fds)
    else:
        head, fds = sock.recv(HEADER.size), []
    head += _read_exactly(sock, HEADER.size - len(head))
    (size,) = HEADER.unpack(head)
    if size > MESSAGE_MAX:
        raise ValueError(f"a message of {size} bytes (at most {MESSAGE_MAX})")
    message = json.loads(_read_exactly(sock, size))
    if not isinstance(message, dict):
        raise ValueError("a message that is not a JSON object")
    return message, list(fds)


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("the other end closed the connection")
        data += chunk
    return data


def _run_attached(sock: socket.socket, argv: list[str], environ: Mapping[str, str], folder: Path, key: str
                  ) -> int | None:
    try:
        request = {"argv": list(argv), "cwd": os.getcwd(), "env": dict(environ), "key": key,
                   "encoding": sys.stdout.encoding or "utf-8", "process": process_attributes()}
    except OSError:  # a working folder that was removed: the command in process says what it can
        return None
    try:
        send_message(sock, request, [0, 1, 2])
        sock.settimeout(REPLY_S)
        reply, _ = read_message(sock)
    except TimeoutError:
        _stop_hung(folder, key, environ)
        return None
    except (OSError, ValueError):
        return None
    pid = reply.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool):  # refused: its code changed (it leaves), or no TUI there
        if reply.get("restart"):
            start_server(folder, key, environ, replacing=True)
        return None
    return _wait(sock, pid)


def _stop_hung(folder: Path, key: str, environ: Mapping[str, str]) -> None:
    """The server took the request and said nothing within REPLY_S (stopped, hung): it is killed
    (its pid verified) and a fresh one started, with one line; this start runs in process (the
    TUI forked late, if any, finds its client gone and hangs itself up)."""
    files = server_files(folder, key)
    pid = _read_info(files["json"]).get("pid")
    if isinstance(pid, int) and server_pid_verified(pid, folder):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    os.write(2, f"workbench: the warm TUI process (pid {pid}) did not answer in {REPLY_S:g} s: stopped; "
                f"this TUI runs in its own process\n".encode())
    start_server(folder, key, environ, replacing=True)


def process_attributes() -> dict:
    """What a process inherits besides its environment and that a TUI forked by the server must
    take from this one to run as it would here (tui_server.apply_process_attributes): umask,
    CPU affinity, nice value, resource limits, and the cgroup (the server refuses another's)."""
    import resource

    mask = os.umask(0)
    os.umask(mask)
    limits = {name: list(resource.getrlimit(getattr(resource, name)))
              for name in dir(resource) if name.startswith("RLIMIT_")}
    try:
        cgroup = Path("/proc/self/cgroup").read_text()
    except OSError:
        cgroup = ""
    return {"umask": mask, "affinity": sorted(os.sched_getaffinity(0)),
            "nice": os.getpriority(os.PRIO_PROCESS, 0), "rlimits": limits, "cgroup": cgroup}


def _wait(sock: socket.socket, pid: int) -> int:
    """Wait for the TUI's exit code while it runs on this process's terminal; the signals this
    process gets as the terminal's foreground job go on to it (module docstring). Returns its
    code; with none (killed), the terminal is put back as it was, with one line on stderr."""
    try:
        saved = termios.tcgetattr(0)
    except termios.error:
        saved = None
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    handlers = {}
    old_wakeup = -1
    try:
        for signum in FORWARDED:
            handlers[signum] = signal.signal(signum, _note_signal)
        old_wakeup = signal.set_wakeup_fd(wake_w)
        code = _wait_loop(sock, pid, wake_r)
    finally:
        signal.set_wakeup_fd(old_wakeup)
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
        os.close(wake_r)
        os.close(wake_w)
    if code is None:
        if saved is not None:
            try:
                termios.tcsetattr(0, termios.TCSADRAIN, saved)
            except termios.error:
                pass
        _write_all(1, TERMINAL_RESET)
        os.write(2, b"workbench: the TUI's process ended without an exit code (killed?)\n")
        return 1
    return code


def _note_signal(signum: int, frame: object) -> None:
    """The waiting handler: the signal's number reaches the loop through the wakeup pipe."""


def _wait_loop(sock: socket.socket, pid: int, wake_r: int) -> int | None:
    """The TUI's exit code ({"rc": N}), or None when its connection ended without one."""
    data = b""
    signalled: float | None = None  # when a SIGTERM, SIGHUP or SIGINT was passed on
    sock.setblocking(False)
    while not _has_message(data):
        if signalled is not None and time.monotonic() - signalled > SIGNAL_GRACE_S:
            return None  # the TUI did not leave: this process ends, and the TUI, its client gone, hangs up
        try:
            readable, _, _ = select.select([sock.fileno(), wake_r], [], [], 0.5 if signalled is not None else None)
        except InterruptedError:
            continue
        if wake_r in readable:
            for signum in os.read(wake_r, 64):
                if signum == signal.SIGTSTP:
                    _suspend(pid)
                    continue
                try:
                    os.kill(pid, signum)
                except OSError:
                    pass
                if signum in ENDING and signalled is None:
                    signalled = time.monotonic()
        if sock.fileno() in readable:
            try:
                chunk = sock.recv(1 << 12)
            except BlockingIOError:
                continue
            except OSError:
                chunk = b""
            if not chunk:
                return None
            data += chunk
    size = HEADER.unpack(data[:HEADER.size])[0]
    try:
        rc = json.loads(data[HEADER.size:HEADER.size + size]).get("rc")
    except (ValueError, AttributeError):
        return None
    return rc if isinstance(rc, int) and not isinstance(rc, bool) else None


def _suspend(pid: int) -> None:
    """ctrl+z (SIGTSTP) at this process, the terminal's foreground job: the TUI suspends first
    (Textual puts the terminal back and stops itself; before the app, at the trust question,
    SIGSTOP after TSTP_WAIT_S: in a session of its own its group is orphaned and a SIGTSTP would
    be discarded), then this process stops (SIGSTOP, as Textual does), and the shell has the
    terminal. Continued in the foreground (fg), the TUI is continued (Textual takes the terminal
    again); continued in the background (bg), this process stops again, as a TUI touching the
    terminal from the background would, and the TUI stays stopped until `fg`."""
    try:
        for signum in (signal.SIGTSTP, signal.SIGSTOP):
            os.kill(pid, signum)
            deadline = time.monotonic() + TSTP_WAIT_S
            while not _stopped(pid) and time.monotonic() < deadline:
                time.sleep(0.01)
            if _stopped(pid):
                break
    except OSError:
        return
    os.kill(os.getpid(), signal.SIGSTOP)  # stops here until SIGCONT
    while not _foreground():
        os.kill(os.getpid(), signal.SIGSTOP)
    try:
        os.kill(pid, signal.SIGCONT)
    except OSError:
        pass


def _stopped(pid: int) -> bool:
    """Whether `pid` is stopped (/proc state T) or gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in "TtZX"
    except (OSError, IndexError):
        return True


def _foreground() -> bool:
    """Whether this process's group is the terminal's foreground group (True without a terminal)."""
    try:
        return os.tcgetpgrp(0) == os.getpgrp()
    except OSError:
        return True


def _has_message(data: bytes) -> bool:
    return len(data) >= HEADER.size and len(data) >= HEADER.size + HEADER.unpack(data[:HEADER.size])[0]


def _write_all(fd: int, data: bytes) -> None:
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    except OSError:
        pass


def start_server(folder: Path, key: str, environ: Mapping[str, str], delay_s: float = START_DELAY_S,
                 replacing: bool = False) -> None:
    """Start this user's warm TUI server for `key` in the background (a session of its own, cwd /,
    `python -P`, output to its log; it imports after `delay_s`); nothing when one is up or
    starting (it holds its lock), unless `replacing` one that is leaving (the new one waits for
    its lock)."""
    from workbench.engine.daemon.folder import lock_held

    import subprocess

    files = server_files(folder, key)
    if not replacing and lock_held(files["lock"]):
        return
    try:
        log = os.open(files["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
    except OSError:
        return
    try:
        subprocess.Popen([sys.executable, "-P", "-m", SERVER_MODULE, "--dir", str(folder), "--key", key,
                          "--start-delay-s", f"{delay_s:g}", "--package", package_folder()],
                         stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True, close_fds=True,
                         cwd="/", env=dict(environ))
    except OSError:
        pass
    finally:
        os.close(log)



def list_servers(folder: Path) -> list[dict]:
    """This user's live warm TUI processes in `folder` (the daemon folder, checked by the caller):
    each one's info file (pid, key, python, started, idle_timeout_s) with kind "tui" and state
    "idle" (it never runs anything itself). A dead one's files (its lock free) are skipped."""
    from workbench.engine.daemon.folder import lock_held

    found = []
    for lock in sorted(folder.glob("t-*.lock")):
        files = server_files(folder, lock.name[2:-5])
        if not lock_held(files["lock"]):
            continue
        found.append({**_read_info(files["json"]), "key": lock.name[2:-5], "kind": "tui", "state": "idle"})
    return found


def stop_servers(folder: Path) -> list[dict]:
    """Stop every warm TUI process of this user in `folder` (SIGTERM, then SIGKILL after
    STOP_WAIT_S; only to a pid verified to be one: `server_pid_verified`) and wait until each is
    gone; what each info file said. The TUIs it started run on."""
    from workbench.engine.daemon.folder import lock_held

    stopped = []
    for info in list_servers(folder):
        files = server_files(folder, str(info.get("key")))
        pid = info.get("pid")
        for signum in (signal.SIGTERM, signal.SIGKILL):
            if not isinstance(pid, int) or not server_pid_verified(pid, folder):
                break
            os.kill(pid, signum)
            deadline = time.monotonic() + STOP_WAIT_S
            while lock_held(files["lock"]) and time.monotonic() < deadline:
                time.sleep(0.02)
            if not lock_held(files["lock"]):
                break
        stopped.append(info)
    return stopped


def server_pid_verified(pid: object, folder: Path) -> bool:
    """Whether `pid` is a live warm TUI process of this user's serving `folder` (/proc: real uid,
    and the command line `python -P -m workbench.cli.tui_server --dir FOLDER`), not one of the TUIs
    it forked (they carry its command line too, but not its lock: `--key` is checked against the
    info file by the caller through the lock). Only such a pid is ever signalled."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 1:
        return False
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        argv = [a.decode(errors="replace") for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")]
    except OSError:
        return False
    uids = next((line.split()[1:] for line in status.splitlines() if line.startswith("Uid:")), [])
    ppid = next((line.split()[1] for line in status.splitlines() if line.startswith("PPid:")), "")
    if not uids or int(uids[0]) != os.getuid():
        return False
    try:
        at = argv.index(SERVER_MODULE)
        given = argv[argv.index("--dir", at) + 1]
    except (ValueError, IndexError):
        return False
    if argv[at - 1] != "-m" or os.path.realpath(given) != os.path.realpath(folder):
        return False
    return not _is_server_child(ppid, folder)


def _is_server_child(ppid: str, folder: Path) -> bool:
    """Whether the parent `ppid` is itself a warm TUI process (then the pid is a TUI it forked)."""
    try:
        argv = Path(f"/proc/{int(ppid)}/cmdline").read_bytes().split(b"\0")
    except (OSError, ValueError):
        return False
    return SERVER_MODULE.encode() in argv


def _read_info(path: Path) -> dict:
    from workbench.engine.daemon.paths import read_private

    try:
        data = json.loads(read_private(path, 1 << 16))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
