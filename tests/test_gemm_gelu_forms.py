"""The fused GeLU epilogue's forms (kernels/_tma_gemm.py `_gelu_tile`, config GELU): the H100's
candidates that take the tanh by one MUFU instruction (issue #40) from K = FAST_TANH_MIN_K, their
sm_90 compile, and the launch's fallback to the exp2 form where no PTX runs (the interpreter) or
no GeLU is fused."""

from __future__ import annotations

import pytest

from workbench.kernels import _tma_gemm as tma

H100 = "NVIDIA H100 80GB HBM3 sm_90"
H200 = "NVIDIA H200 sm_90"


def test_the_fast_tanh_is_an_h100_candidate_of_the_fused_kernel_from_k_4096_only():
    k = tma.FAST_TANH_MIN_K
    plain, fused = tma.candidate_configs(H100, k=k), tma.candidate_configs(H100, "gelu", k)
    assert all(c["GELU"] == 0 for c in plain)
    assert {c["GELU"] for c in fused} == {0, 1} and fused[: len(plain)] == plain
    # every fast-tanh variant is one of the plain list's configs with another epilogue
    assert all({**c, "GELU": 0} in plain for c in fused if c["GELU"])
    # below FAST_TANH_MIN_K the check's tolerance does not cover tanh.approx's error: not offered
    assert tma.candidate_configs(H100, "gelu", k - 8) == plain
    # the H200's list is left as it was measured
    assert tma.candidate_configs(H200, "gelu", k) == tma.candidate_configs(H200)
    assert all(c["GELU"] == 0 for c in tma.candidate_configs(H200))


def test_gelu_mode_falls_back_to_the_exp2_form_without_gelu_or_under_the_interpreter(monkeypatch):
    config = {**tma.candidate_configs(H100)[0], "GELU": 1}
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    assert tma.gelu_mode(config, "gelu") == 1
    assert tma.gelu_mode(config, "none") == 0
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert tma.gelu_mode(config, "gelu") == 0
    with pytest.raises(ValueError, match="GELU must be 0 or 1, got 2"):
        tma.gelu_mode({**config, "GELU": 2}, "gelu")
    assert tma.tma_launch(4096, 4096, 4096, "bfloat16", config, activation="gelu").constexprs["GELU"] == 0


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_the_fast_tanh_compiles_for_sm90_with_one_tanh_instruction(dtype, monkeypatch):
    """GELU 1 emits tanh.approx.f32 and not the exp2 form's ex2 (Triton's own sm_90 compile, no GPU)."""
    from sm90_aot import compile_sm90

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    base = tma.candidate_configs(H100)[0]
    for mode, want, never in ((0, "ex2.approx", "tanh.approx"), (1, "tanh.approx.f32", "ex2.approx")):
        launch = tma.tma_launch(4096, 4096, 4096, dtype, {**base, "GELU": mode}, activation="gelu")
        assert launch.constexprs["GELU"] == mode
        ptx = compile_sm90(launch).asm["ptx"]
        assert want in ptx and never not in ptx and "wgmma.mma_async" in ptx, (dtype, mode)


def test_the_prewarm_compiles_every_candidate_of_both_epilogues_and_the_builds_asked_for():
    """benchmarks/gemm_prewarm.py's task list (no GPU: the generic list; nothing launched)."""
    from benchmarks.gemm_prewarm import tasks

    got = tasks(["bfloat16"], ["matmul_gelu:compiled:8192x8192x8192:bfloat16", "softmax:cuda:4096x262144:bfloat16"])
    tma_tasks = [t for t in got if t["kind"] == "tma"]
    assert [t["config"] for t in tma_tasks if t["act"] == "none"] == tma.candidate_configs(None)
    assert [t["config"] for t in tma_tasks if t["act"] == "gelu"] == tma.candidate_configs(None, "gelu", 8192)
    assert got[-2:] == [
        {"kind": "build", "op": "matmul_gelu", "impl": "compiled", "dtype": "bfloat16",
         "shape": {"M": 8192, "N": 8192, "K": 8192}},
        {"kind": "build", "op": "softmax", "impl": "cuda", "dtype": "bfloat16", "shape": {"M": 4096, "N": 262144}}]
