"""The wheel job's check of the TUI's warm process (docs/engine.md, "The TUI's warm process"),
from the installed wheel: `workbench default-cpu` on a pseudo-terminal twice; the first start
runs in its own process and leaves the warm process, the second is forked by it; each shows its
first frame and quits with exit 0 on `q`.

    python .ci/tui_warm_check.py        (with the wheel's python; WORKBENCH_DAEMON_DIR: a private folder)
"""

from __future__ import annotations

import fcntl
import os
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

WORKBENCH = str(Path(sys.executable).with_name("workbench"))


def start_on_a_terminal(env: dict) -> tuple[subprocess.Popen, int]:
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 140, 0, 0))
    proc = subprocess.Popen([WORKBENCH, "default-cpu"], stdin=slave, stdout=slave, stderr=slave, env=env,
                            start_new_session=True, preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0))
    os.close(slave)
    return proc, master


def until(master: int, needle: bytes, timeout_s: float) -> None:
    data, deadline = b"", time.monotonic() + timeout_s
    while needle not in data:
        if time.monotonic() > deadline:
            sys.exit(f"tui warm check: {needle!r} not seen in {timeout_s} s; last output {data[-400:]!r}")
        if select.select([master], [], [], 0.1)[0]:
            data += os.read(master, 1 << 16)


def drain_until_exit(proc: subprocess.Popen, master: int, timeout_s: float) -> int:
    """The exit code, the terminal read meanwhile (a TUI whose output nobody reads blocks)."""
    deadline = time.monotonic() + timeout_s
    while proc.poll() is None:
        if time.monotonic() > deadline:
            proc.kill()
            sys.exit(f"tui warm check: no exit {timeout_s} s after q")
        if select.select([master], [], [], 0.1)[0]:
            try:
                os.read(master, 1 << 16)
            except OSError:
                pass
    return proc.returncode


def tui_parent(client: subprocess.Popen) -> str:
    """The command line of the parent of the process that draws the TUI (the client itself, or a
    child of the warm server)."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and entry.name != str(client.pid):
            try:
                if os.readlink(entry / "fd/1") == os.readlink(f"/proc/{client.pid}/fd/1"):
                    ppid = (entry / "stat").read_text().rsplit(")", 1)[1].split()[1]
                    return Path(f"/proc/{ppid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
    return "(the client itself)"


def main() -> int:
    folder = Path(os.environ["WORKBENCH_DAEMON_DIR"])
    env = {k: v for k, v in os.environ.items() if k not in ("WORKBENCH_DAEMON", "COLUMNS", "LINES")}
    env["TERM"] = "xterm-256color"
    for start in ("first", "second"):
        proc, master = start_on_a_terminal(env)
        until(master, b"Quit", 90)
        where = tui_parent(proc)
        print(f"tui warm check: {start} start drawn, by a process whose parent is {where[:90]}")
        if start == "second" and "workbench.cli.tui_server" not in where:
            sys.exit("tui warm check: the second start was not forked by the warm TUI process")
        os.write(master, b"q")
        code = drain_until_exit(proc, master, 30)
        os.close(master)
        if code != 0:
            sys.exit(f"tui warm check: the {start} start exited {code}")
        if start == "first":
            deadline = time.monotonic() + 60
            while not list(folder.glob("t-*.sock")):
                if time.monotonic() > deadline:
                    sys.exit("tui warm check: the first start left no warm TUI process")
                time.sleep(0.1)
    print("tui warm check: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
