"""Stage `overhead` (benchmarks/stages/overhead.py): its figures file is the flat object of
seconds the issue names, written after every part, with a failing part's error kept beside."""

from __future__ import annotations

import json

from benchmarks.stages.overhead import TARGETS, Figures, _rows, _session_file


def test_the_figures_file_is_flat_and_written_as_parts_finish(tmp_path):
    figures = Figures(tmp_path)
    figures.detail["gpu"] = True
    figures.put("list_s", 0.41, walls_s=[0.5, 0.4])
    flat = json.loads((tmp_path / "engine-overhead.json").read_text())
    assert list(flat) == list(TARGETS) and flat["list_s"] == 0.41
    assert all(v is None for k, v in flat.items() if k != "list_s")
    figures.fail("tui", RuntimeError("textual is not installed here"))
    detail = json.loads((tmp_path / "engine-overhead-detail.json").read_text())
    assert detail["list_s"]["walls_s"] == [0.5, 0.4] and "textual" in detail["errors"]["tui"]
    rows = {r["figure"]: r for r in _rows(figures)}
    assert rows["list_s"]["met"] is True and rows["list_s"]["target"] == 1.0
    assert rows["key_latency_midrun_ms"]["value"] is None and "textual" in rows["key_latency_midrun_ms"]["error"]


def test_the_stages_sessions_load(tmp_path):
    from workbench.session import load_session

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
