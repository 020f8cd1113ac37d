"""The GPU evidence stage benchmarks/stages/check.py, tried on the CPU: its tasks run in worker
processes, a worker that dies loses only the task it was in (named with the exit code) and the
rest still run, every finished task is a JSON line, and the summary counts shipped passes and
known-wrong failures."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.stages import check as stage  # noqa: E402
from op_cases import PLUGINS  # noqa: E402


@pytest.mark.slow
def test_a_crashing_task_loses_only_itself(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONSAFEPATH", "1")  # as after an engine run in this process: no cwd on a child's path
    tasks = [stage._task("case", "gelu", "pytorch", {"M": 3, "N": 100}, "float32"),
             stage._task("case", "crashy", "manual_segv", {"N": 2}, "float32"),
             stage._task("case", "gelu", "manual_wrong_zeros", {"M": 3, "N": 100}, "bfloat16"),
             stage._task("memory", "add", "pytorch", {"M": 16, "N": 64}, "float16")]
    (tmp_path / "check_tasks.jsonl").write_text("")
    stage.run_group(tasks, tmp_path, "cpu", [str(PLUGINS / "known_wrong.py"), str(PLUGINS / "crashy.py")],
                    deadline=1e12)
    rows = {r["id"]: r for r in map(json.loads, (tmp_path / "check_tasks.jsonl").read_text().splitlines())}
    assert list(rows) == [t["id"] for t in tasks]
    right, crash, wrong, memory = (rows[t["id"]] for t in tasks)
    assert right["check"]["passed"] and right["sets"]["first"]["raw_elementwise"] < 1
    assert right["sets"]["first"]["least_factor"] == 1.0 and set(right["sets"]) == {"first", "special", "timed"}
    assert "worker died (exit -11)" in crash["error"]
    assert wrong["check"]["passed"] is False and wrong["check"]["gate"] == "elementwise+norm-wise"
    assert memory["check"]["passed"] and memory["estimate"]["footprint_bytes"] == 3 * 16 * 64 * 2
    summary = stage.summarise(list(rows.values()))
    assert summary["shipped_passed"] == 1 and summary["shipped_failed"] == [crash["id"]]
    assert summary["wrong_failed_with_gate"] == 1 and summary["wrong_passed"] == []


@pytest.mark.slow
def test_the_stage_runs_end_to_end_and_writes_its_json(tmp_path, monkeypatch):
    monkeypatch.setattr(stage, "ONLY", ("sleep",))
    table = stage.run(True, tmp_path)
    doc = json.loads((tmp_path / "check_results.json").read_text())
    assert doc["device"] == "cpu" and doc["summary"]["shipped"] == 3  # sleep's first spec, 3 dtypes
    assert doc["summary"]["shipped_passed"] == 3
    assert doc["summary"]["wrong"] > 0 and doc["summary"]["wrong_passed"] == []
    kinds = [row["part"] for row in table]
    assert "cases" in kinds and kinds.count("memory") == 3
    assert all(row["passed"] for row in table if row["part"] == "memory"), table


@pytest.mark.parametrize("quick", [True, False])
def test_the_big_rows_are_the_issue_14_rows(quick):
    tasks = stage.big_tasks(quick)
    assert tasks[-1]["impl"] == "triton_int32" and tasks[-1]["shape"] == {"M": 1, "N": 2**31 + 2**20}
    assert len(tasks) == (1 if quick else 7)
