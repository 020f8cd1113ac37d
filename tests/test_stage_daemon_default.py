"""benchmarks/stages/daemon_default.py's logic with its replays replaced (no children): the
order of the replays, which are the default and which --no-daemon, the medians' ratios and the
daemon stopped at the end whatever happened."""

from __future__ import annotations

import json

import pytest

from benchmarks.stages import daemon_default as stage


@pytest.fixture
def fake(monkeypatch):
    calls = []

    def replay(session, folder, env, default):
        calls.append((default, env.get("WORKBENCH_DAEMON")))
        if len(calls) == 5:
            raise RuntimeError("one replay failed")
        median = 1.0 if default else 1.005
        return 2.0 if default else 10.0, {"exit": 0, "daemon_pid": 7 if default else None,
                                          "started_line": default and len(calls) == 3, "rows_ok": "2/2",
                                          "medians_ms": {"pytorch": median, "manual": 2 * median}, "stderr_tail": ""}

    stopped = []
    monkeypatch.setattr(stage, "_replay", replay)
    monkeypatch.setattr(stage, "stop_daemons", lambda env, root: stopped.append(env["WORKBENCH_DAEMON_DIR"]) or [])
    monkeypatch.setattr("workbench.machine.probe", lambda: type("M", (), {"has_cuda": False})())
    monkeypatch.setenv("WORKBENCH_DAEMON", "0")  # the suite's; the stage's own replays must not inherit it
    return calls, stopped


def test_the_stage_interleaves_default_and_no_daemon_and_stops_its_daemon(tmp_path, fake):
    calls, stopped = fake
    rows = stage.run(quick=True, out=tmp_path)
    assert [default for default, _ in calls] == [False, False, True, True, False, True]
    assert all(flag is None for _, flag in calls)
    report = json.loads((tmp_path / "daemon_default" / "daemon-default.json").read_text())
    assert [r["step"] for r in report["replays"]] == ["no_daemon_cold", "no_daemon", "default_first",
                                                     "default_second", "default_3"]
    assert "one replay failed" in report["errors"]["no_daemon_1"]
    assert report["ratios"]["pytorch"] == pytest.approx(1 / 1.005) and report["within_1pct"] is True
    assert len(stopped) == 1
    assert any(r["replay"].startswith("worst") for r in rows)
