"""`workbench --replay FILE --watch` in-process, against a stand-in for run_plan (no children):
each save re-runs what it changed and prints how it moved; a broken edit names its file and
line on stderr and the last good result stays (in -o too); Ctrl-C ends it with 130. The usage
rules of --watch. (The real engine's watch loop: test_examples.py.)"""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time

import pytest
from cli_fakes import run, user_dirs  # noqa: F401 (fixture)
from watch_fakes import PLUGIN, SESSION, rows_engine



@pytest.fixture(autouse=True)
def _user_dirs(user_dirs):
    """platformdirs' folders under tmp_path, no colour."""


def until(condition, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def watch_while(capsys, session, out, edits):
    """`--replay SESSION --watch -o OUT` while `edits()` saves files in a thread; then Ctrl-C."""
    def edit() -> None:
        edits()
        os.kill(os.getpid(), signal.SIGINT)
    helper = threading.Thread(target=edit)
    helper.start()
    try:
        return run(capsys, "--replay", str(session), "--watch", "-o", str(out))
    finally:
        helper.join(timeout=60)


@pytest.mark.slow  # the plugin's manifest is built in a subprocess
def test_watch_prints_what_each_save_moved_and_survives_a_broken_edit(capsys, tmp_path, monkeypatch):
    import workbench.engine.plan as plan

    plugin, session, out = tmp_path / "mine.py", tmp_path / "watched.yaml", tmp_path / "w.json"
    plugin.write_text(PLUGIN)
    session.write_text(SESSION)
    engine = rows_engine()
    monkeypatch.setattr(plan, "run_plan", engine)

    def edit() -> None:
        until(lambda: len(engine.calls) == 1)
        time.sleep(0.5)  # the watcher has taken its first look
        plugin.write_text(PLUGIN.replace("MEDIAN_MS = 2.0", "MEDIAN_MS = 1.5"))
        until(lambda: len(engine.calls) == 2)
        until(lambda: json.loads(out.read_text())["results"][0]["timing"]["median_ms"] == 1.5)
        plugin.write_text(PLUGIN.replace("def build(", "def build(("))
        time.sleep(1.5)
    code, stdout, stderr = watch_while(capsys, session, out, edit)
    assert code == 130
    assert engine.calls == [["manual_mine", "pytorch"], ["manual_mine"]]   # pytorch was not re-run
    assert "watch #2: 1 row(s) re-run, 1 kept" in stdout and "manual_mine: 2 ms -> 1.5 ms (-25.0%)" in stdout
    assert re.search(rf"error: plugin .*{re.escape(str(plugin.resolve()))}:9: SyntaxError", stderr)
    assert "nothing re-ran; the last results stay" in stderr and "changed: " in stderr
    assert "watch #3: not run: the edit did not load (the error is on stderr)" in stdout  # no gap on stdout
    kept = json.loads(out.read_text())                   # the last good document stays in -o
    assert [r["timing"]["median_ms"] for r in kept["results"]] == [1.5, 1.0]


@pytest.mark.parametrize("argv", [
    ["--check", "s.yaml", "--watch"],
    ["--list", "--watch"],
    ["--replay", "s.yaml", "--watch", "--compare", "base.json"],
    ["--replay", "s.yaml", "--watch", "--resume", "out.json"],
    ["--replay", "s.yaml", "--watch", "--format", "json"],
])
def test_watch_usage(capsys, argv):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == "" and "--watch" in err


@pytest.mark.slow  # the plugin's manifest is built in a subprocess
def test_an_edit_that_fails_its_check_is_failed_in_o_with_the_last_good_under_its_own_sha(capsys, tmp_path,
                                                                                           monkeypatch):
    """A fresh user's find: `--replay --watch -o` kept the row `ok`, check passed, under the
    provenance sha256 of the broken file. -o now has the new code's failure; the last good
    figures sit under `last_good` with the sha256 of the file they were measured from."""
    import workbench.engine.plan as plan
    from workbench.plugins.sources import sha256_file

    plugin, session, out = tmp_path / "mine.py", tmp_path / "watched.yaml", tmp_path / "w.json"
    plugin.write_text(PLUGIN)
    session.write_text(SESSION)
    good_sha = sha256_file(plugin)
    engine = rows_engine()
    monkeypatch.setattr(plan, "run_plan", engine)
    shas = []

    def edit() -> None:
        until(lambda: len(engine.calls) == 1)
        time.sleep(0.5)  # the watcher has taken its first look
        plugin.write_text(PLUGIN.replace("FAIL = None", 'FAIL = "check failed: elementwise gate (first inputs): x"'))
        shas.append(sha256_file(plugin))
        until(lambda: len(engine.calls) == 2)
        until(lambda: json.loads(out.read_text())["results"][0]["status"] == "failed")
    code, stdout, stderr = watch_while(capsys, session, out, edit)
    assert code == 130 and engine.calls == [["manual_mine", "pytorch"], ["manual_mine"]]
    assert "watch #2: 1 row(s) re-run (1 failed), 1 kept" in stdout
    assert "manual_mine: edit failed: check failed" in stdout and "the row is failed now" in stdout
    doc = json.loads(out.read_text())
    assert [p["sha256"] for p in doc["provenance"]["plugins"]] == shas     # the broken file's
    mine, pytorch = doc["results"]
    assert (mine["status"], mine["check"]["passed"], mine["timing"]) == ("failed", False, None)
    assert mine["last_good"]["record"]["status"] == "ok" and mine["last_good"]["record"]["timing"]["median_ms"] == 2.0
    assert [p["sha256"] for p in mine["last_good"]["plugins"]] == [good_sha] != shas
    assert pytorch["status"] == "ok" and "last_good" not in pytorch
