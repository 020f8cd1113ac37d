"""The check inside the engine (a real child process, run_plan): a shipped row is checked on all
three input sets and timed; known-wrong ones that are right once and then a no-op, or cache by
pointer, are caught at the timed set and get no speed; one with a wrong dtype fails before timing; every record
carries its size estimate."""

from __future__ import annotations

import pytest

from op_cases import PLUGINS
from workbench.engine.plan import RunOptions, run_plan
from workbench.results.document import missing_keys
from workbench.session.model import ImplRef, RunSpec, Session, Settings

pytestmark = pytest.mark.slow  # every test here starts child processes (tests/conftest.py)

SETTINGS = Settings(device="cpu", warmup_ms=1.0, rep_ms=5.0, min_samples=3, timeout_s=120.0)


@pytest.fixture(scope="module")
def doc(tmp_path_factory):
    session = Session(name="check-engine", settings=SETTINGS, plugins=(str(PLUGINS / "known_wrong.py"),), runs=(
        RunSpec(op="softmax", impls=(ImplRef("pytorch"), ImplRef("manual_wrong_dtype")),
                shape={"M": 8, "N": 300}, dtype="float32", actions=("check", "bench")),
        # cdist declares no special set: a stale result survives until the timed set
        RunSpec(op="cdist", impls=(ImplRef("manual_wrong_once"), ImplRef("manual_wrong_ptrcache")),
                shape={"M": 8, "N": 9, "D": 3}, dtype="float32", actions=("check", "bench")),))
    return run_plan(session, on_event=lambda event: None,
                    options=RunOptions(cache_dir=tmp_path_factory.mktemp("cache"), argv=("pytest",)))


def _row(doc, impl):
    return next(r for r in doc["results"] if r["impl"] == impl)


def test_a_right_row_is_checked_on_every_set_and_timed(doc):
    assert missing_keys(doc) == []
    row = _row(doc, "pytorch")
    assert row["status"] == "ok", row["error"]
    assert row["check"]["passed"] and row["check"]["sets_checked"] == ["first", "special", "timed"]
    assert row["timing"]["median_ms"] > 0
    assert row["estimate"]["footprint_bytes"] == 2 * 8 * 300 * 4 and row["estimate"]["memory_bytes"] > 0


@pytest.mark.parametrize("impl", ["manual_wrong_once", "manual_wrong_ptrcache"])
def test_a_stale_result_is_caught_after_timing_and_gets_no_speed(doc, impl):
    row = _row(doc, impl)
    assert row["status"] == "failed" and row["check"]["input_set"] == "timed", row["error"]
    assert row["check"]["sets_checked"] == ["first", "timed"]
    assert row["error"].startswith("check failed: elementwise") and "(timed inputs)" in row["error"]
    assert row["timing"] is None and row["traffic"] is None


def test_a_wrong_dtype_fails_before_timing(doc):
    row = _row(doc, "manual_wrong_dtype")
    assert row["status"] == "failed" and row["check"]["gate"] == "dtype"
    assert row["error"] == "check failed: dtype gate (first inputs): output dtype float64 != expected float32"
    assert row["timing"] is None
