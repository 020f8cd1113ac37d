"""Test-only: a deliberately wrong GeLU implementation that the checker must catch.

`manual_notail` is a vectorized kernel's classic bug in PyTorch form: it processes the elements
in packs of 8 and forgets the scalar tail, so the last numel % 8 outputs stay zero. At 3 x 4097
(12291 elements) the first bad element is flat index 12288, that is (2, 4094).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from workbench.registry import REGISTRY

PACK = 8
GELU = REGISTRY.op("gelu")  # the shipped op: its entry point loads before any --kernels path


@GELU.impl("manual_notail", math="tanh")
def build_manual_notail(spec, params, ctx):
    """GeLU in packs of 8 with the tail forgotten (wrong on purpose)."""
    def run(x: torch.Tensor) -> torch.Tensor:
        y = torch.zeros_like(x)
        whole = x.numel() - x.numel() % PACK
        y.view(-1)[:whole] = F.gelu(x.reshape(-1)[:whole], approximate="tanh")
        return y
    return run
