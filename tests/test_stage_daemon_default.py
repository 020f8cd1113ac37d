"""benchmarks/stages/daemon_default.py's logic with its replays replaced (no children): the
order of the replays, which are the default and which --no-daemon, the medians' ratios and the
daemon stopped at the end whatever happened."""

from __future__ import annotations

import json

import pytest

from benchmarks.stages import daemon_default as stage


@pytest.fixture
def fake(monkeypatch):
    calls, preloads = [], []

    def replay(session, folder, env, default):
        calls.append((default, env.get("WORKBENCH_DAEMON")))
        preloads.append(env.get("WORKBENCH_ZYGOTE_PRELOAD"))
        if len(calls) == 5:
            raise RuntimeError("one replay failed")
        median = 1.0 if default else 1.005
        return 2.0 if default else 10.0, {"exit": 0, "daemon_pid": 7 if default else None,
                                          "started_line": default and len(calls) == 3, "rows_ok": "2/2",
                                          "medians_ms": {"pytorch": median, "manual": 2 * median}, "stderr_tail": ""}

    stopped = []
    monkeypatch.setattr(stage, "_replay", replay)
    monkeypatch.setattr(stage, "user_bytecode", lambda: {"modules": 9, "without_bytecode": 4, "written_s": 0.5,
                                                         "ok": True})
    monkeypatch.setattr(stage, "stop_daemons", lambda env, root: stopped.append(env["WORKBENCH_DAEMON_DIR"]) or [])
    monkeypatch.setattr("workbench.machine.probe", lambda: type("M", (), {"has_cuda": False})())
    monkeypatch.setenv("WORKBENCH_DAEMON", "0")  # the suite's; the stage's own replays must not inherit it
    return calls, stopped, preloads


def test_the_stage_interleaves_default_and_no_daemon_and_stops_its_daemon(tmp_path, fake):
    calls, stopped, preloads = fake
    rows = stage.run(quick=True, out=tmp_path)
    assert preloads == [None] * 6 + ["0", "all"]  # the last two first runs: the zygote's preload off, all
    assert [default for default, _ in calls] == [False, False, True, True, False, True, True, True]
    assert all(flag is None for _, flag in calls)
    report = json.loads((tmp_path / "daemon_default" / "daemon-default.json").read_text())
    assert [r["step"] for r in report["replays"]] == ["no_daemon_cold", "no_daemon", "default_first",
                                                     "default_second", "default_3", "default_first_preload_0",
                                                     "default_first_preload_all"]
    assert "one replay failed" in report["errors"]["no_daemon_1"]
    assert report["ratios"]["pytorch"] == pytest.approx(1 / 1.005) and report["within_1pct"] is True
    assert len(stopped) == 1
    assert any(r["replay"].startswith("worst") for r in rows)
    assert rows[0]["replay"] == "bytecode written first: 4 of 9 modules had none" and report["bytecode"]["ok"]


def test_the_timelines_of_no_daemon_and_default_first_hold_their_own_marks(tmp_path, monkeypatch):
    """Every replay writes to one trace (the daemon's fingerprint holds WORKBENCH_TRACE); each
    traced replay's timeline is the marks of its own window, in s since its launch, with roles."""
    import time

    def line(t, pid, phase):
        return f"{t:.6f} {pid} {phase}\n"

    launches = []

    def replay(session, folder, env, default):
        trace = env["WORKBENCH_TRACE"]
        launched = time.monotonic() + 10 * len(launches)  # replays one after the other, 10 s apart
        launches.append(launched)
        with open(trace, "a") as f:
            f.write(line(launched + 0.1, 100, "client: process up"))
            f.write(line(launched + 0.2, 200 if default else 300, "zygote: start"))
            f.write(line(launched + 0.3, 400, "worker cuda:0: start"))
            f.write(line(launched + 0.35, 400, "after row: reset"))
        return 0.5, {"exit": 0, "daemon_pid": None, "started_line": False, "rows_ok": "1/1",
                     "medians_ms": {"pytorch": 1.0}, "stderr_tail": "", "launched": launched}

    monkeypatch.setattr(stage, "_replay", replay)
    monkeypatch.setattr(stage, "user_bytecode", lambda: {"modules": 9, "without_bytecode": 4, "written_s": 0.5,
                                                         "ok": True})
    monkeypatch.setattr(stage, "stop_daemons", lambda env, root: [])
    monkeypatch.setattr("workbench.machine.probe", lambda: type("M", (), {"has_cuda": False})())
    rows = stage.run(quick=True, out=tmp_path)
    report = json.loads((tmp_path / "daemon_default" / "daemon-default.json").read_text())
    assert sorted(report["timelines"]) == ["default_first", "no_daemon"]
    first = report["timelines"]["default_first"]
    assert [(round(t, 1), role.split()[0], phase) for t, role, phase in first] == [
        (0.1, "client", "client: process up"), (0.2, "zygote", "zygote: start"),
        (0.3, "worker", "worker cuda:0: start")]  # its window only; the reset marks left out
    assert sorted(report["milestones"]) == ["default_first", "default_first_preload_0", "default_first_preload_all",
                                            "no_daemon"]
    assert round(report["milestones"]["default_first_preload_all"]["zygote start"], 1) == 0.2
    assert report["milestones"]["no_daemon"]["worker warm"] is None  # no "heap settled" mark in its window
    assert any(r.get("phase") == "zygote: start" and r["replay"] == "no_daemon timeline" for r in rows)
    # the warm runs' timelines (where a warm run's seconds go) in the JSON, not in the table
    assert sorted(report["warm_timelines"]) == ["default_3", "default_second"]  # quick: one round
    assert [phase for _, _, phase in report["warm_timelines"]["default_3"]][0] == "client: process up"
    assert not any("default_3 timeline" in r["replay"] for r in rows)
