"""A host sleep of a known length, to calibrate the timer and the profiler (the lecture's
section 1.3 profiles a 50 ms `time.sleep` before any kernel).

    sentinel -> sentinel, after sleeping sleep_ms milliseconds on the host

No device work: zero bytes and zero FLOPs. A timer must report ~sleep_ms; a profiler must show
no kernels. The check is only that the call returned: it returns its input sentinel, and the
reference returns the same. dtype is the sentinel's (any of the three); its value is seeded, so
the check's second input set differs from the first.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import ClassVar

import torch

from workbench.cost import Cost
from workbench.dtypes import DType
from workbench.check.chunks import CheckChunks
from workbench.check.inputs import seeded_normal
from workbench.registry import BuildContext, Op
from workbench.spec import Spec


# -- spec ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SleepSpec(Spec):
    """Sleep sleep_ms milliseconds (0 allowed: the bare call overhead)."""

    NON_NEGATIVE: ClassVar[frozenset[str]] = frozenset({"sleep_ms"})

    sleep_ms: int = 50
    dtype: DType = DType.float32

    @property
    def label(self) -> str:
        return f"{self.sleep_ms} ms"


SLEEP = Op(
    "sleep", SleepSpec,
    description="Host sleep of sleep_ms (calibrates timing and profiling)",
    test_specs=[{"sleep_ms": 0}, {"sleep_ms": 2}],
    check_chunks=CheckChunks.flat(0),
)


# -- inputs and reference --------------------------------------------------------------------
@SLEEP.inputs
def make_inputs(spec: SleepSpec, device: str, seed: int, out=None) -> tuple[torch.Tensor]:
    """A one-element seeded sentinel on the device (out: refill that tensor)."""
    return (seeded_normal((1,), spec.dtype.torch, device, seed, 0, out=out[0] if out else None),)


@SLEEP.reference()
def reference(sentinel: torch.Tensor) -> torch.Tensor:
    """The sentinel itself: the check passes once the call has returned it."""
    return sentinel


# -- cost model ------------------------------------------------------------------------------
@SLEEP.cost_model
def cost(spec: SleepSpec) -> Cost:
    return Cost(
        bytes_read=0,      # no device memory is touched
        bytes_written=0,
        flops=0,
    )


# -- implementation --------------------------------------------------------------------------
@SLEEP.impl("manual")
def build_manual(spec: SleepSpec, params, ctx: BuildContext):
    """time.sleep(sleep_ms / 1000) on the host; returns the sentinel."""
    seconds = spec.sleep_ms / 1000.0

    def run(sentinel: torch.Tensor) -> torch.Tensor:
        time.sleep(seconds)
        return sentinel
    return run
