"""Python's cyclic garbage collector kept out of key presses.

A full (generation 2) collection walks every tracked object: in a TUI mid-run that is ~145,000
objects (Textual's widgets, styles and caches, the results) and took 55-75 ms on the 2-core CPU,
landing on whichever key press allocated at the wrong moment (the 190-290 ms outliers of the
key-latency measure, benchmarks/key_latency_cpu.py); with those frozen, the younger collections
during a run still cost the H200's presses that met one 25-35 ms.

So while the app runs, collections happen only here, between frames, never inside a key press
(Textual pauses the collector the same way during smooth scrolls, App.PAUSE_GC_ON_SCROLL):
- `pause()` at app start turns automatic collection off (`resume()` at exit turns it back on;
  the CLI turned it off before importing the app: workbench/cli/main.run_tui);
- `tick()`, on the app's 0.2 s redraw timer, collects the two young generations at most every
  TICK_EVERY_S and freezes what is left (gc.freeze: a permanent generation no collection
  walks), so each tick sees only what was made since the last: a pause that grows with the time
  since the last tick (once a second mid-run it was 23-102 ms, and a key press that met one
  waited for it; on every redraw tick they are 0.5-24 ms, median 3);
- `settle()`, after the catalog has loaded, after each run has ended and been drawn, and every
  SETTLE_IDLE_S without a run, unfreezes, collects everything and freezes the survivors.
Frozen objects are still freed by reference counting; a reference cycle that dies after it was
frozen is freed by the next `settle()`.
"""

from __future__ import annotations

import gc
import time

TICK_EVERY_S = 0.15  # every tick of the 0.2 s redraw timer (a timer firing a little early included)
SETTLE_IDLE_S = 120.0
_last_tick = 0.0
_last_settle = 0.0


def pause() -> None:
    """Automatic collection off; the idle clock of `tick`'s settle starts now (from 0 it read
    every app start as idle since boot: a full collection, ~0.1 s with the whole start-up's
    objects to walk, on the first redraw tick, 0.2 s after the app mounted, when its first frame
    and its catalog's load were due)."""
    global _last_settle
    gc.disable()
    _last_settle = time.monotonic()


def resume() -> None:
    gc.unfreeze()
    gc.enable()


def settle() -> float:
    """Collect everything (the frozen generation included), freeze the survivors; returns the
    seconds it took."""
    global _last_settle
    start = time.perf_counter()
    gc.unfreeze()
    gc.collect()
    gc.freeze()
    _last_settle = time.monotonic()
    return time.perf_counter() - start


def tick(now: float | None = None, running: bool = True) -> str | None:
    """The collector's share of the redraw timer (now: time.monotonic()): a settle() when no run
    is streaming and the last was SETTLE_IDLE_S ago, else a young collection and freeze when the
    last was TICK_EVERY_S ago; returns which ran ("settle", "young") or None."""
    global _last_tick
    now = time.monotonic() if now is None else now
    if not running and now - _last_settle >= SETTLE_IDLE_S:
        settle()
        _last_tick = now
        return "settle"
    if now - _last_tick < TICK_EVERY_S:
        return None
    gc.collect(1)
    gc.freeze()
    _last_tick = now
    return "young"
