"""A replay stopped by a signal keeps every finished row (real subprocesses, real children).

SIGTERM (`timeout`, `kill`, a batch scheduler), SIGHUP (a closed SSH session) and SIGINT stop the
run alike: the partial document is written with `cancelled: true` and `cancel_signal`, and the
exit code is 128 + the signal number. Before this, SIGTERM exited 143 in 0.02 s with nothing
written: 33 finished rows of an H200 replay were lost that way.

The session sleeps on the host (the `sleep` op): two short rows, then rows long enough that the
signal always lands while one of them runs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from workbench.results import journal

pytestmark = pytest.mark.slow  # every test here starts child processes (tests/conftest.py)

SESSION = """schema_version: 1
name: stop-test
settings: {device: cpu, warmup_ms: 1, rep_ms: 1, min_samples: 3, timeout_s: 60}
runs:
  - op: sleep
    impls: [manual]
    sweep: {params: [sleep_ms], values: [20, 30, 8000, 8001]}
"""
START_S = 120  # a cold child imports torch: slow on a loaded 2-core machine


def start(tmp_path: Path, *args: str, text: str = SESSION) -> subprocess.Popen:
    session = tmp_path / "stop.yaml"
    session.write_text(text)
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "XDG_DATA_HOME": str(tmp_path / "data")}
    return subprocess.Popen([sys.executable, "-m", "workbench", "--replay", str(session), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path,
                            start_new_session=True)  # its own process group, as under `timeout` or sshd


def wait_for_line(proc: subprocess.Popen, text: str) -> list[str]:
    """stderr lines up to the one containing `text` (the replay prints one per finished row)."""
    seen, deadline = [], time.monotonic() + START_S
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line and proc.poll() is not None:
            break
        seen.append(line)
        if text in line:
            return seen
    proc.kill()
    pytest.fail(f"no {text!r} on stderr: {''.join(seen)}")


def wait_for_mark(proc: subprocess.Popen, trace: Path, text: str, count: int = 1) -> None:
    """Until $WORKBENCH_TRACE holds `text` `count` times (the replay and its worker mark each step)."""
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline:
        if (trace.read_text() if trace.exists() else "").count(text) >= count:
            return
        time.sleep(0.02)
    proc.kill()
    pytest.fail(f"{text!r} not {count} time(s) in the trace: {trace.read_text() if trace.exists() else ''}")


@pytest.mark.parametrize("signum, to_group", [(signal.SIGTERM, False), (signal.SIGHUP, False), (signal.SIGINT, False),
                                              (signal.SIGTERM, True), (signal.SIGHUP, True),
                                              (signal.SIGTERM, "both")],
                         ids=["SIGTERM", "SIGHUP", "SIGINT", "SIGTERM-group", "SIGHUP-group", "SIGTERM-as-timeout"])
def test_a_signal_mid_replay_keeps_every_finished_row(tmp_path, signum, to_group):
    """To the process alone (`kill PID`), or to its whole group, children included (a closed
    SSH session hangs up the session's), or both at once as GNU `timeout` does (the process,
    then its group): that one arrived as two and aborted the run, leaving the row being timed
    out of the document."""
    target = tmp_path / "out.json"
    proc = start(tmp_path, "-o", str(target))
    wait_for_line(proc, "[2/4]")                   # two rows finished; the third (8 s) is running
    assert journal.journal_path(target).is_file(), "the finished rows are on disk already"
    if to_group == "both":
        proc.send_signal(signum)
        os.killpg(proc.pid, signum)
    elif to_group:
        os.killpg(proc.pid, signum)
    else:
        proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    doc = json.loads(target.read_text())
    assert proc.returncode == 128 + signum, err
    assert doc["cancelled"] is True and doc["cancel_signal"] == signum.name
    assert [r["status"] for r in doc["results"]] == ["ok", "ok", "skipped", "skipped"]
    assert [r["timing"]["n"] >= 3 for r in doc["results"][:2]] == [True, True]
    assert {r["error"] for r in doc["results"][2:]} == {"cancelled"}
    assert not journal.journal_path(target).exists(), "a JSON document can be resumed from: no journal left"
    assert f"{signum.name}: the results written are partial" in err


def test_a_second_signal_writes_what_finished_at_once(tmp_path, monkeypatch):
    trace = tmp_path / "trace.txt"
    monkeypatch.setenv("WORKBENCH_TRACE", str(trace))  # the replay marks when it has handled a signal
    proc = start(tmp_path, "--format", "json")
    wait_for_line(proc, "[2/4]")
    # the worker is in the 8 s row's first call, past its last look at the stop flag, so the cancel
    # waits for its kill (2 s). Sent at "[2/4]" alone, on a loaded CI machine the signal found the
    # worker between rows: it left at once, the replay ended within 0.2 s, and the second signal
    # came too late to be one (CI, 2026-12-02)
    wait_for_mark(proc, trace, "row sleep manual: references ready", count=3)
    proc.send_signal(signal.SIGTERM)
    # the first is handled (the run is stopping) before the second is sent: a fixed 0.5 s was not
    # enough on a loaded CI machine, where both arrived as one (CI, 2026-12-02)
    wait_for_mark(proc, trace, "stop: SIGTERM handled")
    time.sleep(0.2)                                 # past DUPLICATE_S: a second request, not timeout's echo
    proc.send_signal(signal.SIGTERM)                # ... and this one does not wait for the cancel
    out, err = proc.communicate(timeout=60)
    doc = json.loads(out)
    assert proc.returncode == 143, err
    assert "stopped by a second SIGTERM: writing the 2 finished row(s)" in err
    assert doc["cancelled"] is True and doc["cancel_signal"] == "SIGTERM"
    assert [r["status"] for r in doc["results"][:2]] == ["ok", "ok"] and doc["results"][1]["sweep_value"] == 30


def test_a_killed_run_leaves_its_journal_and_resume_completes_it(tmp_path):
    """SIGKILL cannot be caught: the journal is what survives; --resume runs only the rest."""
    session = SESSION.replace("[20, 30, 8000, 8001]", "[20, 30, 1000, 40]")
    target = tmp_path / "out.csv"
    proc = start(tmp_path, "-o", str(target), text=session)
    wait_for_line(proc, "[2/4]")                   # the third row (1 s a call) is running
    proc.kill()
    proc.communicate(timeout=30)
    partial = journal.read_partial(target)
    assert [r["sweep_value"] for r in partial["results"]] == [20, 30] and not target.exists()
    resumed = start(tmp_path, "--resume", str(target), text=session)
    _, err = resumed.communicate(timeout=START_S)
    assert resumed.returncode == 0, err
    assert "2 finished row(s) kept" in err and "[1/4]" not in err and "[3/4]" in err and "[4/4]" in err
    rows = target.read_text().splitlines()
    assert len(rows) == 5 and not journal.journal_path(target).exists()
    kept = {r["sweep_value"]: r["timing"]["median_ms"] for r in partial["results"]}
    assert all(f",{kept[v]}," in rows[i + 1] for i, v in enumerate((20, 30))), "kept rows as they were"
