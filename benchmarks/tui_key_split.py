"""The `workbench` command with the TUI's key handling timed from inside: a launcher that
`benchmarks/tui_tmux_latency.py --split` starts instead of `python -m workbench`.

    WB_KEY_SPLIT_LOG=FILE python benchmarks/tui_key_split.py [workbench arguments]

Appends one line per event to FILE: `key MONOTONIC THREAD_TIME` when the app's main thread
takes a Key event, `frame MONOTONIC THREAD_TIME` when it has handed a frame to the terminal
(App._display returned). time.monotonic is CLOCK_MONOTONIC, shared with the measuring process;
time.thread_time is the main thread's CPU time. So each pane key splits into: tmux send-keys ->
the app takes the key; the app's wall and CPU time until the frame; the frame -> the screen
capture that shows it. Benchmark only: Textual's App methods are wrapped in this process.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

LOG_ENV = "WB_KEY_SPLIT_LOG"


def install(path: str) -> None:
    from textual import events
    from textual.app import App

    log = open(path, "a", buffering=1)  # noqa: SIM115 - open for the process's life
    on_event, display = App.on_event, App._display

    async def timed_event(self, event):
        if isinstance(event, events.Key):
            log.write(f"key {time.monotonic():.6f} {time.thread_time():.6f}\n")
        return await on_event(self, event)

    def timed_display(self, screen, renderable):
        result = display(self, screen, renderable)
        if renderable is not None:
            log.write(f"frame {time.monotonic():.6f} {time.thread_time():.6f}\n")
        return result

    App.on_event, App._display = timed_event, timed_display


def read(path: Path) -> list[tuple[str, float, float]]:
    """The log's (kind, monotonic s, thread CPU s) lines."""
    rows = []
    for line in path.read_text().splitlines() if path.exists() else ():
        kind, wall, cpu = line.split()
        rows.append((kind, float(wall), float(cpu)))
    return rows


def press_split(rows: list[tuple[str, float, float]], t0: float, seen: float) -> dict | None:
    """For a key sent at t0 and seen on screen at `seen`: ms from t0 to the app taking it
    (to_app_ms), the app's wall and main-thread CPU ms from taking it to the first frame after it
    (app_wall_ms, app_cpu_ms), and ms from that frame to the capture (to_screen_ms); None when
    the log has no such key and frame."""
    key = next((r for r in rows if r[0] == "key" and t0 <= r[1] <= seen), None)
    frame = next((r for r in rows if key and r[0] == "frame" and key[1] <= r[1] <= seen), None)
    if key is None or frame is None:
        return None
    return {"to_app_ms": round((key[1] - t0) * 1e3, 1), "app_wall_ms": round((frame[1] - key[1]) * 1e3, 1),
            "app_cpu_ms": round((frame[2] - key[2]) * 1e3, 1), "to_screen_ms": round((seen - frame[1]) * 1e3, 1)}


if __name__ == "__main__":  # (not when multiprocessing's spawn imports this file as __mp_main__)
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the checkout's workbench
    if os.environ.get(LOG_ENV):
        install(os.environ[LOG_ENV])
    from workbench.cli.main import main

    sys.exit(main())
