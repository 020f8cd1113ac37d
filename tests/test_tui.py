"""Pilot tests of the TUI's flows against a fake engine that replays a committed fixture.

The real engine's flow (CPU, small shapes) is in test_tui_engine.py; snapshots of each pane in
test_tui_snapshots.py.
"""

from __future__ import annotations

import pytest

import subprocess
import sys
import threading

from textual.command import CommandList
from textual.widgets import DataTable, Input, SelectionList, Static, TabbedContent

from tui_helpers import (gated_catalog, fake_catalog, fake_opener, fixture_engine, loaded, ran, run_async,
                         wait_for)
from workbench.errors import WorkbenchError
from workbench.screens.app import WorkbenchApp
from workbench.screens.dialogs import ConfirmScreen, HelpScreen
from workbench.screens.panes.log import LogPane

pytestmark = pytest.mark.slow  # every test here runs the whole Textual app (pyproject markers)


def make_app(tmp_path, engine=None, catalog_loader=None, **kwargs) -> WorkbenchApp:
    return WorkbenchApp(None, None, engine=engine or fixture_engine(),
                        catalog_loader=catalog_loader or (lambda kernels, device: fake_catalog()),
                        opener=fake_opener(), data_dir=tmp_path, **kwargs)


def first_command(app) -> str:
    """The palette's first hit ('' while it is still searching)."""
    lists = app.screen.query(CommandList)
    if not lists or not lists.first().option_count:
        return ""
    return str(lists.first().get_option_at_index(0).prompt)


def autosaved(data_dir) -> str:
    """The text of the autosave ('' until there is one)."""
    files = list((data_dir / "autosave").glob("*.yaml"))
    return files[0].read_text() if files else ""


def log_text(app) -> str:
    return "\n".join(text for _, text in app.query_one(LogPane).entries)


@pytest.mark.slow
def test_app_module_imports_no_torch():
    """The first frame must not wait for torch, Triton or the kernels: importing the app loads none
    of them. (How fast it imports is a benchmark's figure, not a test's: benchmarks/stages/
    overhead.py; an import-time bound here failed CI at 1.18 s on two busy cores.)"""
    code = ("import sys; import workbench.screens.app; "
            "bad = [m for m in ('torch', 'triton', 'workbench.kernels', 'workbench.registry') if m in sys.modules]; "
            "print(bad); assert not bad, bad")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stdout + out.stderr


@run_async
async def test_loading_state_before_ops_arrive(tmp_path):
    gate = threading.Event()
    app = make_app(tmp_path, catalog_loader=gated_catalog(gate))
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        assert "loading ops…" in str(app.query_one("#title-bar", Static).render())
        assert app.run_bar.status == "loading ops…"
        await pilot.press("r")  # nothing to run yet: a notice, no crash
        gate.set()
        await loaded(pilot)
        assert app.ws.run.op == "gelu"


@run_async
async def test_ops_that_cannot_be_loaded_are_said_on_screen_until_the_app_ends(tmp_path):
    """A plugin with a syntax error: the title and the Runs list said `loading ops…` for good and
    `r` said to pick an op from the empty list; the error was only in a toast (a new user's try)."""
    from textual.widgets import OptionList

    error = "plugin /x/badplug.py:4: SyntaxError: invalid syntax"

    def broken(kernels, device):
        raise WorkbenchError(error)
    app = make_app(tmp_path, catalog_loader=broken)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.run_bar.status == "could not load")
        title = str(app.query_one("#title-bar", Static).render())
        assert "the ops could not be loaded" in title and "badplug.py:4: SyntaxError" in title
        ops = app.query_one("#op-list", OptionList)
        assert ops.option_count == 1 and "could not be loaded" in str(ops.get_option_at_index(0).prompt)
        assert error in log_text(app) and "WorkbenchError" not in title  # our words, not a class name
        await pilot.press("r")
        await pilot.pause(0.1)
        assert any("nothing to run: the ops could not be loaded" in str(n.message) and "badplug.py:4" in str(n.message)
                   for n in app._notifications)


@run_async
async def test_saving_a_scratch_session_saves_the_new_run_on_screen(tmp_path):
    """`+ gelu` then ctrl+s said `nothing to save yet`: the new run joined the session only when
    run (a new user's try). A save saves what is on screen."""
    from textual.widgets import OptionList

    from workbench.screens.sessions_io import BLANK
    from workbench.session.api import load_session

    app = WorkbenchApp(None, None, engine=fixture_engine(), catalog_loader=lambda k, d: fake_catalog(),
                       opener=fake_opener(BLANK), data_dir=tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.ws.catalog is not None and app.run_bar.status == "ready")
        assert app.ws.session.runs == ()
        ops = app.query_one("#op-list", OptionList)
        ops.focus()
        ops.highlighted = next(i for i, o in enumerate(ops.options) if o.id == "op:gelu")
        await pilot.press("enter")
        await pilot.pause(0.2)
        assert app.ws.index is None and app.ws.run.op == "gelu"  # a draft
        await pilot.press("ctrl+s")
        await pilot.pause(0.3)
        assert [r.op for r in app.ws.session.runs] == ["gelu"] and app.ws.index == 0
        assert app.query_one("#op-list", OptionList).get_option_at_index(0).id == "run:0"
    saved = load_session(app.ws.path, check_ops=False)
    assert [r.op for r in saved.runs] == ["gelu"]


@run_async
async def test_a_scratch_session_never_saves_over_an_earlier_saved_one(tmp_path):
    """A new user's scratch session (a broken file opened as an empty one) saved over the
    scratch.yaml an earlier session had saved, and its runs were gone. The first save of a session
    without a file takes a free name; later saves of it go to that file."""
    from textual.widgets import OptionList

    from workbench.screens.sessions_io import BLANK

    earlier = tmp_path / "sessions" / "scratch.yaml"
    earlier.parent.mkdir(parents=True)
    earlier.write_text("# an earlier session's runs\n")
    app = WorkbenchApp(None, None, engine=fixture_engine(), catalog_loader=lambda k, d: fake_catalog(),
                       opener=fake_opener(BLANK), data_dir=tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.ws.catalog is not None and app.run_bar.status == "ready")
        ops = app.query_one("#op-list", OptionList)
        ops.focus()
        ops.highlighted = next(i for i, o in enumerate(ops.options) if o.id == "op:gelu")
        await pilot.press("enter")
        await pilot.pause(0.2)
        await pilot.press("ctrl+s")
        await pilot.pause(0.3)
        assert app.ws.path == tmp_path / "sessions" / "scratch-2.yaml" and app.ws.path.is_file()
        await pilot.press("ctrl+s")  # the session has its file now: the same one again
        await pilot.pause(0.3)
        assert app.ws.path == tmp_path / "sessions" / "scratch-2.yaml"
    assert earlier.read_text() == "# an earlier session's runs\n"
    assert sorted(p.name for p in earlier.parent.glob("*.yaml")) == ["scratch-2.yaml", "scratch.yaml"]


@run_async
async def test_e_on_a_highlighted_new_op_edits_that_op(tmp_path):
    """`e` with `+ cdist` highlighted edited the run shown before (add's M and N, no D): `e`
    from the Runs list now puts the highlighted new run on screen first, as Enter does."""
    from textual.widgets import Input, OptionList

    app = WorkbenchApp(None, None, engine=fixture_engine(), catalog_loader=lambda k, d: fake_catalog(),
                       opener=fake_opener(), data_dir=tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.ws.catalog is not None and app.run_bar.status == "ready")
        ops = app.query_one("#op-list", OptionList)
        ops.focus()
        shown = app.ws.run
        ops.highlighted = next(i for i, o in enumerate(ops.options) if o.id == "op:softmax")
        await pilot.pause(0.1)
        assert app.ws.run == shown  # moving onto `+ op` alone changes nothing
        await pilot.press("e")
        await pilot.pause(0.3)
        assert app.ws.index is None and app.ws.run.op == "softmax"
        assert isinstance(app.focused, Input) and app.focused.name == "M"
        await pilot.press("escape")
        await pilot.pause(0.2)
        ops.highlighted = next(i for i, o in enumerate(ops.options) if o.id == "run:0")
        await pilot.pause(0.2)
        await pilot.press("e")  # on a run: that run, as before
        await pilot.pause(0.3)
        assert app.ws.index == 0


@run_async
async def test_r_in_the_runs_list_runs_the_highlighted_run(tmp_path):
    """A new user moved the highlight to another run and pressed `r`: the run on screen ran again
    (a run was shown only on Enter). `r` in the list now runs what is highlighted there."""
    from textual.widgets import OptionList

    asked = []
    engine = fixture_engine()

    def recording(session, **kwargs):
        asked.append([run.op for run in session.runs])
        return engine(session, **kwargs)
    app = make_app(tmp_path, engine=recording)
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        assert app.ws.index == 0 and app.ws.run.op == "gelu"
        runs = app.query_one("#op-list", OptionList)
        runs.focus()
        runs.highlighted = 1  # softmax, not picked (no Enter)
        await pilot.pause(0.1)
        await ran(pilot)  # r, then the run's end
        assert asked == [["softmax"]] and app.ws.index == 1 and app.ws.run.op == "softmax"
        # with the highlight on the run on screen, r runs it as before
        await ran(pilot)  # r, then the run's end
        assert asked == [["softmax"], ["softmax"]]


@run_async
async def test_moving_the_highlight_onto_a_run_shows_it_and_onto_an_op_does_not(tmp_path):
    """A fresh-clone try (2026-12-03): j moved the highlight to softmax while the panes still
    showed gelu, and `e` then edited a run not highlighted. Highlighting a run now shows it;
    `+ op` entries start a new run only on Enter."""
    from textual.widgets import OptionList

    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        assert app.ws.index == 0 and app.ws.run.op == "gelu"
        runs = app.query_one("#op-list", OptionList)
        runs.focus()
        await pilot.press("j")
        await wait_for(pilot, lambda: app.ws.index == 1)
        assert app.ws.run.op == "softmax" and app.focused is runs and runs.highlighted == 1
        n_runs = len(app.ws.session.runs)
        await pilot.press("j")  # onto the first `+ op`: no new run, the shown run stays
        await pilot.pause(0.2)
        assert runs.get_option_at_index(runs.highlighted).id.startswith("op:")
        assert len(app.ws.session.runs) == n_runs and app.ws.index == 1
        await pilot.press("k", "k")
        await wait_for(pilot, lambda: app.ws.index == 0)
        assert app.ws.run.op == "gelu" and app.focused is runs


@run_async
async def test_moving_the_highlight_during_a_run_keeps_its_results_with_the_run_that_ran(tmp_path):
    """Highlighting shows a run (above), so j during a run switches the panes mid-run: the
    results must still land on the run that ran, and show when it is highlighted again. The
    run's events wait until softmax is shown (a delay alone let a loaded box finish the run
    before the j)."""
    from textual.widgets import OptionList

    gate = threading.Event()
    fixture = fixture_engine(delay_s=0.05)

    def engine(session, *, on_event, stop=None, options=None) -> dict:
        gate.wait(30)
        return fixture(session, on_event=on_event, stop=stop, options=options)

    app = make_app(tmp_path, engine=engine)
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        await pilot.press("r")
        await wait_for(pilot, lambda: app.running)
        runs = app.query_one("#op-list", OptionList)
        runs.focus()
        await pilot.press("j")  # softmax shown while gelu runs
        await wait_for(pilot, lambda: app.ws.index == 1)
        gate.set()
        await wait_for(pilot, lambda: not app.running, timeout_s=30)
        assert app.ws.index == 1 and app.ws.run.op == "softmax"
        await pilot.pause(0.2)
        table = app.query_one("#results-table", DataTable)
        assert table.row_count == 0  # gelu's results did not land on softmax, which never ran
        await pilot.press("k")
        await wait_for(pilot, lambda: app.ws.index == 0)
        await pilot.pause(0.2)
        assert table.row_count > 0  # gelu's rows, back on screen with gelu


@run_async
async def test_run_fills_every_pane_and_writes_results(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        await ran(pilot)
        assert app.query_one("#results-table", DataTable).row_count == 6
        assert app.query_one("#profile-table", DataTable).row_count > 0
        assert "ld.global" in str(app.query_one("#ptx-code", Static).render())
        assert app.query_one("#traffic-table", DataTable).row_count == 6
        assert "done: 6 ok" in log_text(app)
        assert (tmp_path / "sessions" / "tui-fixture.results.json").exists()
        assert app.ws.session.runs[0].op == "gelu"


@run_async
async def test_failing_run_is_a_notification_and_the_app_goes_on(tmp_path):
    app = make_app(tmp_path, engine=fixture_engine(fail="the GPU caught fire"))
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        await ran(pilot)
        assert any("the GPU caught fire" in n.message for n in app._notifications)
        assert "Traceback" in log_text(app)  # the details go to the Log pane only
        assert app.is_running and not app.running
        await pilot.press("2")  # still answering keys
        assert app.query_one(TabbedContent).active == "profile"


@run_async
async def test_small_terminal_shows_a_notice(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(50, 15)) as pilot:
        await loaded(pilot)
        assert app.has_class("-too-small")
        assert app.query_one("#too-small").display
        assert not app.query_one("#main").display
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        assert not app.has_class("-too-small")
        assert app.query_one("#main").display


@run_async
async def test_single_key_bindings_are_inert_while_typing(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        field = app.query_one(".shape", Input)
        field.focus()
        field.value = ""
        await pilot.press("1", "2", "r", "q", "b", "question_mark")
        await pilot.pause(0.2)
        assert field.value == "12rqb?"  # every key typed into the field, none ran its binding
        assert "must be a positive integer" in app.query_one("SpecEditor").problem
        assert not app.running
        assert app.query_one(TabbedContent).active == "timing"
        assert app.is_running and not isinstance(app.screen, HelpScreen)
        await pilot.press(*["backspace"] * 4)
        await pilot.pause(0.2)
        assert field.value == "12" and app.ws.run.shape["M"] == 12
        assert app.query_one("SpecEditor").problem == ""


@run_async
async def test_keyboard_reaches_panes_help_and_palette(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        for key, pane in zip("23451", ("profile", "ptx", "traffic", "log", "timing")):
            await pilot.press(key)
            assert app.query_one(TabbedContent).active == pane
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        from textual.containers import VerticalScroll
        scroll = app.screen.query_one(VerticalScroll)
        top = scroll.scroll_offset.y
        await pilot.press("j", "j")  # j / k scroll the help as the arrows do (README)
        await pilot.pause()
        assert scroll.scroll_offset.y == top + 2
        await pilot.press("k")
        await pilot.pause()
        assert scroll.scroll_offset.y == top + 1
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
        await pilot.press("ctrl+p")
        await pilot.press(*"shape")  # what a user types to change the shape finds the spec editor
        await wait_for(pilot, lambda: "Edit the spec" in first_command(app))
        for _ in "shape":
            await pilot.press("backspace")
        await pilot.press(*"new run: softmax")
        await wait_for(pilot, lambda: "new run: softmax" in first_command(app))
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.ws.run.op == "softmax")
        assert app.ws.index is None  # a draft until it is run


@run_async
async def test_editing_the_spec_updates_the_session_and_autosaves(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        field = next(i for i in app.query(".shape").results(Input) if i.name == "M")
        field.focus()
        field.value = ""
        await pilot.press("2", "5", "6")
        await wait_for(pilot, lambda: app.ws.session.runs[0].shape["M"] == 256)
        await wait_for(pilot, lambda: "M: 256" in autosaved(tmp_path))
        field.value = "-3"
        await wait_for(pilot, lambda: "M" in app.query_one("SpecEditor").problem)
        app.query_one("#results-table").focus()
        await pilot.press("r")
        await wait_for(pilot, lambda: any("fix the field" in n.message for n in app._notifications))
        assert not app.running and app.runs_finished == 0  # a bad spec is not run


@run_async
async def test_unticking_an_implementation_records_it(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        checklist = app.query_one("#impl-list", SelectionList)
        checklist.focus()
        await pilot.press("j", "space")  # j moves like the down arrow
        await wait_for(pilot, lambda: app.ws.session.runs[0].impls is not None)
        names = [ref.name for ref in app.ws.session.runs[0].impls]
        assert "pytorch" not in names and "manual" in names


@run_async
async def test_cancel_stops_the_run(tmp_path):
    app = make_app(tmp_path, engine=fixture_engine(delay_s=0.2))
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        await pilot.press("r")
        await wait_for(pilot, lambda: app.running)
        await pilot.pause(0.3)
        await pilot.press("r")  # its binding is off while a run is in flight: it says why
        await pilot.pause()
        assert any("a run is in progress" in str(n.message) for n in app._notifications)
        await pilot.press("escape")
        await wait_for(pilot, lambda: not app.running)
        assert app.run_bar.status.startswith("cancelled")


@run_async
async def test_a_cancelled_rerun_keeps_the_earlier_results_of_the_rows_it_did_not_measure(tmp_path):
    """r, then r and escape: the cancel wrote skipped rows over the measured ones in the results
    file, and the Timing pane said '(check failed, unavailable, or not benchmarked)'."""
    import json

    from workbench.screens.sessions_io import KEPT_FLAG

    app = make_app(tmp_path, engine=fixture_engine(delay_s=0.1))
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        await pilot.press("r")
        await wait_for(pilot, lambda: app.runs_finished == 1, timeout_s=60)
        first = {r["label"]: r for r in json.loads((tmp_path / "sessions" / "tui-fixture.results.json").read_text())["results"]}
        await pilot.press("r")
        await wait_for(pilot, lambda: app.running)
        await wait_for(pilot, lambda: any(r.status == "ok" for r in app.ws.models[0].rows.values() if r.record))
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.runs_finished == 2, timeout_s=60)
        saved = json.loads((tmp_path / "sessions" / "tui-fixture.results.json").read_text())["results"]
        kept = [r for r in saved if KEPT_FLAG in (r.get("flags") or ())]
        assert kept and len(saved) == len(first)
        for record in kept:  # the earlier measurement, unchanged but for the flag
            assert record["status"] == "ok" and record["timing"] == first[record["label"]]["timing"]
        assert not any(r["status"] == "skipped" for r in saved)
        assert app.run_bar.status.startswith("cancelled: ") and "not run" in app.run_bar.status
        assert app.run_bar.status.endswith(f"({len(kept)} kept)")
        assert any(line.startswith(f"{len(kept)} row(s) the cancel left unmeasured show their earlier results")
                   for _level, line in app.log_pane.entries)
        shown = app.ws.models[0].rows
        assert all(shown[(r["label"], None)].get("timing", "median_ms") == r["timing"]["median_ms"] for r in kept)
        # they look kept, not fresh: the status cell, the detail line, the Diagnosis pane
        from textual.widgets import DataTable, Static

        from workbench.screens.panes.diagnosis import DiagnosisPane

        await pilot.pause()
        table = app.query_one("#results-table", DataTable)
        statuses = {str(table.get_row_at(i)[0]): str(table.get_row_at(i)[1]) for i in range(table.row_count)}
        assert {label for label, status in statuses.items() if status == "ok (kept)"} == {r["label"] for r in kept}
        row = next(i for i in range(table.row_count) if str(table.get_row_at(i)[0]) == kept[0]["label"])
        table.move_cursor(row=row)
        await pilot.pause()
        assert "kept from an earlier run" in str(app.query_one("#row-detail", Static).render())
        await pilot.press("6")
        await pilot.pause()
        pane = app.query_one(DiagnosisPane)
        titles = [str(c) for c in pane.query_one("#diagnosis-table", DataTable).get_column_at(1)]
        assert sum(t.endswith(" (kept)") for t in titles) == len(kept)


@run_async
async def test_tab_passes_the_run_bars_buttons_and_a_click_still_runs(tmp_path):
    """Tab from a pane stopped on 'Run r', which showed no heavy border and took no j/k."""
    from workbench.screens.run_bar import KeyButton

    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        app.query_one("#results-table").focus()
        for _ in range(12):
            await pilot.press("tab")
            assert not isinstance(app.focused, KeyButton)
        await pilot.click("#run")
        await wait_for(pilot, lambda: app.runs_finished == 1, timeout_s=60)


@run_async
async def test_a_sessions_gpu_device_on_a_host_without_one_is_said_when_it_opens(tmp_path):
    """settings: {device: cuda} opened as `ready` and its rows came back unavailable after r."""
    import dataclasses

    from tui_helpers import fake_session
    from workbench.session.model import Settings

    session = dataclasses.replace(fake_session(), settings=Settings(device="cuda"))
    app = WorkbenchApp(None, None, engine=fixture_engine(), catalog_loader=lambda k, d: fake_catalog(gpu=False),
                       opener=fake_opener(session), data_dir=tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        await wait_for(pilot, lambda: any("settings.device: cuda, but this host has no GPU" in line
                                          for _level, line in app.log_pane.entries))
    gpu_box = WorkbenchApp(None, None, engine=fixture_engine(), catalog_loader=lambda k, d: fake_catalog(gpu=True),
                           opener=fake_opener(session), data_dir=tmp_path)
    async with gpu_box.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        await pilot.pause(0.2)
        assert not any("has no GPU" in line for _level, line in gpu_box.log_pane.entries)


@run_async
async def test_the_catalogs_notes_reach_the_log_once(tmp_path):
    """A plugin that registers nothing: said in the TUI too, once though the ops load twice."""
    import dataclasses

    note = "/x/empty.py: loaded, but it registers no op and no implementation"
    app = make_app(tmp_path, catalog_loader=lambda k, d: dataclasses.replace(fake_catalog(), notes=(note,)))
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        app.post_message(__import__("workbench.screens.messages", fromlist=["Loaded"]).Loaded(app.ws.catalog))
        await pilot.pause(0.2)
        assert [line for _level, line in app.log_pane.entries].count(note) == 1


@run_async
async def test_quit_asks_while_a_run_is_active(tmp_path):
    app = make_app(tmp_path, engine=fixture_engine(delay_s=0.2))
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        await pilot.press("r")
        await wait_for(pilot, lambda: app.running)
        await pilot.press("q")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("n")
        assert app.is_running and app.running
        await pilot.press("q", "y")
        await wait_for(pilot, lambda: not app.is_running)


@run_async
async def test_ptx_jumps_between_highlighted_instructions(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        await ran(pilot)
        await pilot.press("3")
        pane = app.query_one("PtxPane")
        await pilot.press("n")
        first = pane._view.current
        await pilot.press("n")
        assert pane._view.current > first
        await pilot.press("N")
        assert pane._view.current == first
        await pilot.press("f")  # filter: the first kind only
        assert pane._view.kind is not None


@run_async
async def test_a_pane_key_is_the_apps_first_but_stays_text_in_a_field_and_behind_a_dialog(tmp_path):
    """The pane keys are priority bindings (answered before the focused widget, not bubbled up to
    the app through every container): from a focused table they switch the pane without the
    table seeing the key; typed in a spec field they are digits; over the help screen or the
    palette they do not switch the pane behind it."""
    from workbench.screens.keys import KeyDataTable

    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        tabs = app.query_one(TabbedContent)
        table = app.query_one("#results-table", KeyDataTable)
        table.focus()
        await pilot.pause()
        seen = []
        table.post_message = lambda message, post=table.post_message: (seen.append(type(message).__name__),
                                                                         post(message))[1]
        await pilot.press("2")
        assert tabs.active == "profile" and "Key" not in seen
        await pilot.press("1")
        assert tabs.active == "timing"
        await pilot.press("e")  # the spec editor's first field: digits are text there
        await wait_for(pilot, lambda: isinstance(app.focused, Input))
        field = app.focused
        field.value = ""
        await pilot.press("2", "5", "6")
        assert field.value == "256" and tabs.active == "timing"
        await pilot.press("escape")
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("3")
        assert tabs.active == "timing"  # not switched behind the help
        await pilot.press("escape")
        await pilot.press("3")
        assert tabs.active == "ptx"


@run_async
async def test_ptx_keys_before_any_ptx_say_why_instead_of_nothing(tmp_path):
    """n, N and f in the PTX pane before a run has brought any PTX: a notice names why."""
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        await pilot.press("3")
        pane = app.query_one("PtxPane")
        await wait_for(pilot, lambda: pane.is_mounted)
        assert pane._view is None
        for key, what in (("n", "step through"), ("N", "step through"), ("f", "filter")):
            app._notifications.clear()
            await pilot.press(key)
            await pilot.pause()
            messages = [n.message for n in app._notifications]
            assert any(m.startswith(f"no PTX to {what}: ") for m in messages), (key, messages)


@run_async
async def test_implementation_params_are_editable(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(100, 40)) as pilot:
        await loaded(pilot)
        checklist = app.query_one("#impl-list", SelectionList)
        checklist.focus()
        checklist.highlighted = 5  # triton: BLOCK_SIZE, num_warps
        await wait_for(pilot, lambda: len(app.query(".param")) == 2)
        block = next(i for i in app.query(".param").results(Input) if i.name == "BLOCK_SIZE")
        block.focus()
        block.value = ""
        await pilot.press(*"256")
        await wait_for(pilot, lambda: app.ws.session.runs[0].impls is not None)
        triton = next(r for r in app.ws.session.runs[0].impls if r.name == "triton")
        assert dict(triton.params) == {"BLOCK_SIZE": 256}


@run_async
async def test_cuda_is_greyed_without_a_gpu_unless_only_ptx_is_asked(tmp_path):
    app = make_app(tmp_path, catalog_loader=lambda kernels, device: fake_catalog(gpu=False))
    async with app.run_test(size=(100, 40)) as pilot:
        await loaded(pilot)
        checklist = app.query_one("#impl-list", SelectionList)
        checklist.highlighted = 4  # cuda: PTX from nvcc, but no GPU to check or bench on
        await wait_for(pilot, lambda: "bench: needs a CUDA GPU" in str(app.query_one("#impl-detail", Static).render()))
        assert "cuda" in checklist.selected
        actions = app.query_one("#actions", SelectionList)
        actions.deselect("ptx")
        actions.deselect("profile")
        await wait_for(pilot, lambda: "cuda" not in checklist.selected)  # nothing left to do
        checklist.focus()
        await pilot.press("space")  # ticking it again says why not
        await wait_for(pilot, lambda: any("needs a CUDA GPU" in n.message for n in app._notifications))
        assert "cuda" not in checklist.selected


SMALL_SESSION = """\
schema_version: 1
name: mine
runs:
  - op: gelu
    impls: [pytorch]
    shape: {M: 8, N: 8}
"""


@run_async
async def test_autosave_is_restored_after_a_crash_and_cleared_by_save(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text(SMALL_SESSION)

    def app() -> WorkbenchApp:
        return WorkbenchApp(path, None, engine=fixture_engine(), data_dir=tmp_path / "data",
                            catalog_loader=lambda kernels, device: fake_catalog())
    first = app()
    async with first.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        field = next(i for i in first.query(".shape").results(Input) if i.name == "M")
        field.value = "77"
        await wait_for(pilot, lambda: list((tmp_path / "data" / "autosave").glob("*.yaml")))
    assert "M: 8" in path.read_text()  # not saved: only autosaved
    second = app()
    async with second.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        assert second.ws.session.runs[0].shape["M"] == 77
        assert any("restored unsaved changes" in n.message for n in second._notifications)
        await pilot.press("ctrl+s")
        await pilot.pause(0.2)
    assert "M: 77" in path.read_text()
    assert not list((tmp_path / "data" / "autosave").glob("*.yaml"))


@run_async
async def test_a_new_session_never_saved_is_opened_again_from_its_autosave(tmp_path):
    """A new session (ctrl+o to a missing path, runs added and run) quit without ctrl+s: opening
    that path again said 'no such session file' (workbench PATH, exit 2) or started it empty, whose
    first change overwrote the autosave (a new user's try)."""
    from workbench.session import api as ws
    from workbench.session.paths import resolve_session_path
    from workbench.screens import sessions_io

    path, data = tmp_path / "sub" / "new1.yaml", tmp_path / "data"
    session = ws.parse_session(SMALL_SESSION)
    sessions_io.autosave(session, path, data)
    assert resolve_session_path(str(path), data, unsaved=True) == path  # the TUI's FILE
    with pytest.raises(WorkbenchError, match="no such session file"):
        resolve_session_path(str(path), data)  # --replay and --check: there is no file to run
    opened = sessions_io.open_session(path, data=data)
    assert opened.session.runs == session.runs and opened.path == path
    assert any("was never saved: its runs are restored from" in note for note in opened.notes)
    app = WorkbenchApp(path, None, engine=fixture_engine(), data_dir=data,
                       catalog_loader=lambda kernels, device: fake_catalog())
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        assert len(app.ws.session.runs) == len(session.runs)
    assert "was never saved; its 1 run(s) are in the autosave" in app.unsaved_note()
    path.parent.mkdir()
    path.write_text(SMALL_SESSION)
    assert app.unsaved_note() is None


@run_async
async def test_ctrl_c_says_how_to_quit_in_plain_text(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        await pilot.press("ctrl+c")
        await pilot.pause()
        messages = [n.message for n in app._notifications]
        assert any("press q" in m and "ctrl+q" in m for m in messages), messages
        assert not any("[b]" in m for m in messages)
        assert app.is_running


@run_async
async def test_the_quit_question_follows_a_run_that_ends_under_it(tmp_path):
    """Asked "A run is in progress. Stop it and quit?" while the run ended: the question said
    so still after the status bar read done (a new user's try)."""
    from textual.widgets import Label

    app = make_app(tmp_path, engine=fixture_engine(delay_s=0.2))
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        await pilot.press("r")
        await wait_for(pilot, lambda: app.running)
        await pilot.press("q")
        assert isinstance(app.screen, ConfirmScreen)
        await wait_for(pilot, lambda: not app.running)
        await pilot.pause(0.1)
        assert str(app.screen.query_one(".dialog-title", Label).render()) == "The run has ended. Quit?"
        await pilot.press("y")
        await wait_for(pilot, lambda: not app.is_running)


@run_async
async def test_the_hidden_panes_mount_after_the_first_frame_and_answer_their_keys(tmp_path):
    """Issue #39: the first frame composes only the Timing and Log panes; the others (behind their
    tabs) mount right after it (LazyPane), answer their keys while the ops still load, and get
    the run's results like the rest."""
    from workbench.screens.app import FIRST_FRAME_PANES, LazyPane

    assert set(FIRST_FRAME_PANES) == {"timing", "log"}
    gate = threading.Event()
    app = make_app(tmp_path, catalog_loader=gated_catalog(gate))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: not app.query(LazyPane))  # mounted with the ops still loading
        await pilot.press("3")
        await wait_for(pilot, lambda: app.focused is not None and app.query_one("#ptx") in app.focused.ancestors)
        await pilot.press("2")
        assert app.query_one(TabbedContent).active == "profile" and app.focused.id == "profile-table"
        gate.set()
        await loaded(pilot)
        await ran(pilot)
        assert app.query_one("#profile-table", DataTable).row_count > 0
        assert app.query_one("#traffic-table", DataTable).row_count == 6


def test_an_unsaved_sessions_autosave_that_does_not_read_is_kept_aside(tmp_path):
    from workbench.screens import sessions_io

    path, data = tmp_path / "new2.yaml", tmp_path / "data"
    saved = sessions_io.autosave_path(path, data)
    saved.parent.mkdir(parents=True)
    saved.write_text("schema_version: 1\nname: new2\nruns:\n  - op: no_such_op\n")
    opened = sessions_io.open_session(path, data=data)
    assert opened.session.runs == () and not saved.exists()
    assert saved.with_suffix(".unread.yaml").read_text().endswith("op: no_such_op\n")
    assert any("its autosave did not read" in note and "kept as" in note for note in opened.notes)


def test_watch_modes_re_read_of_a_saved_file_never_restores_an_autosave(tmp_path):
    """CI caught it under load: an autosave written between a save of the session file and watch
    mode's re-read of it (newer than the file) was restored over the file, and the run kept the
    old shape. open_session(restore=False), which the re-read uses, reads the file."""
    import os

    from workbench.screens import sessions_io
    from workbench.session import api as ws

    path, data = tmp_path / "w.yaml", tmp_path / "data"
    path.write_text(SMALL_SESSION.replace("M: 8", "M: 16"))
    sessions_io.autosave(ws.parse_session(SMALL_SESSION), path, data)
    later = path.stat().st_mtime + 5
    os.utime(sessions_io.autosave_path(path, data), (later, later))
    assert sessions_io.open_session(path, data=data).session.runs[0].shape["M"] == 8  # a crash's autosave wins
    opened = sessions_io.open_session(path, data=data, restore=False)
    assert opened.session.runs[0].shape["M"] == 16 and not any("restored" in n for n in opened.notes)


@run_async
async def test_help_lists_the_metric_key_under_the_timing_pane_only(tmp_path):
    """`?` on the PTX pane listed m (Metric) under Everywhere, where it does nothing but on the
    Timing pane; it is listed in the Timing pane's group."""
    app = make_app(tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        for pane_key in ("3", "1"):
            await pilot.press(pane_key)
            await pilot.press("question_mark")
            groups = dict(app.screen._groups)
            keys = {name: {b.key for b in bindings if hasattr(b, "key")} for name, bindings in groups.items()}
            assert "m" not in keys["Everywhere"] and "m" in keys["Timing pane"], pane_key
            await pilot.press("escape")


@run_async
async def test_a_choice_still_queued_when_the_app_closes_is_dropped(tmp_path):
    """`j q` typed at once on a loaded box: the run list's choice was handled after the app's
    screens had gone (App._shutdown closes them, then its own queue), and show_run's
    NoMatches ('#title-bar') came out of the app's exit. Posted here as the screens close."""
    from workbench.screens.messages import Choice

    app = make_app(tmp_path)
    close_all = app._close_all

    async def close_then_choose() -> None:
        await close_all()
        app.post_message(Choice("run", 1))

    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        assert len(app.ws.session.runs) > 1
        app._close_all = close_then_choose
    assert app.ws.index == 0  # not picked


@run_async
async def test_a_choice_whose_widgets_go_while_it_is_handled_is_no_error(tmp_path, monkeypatch):
    """A choice handled as the app begins to close: show_run awaited, the screens went meanwhile,
    and the spec editor's query raised NoMatches ('#actions') out of the app's exit (CI, under
    load). Here the editor's show closes the app and finds nothing."""
    from textual.css.query import NoMatches

    from workbench.screens.messages import Choice
    from workbench.screens.spec_editor import SpecEditor

    app = make_app(tmp_path)
    closing = []

    async def show_while_closing(self, op, run):
        closing.append(True)
        raise NoMatches("No nodes match '#actions' on SpecEditor(id='spec')")

    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        monkeypatch.setattr(SpecEditor, "show", show_while_closing)
        monkeypatch.setattr(app, "_closing_down", lambda: bool(closing))
        app.post_message(Choice("run", 1))
        await wait_for(pilot, lambda: closing)
        await pilot.pause()
    assert closing  # handled, and nothing came out of the app's exit


@run_async
async def test_a_focus_message_after_the_spec_editor_went_does_not_raise(tmp_path):
    """on_descendant_focus looked the spec editor up with query_one: a focus message handled
    while the screen's widgets were being removed (the app closing after a burst of keys, on a
    loaded box) raised NoMatches ("No nodes match 'SpecEditor' on MainScreen") out of the
    handler (seen in a helper's test run). The editor removed here stands for that."""
    from types import SimpleNamespace

    from workbench.screens.sidebar import OpList
    from workbench.screens.spec_editor import SpecEditor

    app = make_app(tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        await app.query_one(SpecEditor).remove()
        app.on_descendant_focus(SimpleNamespace(widget=app.query_one(OpList)))
        assert not app.has_class("-spec")
