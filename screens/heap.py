"""Python's cyclic garbage collector kept out of key presses.

A full (generation 2) collection walks every tracked object: in a TUI mid-run that is ~145,000
objects (Textual's widgets, styles and caches, the results) and took 55-75 ms on the 2-core CPU,
landing on whichever key press allocated at the wrong moment (the 190-290 ms outliers of the
key-latency measure, benchmarks/key_latency_cpu.py). `settle()` collects once and then freezes
what survived (gc.freeze, Python 3.7+: frozen objects move to a permanent generation no
collection walks), so later collections see only what was made since. It is called where a
pause is not felt: after the catalog has loaded and after a run has ended and been drawn.

Frozen objects are still freed by reference counting; only a reference cycle among them that
dies later is kept until the next `settle()`, which unfreezes, collects and freezes again.
"""

from __future__ import annotations

import gc
import time


def settle() -> float:
    """Collect everything (the frozen generation included), freeze the survivors; returns the
    seconds it took."""
    start = time.perf_counter()
    gc.unfreeze()
    gc.collect()
    gc.freeze()
    return time.perf_counter() - start
