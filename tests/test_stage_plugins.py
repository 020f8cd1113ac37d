"""The `plugins` GPU stage's watch part on the CPU (tiny, one edit): a save of the Triton
kernel's launch re-runs only the `triton` row, and the timings are written as it goes."""

from __future__ import annotations

import json
import time

import pytest

from benchmarks.stages import plugins as stage

pytestmark = pytest.mark.slow  # the engine's children


def test_the_stage_times_an_edit_and_reruns_only_the_triton_row(tmp_path):
    settings = stage._settings(gpu=False, quick=True)
    rows = stage.watch_rows({"M": 4, "N": 1024}, "float32", settings, tmp_path, edits=1,
                            deadline=time.monotonic() + 600, all_impls=False)
    first, edit = rows
    assert first["status"] == "ok" and edit["status"] == "ok", rows
    assert edit["reran"] == "triton"                       # pytorch kept its result
    assert 0 < edit["detect_s"] <= edit["started_s"] <= edit["total_s"]
    assert edit["line"].startswith("triton: ") and " ms -> " in edit["line"]
    report = json.loads((tmp_path / "plugins-watch.json").read_text())
    cycle, = report["cycles"]
    assert cycle["reran"] == ["triton"] and cycle["edit"] == "num_warps 16 ->  8"
    assert stage.WARPS_8 in (tmp_path / "plugins-watch" / "rmsnorm.py").read_text()
