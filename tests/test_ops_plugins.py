"""The plugin door, seen from the ops: a deliberately wrong implementation is caught with its first
bad index; the README's example plugin (tests/plugins/my_ops.py) adds an op and a GeLU variant
that check out. Both load in a child process (tests/op_child.py), so their ops never reach this
process's registry. Also: the core and every kernel import without Textual."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from op_cases import PLUGINS, Case, describe, run_child
from workbench.check.compare import compare
from workbench.check.tolerance import tolerance
from workbench.machine import probe
from workbench.registry import discover

REGISTRY = discover()
MACHINE = probe()

WRONG = Case("gelu", "manual_notail", {"M": 3, "N": 4097}, "float32")
EXAMPLE = [Case(op, impl, shape, dtype)
           for op, impl, specs in [("relu", "pytorch", [{"M": 1, "N": 1000}, {"M": 3, "N": 4097}]),
                                   ("relu", "triton", [{"M": 1, "N": 1000}, {"M": 3, "N": 4097}]),
                                   ("gelu", "manual_erf", [{"M": 257, "N": 257}])]
           for shape in specs for dtype in ("float32", "float16", "bfloat16")]


@pytest.fixture(scope="module")
def plugin_results(tmp_path_factory):
    return run_child([WRONG, *EXAMPLE], tmp_path_factory.mktemp("plugins"), has_cuda=MACHINE.has_cuda,
                     plugins=[PLUGINS / "wrong_ops.py", PLUGINS / "my_ops.py"])


@pytest.mark.slow
def test_wrong_implementation_is_caught_at_its_first_bad_index(plugin_results):
    result = plugin_results[WRONG.id]
    assert "error" not in result, describe(result)
    assert not result["passed"]
    assert result["check"]["first_bad_index"] == [2, 4094]  # flat 12288: the first of the 3-element tail


@pytest.mark.slow
@pytest.mark.parametrize("case", EXAMPLE, ids=lambda c: c.id)
def test_example_plugin_checks_out(case, plugin_results):
    result = plugin_results[case.id]
    assert "error" not in result and result["passed"], describe(result)
    assert not result.get("launch_problems"), describe(result)


@pytest.mark.slow
def test_plugin_ops_stay_out_of_this_process(plugin_results):
    assert "relu" not in REGISTRY
    assert "manual_notail" not in REGISTRY.op("gelu").impls


def test_the_tanh_form_fails_the_erf_check():
    """Why manual_erf is checked against the erf reference: the two GeLUs differ by ~1e-3."""
    import torch.nn.functional as F

    gelu = REGISTRY.op("gelu")
    spec = gelu.make_spec({"M": 1, "N": 1000}, "float32")
    (x,) = gelu.make_inputs(spec, "cpu", 0)
    report = compare(F.gelu(x, approximate="tanh"), gelu.reference_fn("erf")(x.double()), tolerance("float32"))
    assert not report.passed and report.max_abs_err > 1e-4


@pytest.mark.slow
def test_core_and_kernels_import_without_textual():
    code = textwrap.dedent("""
        import importlib, pkgutil, sys
        import workbench
        for info in pkgutil.walk_packages(workbench.__path__, "workbench."):
            if info.name != "workbench.cli":
                importlib.import_module(info.name)
        from workbench.registry import discover
        ops = discover().ops
        assert {"gelu", "softmax", "matmul", "matmul_gelu", "add", "cdist", "mlp", "sleep"} <= set(ops), ops
        loaded = sorted(m for m in sys.modules if m == "textual" or m.startswith("textual."))
        assert not loaded, loaded
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
