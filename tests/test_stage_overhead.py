"""Stage `overhead` (benchmarks/stages/overhead.py): its figures file is the flat object of
seconds the issue names, written after every part, with a failing part's error kept beside."""

from __future__ import annotations

import json

import pytest

from benchmarks.stages.overhead import EXTRA, TARGETS, Figures, _rows, _session_file


def test_the_figures_file_is_flat_and_written_as_parts_finish(tmp_path):
    figures = Figures(tmp_path)
    figures.detail["gpu"] = True
    figures.put("list_s", 0.41, walls_s=[0.5, 0.4])
    flat = json.loads((tmp_path / "engine-overhead.json").read_text())
    assert list(flat) == [*TARGETS, *EXTRA] and flat["list_s"] == 0.41
    assert all(v is None for k, v in flat.items() if k != "list_s")
    figures.fail("tui", RuntimeError("textual is not installed here"))
    detail = json.loads((tmp_path / "engine-overhead-detail.json").read_text())
    assert detail["list_s"]["walls_s"] == [0.5, 0.4] and "textual" in detail["errors"]["tui"]
    rows = {r["figure"]: r for r in _rows(figures)}
    assert rows["list_s"]["met"] is True and rows["list_s"]["target"] == 1.0
    assert rows["key_latency_midrun_ms"]["value"] is None and "textual" in rows["key_latency_midrun_ms"]["error"]


def test_the_stages_sessions_load(tmp_path):
    from workbench.session.api import load_session

    for streaming in (False, True):
        path = _session_file(tmp_path, f"s{streaming}", ("manual", "pytorch"), 64, False, streaming=streaming)
        session = load_session(path)
        assert [r.name for r in session.runs[0].impls] == ["manual", "pytorch"]
        assert (session.settings.target_rel_error < 1e-5) == streaming


def test_tui_figures_are_saved_as_each_is_measured():
    """On the H200 the call's limit cut the TUI part before it returned and no TUI figure was
    written; each now goes to Figures.put when it is measured."""
    from benchmarks.stages._overhead_tui import _Saved

    seen = []
    figures = _Saved(lambda key, value, **detail: seen.append((key, value, detail)))
    figures["default_session_tui_s"] = (41.5, {"statuses": ["gelu:ok"]})
    assert seen == [("default_session_tui_s", 41.5, {"statuses": ["gelu:ok"]})]
    assert figures["default_session_tui_s"][0] == 41.5


@pytest.mark.slow
def test_the_replays_part_runs_on_cpu_and_stops_its_daemon(tmp_path, monkeypatch):
    """A CPU dry run of the replay part (two implementations at 64^2): every figure written, the
    daemon's second runs served by one daemon, which is stopped at the end, workers and all."""
    import os
    import time

    from benchmarks.stages import overhead

    monkeypatch.setattr(overhead, "FIVE", ("manual", "pytorch"))
    monkeypatch.setattr(overhead, "CPU_SIDE", 64)
    monkeypatch.setattr(overhead, "ONLY", ("replays",))
    monkeypatch.setattr(overhead, "_has_gpu", lambda: False)
    rows = {r["figure"]: r for r in overhead.run(True, tmp_path)}
    flat = json.loads((tmp_path / "overhead" / "engine-overhead.json").read_text())
    detail = json.loads((tmp_path / "overhead" / "engine-overhead-detail.json").read_text())
    assert detail["errors"] == {}
    for key in ("five_way_gelu_cold_s", "five_way_gelu_warm_per_process_s", "five_way_gelu_daemon_first_s",
                "five_way_gelu_warm_s", "one_row_warm_per_process_s", "one_row_warm_s", "daemon_vs_per_process_worst"):
        assert flat[key] is not None, key
    assert detail["five_way_gelu_warm_per_process_s"]["daemon"] is None
    assert detail["five_way_gelu_warm_s"]["daemon"]["runs"] == 2 and detail["one_row_warm_s"]["daemon"]["runs"] == 4
    assert set(detail["daemon_vs_per_process_worst"]["ratios"]) == {"manual", "pytorch"}
    assert rows["daemon/per-process median, worst |ratio-1|"]["value"] == pytest.approx(flat["daemon_vs_per_process_worst"], abs=1e-4)
    stopped = detail["daemon_stopped"]
    assert [d["pid"] for d in stopped] == [detail["five_way_gelu_warm_s"]["daemon"]["pid"]]
    time.sleep(0.5)
    assert not os.path.exists(f"/proc/{stopped[0]['pid']}/cmdline") or \
        open(f"/proc/{stopped[0]['pid']}/stat").read().rsplit(")", 1)[1].split()[0] == "Z"
