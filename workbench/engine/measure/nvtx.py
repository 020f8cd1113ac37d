"""NVTX ranges named after the row, so that Nsight Systems and Nsight Compute can pick out a row and
its phase (`ncu --nvtx --nvtx-include "run0-triton/"`, `nsys profile --trace cuda,nvtx`).

Each row is one push/pop range named `row_range(row)` (`run<i>-<label>[-<sweep value>]`, no `/`,
which ncu's filter syntax reads as nesting), with its phases nested inside: build, check, warm-up,
timed, profile, counters. The timed range is pushed before the first sample's start event and
popped after the last sample's stop event (engine/timing.measure_run): never inside a sample, so
the samples time the same calls with and without ranges (the GPU stage `handoffs` measures it).
On a CPU device, or where torch has no NVTX, a range is nothing.
"""

from __future__ import annotations

import contextlib
import re
from typing import Iterator

PHASES = ("build", "check", "warm-up", "timed", "profile", "counters")


def row_range(row_key: tuple) -> str:
    """`run<i>-<label>[-<sweep value>]`, characters outside [A-Za-z0-9_.=-] as `_`."""
    run_index, label, sweep_value = row_key
    text = f"run{run_index}-{label}" + ("" if sweep_value is None else f"-{sweep_value}")
    return re.sub(r"[^A-Za-z0-9_.=-]", "_", text)


@contextlib.contextmanager
def nvtx_range(name: str, enabled: bool) -> Iterator[None]:
    """A push/pop NVTX range around the block when `enabled` (a CUDA device); else nothing."""
    pushed = False
    if enabled:
        try:
            import torch

            torch.cuda.nvtx.range_push(name)
            pushed = True
        except (RuntimeError, AttributeError):  # a torch built without NVTX: ranges are a nicety
            pushed = False
    try:
        yield
    finally:
        if pushed:
            import torch

            torch.cuda.nvtx.range_pop()
