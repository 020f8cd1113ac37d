"""Pilot regression tests for the issues found by a first user in tmux (one test per fix)."""

from __future__ import annotations

from textual.widgets import DataTable, Input, SelectionList, Static, TabbedContent

from tui_helpers import (SOFTMAX_SWEEP, fake_catalog, fake_opener, fake_session, fixture_engine,
                         loaded, ran, run_async, wait_for)
from workbench.screens.app import WorkbenchApp


def make_app(tmp_path, engine=None, **kwargs) -> WorkbenchApp:
    kwargs.setdefault("opener", fake_opener())
    return WorkbenchApp(None, None, engine=engine or fixture_engine(),
                        catalog_loader=lambda kernels, device: fake_catalog(), data_dir=tmp_path,
                        **kwargs)


@run_async
async def test_resizing_and_toggling_the_sidebar_after_a_run_never_crashes(tmp_path):
    """plotext log-transformed its data again on every re-render: math domain error."""
    app = make_app(tmp_path, engine=fixture_engine(SOFTMAX_SWEEP),
                   opener=fake_opener(fake_session(sweep=True)))
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        await ran(pilot)
        assert "log x" in str(app.query_one("#timing-caption", Static).render())
        for size in ((100, 30), (200, 50), (120, 40), (80, 24), (160, 45)):
            await pilot.resize_terminal(*size)
            await pilot.pause(0.1)
        for _ in range(4):
            await pilot.press("b")
            await pilot.pause(0.1)
        await pilot.press("4")  # the roofline (log-log) too
        await pilot.resize_terminal(100, 30)
        await pilot.pause(0.2)
        await pilot.resize_terminal(140, 40)
        await pilot.pause(0.2)
        assert app.is_running
        assert app.return_code is None


def test_a_plotting_error_is_a_line_in_the_chart_not_a_crash():
    from workbench.screens.chart_plot import ChartPlot

    def broken(plt):
        raise ValueError("math domain error")
    plot = ChartPlot()
    assert "chart not drawn: ValueError" in plot.draw(broken)
