"""Test plugin (CPU): plugin code that games the check from inside the worker (MEASUREMENT.md rule
13, issue 38 class 6). On import it replaces `workbench.check.compare.verdict` in the process that
loads it with one that always passes, and registers gelu `manual_patched`, whose output is 10% off.
Without --strict the worker's own comparison is the patched one and the row gets `ok` and a time
(the hole --strict closes); with --strict the clean process (workbench/check/strict.py) judges and
the row fails at a value gate (tests/test_check_strict.py)."""

from __future__ import annotations

import torch

import workbench.check.compare as compare
from workbench.registry import REGISTRY


def _always_pass(totals, tol):
    return None, tol.atol(totals.ref_rms), None


compare.verdict = _always_pass

GELU = REGISTRY.op("gelu")
MATH = GELU.get_impl("pytorch").math


@GELU.impl("manual_patched", math=MATH)
def build_patched(spec, params, ctx):
    approximate = "tanh" if MATH == "tanh" else "none"
    return lambda x: torch.nn.functional.gelu(x, approximate=approximate) * 1.1
