"""The `plugins` GPU stage's watch part on the CPU (tiny, two edits): each save of the Triton
kernel's launch is new text, re-runs only the `triton` row in the same warm worker (reloaded in
place), and the timings and worker pids are written as it goes."""

from __future__ import annotations

import json
import time

import pytest

from benchmarks.stages import plugins as stage

pytestmark = pytest.mark.slow  # the engine's children


def test_the_stage_times_an_edit_and_reruns_only_the_triton_row(tmp_path):
    settings = stage._settings(gpu=False, quick=True)
    rows = stage.watch_rows({"M": 4, "N": 1024}, "float32", settings, tmp_path, edits=2,
                            deadline=time.monotonic() + 600, all_impls=False)
    first, edit, second = rows
    assert second["status"] == "ok" and second["reran"] == "triton", rows
    assert first["status"] == "ok" and edit["status"] == "ok", rows
    assert edit["reran"] == "triton"                       # pytorch kept its result
    assert 0 < edit["detect_s"] <= edit["started_s"] <= edit["total_s"]
    assert edit["line"].startswith("triton: ") and " ms -> " in edit["line"]
    report = json.loads((tmp_path / "plugins-watch.json").read_text())
    cycle, again = report["cycles"]
    assert cycle["reran"] == ["triton"] and cycle["edit"] == "num_warps 16 -> 8"
    assert again["edit"] == "num_warps 8 -> 4"                 # new text, not a revert
    assert stage.WARPS_RULE.format(4) in (tmp_path / "plugins-watch" / "rmsnorm.py").read_text()
    for c in (cycle, again):                                   # the same processes served the edits
        assert c["same_worker"] and c["pids_before"] == c["pids_after"] and c["starts"].get("reloaded")
        assert "cold" not in c["starts"]
