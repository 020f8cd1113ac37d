"""GELU_FMA: the fused GeLU epilogue's reciprocal by Newton's method on the FMA pipe
(kernels/_tma_gemm.py _gelu_tile), checked for accuracy under the Triton interpreter and for
what it compiles to on sm_90."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from workbench.kernels import _tma_gemm as tma


def test_gelu_fma_candidates_are_only_the_fused_kernels_and_data_parallel():
    plain, fused = tma.candidate_configs(), tma.candidate_configs("gelu")
    assert not any("GELU_FMA" in c for c in plain)
    extra = [c for c in fused if c.get("GELU_FMA")]
    assert fused[:len(plain)] == plain and len(extra) == len(tma.GELU_FMA_FROM) >= 1
    assert all(not c["STREAMK"] for c in extra)
    launch = tma.tma_launch(8192, 8192, 8192, "bfloat16", extra[0], activation="gelu")
    assert launch.constexprs["ACTIVATION"] == "gelu_fma"
    # the knob means nothing without the GeLU: a plain launch of the same config is the plain kernel
    assert tma.tma_launch(8192, 8192, 8192, "bfloat16", extra[0]).constexprs["ACTIVATION"] == "none"


def test_gelu_fma_takes_one_sfu_operation_an_element_on_sm90(tmp_path):
    """ex2 per element, no division; no spills and no stack (the stream-K kernel with it needed
    255 registers and 344 bytes of stack, so it has no such candidate)."""
    from workbench.ptx.resources import cubin_resources
    from workbench.ptx.tools import ToolError
    from workbench.ptx.triton_aot import build_source, compile_launch, resolve_target

    config = next(c for c in tma.candidate_configs("gelu") if c.get("GELU_FMA"))
    counts = {}
    for name, cfg in (("sfu", {k: v for k, v in config.items() if k != "GELU_FMA"}), ("fma", config)):
        launch = tma.tma_launch(8192, 8192, 8192, "bfloat16", cfg, activation="gelu")
        compiled, _ = compile_launch(build_source(launch, resolve_target("sm_90")), stand_in=True)
        ptx = compiled.asm["ptx"]
        counts[name] = {op: ptx.count(op) for op in ("ex2.approx", "div.full.f32", "div.rn.f32", "rcp.")}
        if name == "fma":
            cubin = tmp_path / "fma.cubin"
            cubin.write_bytes(compiled.asm["cubin"])
            try:
                (res,) = cubin_resources(cubin).values()
            except ToolError as exc:
                pytest.skip(str(exc))
            assert res.spill_bytes == 0 and res.stack_bytes == 0 and res.registers < 255, res
    elements = 128 * 256 // 256  # a tile's elements per thread (8 warps)
    assert counts["sfu"]["ex2.approx"] == elements and counts["sfu"]["div.full.f32"] == elements
    assert counts["fma"]["ex2.approx"] == elements
    assert counts["fma"]["div.full.f32"] == counts["fma"]["div.rn.f32"] == counts["fma"]["rcp."] == 0


FMA_CHECK = """
import json, torch
from workbench.kernels import _tma_gemm as g
torch.manual_seed(0)
M, N, K = 64, 64, 32
cfg = {"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 16, "num_warps": 4, "num_stages": 2, "SUBTILE": 1,
       "GROUP_M": 2, "STREAMK": 0}
# A's rows pick out scaled columns of B: C = A @ B covers -20..20 and the tails, exactly in float16
xs = torch.linspace(-20.0, 20.0, M * N, dtype=torch.float64)
a = torch.zeros(M, K, dtype=torch.float16)
a[:, 0] = 1.0
b = torch.zeros(K, N, dtype=torch.float16)
out = {}
for name, extra in (("sfu", {}), ("fma", {"GELU_FMA": 1})):
    errs, worst = [], 0.0
    for chunk in range(M):  # one row of C's values at a time, through B's first row
        vals = xs[chunk * N:(chunk + 1) * N].to(torch.float16)
        b[0] = vals
        c = torch.full((M, N), float("nan"), dtype=torch.float16)
        g.run_launch(g.tma_launch(M, N, K, "float16", {**cfg, **extra}, activation="gelu", sms=4, a=a, b=b, c=c))
        ref = torch.nn.functional.gelu(vals.double(), approximate="tanh")
        got = c[0].double()
        ulp = torch.finfo(torch.float16).eps * ref.abs().clamp_min(torch.finfo(torch.float16).tiny)
        worst = max(worst, ((got - ref).abs() / ulp).max().item())
        if chunk == 0:
            first = c.clone()
    out[name] = {"worst_ulps": worst, "rows_equal": bool(torch.equal(first[0], first[-1]))}
print(json.dumps(out))
"""


@pytest.mark.slow  # a Python subprocess under TRITON_INTERPRET
def test_gelu_fma_is_as_exact_as_the_division_in_float16_under_the_interpreter():
    """x from -20 to 20 (the negative tail down to float16's subnormals): both epilogues within
    one float16 ulp of the float64 reference (the output's own rounding: half an ulp; the
    float32 arithmetic before it the rest)."""
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run([sys.executable, "-c", FMA_CHECK], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    for name, got in found.items():
        assert got["worst_ulps"] <= 1.0 and got["rows_equal"], (name, got)
