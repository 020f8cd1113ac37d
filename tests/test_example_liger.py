"""examples/liger.py: Liger-Kernel's softmax and RMSNorm forwards as `triton_liger` on the shipped
softmax op and the example rmsnorm op; where liger_kernel is not installed (or there is no GPU)
the rows are `unavailable` and say why (on a machine without a CUDA GPU, at any size: the
implementations declare `cuda_device`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow  # a replay (children)
def test_liger_rows_say_why_they_cannot_run_here(tmp_path):
    session = yaml.safe_load((ROOT / "examples" / "liger.yaml").read_text())
    session["plugins"] = [str(ROOT / "examples" / p) for p in session["plugins"]]
    session["settings"] = {"device": "cpu", "warmup_ms": 1, "rep_ms": 5, "min_samples": 3}
    big = [dict(run, impls=["triton_liger"]) for run in session["runs"]]  # the session's own shapes
    for run in session["runs"]:  # tiny shapes: the other rows run under the interpreter
        run.update(shape={"M": 2, "N": 64}, dtype="float32", actions=["check", "bench"], impls=["pytorch", "triton_liger"])
    session["runs"] += big
    path = tmp_path / "liger.yaml"
    path.write_text(yaml.safe_dump(session))
    out = tmp_path / "out.json"
    proc = subprocess.run([sys.executable, "-m", "workbench", "--replay", str(path), "-o", str(out)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    results = json.loads(out.read_text())["results"]
    rows = {(r["op"], r["label"], r["run_index"]): r for r in results}
    assert set(rows) == {(op, impl, index) for index, op in enumerate(("softmax", "rmsnorm"))
                         for impl in ("pytorch", "triton_liger")} | {("softmax", "triton_liger", 2),
                                                                      ("rmsnorm", "triton_liger", 3)}
    for (op, impl, index), row in rows.items():
        if impl == "pytorch":
            assert row["status"] == "ok"
            continue
        # the session's own shapes (runs 2 and 3) too: unavailable, never skipped as too slow on this CPU
        assert row["status"] == "unavailable", row
        assert "needs a CUDA" in row["error"], row["error"]


def test_the_session_names_the_peers_and_validates():
    data = yaml.safe_load((ROOT / "examples" / "liger.yaml").read_text())
    assert data["plugins"] == ["rmsnorm.py", "liger.py"]  # rmsnorm's op first: liger attaches to it
    assert all("triton_liger" in run["impls"] for run in data["runs"])


@pytest.mark.slow  # a child python (importing the plugin registers into that process's registry)
def test_on_a_gpu_without_liger_the_builder_says_how_to_install(tmp_path):
    code = f"""
import importlib.util, sys, types
from workbench.errors import UnavailableError
from workbench.registry import REGISTRY, discover
examples = {str(ROOT / "examples")!r}
discover([examples + "/rmsnorm.py", examples + "/liger.py"])
ctx = types.SimpleNamespace(interpret=False, is_cuda=True)
for op in ("softmax", "rmsnorm"):
    impl = REGISTRY.op(op).get_impl("triton_liger")
    assert "cuda_device" in impl.needs, impl.needs
    try:
        impl.builder(None, None, ctx)
    except UnavailableError as exc:
        print("unavailable:", exc)
    else:
        print("built")
print("installed" if importlib.util.find_spec("liger_kernel") else "missing")
"""
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    if lines[-1] == "missing":
        assert lines[:2] == ["unavailable: liger_kernel is not installed: pip install liger-kernel (0.8.5 works "
                             "with torch 2.11 and Triton 3.6)"] * 2, lines
    else:
        assert lines[:2] == ["built"] * 2, lines
