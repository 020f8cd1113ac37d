"""Regression tests: PTX n/N scroll the matched line into view at small sizes; help lists pane keys."""

from __future__ import annotations

import pytest

from tui_helpers import fake_catalog, fake_opener, fixture_engine, loaded, ran, run_async
from workbench.screens.app import WorkbenchApp

pytestmark = pytest.mark.slow  # every test here runs the whole Textual app (pyproject markers)


def make_app(tmp_path) -> WorkbenchApp:
    return WorkbenchApp(None, None, engine=fixture_engine(), opener=fake_opener(),
                        catalog_loader=lambda kernels, device: fake_catalog(), data_dir=tmp_path)




def _code_rows(app) -> list[str]:
    """The text rows of the PTX code area as drawn on screen (tabs expand, so compare by words)."""
    region = app.query_one("#ptx-scroll").scrollable_content_region
    strips = app.screen._compositor.render_strips()
    return [" ".join(strips[y].crop(region.x, region.right).text.split()) for y in range(region.y, region.bottom)]


@pytest.mark.parametrize("size", [(80, 24), (70, 22), (120, 40)])
@run_async
async def test_ptx_n_and_N_bring_the_matched_line_into_view(tmp_path, size):
    app = make_app(tmp_path)
    async with app.run_test(size=size) as pilot:
        await loaded(pilot)
        await ran(pilot)
        await pilot.press("3")
        await pilot.pause(0.1)
        pane = app.query_one("PtxPane")
        scroll = app.query_one("#ptx-scroll")
        lines = pane._view.text.split("\n")
        for key in ("n",) * 6 + ("N",) * 3:
            await pilot.press(key)
            await pilot.pause(0.05)
            await pilot.pause(0.05)
            current = pane._view.current
            shown = _code_rows(app)
            assert pane._view.text.split("\n")[current].split()[0] in "\n".join(shown), (size, key, shown)
            assert scroll.scroll_offset.y <= current < scroll.scroll_offset.y + len(shown)


@pytest.mark.parametrize("size", [(80, 24), (70, 22)])
@run_async
async def test_help_shows_the_keys_of_the_pane_on_show_without_scrolling(tmp_path, size):
    from workbench.screens.dialogs import HelpScreen

    app = make_app(tmp_path)
    async with app.run_test(size=size) as pilot:
        await loaded(pilot)
        await ran(pilot)
        await pilot.press("3")
        await pilot.pause(0.1)
        await pilot.press("question_mark")
        await pilot.pause(0.2)
        assert isinstance(app.screen, HelpScreen)
        rows = [" ".join(strip.text.split()) for strip in app.screen._compositor.render_strips()]
        shown = "\n".join(rows)
        assert "PTX pane" in shown
        for key, what in (("n", "Next"), ("N", "Prev"), ("f", "Filter"), ("r", "Run"), ("escape", "Cancel")):
            assert any(f"│ {key} {what}" in row for row in rows), (key, rows)
