"""Test plugin (GPU): implementations that are right when checked but leave work on a stream the
timed stream never joins (MEASUREMENT.md rule 13, issue 38 class 5). Load beside
tests/plugins/known_wrong.py (benchmarks/stages/cheats.py). On a machine without CUDA the builders
raise when built, so the plugin still loads anywhere.

- gelu `manual_wrong_side`: the first half of the rows on the current stream, the second half on a
  side stream that waits for the current one but that the current one never waits for: the
  events time the first half only; a device-wide synchronize (the check's) sees all of it.
- gelu `manual_wrong_side90`: the sharper case: the first ~10% of the rows on the current stream,
  the other ~90% on a side stream the current one never waits for. The events time ~10% of the
  work (less what the two streams share); after the timed stream's end event a device-wide
  synchronize still waits for most of the side's 90%: the "streams" gate (engine/measure/timing.py
  unjoined_failure) fails the row.
- gelu `manual_side_joined` (honest): the same 10/90 split over two streams, joined properly (the
  current stream waits for the side stream before returning): the events time all the work, the
  row must stay `ok`.
"""

from __future__ import annotations

import torch

from workbench.registry import REGISTRY

GELU = REGISTRY.op("gelu")
MATH = GELU.get_impl("pytorch").math  # "tanh"


@GELU.impl("manual_wrong_side", math=MATH)
def build_side(spec, params, ctx):
    if not str(ctx.device).startswith("cuda"):
        raise RuntimeError("manual_wrong_side needs a CUDA device (a side stream)")
    side = torch.cuda.Stream(device=ctx.device)
    approximate = "tanh" if MATH == "tanh" else "none"

    def run(x):
        out = torch.empty_like(x)
        half = x.shape[0] // 2
        side.wait_stream(torch.cuda.current_stream())       # the input is ready: never joined back
        out[:half] = torch.nn.functional.gelu(x[:half], approximate=approximate)
        with torch.cuda.stream(side):
            out[half:] = torch.nn.functional.gelu(x[half:], approximate=approximate)
        return out
    return run


def _split(spec, ctx, name, joined):
    """gelu with rows [:m] on the current stream and [m:] (~90%) on a side stream that waits for the
    current one (the input is ready); joined: the current stream then waits for the side stream."""
    if not str(ctx.device).startswith("cuda"):
        raise RuntimeError(f"{name} needs a CUDA device (a side stream)")
    side = torch.cuda.Stream(device=ctx.device)
    approximate = "tanh" if MATH == "tanh" else "none"

    def run(x):
        current = torch.cuda.current_stream()
        out = torch.empty_like(x)
        m = max(1, x.shape[0] // 10)
        side.wait_stream(current)
        out[:m] = torch.nn.functional.gelu(x[:m], approximate=approximate)
        with torch.cuda.stream(side):
            out[m:] = torch.nn.functional.gelu(x[m:], approximate=approximate)
        out.record_stream(side)  # the allocator must not hand out's memory on while the side writes it
        if joined:
            current.wait_stream(side)
        return out
    return run


@GELU.impl("manual_wrong_side90", math=MATH)
def build_side90(spec, params, ctx):
    return _split(spec, ctx, "manual_wrong_side90", joined=False)


@GELU.impl("manual_side_joined", math=MATH)
def build_side_joined(spec, params, ctx):
    return _split(spec, ctx, "manual_side_joined", joined=True)
