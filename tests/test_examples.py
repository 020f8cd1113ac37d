"""The shipped plugin example, for real (children, the Triton interpreter on CPU): the RMSNorm
session replays from another folder, and `--replay --watch` re-runs an edit of its kernel and
shows the time and the PTX counts that moved."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # children and the Triton interpreter: minutes on a CPU

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "rmsnorm.yaml"


def env_for(tmp_path) -> dict:
    env = dict(os.environ)
    for var, sub in (("XDG_CONFIG_HOME", "config"), ("XDG_DATA_HOME", "data"), ("XDG_CACHE_HOME", "cache")):
        env[var] = str(tmp_path / sub)
    env["NO_COLOR"] = "1"
    return env


def test_the_rmsnorm_example_replays_on_cpu_from_any_folder(tmp_path):
    out = tmp_path / "rmsnorm.json"
    proc = subprocess.run([sys.executable, "-m", "workbench", "--replay", str(EXAMPLE), "--device", "cpu",
                           "-o", str(out)], cwd=tmp_path, env=env_for(tmp_path), capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    rows = {r["label"]: r for r in doc["results"]}
    assert set(rows) == {"manual", "pytorch", "compiled", "triton"}
    assert all(r["status"] == "ok" and r["check"]["passed"] for r in rows.values()), rows
    assert rows["triton"]["timing"]["timer"] == "interpreter"
    kernel, = rows["triton"]["ptx"]["kernels"]                 # declared source: the launch's AOT PTX
    assert kernel["name"] == "_rmsnorm_kernel" and kernel["counts"]["ld_global_v4"] > 0
    assert rows["manual"]["traffic"]["bytes_moved_est"] > rows["triton"]["traffic"]["bytes_moved_est"]
    plugin, = doc["provenance"]["plugins"]
    assert plugin["path"] == str(ROOT / "examples" / "rmsnorm.py") and len(plugin["sha256"]) == 64


def test_the_rmsnorm_example_checks_from_any_folder(tmp_path):
    """--check failed outside examples/ ("--kernels rmsnorm.py: no such file or folder"): its
    row count declared the session's plugins relative to the working folder."""
    for cwd in (tmp_path, ROOT):
        proc = subprocess.run([sys.executable, "-m", "workbench", "--check", str(EXAMPLE)], cwd=cwd,
                              env=env_for(tmp_path), capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0 and "4 row(s)" in proc.stdout, proc.stderr


def test_replay_watch_reruns_an_edited_kernel_and_shows_what_moved(tmp_path):
    shutil.copy(ROOT / "examples" / "rmsnorm.py", tmp_path / "rmsnorm.py")
    session = tmp_path / "rmsnorm.yaml"
    session.write_text(EXAMPLE.read_text().replace("impls: all", "impls: [triton]")
                       .replace("M: 256, N: 1024", "M: 8, N: 1024").replace("rep_ms: 50", "rep_ms: 5"))
    out = tmp_path / "stdout.txt"
    with out.open("w") as stdout:
        proc = subprocess.Popen([sys.executable, "-m", "workbench", "--replay", str(session), "--watch"],
                                cwd=tmp_path, env=env_for(tmp_path), stdout=stdout, stderr=subprocess.PIPE,
                                text=True)
        try:
            wait_for_text(out, "run 0: rmsnorm", proc)
            source = (tmp_path / "rmsnorm.py").read_text()
            # 8 warps instead of 4 for a 1024-wide row: 4 floats a thread, one 16-byte load each of x and w
            (tmp_path / "rmsnorm.py").write_text(source.replace("return block, 4 if", "return block, 8 if"))
            wait_for_text(out, "watch #2", proc)
            wait_for_text(out, "triton: ", proc)
        finally:
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=60)
    text = out.read_text()
    assert proc.returncode == 130, err
    line = next(x for x in text.splitlines() if x.strip().startswith("triton: "))
    assert " ms -> " in line and "ptx ld_global_v4 4 -> 2" in line, text
    assert "changed: " in err and "rmsnorm.py" in err


def wait_for_text(path: Path, needle: str, proc, timeout_s: float = 400.0) -> None:
    deadline = time.monotonic() + timeout_s
    while needle not in path.read_text():
        assert proc.poll() is None, f"watch ended early: {path.read_text()}"
        assert time.monotonic() < deadline, f"no {needle!r} after {timeout_s} s: {path.read_text()}"
        time.sleep(0.2)
