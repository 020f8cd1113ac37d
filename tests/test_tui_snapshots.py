"""Snapshots of each pane, rendered from committed results fixtures (no measured numbers).

Deterministic by construction: a fake catalog (an H200 with nvcc), a fake engine replaying
tests/fixtures/tui_*.json, a fixed terminal size, a fixed data directory, the Log's timestamps fixed, no
animations, notifications cleared. Update with `pytest tests/test_tui_snapshots.py --snapshot-update`
after checking the new SVGs by eye.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from textual.widgets import Input

from tui_helpers import (GELU_H200, SOFTMAX_SWEEP, fake_catalog, fake_opener, fake_session,
                         fixture_engine, fixture_from_results, loaded, wait_for)
from workbench.screens.app import WorkbenchApp
from workbench.session.model import ImplRef, RunSpec, Session

pytestmark = pytest.mark.slow  # every test here runs the whole Textual app (pyproject markers)

DATA_DIR = Path("/tmp/workbench-tui-snapshots")  # fixed: paths appear in the Log pane
SIZE = (120, 40)
SIZES = {"80x24": (80, 24), "120x40": (120, 40), "200x50": (200, 50)}
PROFILE_H200 = Path(__file__).parent / "fixtures" / "h200" / "lecture06-profile-2026-11-29.json"


@pytest.fixture
def data_dir(monkeypatch):
    from workbench.screens import runner
    from workbench.screens.panes import log as pane_log

    monkeypatch.setattr(pane_log, "clock", lambda: "12:00:00")  # the Log's times and a run's duration: fixed
    monkeypatch.setattr(runner, "duration", lambda seconds: "1.0 s")
    shutil.rmtree(DATA_DIR, ignore_errors=True)
    yield DATA_DIR
    shutil.rmtree(DATA_DIR, ignore_errors=True)


def make_app(fixture: Path = GELU_H200, sweep: bool = False) -> WorkbenchApp:
    return WorkbenchApp(None, None, engine=fixture_engine(fixture),
                        catalog_loader=lambda kernels, device: fake_catalog(),
                        opener=fake_opener(fake_session(sweep)), data_dir=DATA_DIR)


def after_run(*keys: str):
    """A run_before: wait for the ops, run the fixture, press `keys`, settle."""
    async def run_before(pilot) -> None:
        pilot.app.animation_level = "none"
        await loaded(pilot)
        await pilot.press("r")
        await wait_for(pilot, lambda: pilot.app.runs_finished == 1)
        await pilot.pause(0.3)
        for key in keys:
            await pilot.press(key)
        await pilot.pause(0.3)
        for field in pilot.app.query(Input):  # a focused field's blinking cursor: not in a snapshot
            field.cursor_blink = False
        await pilot.pause()
        pilot.app.clear_notifications()
        await pilot.pause()
    return run_before


@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("pane", ["1", "2", "3"], ids=["timing", "profile", "ptx"])
def test_pane_after_a_run(snap_compare, data_dir, pane, size):
    keys = (pane, "n", "n") if pane == "3" else (pane,)
    assert snap_compare(make_app(), terminal_size=SIZES[size], run_before=after_run(*keys))


@pytest.mark.parametrize("pane", ["4", "5"], ids=["traffic", "log"])
def test_pane(snap_compare, data_dir, pane):
    assert snap_compare(make_app(), terminal_size=SIZE, run_before=after_run(pane))


@pytest.mark.parametrize("size", ["80x24", "200x50"])
def test_profile_with_the_h200s_own_kernel_names(snap_compare, data_dir, size):
    """results/h200/lecture06-profile.json's gelu run: the profiler's 300-column template names."""
    gelu = RunSpec(op="gelu", impls=tuple(ImplRef(n) for n in ("manual", "pytorch", "compiled")),
                   shape={"M": 2048, "N": 2048}, dtype="float32", actions=("check", "bench", "profile"))
    app = WorkbenchApp(None, None, engine=fixture_engine(fixture_from_results(PROFILE_H200, 5)),
                       catalog_loader=lambda kernels, device: fake_catalog(),
                       opener=fake_opener(Session(name="h200-profile", runs=(gelu,))), data_dir=DATA_DIR)
    assert snap_compare(app, terminal_size=SIZES[size], run_before=after_run("2", "j"))


def test_80x24_spec_editor_one_key_away(snap_compare, data_dir):
    """Before a run: at 80x24 the medians chart's y labels (6 rows in 5 lines) vary from render
    to render, and the spec view is what this shows."""
    async def run_before(pilot) -> None:
        pilot.app.animation_level = "none"
        await loaded(pilot)
        await pilot.press("e")
        await pilot.pause(0.3)
        for field in pilot.app.query(Input):
            field.cursor_blink = False
        await pilot.pause()
    assert snap_compare(make_app(), terminal_size=(80, 24), run_before=run_before)


def test_roofline_legend_of_a_sweep(snap_compare, data_dir):
    assert snap_compare(make_app(SOFTMAX_SWEEP, sweep=True), terminal_size=SIZE,
                        run_before=after_run("4"))


def test_sweep_timing_in_gbps(snap_compare, data_dir):
    assert snap_compare(make_app(SOFTMAX_SWEEP, sweep=True), terminal_size=SIZE,
                        run_before=after_run("1", "m"))


def test_80x24_without_sidebar(snap_compare, data_dir):
    assert snap_compare(make_app(), terminal_size=(80, 24), run_before=after_run("b"))


def test_80x24_layout_before_a_run(snap_compare, data_dir):
    async def run_before(pilot) -> None:
        pilot.app.animation_level = "none"
        await loaded(pilot)
        await pilot.pause(0.3)
    assert snap_compare(make_app(), terminal_size=(80, 24), run_before=run_before)


def test_too_small_notice(snap_compare, data_dir):
    async def run_before(pilot) -> None:
        await loaded(pilot)
    assert snap_compare(make_app(), terminal_size=(56, 18), run_before=run_before)


def test_help_screen(snap_compare, data_dir):
    async def run_before(pilot) -> None:
        pilot.app.animation_level = "none"
        await loaded(pilot)
        await pilot.press("question_mark")
        await pilot.pause(0.3)
    assert snap_compare(make_app(), terminal_size=SIZE, run_before=run_before)
