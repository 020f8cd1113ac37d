"""examples/liger.py: Liger-Kernel's softmax and RMSNorm forwards as `triton_liger` on the shipped
softmax op and the example rmsnorm op; where liger_kernel is not installed (or there is no GPU)
the rows are `unavailable` and say why."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
NO_LIGER = importlib.util.find_spec("liger_kernel") is None


@pytest.mark.slow  # a replay (children)
def test_liger_rows_say_why_they_cannot_run_here(tmp_path):
    session = yaml.safe_load((ROOT / "examples" / "liger.yaml").read_text())
    session["plugins"] = [str(ROOT / "examples" / p) for p in session["plugins"]]
    session["settings"] = {"device": "cpu", "warmup_ms": 1, "rep_ms": 5, "min_samples": 3}
    for run in session["runs"]:  # tiny shapes: the other rows run under the interpreter
        run.update(shape={"M": 2, "N": 64}, dtype="float32", actions=["check", "bench"], impls=["pytorch", "triton_liger"])
    path = tmp_path / "liger.yaml"
    path.write_text(yaml.safe_dump(session))
    out = tmp_path / "out.json"
    proc = subprocess.run([sys.executable, "-m", "workbench", "--replay", str(path), "-o", str(out)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    rows = {(r["op"], r["label"]): r for r in json.loads(out.read_text())["results"]}
    assert set(rows) == {(op, impl) for op in ("softmax", "rmsnorm") for impl in ("pytorch", "triton_liger")}
    for op in ("softmax", "rmsnorm"):
        assert rows[(op, "pytorch")]["status"] == "ok"
        liger = rows[(op, "triton_liger")]
        assert liger["status"] == "unavailable", liger
        why = "liger_kernel is not installed: pip install liger-kernel" if NO_LIGER else "need a CUDA GPU"
        assert why in liger["error"]


def test_the_session_names_the_peers_and_validates():
    data = yaml.safe_load((ROOT / "examples" / "liger.yaml").read_text())
    assert data["plugins"] == ["rmsnorm.py", "liger.py"]  # rmsnorm's op first: liger attaches to it
    assert all("triton_liger" in run["impls"] for run in data["runs"])
