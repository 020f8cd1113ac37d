"""`compiled`: torch.compile (Inductor), and its honesty watch (MEASUREMENT.md rule 8).

Runs wherever torch.compile runs; its kernels are the Triton kernels Inductor generates when the
builder runs (`INDUCTOR`: the PTX view collects them on a GPU).

Each row of a compiled implementation starts from `torch._dynamo.reset()`, so every new shape
compiles fresh inside build_ms and a sweep never reaches dynamo's recompile limit (after which
dynamo silently runs eager code). Dynamo's counters (`torch._dynamo.utils.counters`) are read
around the build and the rest of the row:

- no graph compiled during the build -> the row fell back to eager: status failed, never
  labelled compiled;
- graphs compiled after the build (during check, warm-up, timing) -> `recompiles` (>0 is
  also a Log warning: the timing may include compilation).
"""

from __future__ import annotations

from typing import Any

from workbench.backends.base import Backend
from workbench.events import Log
from workbench.kernel_source import INDUCTOR, InductorKernels

COMPILED = Backend("compiled", "torch.compile of the manual (or built-in) form, dynamic=False",
                   source_type=InductorKernels)


def _counters() -> Any:
    from torch._dynamo.utils import counters

    return counters


def compiled_graphs() -> int:
    """Graphs dynamo has compiled in this process since the last reset of the counters."""
    return int(_counters()["stats"]["unique_graphs"])


def eager_frames() -> int:
    """Frames dynamo gave up on (ran eagerly) so far."""
    frames = _counters()["frames"]
    return int(frames["total"]) - int(frames["ok"])


class CompileWatch:
    """start() before the build, after_build() after the first call, finish(row, record, channel)."""

    def __init__(self) -> None:
        self.base = self.after = 0

    def start(self) -> None:
        import torch._dynamo

        torch._dynamo.reset()
        self.base = compiled_graphs()

    def after_build(self) -> None:
        self.after = compiled_graphs()

    @property
    def build_graphs(self) -> int:
        return self.after - self.base

    def finish(self, row: Any, record: dict, channel: Any) -> None:
        record["recompiles"] = compiled_graphs() - self.after
        if record["recompiles"]:
            channel.event(Log(row.key, f"torch.compile recompiled {record['recompiles']} time(s) after the "
                                       "build (timing may include compilation)", "warning"))
        if self.build_graphs == 0 and record["status"] in (None, "ok"):
            record["status"] = "failed"
            record["error"] = ("torch.compile compiled no graph: the row ran eager code and is not "
                               "labelled compiled (recompile limit or a graph break)")


@COMPILED.source
def _inductor(impl, spec, params, ctx):
    return INDUCTOR


@COMPILED.watcher
def _watch() -> CompileWatch:
    return CompileWatch()
