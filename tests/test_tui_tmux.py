"""Pilot regression tests for what a fresh user found in tmux (log width, typing fast, focus
after the sidebar toggle, the 80x24 layout). One test per fix; each failed before it."""

from __future__ import annotations

import pytest

from tui_helpers import fake_catalog, fake_opener, fixture_engine, loaded, ran, run_async
from workbench.screens.app import WorkbenchApp
from workbench.screens.panes.log import LogPane

pytestmark = pytest.mark.slow  # every test here runs the whole Textual app (pyproject markers)


def make_app(tmp_path, **kwargs) -> WorkbenchApp:
    return WorkbenchApp(None, None, engine=fixture_engine(), opener=fake_opener(),
                        catalog_loader=lambda kernels, device: fake_catalog(), data_dir=tmp_path, **kwargs)


def _log_lines(log: LogPane) -> list[str]:
    return [strip.text.rstrip() for strip in log.lines]


def _reads_normally(log: LogPane) -> None:
    """Every entry is on screen whole (short ones on one line), none one character per line."""
    lines = _log_lines(log)
    width = log.scrollable_content_region.width
    short = [text for _, text in log.entries if len(text) + 2 + len("12:00:00 ") <= width]  # mark and time
    assert short, log.entries
    for text in short:
        assert any(text in line for line in lines), (text, lines[:8])
    assert max(len(line) for line in lines) > 1


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
@run_async
async def test_log_lines_written_while_the_log_is_hidden_read_normally(tmp_path, size):
    """RichLog renders a line at the width it has when written: 0 in a hidden tab, so the
    lines of a run made while another pane showed read one character per line."""
    app = make_app(tmp_path)
    async with app.run_test(size=size) as pilot:
        await loaded(pilot)
        await pilot.press("5")  # the Log shown once, then hidden for the run
        await pilot.pause(0.2)
        await pilot.press("1")
        await pilot.pause(0.2)
        count = len(app.log_pane.entries)
        await ran(pilot)
        assert len(app.log_pane.entries) > count
        await pilot.press("5")
        await pilot.pause(0.3)
        _reads_normally(app.log_pane)
        await pilot.resize_terminal(size[0] + 30, size[1] + 6)  # and re-wrapped to a new width
        await pilot.pause(0.3)
        _reads_normally(app.log_pane)


def _field(app, name: str):
    from textual.widgets import Input
    return next(i for i in app.query(".shape").results(Input) if i.name == name)


async def _burst(pilot, *keys: str) -> None:
    """Keys as a terminal sends them typed fast: all queued before the app handles the first
    (pilot.press waits for each key to be handled)."""
    from textual import events

    chars = {"backspace": None, "end": None}
    for key in keys:
        pilot.app.post_message(events.Key(key, chars.get(key, key)))
    await pilot.pause(0.5)


@run_async
async def test_keys_typed_in_a_burst_in_a_shape_field_all_land(tmp_path):
    """Each edit re-set the field from the model while later keys were queued: `backspace 7 7`
    on 1024 gave 10247; with keys 0.7 s apart it worked."""
    app = make_app(tmp_path)
    async with app.run_test(size=(200, 50)) as pilot:
        await loaded(pilot)
        await pilot.press("e", "tab")
        await pilot.pause(0.2)
        assert app.focused is _field(app, "N")
        await _burst(pilot, "end", "backspace", "7", "7")
        assert _field(app, "N").value == "163877"
        await _burst(pilot, "5", "backspace", "6")
        assert _field(app, "N").value == "1638776"
        await _burst(pilot, "end", "backspace", "backspace", "backspace", "2", "5", "6")
        assert _field(app, "N").value == "1638256"
        assert app.focused is _field(app, "N")
        assert app.ws.run.shape["N"] == 1638256
        assert "1638256" in app.ws.run_titles()[0][1]


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
@run_async
async def test_a_burst_with_tab_puts_each_value_in_its_own_field(tmp_path, size):
    """`e`, then `64 tab 64 tab` typed fast (over SSH): M read 6464 and N kept its value. The
    keys after the tab were already queued at M when the tab moved the focus to N."""
    app = make_app(tmp_path)
    async with app.run_test(size=size) as pilot:
        await loaded(pilot)
        await pilot.press("e")
        await pilot.pause(0.2)
        assert app.focused is _field(app, "M")
        await _burst(pilot, "6", "4", "tab", "3", "2", "tab")
        assert (_field(app, "M").value, _field(app, "N").value) == ("64", "32")
        assert app.ws.run.shape == {**app.ws.run.shape, "M": 64, "N": 32}
        assert app.focused is not _field(app, "M") and app.focused is not _field(app, "N")  # the dtype, next


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
@run_async
async def test_keys_typed_with_e_land_in_the_field_it_opens(tmp_path, size):
    """`e q` typed at once quit the app, and `e 1 2 8` switched panes: e acted on its way back up
    and moved the keyboard a frame later, after the keys behind it had been routed as shortcuts
    (a new user's try in tmux). Now e is answered as it comes in and the field has the keyboard
    before the next key is routed: they are typed into M, across the end of the burst too."""
    app = make_app(tmp_path)
    async with app.run_test(size=size) as pilot:
        await loaded(pilot)
        app.query_one("#op-list").focus()
        await pilot.pause(0.2)
        pane = app.query_one("#panes").active
        await _burst(pilot, "e", "end", *["backspace"] * 8, "1", "2", "8", "q")
        assert app.is_running and app.query_one("#panes").active == pane
        assert app.focused is _field(app, "M") and _field(app, "M").value == "128q"


@run_async
async def test_keys_typed_with_a_tab_out_of_the_actions_list_land_in_the_next_field(tmp_path):
    """`tab 4 2` typed at once on the spec's actions checklist: the 4 and the 2 switched panes and
    the next field stayed empty (a new user's try in tmux). Tab acted on its way back up, after
    the keys behind it had been routed from the checklist; it is now answered as it comes in
    where no text field has the keyboard (a field's own tab keeps its place among the keys)."""
    from textual.widgets import Input, SelectionList

    app = make_app(tmp_path)
    async with app.run_test(size=(200, 50)) as pilot:
        await loaded(pilot)
        await pilot.press("e")
        await pilot.pause(0.2)
        checklist = app.query_one("SpecEditor").query(SelectionList).first()
        checklist.focus()
        await pilot.pause(0.2)
        chain = app.screen.focus_chain
        after = chain[chain.index(checklist) + 1]
        assert isinstance(after, Input)
        before, pane = after.value, app.query_one("#panes").active
        await _burst(pilot, "tab", "4", "2")
        assert app.focused is after and after.value == before + "42"
        assert app.query_one("#panes").active == pane
        await _burst(pilot, "shift+tab", "j")  # back on the checklist: j moves its highlight there
        assert app.focused is checklist


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
@run_async
async def test_hiding_and_showing_the_sidebar_gives_the_run_list_its_focus_back(tmp_path, size):
    """After `b b` nothing in the sidebar had the focus: d did nothing, k did not move."""
    from workbench.screens.sidebar import OpList

    app = make_app(tmp_path)
    async with app.run_test(size=size) as pilot:
        await loaded(pilot)
        runs = app.query_one(OpList)
        runs.focus()
        await pilot.press("j")
        await pilot.pause(0.1)
        assert runs.highlighted == 1
        await pilot.press("b")
        await pilot.pause(0.2)
        assert app.focused is not runs and app.focused is not None
        await pilot.press("b")
        await pilot.pause(0.2)
        assert app.focused is runs
        await pilot.press("k")
        await pilot.pause(0.1)
        assert runs.highlighted == 0


def _hints(app):
    footer = app.query_one("FittedFooter")
    keys = [k for k in footer.query("FooterKey") if k.display]
    palette = next(k for k in keys if k.has_class("-command-palette"))
    return [k for k in keys if k is not palette], palette


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
@run_async
async def test_what_does_not_fit_at_80x24_ends_with_an_ellipsis_or_is_dropped(tmp_path, size):
    """At 80x24 the title stopped mid-word, the tab strip at `6 Di`, the footer at `b Sideb`,
    and the panes had no right border."""
    from textual.widgets import Tab

    app = make_app(tmp_path)
    async with app.run_test(size=size) as pilot:
        await loaded(pilot)
        for keys in ((), ("3",), ("b",), ("b", "e")):
            await pilot.press(*keys)
            await pilot.pause(0.3)
            panes = app.query_one("#panes")
            tabs = list(panes.query(Tab))
            assert len(tabs) == 6
            inside = panes.content_region
            for tab in tabs:
                assert inside.x <= tab.region.x and tab.region.right <= inside.right, (keys, str(tab.label))
                assert str(tab.label).split()[0].isdigit()
            assert panes.region.right <= app.size.width and panes.styles.border_right[0]
            assert panes.styles.border_top[0] or size[1] < 30  # short: the rows go to the figures
            hints, palette = _hints(app)
            assert hints and max(h.region.right for h in hints) <= palette.region.x, keys
            if "e" not in keys:  # in a field `?` is a character, not the help
                assert any(h.key == "question_mark" for h in hints), keys
        app.ws.path = tmp_path / ("a-long-folder-name-" * 3) / "session.yaml"
        title = app.query_one("#title-bar")
        title.update(app.title_text())
        await pilot.pause(0.1)
        line = title.render_line(0).text.rstrip()
        if size[0] == 80:
            assert line.endswith("…"), line
        else:
            assert line.endswith(app.title_text()), line


def test_tab_labels_shorten_to_fit_and_keep_their_numbers():
    from workbench.screens.fitting import tab_labels

    panes = ["timing", "profile", "ptx", "traffic", "log", "diagnosis"]
    assert tab_labels(panes, 200)["diagnosis"] == "6 Diagnosis"
    assert list(tab_labels(panes, 50).values()) == ["1 Time", "2 Prof", "3 PTX", "4 Traf", "5 Log", "6 Diag"]
    assert tab_labels(panes, 42)["timing"] == "1 Tim"
    assert list(tab_labels(panes, 20).values()) == ["1", "2", "3", "4", "5", "6"]
    for width in (20, 42, 46, 59, 200):
        assert sum(len(label) + 2 for label in tab_labels(panes, width).values()) <= width


@run_async
async def test_k_typed_with_the_log_pane_key_after_new_lines_scrolls_the_log_up(tmp_path):
    """`5 k k k` typed at once, with lines added while the Log was hidden: the Log is rendered
    anew at its width once shown (LogPane._sync), which scrolled it back to the end after the
    k's had scrolled it up; the k's are kept (three lines up from the end)."""
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        log = app.log_pane
        for i in range(80):
            log.add(f"line {i}")
        await pilot.press("5")
        await pilot.pause(0.3)
        assert log.scroll_y == log.max_scroll_y > 3  # at the end, and more than a screen
        await pilot.press("1")
        await pilot.pause(0.2)
        for i in range(80, 90):
            log.add(f"line {i}")  # while hidden: rendered anew when shown
        await _burst(pilot, "5", "k", "k", "k")
        await pilot.pause(0.3)
        assert app.focused is log
        assert log.max_scroll_y - log.scroll_y == 3, (log.scroll_y, log.max_scroll_y)
        # scrolled up, a new line leaves the view where it is; at the end (End), it is followed
        at = log.scroll_y
        log.add("line 90")
        await pilot.pause(0.2)
        assert log.scroll_y == at < log.max_scroll_y
        await pilot.press("end")
        await pilot.pause(0.2)
        log.add("line 91")
        await pilot.pause(0.2)
        assert log.scroll_y == log.max_scroll_y > at


@run_async
async def test_the_keyboard_comes_back_where_it_was_after_the_window_was_too_small(tmp_path):
    """The Timing table had the keyboard; the window made too small (the notice alone on
    screen), then big enough again: the keyboard went to the run list (a new user's try in
    tmux, resize-window -x 50 and back). It comes back to the table."""
    app = make_app(tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        await pilot.press("1")
        await pilot.pause(0.2)
        table = app.query_one("#results-table")
        assert app.focused is table
        await pilot.resize_terminal(50, 30)
        await pilot.pause(0.3)
        assert app.has_class("-too-small")
        await pilot.resize_terminal(100, 30)
        await pilot.pause(0.3)
        assert not app.has_class("-too-small") and app.focused is table
