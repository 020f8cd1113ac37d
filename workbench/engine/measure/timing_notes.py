"""What a timing record says about how it was taken, beyond the loop's own fields (bench.py):
`timing.mode` ("eager" | "graph", engine/graph_mode.py) with a flag for graph replays, and
`timing.env`: the environment switches of the worker that change what a timing means
(MEASUREMENT.md rule 9), those that are set, name -> value (the diagnosis reads them:
CUDA_LAUNCH_BLOCKING makes every launch wait for its kernel).
"""

from __future__ import annotations

import os
from typing import Any, Mapping

from workbench.engine.measure.graph_mode import FLAG_FLUSHED, FLAG_WARM, timing_mode
from workbench.results.record import Record

SWITCHES = ("CUDA_LAUNCH_BLOCKING", "PYTORCH_NO_CUDA_MEMORY_CACHING", "TORCH_USE_CUDA_DSA",
            "CUDA_DEVICE_MAX_CONNECTIONS", "TORCHINDUCTOR_COMPILE_THREADS", "TRITON_INTERPRET")


def env_switches(environ: Mapping[str, str]) -> dict[str, str]:
    """The SWITCHES set in `environ`, name -> value."""
    return {name: environ[name] for name in SWITCHES if name in environ}


def note_timing(row: Any, record: Record, environ: Mapping[str, str] = os.environ) -> None:
    """Fill timing.mode and timing.env of a benched record; flag a graph replay."""
    timing = record.timing
    if timing is None:
        return
    timing.mode = timing_mode(row)
    timing.env = env_switches(environ)
    if timing.mode == "graph":
        record.flags.append(FLAG_FLUSHED if timing.flush_l2 else FLAG_WARM)
