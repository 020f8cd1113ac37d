"""What a new user tripped over in the TUI (issue 42 items 7-10): focus, m and s, integer sweep
ticks, the Traffic pane's interpreter rows and height, the footer, the run summary, Log times.
Pilot tests (slow: each runs the whole Textual app) and plain unit tests."""

from __future__ import annotations

import re

import pytest

from tui_helpers import (GELU_H200, fake_catalog, fake_opener, fake_session, fixture_engine,
                         loaded, ran, run_async, wait_for)
from workbench.screens.panes import charts
from workbench.screens.app import WorkbenchApp
from workbench.screens.model import Row
from workbench.screens.runner import duration, summary


def make_app(tmp_path, fixture=GELU_H200, sweep: bool = False) -> WorkbenchApp:
    return WorkbenchApp(None, None, engine=fixture_engine(fixture), opener=fake_opener(fake_session(sweep)),
                        catalog_loader=lambda kernels, device: fake_catalog(), data_dir=tmp_path)


def _in_a_section(app) -> bool:
    focused = app.focused
    return focused is not None and any(n.has_class("box") for n in focused.ancestors_with_self)


# -- item 7: focus, m, s ---------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
@run_async
async def test_shift_tab_never_leaves_no_section_focused(tmp_path, size):
    app = make_app(tmp_path)
    async with app.run_test(size=size) as pilot:
        await loaded(pilot)
        for _ in range(12):
            await pilot.press("shift+tab")
            await pilot.pause(0.05)
            assert _in_a_section(app), app.focused
        app.screen.set_focus(None)  # focus gone (a widget that had it removed, hidden)
        await pilot.pause(0.3)
        assert _in_a_section(app), app.focused
        await pilot.press("shift+tab", "shift+tab")
        await pilot.pause(0.1)
        assert _in_a_section(app)


@pytest.mark.slow
@run_async
async def test_m_changes_the_metric_whenever_timing_is_shown(tmp_path):
    """The caption offers `m`; it worked only with focus inside the Timing pane."""
    from workbench.screens.panes.timing import TimingPane

    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        await ran(pilot)
        app.query_one("#op-list").focus()  # the run list has the keyboard, Timing is on show
        await pilot.pause(0.1)
        pane = app.query_one(TimingPane)
        before = pane.metric
        await pilot.press("m")
        await pilot.pause(0.1)
        assert pane.metric != before
        await pilot.press("2")  # another pane on show: m does nothing to the hidden chart
        await pilot.pause(0.1)
        shown = pane.metric
        await pilot.press("m")
        await pilot.pause(0.1)
        assert pane.metric == shown


@pytest.mark.slow
@run_async
async def test_s_in_profile_marks_the_sorted_column_and_reorders(tmp_path):
    from workbench.screens.keys import KeyDataTable
    from workbench.screens.panes.profile import ProfilePane

    app = make_app(tmp_path)
    async with app.run_test(size=(200, 50)) as pilot:
        await loaded(pilot)
        await ran(pilot)
        await pilot.press("2")
        await pilot.pause(0.2)
        table = app.query_one(ProfilePane).query_one(KeyDataTable)
        assert table.row_count > 1

        def header() -> list[str]:
            return [str(c.label) for c in table.ordered_columns]

        def names() -> list[str]:  # in the order on screen
            return [str(table.get_cell_at((i, 0))) for i in range(table.row_count)]
        assert "device µs ▼" in header()
        first = names()
        await pilot.press("s")
        await pilot.pause(0.1)
        assert names() != first  # the first s already shows another order
        marked = next(h for h in header() if h.endswith(("▼", "▲")))
        assert f"sorted by {marked} (s)" in str(app.query_one("#profile-summary").render())
        orders = set()
        for _ in range(6):
            before = header()
            await pilot.press("s")
            await pilot.pause(0.1)
            marked = [h for h in header() if h.endswith(("▼", "▲"))]
            assert len(marked) == 1 and header() != before
            orders.add(tuple(names()))
        assert len(orders) > 1  # the rows' order changed on screen


# -- item 8: whole sweep values, whole ticks -----------------------------------------------------
def test_integer_ticks_are_the_sweep_values_spaced_out():
    assert charts.integer_ticks([64, 127, 191, 255], log=False) == [64, 127, 191, 255]
    assert charts.integer_ticks([64, 128, 256, 512, 1024], log=True) == [64, 128, 256, 512, 1024]
    assert charts.integer_ticks([100, 101, 102, 2000], log=False) == [100, 2000]
    assert charts.integer_ticks([1.5, 2], log=False) == []
    ticks = charts.integer_ticks(list(range(1, 101)), log=False)
    assert ticks[0] == 1 and ticks[-1] == 100 and len(ticks) <= charts.MAX_X_TICKS + 1


def test_a_sweep_of_whole_numbers_has_no_fractional_ticks():
    from textual_plotext.plot import Plot

    rows = []
    for n in (64, 127, 191, 255):
        row = Row(label="manual", impl="manual", sweep_value=n, status="ok")
        row.record = {"timing": {"median_ms": n / 100}}
        rows.append(row)
    plt = Plot()
    charts.sweep(plt, rows, "time", "N")
    plt.plotsize(60, 12)
    axis = re.sub(r"\x1b\[[0-9;]*m", "", plt.build()).splitlines()[-1]
    assert axis.split() == ["64", "127", "191", "255"], axis


# -- item 9: the Traffic pane -------------------------------------------------------------------
def test_roofline_names_interpreter_rows():
    from textual_plotext.plot import Plot

    points = [("manual", None, 0.5, 0.001), ("triton", None, 0.5, 0.0)]
    text = charts.roofline(Plot(), points, None, None, interpreted={"triton"}).plain
    assert "triton (not placed: Triton interpreter: no GPU speed)" in text
    assert "zero/NaN" not in text


@pytest.mark.parametrize("points", [[("triton", None, 0.28, None)], [("triton", None, 0.28, 0.0)],
                                    [("triton", None, 0.28, None), ("cuda", None, 0.28, None)]])
def test_a_roofline_with_no_point_placed_builds(points):
    """Only interpreted rows on a CPU (no ceiling line, nothing placed): plotext's build raised
    TypeError ('NoneType' object is not iterable) on empty log axes, and the Traffic pane showed
    'chart not drawn: TypeError ...' (a new user's try)."""
    from textual_plotext.plot import Plot

    plt = Plot()
    text = charts.roofline(plt, points, None, None, interpreted={"triton"}).plain
    plt.plotsize(60, 12)
    assert "┌" in plt.build()  # the empty axes, no exception
    assert "triton (not placed: Triton interpreter: no GPU speed)" in text and "log x" not in text


@pytest.mark.slow
@run_async
async def test_traffic_table_shows_every_row_at_80x24(tmp_path):
    from workbench.screens.panes.traffic import TrafficPane
    from workbench.screens.keys import KeyDataTable

    app = make_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        await ran(pilot)
        await pilot.press("4")
        await pilot.pause(0.3)
        table = app.query_one(TrafficPane).query_one(KeyDataTable)
        assert table.row_count >= 4
        assert table.max_scroll_y == 0, (table.row_count, table.size)  # all rows in view


# -- item 10: footer, summary, Log --------------------------------------------------------------
def _footer_keys(screen) -> list[str]:
    from workbench.screens.fitting import FittedFooter

    return [w.description for w in screen.query_one(FittedFooter).query("FooterKey")]


@pytest.mark.slow
@run_async
async def test_footer_follows_the_pane_and_an_open_dialog(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(200, 50)) as pilot:
        await loaded(pilot)
        await ran(pilot)
        await pilot.press("2")
        await wait_for(pilot, lambda: "Sort" in _footer_keys(app.screen), 2)
        await pilot.press("3")
        await wait_for(pilot, lambda: "Sort" not in _footer_keys(app.screen), 2)
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: app.screen is not app.screen_stack[0], 2)
        await wait_for(pilot, lambda: _footer_keys(app.screen) == ["Close"], 2)


def test_summary_says_cancelled_only_when_a_row_was_cut():
    finished = {"results": [{"status": "ok", "timing": {"median_ms": 1.0}}] * 4}
    assert summary(finished, True) == "done: 4 ok"
    cut = {"results": [{"status": "ok"}, {"status": "skipped", "error": "cancelled"}]}
    assert summary(cut, True).startswith("cancelled: ")


def test_duration_reads_as_seconds_then_minutes():
    assert duration(8.24) == "8.2 s"
    assert duration(125) == "2 min 05 s"


@pytest.mark.slow
@run_async
async def test_log_lines_carry_times_and_a_run_its_duration(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        await ran(pilot)
        await pilot.press("5")
        await pilot.pause(0.3)
        log = app.log_pane
        assert len(log.stamps) == len(log.entries)
        assert all(re.fullmatch(r"\d\d:\d\d:\d\d", s) for s in log.stamps)
        lines = [strip.text for strip in log.lines]
        assert any(re.match(r"\d\d:\d\d:\d\d ", line) for line in lines), lines[:4]
        assert any(re.search(r"run 0 done: .* · took \d+\.\d s", text) for _, text in log.entries), log.entries


# -- issue 39 item 3: a streaming run redraws only the pane on screen ----------------------------
@pytest.mark.slow
@run_async
async def test_a_streaming_run_redraws_only_the_pane_on_screen(tmp_path):
    from workbench.screens.panes.profile import ProfilePane

    app = WorkbenchApp(None, None, engine=fixture_engine(GELU_H200, delay_s=0.4), opener=fake_opener(),
                       catalog_loader=lambda kernels, device: fake_catalog(), data_dir=tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        profile = app.query_one(ProfilePane)
        sets = []
        watch = type(profile).watch_model
        type(profile).watch_model = lambda self, model: (sets.append(model), watch(self, model))[1]
        try:
            await pilot.press("r")
            await wait_for(pilot, lambda: app.runs_finished == 0 and app.ws.model().rows, 10)
            sets.clear()  # (the run's start clears every pane once)
            await pilot.pause(1.0)  # redraws while Timing is shown
            assert app.running
            assert not sets  # the hidden Profile pane was not rebuilt
            assert ProfilePane in app._behind
            await pilot.press("2")
            await wait_for(pilot, lambda: bool(sets), 2)  # brought up to date once shown
            assert ProfilePane not in app._behind or app.running
            await wait_for(pilot, lambda: app.runs_finished == 1, 20)
        finally:
            type(profile).watch_model = watch
