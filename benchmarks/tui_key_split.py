"""The `workbench` command with the TUI's key handling timed from inside: a launcher that
`benchmarks/tui_tmux_latency.py --split` starts instead of `python -m workbench`.

    WB_KEY_SPLIT_LOG=FILE python benchmarks/tui_key_split.py [workbench arguments]

Appends one line per event to FILE: `key MONOTONIC THREAD_TIME` when the app's main thread
takes a Key event, `frame MONOTONIC THREAD_TIME` when it has handed a frame to the terminal
(App._display returned). time.monotonic is CLOCK_MONOTONIC, shared with the measuring process;
time.thread_time is the main thread's CPU time. So each pane key splits into: tmux send-keys ->
the app takes the key; the app's wall and CPU time until the frame; the frame -> the screen
capture that shows it.

It also writes `slice MONOTONIC WALL CPU WHAT` for every piece of the main thread's event loop
(one asyncio callback: a message pump's step, a timer) that took SLICE_MIN_S or more: its start,
its wall and main-thread CPU seconds, and what ran in it, with their ms: the top-level messages
dispatched (`Pump:Message`), the timer callbacks (`timer:NAME`) and call_next's (`next:NAME`,
set_timer's and set_interval's among them). A press whose key waited (to_app) or whose frame
took long shows here what the main thread was doing; where wall exceeds CPU, the thread waited
for a core or for the interpreter lock (the run's thread, the chart builder's). Benchmark only:
Textual's and asyncio's methods are wrapped in this process.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

LOG_ENV = "WB_KEY_SPLIT_LOG"
SLICE_MIN_S = 0.002  # event-loop slices this long or longer are logged


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
    _install_slices(log)


def _install_slices(log) -> None:
    """`slice` lines: asyncio.Handle._run (each event-loop callback on the main thread), with
    MessagePump._dispatch_message (top level only) and textual's Timer._tick naming its parts."""
    import asyncio.events
    import threading

    from textual.message_pump import MessagePump
    from textual.timer import Timer

    main = threading.main_thread()
    parts: list = []  # (what, ms) of the slice running now
    depth = [0]
    run, dispatch, tick = asyncio.events.Handle._run, MessagePump._dispatch_message, Timer._tick
    flush = MessagePump._flush_next_callbacks

    def timed_run(self):
        if threading.current_thread() is not main:
            return run(self)
        parts.clear()
        wall, cpu = time.monotonic(), time.thread_time()
        try:
            return run(self)
        finally:
            took = time.monotonic() - wall
            if took >= SLICE_MIN_S:
                what = ",".join(f"{name}={ms:.1f}" for name, ms in sorted(parts, key=lambda p: -p[1])[:4]) or "-"
                log.write(f"slice {wall:.6f} {took:.6f} {time.thread_time() - cpu:.6f} {what}\n")

    async def timed_dispatch(self, message):
        if depth[0] or threading.current_thread() is not main:
            return await dispatch(self, message)
        depth[0] += 1
        start = time.monotonic()
        try:
            return await dispatch(self, message)
        finally:
            depth[0] -= 1
            parts.append((f"{type(self).__name__}:{type(message).__name__}", (time.monotonic() - start) * 1e3))

    async def timed_tick(self, *args, **kwargs):
        start = time.monotonic()
        try:
            return await tick(self, *args, **kwargs)
        finally:
            parts.append((f"timer:{_name(self._callback)}", (time.monotonic() - start) * 1e3))

    async def timed_flush(self):  # call_next's callbacks (set_timer's and set_interval's among them)
        if depth[0] or threading.current_thread() is not main or not self._next_callbacks:
            return await flush(self)
        names = "+".join(_name(callback.callback) for callback in self._next_callbacks)
        start = time.monotonic()
        try:
            return await flush(self)
        finally:
            parts.append((f"next:{names}", (time.monotonic() - start) * 1e3))

    asyncio.events.Handle._run = timed_run
    MessagePump._dispatch_message = timed_dispatch
    Timer._tick = timed_tick
    MessagePump._flush_next_callbacks = timed_flush


def _name(callback) -> str:
    """A callback's qualified name, through functools.partial (set_timer wraps it in call_next)."""
    import functools

    if isinstance(callback, functools.partial):
        return _name(callback.args[0] if callback.args and callable(callback.args[0]) else callback.func)
    return getattr(callback, "__qualname__", type(callback).__name__)


def read(path: Path) -> list[tuple[str, float, float]]:
    """The log's key and frame lines: (kind, monotonic s, thread CPU s)."""
    rows = []
    for line in path.read_text().splitlines() if path.exists() else ():
        kind, wall, cpu, *_ = line.split()
        if kind in ("key", "frame"):
            rows.append((kind, float(wall), float(cpu)))
    return rows


def read_slices(path: Path) -> list[tuple[float, float, float, str]]:
    """The log's slice lines: (monotonic start s, wall s, CPU s, what ran)."""
    slices = []
    for line in path.read_text().splitlines() if path.exists() else ():
        kind, *rest = line.split(maxsplit=4)
        if kind == "slice" and len(rest) == 4:
            slices.append((float(rest[0]), float(rest[1]), float(rest[2]), rest[3]))
    return slices


def press_slices(slices: list[tuple[float, float, float, str]], t0: float, seen: float,
                 before_s: float = 0.05) -> list[list]:
    """The slices that overlap a press, from `before_s` before it was sent (t0) until it was seen:
    [start ms from t0, wall ms, CPU ms, what ran]."""
    return [[round((start - t0) * 1e3, 1), round(wall * 1e3, 1), round(cpu * 1e3, 1), what]
            for start, wall, cpu, what in slices if start + wall >= t0 - before_s and start <= seen]


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
