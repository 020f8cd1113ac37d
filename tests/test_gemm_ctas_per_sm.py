"""CTAS_PER_SM: the TMA GEMM's persistent grid with two programs a multiprocessor (kernels/_tma_gemm.py).

Two programs can share an SM only if both fit it: the checks compile each such candidate for sm_90
(Triton's own ptxas, read with cuobjdump: workbench.ptx.resources) and hold it to sm_90's limits.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from workbench.kernels import _tma_gemm as tma

SM90_SMEM_PER_SM = 228 * 1024     # CUDA C++ Programming Guide, "Compute Capability 9.0": 228 KB an SM
SM90_SMEM_RESERVED_PER_CTA = 1024  # ... of which 1 KB is reserved for each resident block
SM90_REGISTERS_PER_SM = 65536


def _two_per_sm():
    return [c for c in tma.candidate_configs() if c.get("CTAS_PER_SM", 1) == 2]


def test_the_grid_is_ctas_per_sm_programs_an_sm_capped_by_the_tiles():
    (two, *_) = _two_per_sm()
    assert tma.tma_launch(4096, 4096, 4096, "bfloat16", two).grid == (264, 1, 1)
    assert tma.tma_launch(4096, 4096, 4096, "bfloat16", two, sms=100).grid == (200, 1, 1)
    assert tma.tma_launch(1024, 1024, 4096, "bfloat16", two).grid == (64, 1, 1)  # 8 x 8 tiles
    assert tma.tma_launch(4096, 4096, 4096, "bfloat16", tma.candidate_configs()[0]).grid == (132, 1, 1)
    old_cache_entry = {k: v for k, v in two.items() if k != "CTAS_PER_SM"}  # from before the knob: one an SM
    assert tma.programs(4096, 4096, old_cache_entry, 132) == 132
    assert tma.tma_launch(4096, 4096, 4096, "bfloat16", two).constexprs["NUM_PROGRAMS"] == 264


def test_streamk_refuses_two_programs_an_sm():
    streamk = next(c for c in tma.candidate_configs() if c.get("STREAMK"))
    with pytest.raises(ValueError, match="STREAMK=1 needs CTAS_PER_SM=1"):
        tma.tma_launch(4096, 4096, 4096, "bfloat16", {**streamk, "CTAS_PER_SM": 2})


@pytest.mark.parametrize("activation", ["none", "gelu"])
def test_two_programs_fit_one_sm90_multiprocessor(tmp_path, activation):
    from workbench.ptx.resources import cubin_resources
    from workbench.ptx.tools import ToolError
    from workbench.ptx.triton_aot import build_source, compile_launch, resolve_target

    configs = _two_per_sm()
    assert configs
    for i, config in enumerate(configs):
        launch = tma.tma_launch(8192, 8192, 8192, "bfloat16", config, activation=activation)
        compiled, _ = compile_launch(build_source(launch, resolve_target("sm_90")), stand_in=True)
        shared = int(compiled.metadata.shared)
        assert 2 * (shared + SM90_SMEM_RESERVED_PER_CTA) <= SM90_SMEM_PER_SM, (config, shared)
        assert "wgmma.mma_async" in compiled.asm["ptx"]
        cubin = tmp_path / f"two{i}.cubin"
        cubin.write_bytes(compiled.asm["cubin"])
        try:
            (res,) = cubin_resources(cubin).values()
        except ToolError as exc:
            pytest.skip(str(exc))
        threads = 32 * int(config["num_warps"])
        assert res.spill_bytes == 0, (config, res)
        assert 2 * threads * res.registers <= SM90_REGISTERS_PER_SM, (config, res)


WALK_CHECK = """
import json, torch
from workbench.kernels import _tma_gemm as g
torch.manual_seed(0)
out = {}
for M, N, K, sms, act in [(48, 96, 40, 2, "none"), (48, 96, 40, 2, "gelu"), (16, 32, 16, 3, "none")]:
    cfg = {"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 16, "num_warps": 4, "num_stages": 2, "SUBTILE": 1,
           "GROUP_M": 2, "STREAMK": 0, "CTAS_PER_SM": 2}
    a, b = torch.randn(M, K, dtype=torch.float16), torch.randn(K, N, dtype=torch.float16)
    c = torch.full((M, N), float("nan"), dtype=torch.float16)
    launch = g.tma_launch(M, N, K, "float16", cfg, activation=act, sms=sms, a=a, b=b, c=c)
    g.run_launch(launch)
    ref = a.float() @ b.float()
    if act == "gelu":
        ref = torch.nn.functional.gelu(ref, approximate="tanh")
    err = ((c.float() - ref).abs() / (ref.abs() + 1.0)).max().item()
    out[f"{M}x{N}x{K} sms{sms} {act}"] = {"err": err, "programs": launch.grid[0]}
print(json.dumps(out))
"""


@pytest.mark.slow  # a Python subprocess under TRITON_INTERPRET
def test_two_programs_an_sm_cover_every_tile_under_the_interpreter():
    """3 x 3 tiles on 2 SMs: 4 programs, so programs 0 to 3 take 3, 2, 2 and 2 tiles (a stale or
    skipped tile stays NaN); one tile on 3 SMs: one program."""
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run([sys.executable, "-c", WALK_CHECK], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert [v["programs"] for v in found.values()] == [4, 4, 1]
    for name, got in found.items():
        assert got["err"] < 2e-3, (name, got)  # float16 output rounding (2^-11) of a float32 sum
