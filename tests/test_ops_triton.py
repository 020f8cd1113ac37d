"""Every shipped Triton (op, implementation, test spec, dtype) against the float64 reference,
generated from the registry, plus non-contiguous inputs and the launch each one declares.

Without a GPU the kernels run under Triton's CPU interpreter, which must be chosen before the
kernels are imported (TRITON_INTERPRET): one child process per op runs all of that op's cases
(tests/op_child.py) and reports JSON. Dtypes the interpreter cannot do (bfloat16 through
tl.dot: numpy has no bfloat16) are skipped with that reason. Each launch is also compared with
the implementation's TritonLaunch (kernel, grid, constexprs, num_warps, num_stages, pointer
dtypes, integer arguments): that declaration is what the ahead-of-time PTX is compiled from.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import pytest

from op_cases import Case, correctness_cases, describe, layout_cases, run_child
from workbench.dtypes import DType
from workbench.machine import probe, unavailable_reason
from workbench.registry import discover

pytestmark = pytest.mark.slow  # every test here starts child processes (tests/conftest.py)

REGISTRY = discover()
MACHINE = probe()

EXTRA_CASES = [
    # float32 as TF32 needs a smaller K tile (the default's 288 KiB exceeds shared memory).
    Case("matmul", "triton", {"M": 100, "N": 130, "K": 300}, "float32", fp32_precision="tf32", params={"BLOCK_K": 32}),
    Case("matmul", "triton", {"M": 257, "N": 257, "K": 257}, "float16", params={"GROUP_M": 1}),
    Case("matmul", "triton", {"M": 70, "N": 40, "K": 50}, "float32",
         params={"BLOCK_M": 32, "BLOCK_N": 16, "BLOCK_K": 16, "GROUP_M": 2}),
    # A row longer than the one-block limit: only the looped form takes it.
    Case("softmax", "triton_looped", {"M": 2, "N": 20000}, "float32"),
    Case("gelu", "triton", {"M": 3, "N": 100}, "float32", params={"BLOCK_SIZE": 64}),
]
CASES = correctness_cases(REGISTRY, ("triton",)) + layout_cases(REGISTRY, ("triton",)) + EXTRA_CASES


def skip_reason(case: Case) -> str | None:
    impl = REGISTRY.op(case.op).get_impl(case.impl)
    return unavailable_reason(impl, "check", MACHINE, DType(case.dtype))


@pytest.fixture(scope="module")
def op_results(request, tmp_path_factory):
    """(op, impl) -> {case id: result}: one child per implementation with selected cases, as many
    at a time as there are CPU cores, all started on first use."""
    selected = {item.callspec.params["case"].id for item in request.session.items
                if item.module is request.module and hasattr(item, "callspec")}
    groups: dict[tuple[str, str], list[Case]] = {}
    for case in CASES:
        if case.id in selected and skip_reason(case) is None:
            groups.setdefault((case.op, case.impl), []).append(case)
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        futures = {key: pool.submit(run_child, cases, tmp_path_factory.mktemp("-".join(key)),
                                    has_cuda=MACHINE.has_cuda)
                   for key, cases in groups.items()}
        return {key: _result_or_error(future) for key, future in futures.items()}


def _result_or_error(future) -> dict | Exception:
    try:
        return future.result()
    except Exception as exc:  # the child failed: every test of that op reports it
        return exc


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_triton_matches_reference(case: Case, op_results) -> None:
    reason = skip_reason(case)
    if reason:
        pytest.skip(reason)
    results = op_results[(case.op, case.impl)]
    if isinstance(results, Exception):
        raise results
    result = results[case.id]
    assert "error" not in result, describe(result)
    assert result["passed"], describe(result)
    assert not result.get("launch_problems"), describe(result)
    if case.layout is None:
        assert "launch_problems" in result, f"{case.impl} declares no TritonLaunch (source=TritonSource(...))"
