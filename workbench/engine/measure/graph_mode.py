"""The `graph` timing mode: any implementation's call captured once in a CUDA graph and replayed.

Engine-level, never per op: `wrap_for_mode(row, fn, inputs)` returns `fn` itself in "eager" mode
and a `GraphCall` in "graph" mode (the run's `timing_mode` setting, or a `<impl>+graph` row:
workbench/variants.py). The wrapped call then goes through the ordinary build -> check -> bench
path: the check runs on the graph's own output, the timing loop flushes L2 BEFORE each replay,
outside the graph and outside the timed window (MEASUREMENT.md rule 3), exactly as for eager
calls. What the replay removes is the host's work per kernel: Python, the dispatcher and one
launch per kernel become one cudaGraphLaunch (the lecture's launch-overhead lesson; PyTorch's
"CUDA Graphs" notes: https://pytorch.org/docs/stable/notes/cuda.html#cuda-graphs).

Capture follows torch.cuda.graphs' documented recipe: warm-up calls on a side stream, then one
call captured with `torch.cuda.graph`. A graph replays the tensors it captured: the inputs must be
the very tensors it was captured with (the engine's inputs are built once per row) and the output
is the captured one, rewritten by every replay. A callable that synchronises, allocates host
memory or branches on device values cannot be captured: the row fails with that reason.
"""

from __future__ import annotations

from typing import Any, Callable

from workbench.results.record import Flag
from workbench.tuning import tuned_record

WARMUP_CALLS = 3
FLAG_FLUSHED = Flag.GRAPH_REPLAY.format(detail="one call per graph launch, L2 flushed before each replay (outside the graph)")
FLAG_WARM = Flag.GRAPH_REPLAY.format(detail="one call per graph launch, L2-warm (flush_l2 false)")


def graph_reason(device: str) -> str | None:
    """Why graph mode cannot run on `device` (None: it can)."""
    if not device.startswith("cuda"):
        return f"CUDA graphs need a CUDA device (this row runs on {device})"
    return None


class GraphCall:
    """`fn(*inputs)` captured in one CUDA graph; calling it replays the graph and returns the
    captured output. Raises RuntimeError naming the capture failure."""

    def __init__(self, fn: Callable[..., Any], inputs: tuple, warmup_calls: int = WARMUP_CALLS):
        import torch

        self._fn, self._inputs, self._torch = fn, tuple(inputs), torch
        self.tuned = tuned_record(fn)  # an autotuned kernel's choice stays visible (tuning.TunedCallable)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up off the capture stream (torch.cuda.graphs' recipe)
            for _ in range(warmup_calls):
                fn(*inputs)
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(self.graph):
                self.output = fn(*inputs)
        except Exception as exc:
            first = str(exc).strip().splitlines()
            raise RuntimeError(f"CUDA graph capture failed: {type(exc).__name__}: "
                               f"{first[0] if first else ''}") from exc

    def __call__(self, *args: Any) -> Any:
        if len(args) != len(self._inputs) or any(a is not b for a, b in zip(args, self._inputs)):
            raise ValueError("a CUDA graph replays the tensors it captured; it was called with others")
        if self._torch.cuda.is_current_stream_capturing():
            # captured into an outer graph (engine/floor.py's device time): the kernels themselves,
            # since a graph launch cannot be captured into another graph
            return self._fn(*args)
        self.graph.replay()
        return self.output


def timing_mode(row: Any) -> str:
    """"graph" or "eager" for a row (its settings' timing_mode; older settings: eager)."""
    return getattr(row.settings, "timing_mode", "eager")


def wrap_for_mode(row: Any, fn: Callable[..., Any], inputs: tuple) -> Callable[..., Any]:
    """The callable the row builds, checks and times: `fn`, or its GraphCall in graph mode."""
    if timing_mode(row) != "graph":
        return fn
    reason = graph_reason(row.device)
    if reason:
        raise RuntimeError(reason)
    return GraphCall(fn, inputs)
