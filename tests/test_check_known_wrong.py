"""Every known-wrong implementation (tests/wrong_impls.py) of every shipped op fails the check, in
every dtype the op declares, with a message naming the gate that caught it (MEASUREMENT.md rule
6). Cases are generated from the registry; the wrong implementations load as a test plugin in a
child process (tests/op_child.py), so they never reach this process's registry."""

from __future__ import annotations

import pytest

from op_cases import PLUGINS, Case, describe, layout_spec, run_child
from workbench.machine import probe
from workbench.registry import discover
from wrong_impls import EXPECTED_GATES, PREFIX, applicable, shipped_ops

pytestmark = pytest.mark.slow  # every test here starts child processes (tests/conftest.py)

REGISTRY = discover()
# The op's smallest spec with every dim > 1: a softmax special set then has a shifted row, and a
# tail is a real tail.
CASES = [Case(op.name, PREFIX + kind, layout_spec(op), dtype.value)
         for op in shipped_ops(REGISTRY) for kind in applicable(op) for dtype in op.dtypes]


@pytest.fixture(scope="module")
def wrong_results(tmp_path_factory):
    return run_child(CASES, tmp_path_factory.mktemp("wrong"), has_cuda=probe().has_cuda,
                     plugins=[PLUGINS / "known_wrong.py"])


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_known_wrong_implementation_fails_naming_its_gate(case, wrong_results):
    result = wrong_results[case.id]
    assert "error" not in result, describe(result)
    check = result["check"]
    assert not result["passed"] and check["gate"] in EXPECTED_GATES[case.impl.removeprefix(PREFIX)], describe(result)
    assert result["detail"].startswith(f"{check['gate']} gate ({check['input_set']} inputs)"), describe(result)


def test_every_shipped_op_has_its_wrong_kinds():
    kinds = {(c.op, c.impl.removeprefix(PREFIX)) for c in CASES}
    for op in shipped_ops(REGISTRY):
        assert {"zeros", "half", "overwrite", "notail", "once", "dtype", "ptrcache", "lazy", "global", "sniff",
                "bytes"} <= {k for o, k in kinds if o == op.name}
    assert ("matmul", "ktail") in kinds and ("cdist", "ktail") in kinds and ("softmax", "nomax") in kinds
    assert ("sleep", "input") not in kinds  # sleep returns its input: that is right


def _result(results, op: str, kind: str, dtype: str = "float32") -> dict:
    case = next(c for c in CASES if (c.op, c.impl, c.dtype) == (op, PREFIX + kind, dtype))
    return results[case.id]


def test_no_max_subtraction_fails_only_where_exp_overflows(wrong_results):
    result = _result(wrong_results, "softmax", "nomax")
    assert result["check"]["input_set"] == "special", describe(result)


def test_a_stale_result_fails_at_the_timed_calls(wrong_results):
    for kind in ("once", "ptrcache", "global", "sniff", "bytes"):
        result = _result(wrong_results, "cdist", kind)  # cdist has no special set
        assert result["check"]["input_set"] == "timed calls", describe(result)
        assert result["check"]["gate"] == "timed outputs", describe(result)


def test_a_tensor_subclass_fails_the_ownership_gate_at_the_first_call(wrong_results):
    result = _result(wrong_results, "softmax", "lazy")
    assert result["check"]["input_set"] == "first" and "not a plain torch.Tensor" in result["detail"], describe(result)
