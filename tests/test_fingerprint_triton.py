"""The check's input fingerprint in one Triton pass (workbench/check/fingerprint_triton.py) is the
torch path's hash bit for bit: compared under TRITON_INTERPRET=1 (the interpreter runs the same
kernel on the CPU), with small blocks so that several blocks and a ragged tail are covered."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from workbench.check import inputs

ROOT = Path(__file__).resolve().parents[1]
pytest.importorskip("triton")

_CHILD = r"""
import json, torch
from workbench.check import inputs
from workbench.check.fingerprint_triton import TILE, fingerprint_bits
torch.manual_seed(0)
inputs.BLOCK_ELEMENTS = TILE * 2  # the torch path's blocks, as small as the kernel's allow
cases = []
for dtype, n in ((torch.float32, 3 * TILE * 2 + 1000), (torch.float16, 5000), (torch.bfloat16, TILE * 2),
                 (torch.int64, 20001), (torch.bool, 9000), (torch.float8_e4m3fn, 12345), (torch.int8, 7),
                 (torch.float64, 1), (torch.float32, 0)):
    t = torch.rand(n) > 0.5 if dtype == torch.bool else (torch.randn(n) * 100).to(dtype)
    flat = t.reshape(-1)
    bits = flat.view(inputs._BITS[flat.dtype]) if flat.dtype in inputs._BITS else flat
    a, b = inputs.fingerprint(t), fingerprint_bits(bits, inputs.BLOCK_ELEMENTS, inputs._MIX, inputs._LANE_KEYS)
    swapped = t.clone()
    if n > 2:
        swapped[0], swapped[-1] = t[-1].clone(), t[0].clone()
    flat2 = swapped.reshape(-1)
    bits2 = flat2.view(inputs._BITS[flat2.dtype]) if flat2.dtype in inputs._BITS else flat2
    cases.append({"dtype": str(dtype), "n": n, "shape": list(a.shape), "equal": bool(torch.equal(a, b)),
                  "sees_a_swap": bool(n <= 2 or bool(t[0] == t[-1]) or not torch.equal(b, fingerprint_bits(bits2, inputs.BLOCK_ELEMENTS, inputs._MIX, inputs._LANE_KEYS)))})
# the call inputs.fingerprint makes for a CUDA tensor, taken here for a CPU one (interpreted)
x = torch.randn(3 * TILE * 2 + 5)
one_pass = inputs._one_pass
inputs._one_pass = lambda bits: True
through = inputs.fingerprint(x)
inputs._one_pass = lambda bits: False
cases.append({"dtype": "through inputs.fingerprint", "n": x.numel(), "shape": list(through.shape),
              "equal": bool(torch.equal(through, inputs.fingerprint(x))), "sees_a_swap": True})
print(json.dumps(cases))
"""


@pytest.mark.slow  # a Python under TRITON_INTERPRET=1 (read when the kernel is decorated)
def test_the_triton_pass_is_the_torch_paths_hash_bit_for_bit():
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    import json

    cases = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(cases) == 10
    assert [c for c in cases if not c["equal"]] == []
    assert [c for c in cases if not c["sees_a_swap"]] == []
    assert cases[0]["shape"] == [4, 2]  # several blocks, the last one ragged


def test_only_compiled_cuda_tensors_take_the_triton_pass(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    assert not inputs._one_pass(torch.zeros(4, dtype=torch.int32))  # a CPU tensor: the torch path
    meta = torch.empty(4, dtype=torch.int32, device="meta")
    assert not inputs._one_pass(meta)


def test_the_triton_pass_refuses_what_it_does_not_read():
    from workbench.check.fingerprint_triton import TILE, fingerprint_bits

    with pytest.raises(ValueError, match="float32"):
        fingerprint_bits(torch.zeros(8), TILE, inputs._MIX, inputs._LANE_KEYS)
    with pytest.raises(ValueError, match="not a multiple"):
        fingerprint_bits(torch.zeros(8, dtype=torch.int32), TILE + 1, inputs._MIX, inputs._LANE_KEYS)


def test_a_triton_pass_that_fails_falls_back_to_the_torch_path_once_and_for_all(monkeypatch):
    # a GPU this Triton cannot build for must not fail every row's check: the torch path's hash is the same
    from workbench.check import fingerprint_triton

    calls = []

    def broken(*args):
        calls.append(args)
        raise RuntimeError("no kernel image for sm_120")

    monkeypatch.setattr(inputs, "_ONE_PASS_FAILED", [])
    monkeypatch.setattr(inputs, "_one_pass", lambda bits: not inputs._ONE_PASS_FAILED)
    monkeypatch.setattr(fingerprint_triton, "fingerprint_bits", broken)
    t = torch.randn(1000)
    first = inputs.fingerprint(t)
    assert len(calls) == 1 and "no kernel image" in inputs._ONE_PASS_FAILED[0]
    monkeypatch.setattr(inputs, "_one_pass", lambda bits: False)
    assert torch.equal(first, inputs.fingerprint(t))  # the torch path's answer
    monkeypatch.setattr(inputs, "_one_pass", lambda bits: not inputs._ONE_PASS_FAILED)
    inputs.fingerprint(t)
    assert len(calls) == 1  # not tried again in this process
