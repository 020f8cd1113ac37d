"""Test plugin (GPU): implementations that are right when checked but leave work on a stream the
timed stream never joins (MEASUREMENT.md rule 13, issue 38 class 5). Load beside
tests/plugins/known_wrong.py (benchmarks/stages/cheats.py). On a machine without CUDA the builders
raise when built, so the plugin still loads anywhere.

- gelu `manual_wrong_side`: the first half of the rows on the current stream, the second half on a
  side stream that waits for the current one but that the current one never waits for: the
  events time the first half only; a device-wide synchronize (the check's) sees all of it.
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
