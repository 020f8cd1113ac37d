"""The TUI's first frame and its mid-run key latency, measured as a person sees them: in a real
terminal (tmux), reading the screen with `tmux capture-pane` (issue 39 item 3).

    python benchmarks/tui_tmux_latency.py [--runs 5] [--presses 12] [--session default-cpu]
        [--size 200x50] [--python .venv/bin/python] [--out DIR] [--skip-keys] [--no-compile] [--split]
        [--no-earlier]

first frame: `tmux new-session` running `python -m workbench SESSION` -> the first capture whose
screen shows the footer (the line with "Run" and "Quit": the app has painted its layout), polled
every POLL_S; the median (and every run) of --runs starts. key latency: the session's first run
is started (r) and, once the run streams (the status bar names a row), the pane keys 2 and 1
alternate; each is timed from `tmux send-keys` until the captured screen shows the new pane
(the Profile pane's or the Timing pane's own text), polled every POLL_S (a capture takes ~2-5 ms:
the figure includes up to one poll of lag). --split starts the key-latency app through
benchmarks/tui_key_split.py and splits each press (key_split, and the medians key_to_app_median_ms,
key_app_wall_median_ms, key_app_cpu_median_ms, key_to_screen_median_ms): send-keys -> the app takes
the key; the app's wall and main-thread CPU time until it has handed its next frame to the
terminal; that frame -> the capture that shows it; each press's `slices` list the main thread's event-loop
pieces of 2 ms or more around it (tui_key_split.press_slices: what ran, wall and CPU ms). The
split's app runs in its own process (WORKBENCH_DAEMON=0). On a loaded box the app's wall time is its CPU
time plus the time it waited for a core. Prints one JSON line (and writes it to
OUT/tui_tmux_latency.json with the last screens when --out is given).

The starts counted are a returning user's: one start before them is left running until its ops
have loaded (the screen no longer says "loading ops…"), as a user's earlier session, so the
caches a start writes for the next (the app's parsed CSS, screens/css_cache.py; the manifests)
are there, and the warm TUI process it starts (workbench/cli/tui_server.py) is up: the script
waits for its socket (`warm_tui_ready_s` after the earlier start's first frame; `warm_tui_up`).
Its first frame is reported on its own (`earlier_start_first_frame_s`), not in the median. The
counted starts are the default command's (served by the warm TUI process); as many again run in
their own process (`WORKBENCH_DAEMON=0`: `first_frame_no_daemon_s` and its median; --runs-no-daemon).
--keys-no-daemon presses the keys again on an app in its own process (`key_no_daemon_*`: the
warm process's share). --no-earlier leaves the earlier start out. The warm processes live in a folder of the script's
(WORKBENCH_DAEMON_DIR) and are stopped at its end.

Before the first start the bytecode is written (`compileall` on workbench and its screens folder,
and on the front end's packages: textual, rich, plotext, ...), as a pip install does: a checkout run under
PYTHONDONTWRITEBYTECODE=1 (these machines) compiled every module of the app on every start
(~80 ms of CPU on the 2-core box), which no installed user pays. --no-compile leaves it out.

Needs tmux on PATH and textual installed in --python's environment; says so and exits 2
otherwise. The TUI's autosave goes to a temporary XDG_DATA_HOME, never the user's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
POLL_S = 0.005
FIRST_FRAME_TIMEOUT_S = 60.0
KEY_TIMEOUT_S = 10.0
# what each pane shows on screen that no other does (plain text of a capture)
PANE_TEXT = {"1": ("timing", ("spread",)), "2": ("profile", ("device µs", "no profile yet"))}
STREAMING_TEXT = ("1/", "2/", "3/", "4/")  # the status bar while a run is timing row k of n


def _capture(target: str) -> str:
    return subprocess.run(["tmux", "capture-pane", "-p", "-t", target], capture_output=True, text=True).stdout


def _footer_shown(screen: str) -> bool:
    lines = [line for line in screen.splitlines() if line.strip()]
    return bool(lines) and "Run" in lines[-1] and "Quit" in lines[-1]


ENTRY = "-m workbench"  # --entry: what follows the python (an A/B's other tree: a launcher script)


DAEMONS: Path | None = None  # WORKBENCH_DAEMON_DIR of every start (main sets it)
WARM_TUI_TIMEOUT_S = 60.0


def _start(target: str, python: str, session: str, size: tuple[int, int], data: Path, split_log: Path | None = None,
           in_process: bool = False) -> float:
    entry = ENTRY if split_log is None else f"'{ROOT / 'benchmarks' / 'tui_key_split.py'}'"
    split = "" if split_log is None else f"WB_KEY_SPLIT_LOG='{split_log}' "
    daemons = "" if DAEMONS is None else f"WORKBENCH_DAEMON_DIR='{DAEMONS}' "
    # the split's app is in its own process: one the warm TUI process forks has no timing wrappers
    no_daemon = "WORKBENCH_DAEMON=0 " if in_process or split_log is not None else ""
    env_cmd = f"cd '{ROOT}' && XDG_DATA_HOME='{data}' {daemons}{no_daemon}{split}exec '{python}' {entry} {session}"
    subprocess.run(["tmux", "kill-session", "-t", target], capture_output=True)
    t0 = time.monotonic()
    subprocess.run(["tmux", "new-session", "-d", "-s", target, "-x", str(size[0]), "-y", str(size[1]), env_cmd],
                   check=True)
    return t0


def first_frame(target: str, python: str, session: str, size: tuple[int, int], data: Path,
                split_log: Path | None = None, in_process: bool = False) -> tuple[float, str]:
    """Seconds from tmux starting the app until the screen shows its footer; and that screen.
    split_log: the app started through benchmarks/tui_key_split.py, logging there (--split);
    in_process: with WORKBENCH_DAEMON=0 (no warm TUI process)."""
    t0 = _start(target, python, session, size, data, split_log, in_process)
    deadline = t0 + FIRST_FRAME_TIMEOUT_S
    while time.monotonic() < deadline:
        screen = _capture(target)
        if _footer_shown(screen):
            return time.monotonic() - t0, screen
        time.sleep(POLL_S)
    raise TimeoutError(f"no first frame in {FIRST_FRAME_TIMEOUT_S} s; the screen:\n{_capture(target)}")


def earlier_start(target: str, python: str, session: str, size: tuple[int, int], data: Path,
                  timeout_s: float = 60.0) -> float:
    """A start left running until its ops have loaded (a user's earlier session: what it
    writes for the next start is there); its first frame's seconds."""
    seconds, _ = first_frame(target, python, session, size, data)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and "loading ops" in _capture(target):
        time.sleep(0.05)
    time.sleep(1.0)  # the frame after the load (the app writes its parsed CSS then)
    subprocess.run(["tmux", "kill-session", "-t", target], capture_output=True)
    time.sleep(0.3)
    return round(seconds, 3)


def wait_warm_tui(folder: Path, timeout_s: float = WARM_TUI_TIMEOUT_S) -> float | None:
    """Seconds until a warm TUI process listens in `folder` (its t-*.sock), None after timeout_s."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        if any(folder.glob("t-*.sock")):
            return round(time.monotonic() - t0, 3)
        time.sleep(0.05)
    return None


def stop_warm_tuis(folder: Path) -> list[int]:
    """SIGTERM to every warm TUI process whose info file is in `folder` (the script's own); their pids."""
    pids = []
    for info in folder.glob("t-*.json"):
        try:
            pid = int(json.loads(info.read_text())["pid"])
            os.kill(pid, 15)
            pids.append(pid)
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return pids


def _shows(screen: str, key: str) -> bool:
    """Whether the screen shows the pane of `key`: its text there, the other pane's not."""
    _, words = PANE_TEXT[key]
    other = PANE_TEXT["1" if key == "2" else "2"][1]
    body = "\n".join(screen.splitlines()[2:-2])  # not the title, tab and footer lines
    return any(w in body for w in words) and not any(w in body for w in other)


def key_latency(target: str, presses: int, run_wait_s: float, times: list | None = None
                ) -> tuple[list[float], bool, str]:
    """ms per pane key (2 and 1 in turn) while the run streams; whether it still streamed at the end.
    times, when given, gets each press's (sent, seen) in time.monotonic s."""
    subprocess.run(["tmux", "send-keys", "-t", target, "r"], check=True)
    deadline = time.monotonic() + run_wait_s
    while time.monotonic() < deadline:  # the status bar names a row being timed: the run streams
        if any(mark in _capture(target) for mark in STREAMING_TEXT):
            break
        time.sleep(0.1)
    time.sleep(1.0)
    latencies, screen = [], ""
    for index in range(presses):
        key = "2" if index % 2 == 0 else "1"
        t0 = time.monotonic()
        subprocess.run(["tmux", "send-keys", "-t", target, key], check=True)
        while True:
            screen = _capture(target)
            if _shows(screen, key):
                break
            if time.monotonic() - t0 > KEY_TIMEOUT_S:
                raise TimeoutError(f"key {key} not answered in {KEY_TIMEOUT_S} s; the screen:\n{screen}")
            time.sleep(POLL_S / 5)
        seen = time.monotonic()
        latencies.append((seen - t0) * 1e3)
        if times is not None:
            times.append((t0, seen))
        time.sleep(0.3)
    streaming = "done:" not in screen and "cancelled:" not in screen
    return latencies, streaming, screen


def _split(log: Path, times: list) -> dict:
    """--split's figures: per press (tui_key_split.press_split) and the medians of each part."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from tui_key_split import press_slices, press_split, read, read_slices

    rows, slices = read(log), read_slices(log)
    presses = [press_split(rows, t0, seen) for t0, seen in times]
    for press, (t0, seen) in zip(presses, times):
        if press is not None:
            press["slices"] = press_slices(slices, t0, seen)
    found = [p for p in presses if p is not None]
    medians = {f"key_{name[:-3]}_median_ms": round(statistics.median(p[name] for p in found), 1)
               for name in ("to_app_ms", "app_wall_ms", "app_cpu_ms", "to_screen_ms")} if found else {}
    return {"key_split": presses, **medians}


def compile_package(python: str) -> bool:
    """Write the bytecode of workbench's folders and the front end's packages (as a pip install
    does; benchmarks/bytecode.py); whether it worked (a package not installed is left out)."""
    if str(ROOT) not in sys.path:  # run as a script: `benchmarks` as a package
        sys.path.insert(0, str(ROOT))
    from benchmarks.bytecode import FRONT_END_PACKAGES, write_bytecode

    return bool(write_bytecode(python, FRONT_END_PACKAGES).get("ok"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="app starts for the first-frame median")
    parser.add_argument("--runs-no-daemon", type=int, default=None,
                        help="starts with WORKBENCH_DAEMON=0 for their own median (default: --runs)")
    parser.add_argument("--presses", type=int, default=12, help="pane keys pressed mid-run (>= 10 for the figure)")
    parser.add_argument("--session", default="default-cpu", help="session for the key latency (a name or path)")
    parser.add_argument("--first-session", default="", help="session for the first frame (default: as --session)")
    parser.add_argument("--size", default="200x50")
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--run-wait", type=float, default=120.0, help="s to wait for the run to stream")
    parser.add_argument("--skip-keys", action="store_true")
    parser.add_argument("--keys-no-daemon", action="store_true",
                        help="then the same presses on an app in its own process (WORKBENCH_DAEMON=0): key_no_daemon_*")
    parser.add_argument("--no-compile", action="store_true", help="do not write the package's bytecode first")
    parser.add_argument("--no-earlier", action="store_true",
                        help="no earlier start left running until its ops load before the counted starts")
    parser.add_argument("--entry", default=ENTRY, help="what python runs (default: -m workbench; an A/B of another screens/: benchmarks/launch_screens.py DIR)")
    parser.add_argument("--split", action="store_true",
                        help="start the key-latency app through benchmarks/tui_key_split.py and split each press: "
                             "send-keys -> the app takes the key, the app's wall and CPU ms to its frame, -> the screen")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    globals()["ENTRY"] = args.entry
    if shutil.which("tmux") is None:
        print("tui_tmux_latency: tmux is not on PATH (install it: apt-get install tmux)", file=sys.stderr)
        return 2
    probe = subprocess.run([args.python, "-c", "import textual, textual_plotext"], capture_output=True, text=True)
    if probe.returncode != 0:
        print(f"tui_tmux_latency: textual is missing in {args.python}: {probe.stderr.strip().splitlines()[-1:]}"
              " (install the textual wheels first)", file=sys.stderr)
        return 2
    width, _, height = args.size.partition("x")
    size = (int(width), int(height))
    target = f"wbtmux{os.getpid()}"
    data = Path(tempfile.mkdtemp(prefix="wb-tmux-"))
    globals()["DAEMONS"] = daemons = Path(tempfile.mkdtemp(prefix="wbd"))
    result: dict = {"size": args.size, "session": args.session, "poll_ms": POLL_S * 1e3,
                    "bytecode_written": False if args.no_compile else compile_package(args.python)}
    try:
        frames, screens = [], {}
        if not args.no_earlier:
            result["earlier_start_first_frame_s"] = earlier_start(target, args.python, args.first_session or args.session,
                                                                  size, data)
        ready = wait_warm_tui(daemons)
        result.update(warm_tui_up=ready is not None, warm_tui_ready_s=ready)
        for _ in range(args.runs):
            seconds, screens["first_frame"] = first_frame(target, args.python, args.first_session or args.session,
                                                          size, data)
            frames.append(round(seconds, 3))
            subprocess.run(["tmux", "kill-session", "-t", target], capture_output=True)
            time.sleep(0.3)
        result.update(first_frame_s=frames, first_frame_median_s=statistics.median(frames))
        alone = []
        for _ in range(args.runs if args.runs_no_daemon is None else args.runs_no_daemon):
            seconds, screens["first_frame_no_daemon"] = first_frame(
                target, args.python, args.first_session or args.session, size, data, in_process=True)
            alone.append(round(seconds, 3))
            subprocess.run(["tmux", "kill-session", "-t", target], capture_output=True)
            time.sleep(0.3)
        if alone:
            result.update(first_frame_no_daemon_s=alone, first_frame_no_daemon_median_s=statistics.median(alone))
        if not args.skip_keys:
            split_log = data / "key-split.log" if args.split else None
            first_frame(target, args.python, args.session, size, data, split_log)
            time.sleep(2.0)  # the session open (ops read after the first frame)
            times: list = []
            keys, streaming, screens["last_key"] = key_latency(target, args.presses, args.run_wait, times)
            result.update(key_ms=[round(k, 1) for k in keys], key_median_ms=round(statistics.median(keys), 1),
                          key_max_ms=round(max(keys), 1), run_still_streaming=streaming)
            if split_log is not None:
                result.update(_split(split_log, times))
            if args.keys_no_daemon:  # the same presses on an app started in its own process (A/B of the warm process)
                subprocess.run(["tmux", "kill-session", "-t", target], capture_output=True)
                time.sleep(1.0)
                first_frame(target, args.python, args.session, size, data, in_process=True)
                time.sleep(2.0)
                keys, _, screens["last_key_no_daemon"] = key_latency(target, args.presses, args.run_wait)
                result.update(key_no_daemon_ms=[round(k, 1) for k in keys],
                              key_no_daemon_median_ms=round(statistics.median(keys), 1),
                              key_no_daemon_max_ms=round(max(keys), 1))
    finally:
        subprocess.run(["tmux", "kill-session", "-t", target], capture_output=True)
        result["warm_tui_stopped"] = stop_warm_tuis(daemons)
        shutil.rmtree(data, ignore_errors=True)
        time.sleep(0.5)
        shutil.rmtree(daemons, ignore_errors=True)
    print(json.dumps(result))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "tui_tmux_latency.json").write_text(json.dumps(result, indent=1) + "\n")
        for name, screen in screens.items():
            (args.out / f"tmux-{name}.txt").write_text(screen)
    return 0


if __name__ == "__main__":
    sys.exit(main())
