"""benchmarks/stages/_op_runs._warm_one: the evidence stages' parallel warm-up builds run side by side,
so a builder there gets BuildContext(tune=False) and launches no tuning candidates (an autotuning
CUDA builder timed its candidates there beside seven other builds on the H200, 2026-12-03)."""

from __future__ import annotations

from types import SimpleNamespace

import workbench.registry as registry_module
from benchmarks.stages import _op_runs


def test_a_warm_up_build_may_not_tune(monkeypatch, tmp_path):
    seen, called = [], []
    impl = SimpleNamespace(resolve_params=lambda p: dict(p),
                           builder=lambda spec, params, ctx: seen.append(ctx) or (lambda *a: called.append(a)))
    op = SimpleNamespace(get_impl=lambda name: impl, make_spec=lambda shape, dtype: (shape, dtype),
                         make_inputs=lambda spec, device, seed: ("x",))
    monkeypatch.setattr(registry_module, "discover", lambda: SimpleNamespace(op=lambda name: op))
    task = {"op": "softmax", "impl": "cuda", "params": {}, "shape": {"M": 4, "N": 8}, "dtype": "float32",
            "fp32_precision": "ieee", "device": "cpu"}
    _op_runs._warm_one(task, tmp_path)
    assert len(seen) == 1 and seen[0].tune is False and seen[0].build_dir == tmp_path
    assert called == [("x",)]  # the one warming call still runs
