"""End-to-end replay through the real CLI and engine (subprocesses, CPU): the shipped smoke
session and a user's plugin. Asserts on status, checks, the results contract and sample
counts, never on speed.

The full `smoke` session (every implementation of every op, a few minutes on CPU) is replayed
too when WORKBENCH_FULL_SMOKE=1; CI replays `smoke-quick` (every op once).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.results import report
from workbench.results.baseline import compare_documents
from workbench.results.document import missing_keys
from workbench.session.api import load_session, shipped_path

pytestmark = pytest.mark.slow  # every test here starts child processes (tests/conftest.py)

PLUGIN = Path(__file__).parent / "plugins" / "cli_plugin.py"
CPU_TIMERS = {"perf_counter", "interpreter"}


def workbench(*args: str, cwd: Path | None = None, timeout: int = 540) -> subprocess.CompletedProcess:
    """Run `python -m workbench ARGS` in a fresh interpreter."""
    return subprocess.run([sys.executable, "-m", "workbench", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd)


def replay_json(name: str, tmp_path_factory) -> tuple[subprocess.CompletedProcess, dict]:
    out = tmp_path_factory.mktemp(name) / f"{name}.json"
    proc = workbench("--replay", name, "--format", "json", "-o", str(out), "--device", "cpu")
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc, json.loads(out.read_text())


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    return replay_json("smoke-quick", tmp_path_factory)


def assert_sound(doc: dict, session_name: str) -> None:
    """The checks every CPU replay must pass, whatever the op."""
    from workbench.plugins.manifest import declare
    from workbench.registry import Need

    session = load_session(shipped_path(session_name), check_ops=False)
    registry = declare([])
    assert missing_keys(doc) == [], "every contract key is present"
    assert doc["provenance"]["session"] == session_name
    assert doc["provenance"]["session_sha256"] == hashlib.sha256(shipped_path(session_name).read_bytes()).hexdigest()
    assert doc["cancelled"] is False
    for rec in doc["results"]:
        where = f"{rec['op']}/{rec['label']} {rec['shape']}"
        run = session.runs[rec["run_index"]]
        min_samples = run.settings.get("min_samples", session.settings.min_samples)
        if Need.cuda_device in registry.op(rec["op"]).get_impl(rec["impl"]).needs:  # cuda, cuda_naive, cupy
            assert rec["status"] == "unavailable" and "GPU" in rec["error"], where
            continue
        if rec["dtype"].startswith("float8") and rec["impl"].startswith("triton") and rec["status"] == "unavailable":
            assert "Triton interpreter cannot write float8" in rec["error"], where  # Triton 3.6's CPU fp8 casts
            continue
        assert rec["status"] == "ok", f"{where}: {rec['error']}"
        assert rec["error"] is None and rec["device"] == "cpu"
        assert rec["check"]["passed"] is True, where
        assert rec["timing"]["n"] >= min_samples, where
        assert rec["timing"]["timer"] in CPU_TIMERS, where
        assert (rec["timing"]["timer"] == "interpreter") == rec["impl"].startswith("triton"), where
        assert rec["timing"]["p20_ms"] <= rec["timing"]["median_ms"] <= rec["timing"]["p80_ms"], where
        assert rec["build_ms"] is not None and rec["build_ms"] >= 0


def test_smoke_replay_is_sound(smoke):
    _, doc = smoke
    assert_sound(doc, "smoke-quick")


def test_smoke_covers_every_shipped_op(smoke):
    from workbench.registry import discover

    _, doc = smoke
    shipped = {n for n, op in discover().ops.items() if op.spec.__module__.startswith("workbench.kernels")}
    assert shipped <= {r["op"] for r in doc["results"]}


def test_smoke_rows_follow_the_session(smoke):
    _, doc = smoke
    labels = [(r["run_index"], r["label"], r["sweep_value"]) for r in doc["results"]]
    assert labels[:3] == [(0, "manual", None), (0, "triton128", None), (0, "cuda_naive", None)]
    sweep = [r for r in doc["results"] if r["sweep_value"] is not None]
    assert [(r["sweep_value"], r["shape"]["N"]) for r in sweep] == [(7, 7), (64, 64)]
    triton = doc["results"][1]
    assert triton["params"] == {"BLOCK_SIZE": 128} and triton["impl"] == "triton"


def test_smoke_profile_and_ptx_actions(smoke):
    _, doc = smoke
    manual, triton, _cuda = doc["results"][:3]
    assert manual["profile"] is not None and manual["profile"]["rows"], "profile asked, profile given"
    assert any("mul" in row["name"] for row in manual["profile"]["rows"])
    assert triton["ptx"] is not None and triton["ptx"]["kernels"], "Triton PTX without a GPU (AOT)"
    assert doc["results"][3]["profile"] is None and doc["results"][3]["ptx"] is None, "not asked"


def test_smoke_progress_goes_to_stderr(smoke):
    proc, doc = smoke
    assert proc.stdout == "", "with -o, nothing on stdout"
    assert f"[{len(doc['results'])}/{len(doc['results'])}]" in proc.stderr


def test_smoke_document_renders_in_every_format(smoke):
    _, doc = smoke
    rows = list(csv.DictReader(io.StringIO(report.to_csv(doc))))
    assert len(rows) == len(doc["results"]) and "timing.median_ms" in rows[0]
    table = report.to_table(doc)
    assert "triton128" in table and "interpreter" in table and "unavailable" in table
    assert json.loads(report.to_json(doc)) == json.loads(json.dumps(doc))
    comparison = compare_documents(doc, doc)
    assert comparison.regressions == 0 and not comparison.different_gpu


def test_plugin_through_kernels_and_session_plugins(tmp_path):
    """--kernels PATH adds an op and a gelu implementation; a session's `plugins` does too."""
    listing = workbench("--list", "--format", "json", "--kernels", str(PLUGIN))
    assert listing.returncode == 0, listing.stderr
    ops = {op["name"]: op for op in json.loads(listing.stdout)["ops"]}
    assert {"manual", "pytorch"} <= {i["name"] for i in ops["cli_scale"]["impls"]}
    assert "pytorch_cliplugin" in {i["name"] for i in ops["gelu"]["impls"]}

    session = tmp_path / "mine.yaml"
    session.write_text("schema_version: 1\nname: mine\nsettings: {device: cpu, warmup_ms: 1, rep_ms: 5,"
                       " min_samples: 3, flush_l2: false}\nruns:\n  - op: cli_scale\n    shape: {N: 64}\n"
                       "  - op: gelu\n    impls: [pytorch_cliplugin]\n    shape: {M: 2, N: 8}\n")
    unknown = workbench("--check", str(session))
    assert unknown.returncode == 2 and 'unknown op "cli_scale"' in unknown.stderr

    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "cli_plugin.py").write_text(PLUGIN.read_text())
    session.write_text(session.read_text().replace("name: mine\n", "name: mine\nplugins: [plugins/cli_plugin.py]\n"))
    replay = workbench("--replay", str(session), "--format", "csv", cwd=tmp_path.parent)
    assert replay.returncode == 0, replay.stderr[-3000:]
    rows = list(csv.DictReader(io.StringIO(replay.stdout)))
    assert [(r["op"], r["label"], r["status"], r["check.passed"]) for r in rows] == [
        ("cli_scale", "manual", "ok", "true"), ("cli_scale", "pytorch", "ok", "true"),
        ("gelu", "pytorch_cliplugin", "ok", "true")]


def test_full_smoke_replay(tmp_path_factory):
    """Every implementation of every op at the smoke session's tiny CPU sizes (26 s with cold
    caches on the 2-core CPU box, 6-12 s warm; it was skipped as "minutes" unless asked for)."""
    _, doc = replay_json("smoke", tmp_path_factory)
    assert_sound(doc, "smoke")
