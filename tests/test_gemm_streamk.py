"""The hybrid stream-K GEMM (kernels/_tma_gemm.py `_tma_streamk_kernel`) under the Triton
interpreter: split tiles (two, three and four programs sharing one tile, a program with nothing
to do, K and M tails that TMA pads with zeros) against a float32 reference, the flags cleared for
the next launch, and a second launch equal to the first. float16 only: the interpreter's tensor
descriptors mishandle bfloat16 (the data-parallel kernel too), which the H200 runs check instead."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from workbench.kernels import _tma_gemm as tma

STREAMK_CHECK = """
import json, torch
from workbench.kernels import _tma_gemm as g
torch.manual_seed(0)
out = {}
for M, N, K, sms, sub, act in CASES:
    cfg = {"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 16, "num_warps": 4, "num_stages": 2, "SUBTILE": sub,
           "GROUP_M": 2, "STREAMK": 1}
    a = torch.randn(M, K, dtype=torch.float16)
    b = torch.randn(K, N, dtype=torch.float16)
    ws, flags = g.streamk_buffers(M, N, cfg, sms, "cpu")
    flags_seen = []
    def once():
        c = torch.full((M, N), float("nan"), dtype=torch.float16)
        g.run_launch(g.tma_launch(M, N, K, "float16", cfg, activation=act, sms=sms, a=a, b=b, c=c,
                                  workspace=ws, flags=flags))
        flags_seen.append(int(flags.abs().sum()))
        return c
    c1, c2 = once(), once()
    ref = a.float() @ b.float()
    if act == "gelu":
        ref = torch.nn.functional.gelu(ref, approximate="tanh")
    err = ((c1.float() - ref).abs() / (ref.abs() + 1.0)).max().item()
    out[f"{M}x{N}x{K} sms{sms} sub{sub} {act}"] = {"err": err, "equal": bool(torch.equal(c1, c2)),
                                                  "flags": flags_seen}
print(json.dumps(out))
"""
# (M, N, K, sms, SUBTILE, activation) with 16 x 32 x 16 tiles (stream-K needs SUBTILE: partials move in halves): tiles, programs, full waves, the
# stream-K tiles' iterations and what each program gets
CASES = [
    (48, 64, 80, 4, 1, "none"),   # 6 tiles, 4 programs: 2 tiles x 5 iterations over 4 (3 each): a 2-way and a 3-way split
    (48, 64, 80, 4, 1, "gelu"),   # the same with the GeLU epilogue
    (80, 32, 128, 4, 1, "none"),  # 5 tiles: 1 tile of 8 iterations, 2 a program: a 4-way split
    (64, 96, 64, 5, 1, "none"),   # 12 tiles, 5 programs: 2 tiles of 4 over 5 (2 each): program 4 idles
    (40, 96, 72, 4, 1, "none"),   # M and K tails (zero padding): 9 tiles, 1 tile of 5 over 4
    (64, 64, 64, 4, 1, "none"),   # 8 tiles on 4 programs: whole waves, no stream-K phase
]


def _segments(M, N, K, sms):
    """(program, tile, k0, k1) of the stream-K phase, as the kernel walks it (a model, for the
    cases' comments to be checked)."""
    tiles = -(-M // 16) * -(-N // 32)
    programs = min(sms, tiles)
    k_tiles = -(-K // 16)
    dp = tiles // programs * programs
    total = (tiles - dp) * k_tiles
    per = -(-total // programs) if total else 0
    segs = []
    for p in range(programs):
        start, end = p * per, min(p * per + per, total)
        while end > start:
            t = (end - 1) // k_tiles
            s = max(start, t * k_tiles)
            segs.append((p, t, s - t * k_tiles, end - t * k_tiles))
            end = s
    return segs


def test_the_cases_split_tiles_as_their_comments_say():
    split = lambda case: [s for s in _segments(*case[:4]) if (s[2], s[3]) != (0, -(-case[2] // 16))]  # noqa: E731
    per_tile = lambda case: {t: sum(1 for s in _segments(*case[:4]) if s[1] == t) for _, t, _, _ in _segments(*case[:4])}  # noqa: E731
    assert per_tile(CASES[0]) == {0: 2, 1: 3} and split(CASES[0])
    assert per_tile(CASES[2]) == {0: 4}
    assert 4 not in {p for p, *_ in _segments(*CASES[3][:4])}
    assert _segments(*CASES[5][:4]) == []


@pytest.mark.slow  # a Python subprocess under TRITON_INTERPRET
def test_streamk_matches_the_reference_and_leaves_its_flags_cleared_under_the_interpreter():
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run([sys.executable, "-c", f"CASES = {CASES!r}\n" + STREAMK_CHECK], capture_output=True,
                          text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(found) == len(CASES)
    for name, got in found.items():
        assert got["err"] < 2e-3, (name, got)     # float16 output rounding (2^-11) of a float32 sum
        assert got["equal"] and got["flags"] == [0, 0], (name, got)


def test_streamk_candidates_and_launch_signature():
    configs = tma.candidate_configs()
    streamk = [c for c in configs if c.get("STREAMK")]
    assert streamk and all(c["BLOCK_M"] == 128 and c["BLOCK_N"] == 256 for c in streamk)
    assert not configs[0].get("STREAMK")  # the untuned default stays the data-parallel kernel
    assert {k: v for k, v in streamk[0].items() if k != "STREAMK"} in [
        {k: v for k, v in c.items() if k != "STREAMK"} for c in configs if not c.get("STREAMK")]
    launch = tma.tma_launch(4096, 4096, 4096, "bfloat16", streamk[0])
    assert launch.kernel is tma._tma_streamk_kernel and launch.grid == (132, 1, 1)
    assert list(launch.signature)[:5] == ["a_desc", "b_desc", "c_desc", "ws_ptr", "flags_ptr"]
    assert launch.signature["ws_ptr"] == "*fp32" and launch.signature["flags_ptr"] == "*i32"
    from workbench.ptx.triton_aot import _torch_dtype  # the AOT build takes the int32 flags pointer
    import torch
    assert _torch_dtype(torch, "*i32", "flags_ptr") is torch.int32
    with pytest.raises(ValueError, match="STREAMK=1 needs SUBTILE=1"):
        tma.tma_launch(4096, 4096, 4096, "bfloat16", {**streamk[0], "SUBTILE": 0})
    assert all(c["SUBTILE"] for c in streamk)
    plain = tma.tma_launch(4096, 4096, 4096, "bfloat16", configs[0])
    assert plain.kernel is tma._tma_matmul_kernel and "ws_ptr" not in plain.signature


def test_the_streamk_kernel_compiles_for_sm90_without_spills(tmp_path):
    """128 x 256 tiles hold a 128-register accumulator a thread: an owner adding a whole partial
    tile held 256 and spilled (ptxas: 255 registers, 120 bytes spilled; -8% at 4096^3 on the H200,
    2026-12-03); adding it in halves must not spill. The cubin is Triton's own (its ptxas), read
    with cuobjdump -res-usage (workbench.ptx.resources)."""
    from sm90_aot import compile_sm90, resources

    for i, config in enumerate(c for c in tma.candidate_configs() if c.get("STREAMK")):
        compiled = compile_sm90(tma.tma_launch(4096, 4096, 4096, "bfloat16", config))
        assert "wgmma.mma_async" in compiled.asm["ptx"] and "atom.global.gpu.release" in compiled.asm["ptx"]
        res = resources(compiled, tmp_path, f"streamk{i}")
        assert res.spill_bytes == 0 and res.registers < 255, (config, res)
