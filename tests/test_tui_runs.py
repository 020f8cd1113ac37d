"""Pilot tests of issue #17's flows: managing runs (delete and undo, copy, move), the palette's
actions, a saved copy of a shipped session reopening, ctrl+o on a missing file, field bounds,
notices, focus, the narrow layout and the marks explained under `?`."""

from __future__ import annotations

import contextlib
import json
import threading
from pathlib import Path

from textual.command import CommandList
from textual.widgets import DataTable, Input, Static

from tui_helpers import (fake_catalog, fake_opener, fixture_engine, loaded, ran, run_async,
                         wait_for)
from workbench.screens.app import WorkbenchApp
from workbench.screens.dialogs import ConfirmScreen, HelpScreen, OpenScreen


def make_app(tmp_path, **kwargs) -> WorkbenchApp:
    kwargs.setdefault("opener", fake_opener())
    kwargs.setdefault("engine", fixture_engine())
    return WorkbenchApp(kwargs.pop("path", None), None, catalog_loader=lambda k, d: fake_catalog(),
                        data_dir=tmp_path, **kwargs)


def ops(app) -> list[str]:
    return [run.op for run in app.ws.session.runs]


def messages(app) -> list[str]:
    return [n.message for n in app._notifications]


def saved_records(tmp_path) -> list[tuple[int, str]]:
    doc = json.loads((tmp_path / "sessions" / "tui-fixture.results.json").read_text())
    return sorted({(r["run_index"], r["op"]) for r in doc["results"]})


async def palette(pilot, query: str) -> None:
    """Open ctrl+p, type `query`, wait for a hit starting with it, pick it."""
    app = pilot.app
    await pilot.press("ctrl+p")
    await pilot.press(*query)

    def first() -> str:
        lists = app.screen.query(CommandList)
        return str(lists.first().get_option_at_index(0).prompt) if lists and lists.first().option_count else ""
    await wait_for(pilot, lambda: first().startswith(query))
    await pilot.press("enter")
    await pilot.pause(0.2)


@run_async
async def test_delete_a_run_with_its_results_and_undo_brings_both_back(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        await ran(pilot)
        assert saved_records(tmp_path) == [(0, "gelu")]
        app.query_one("#op-list").focus()
        await pilot.press("d")
        await pilot.pause(0.2)
        assert ops(app) == ["softmax"] and app.ws.index == 0
        assert app.query_one("#results-table", DataTable).row_count == 0  # softmax never ran
        assert saved_records(tmp_path) == []
        assert any("u brings it back" in m for m in messages(app))
        await pilot.press("u")
        await pilot.pause(0.2)
        assert ops(app) == ["gelu", "softmax"] and app.ws.index == 0
        assert app.query_one("#results-table", DataTable).row_count == 6
        assert saved_records(tmp_path) == [(0, "gelu")]


@run_async
async def test_deleting_every_run_clears_the_last_runs_summary(tmp_path):
    """The run bar still said 'done: 6 ok' of a run that was gone, after every run was deleted too
    (a new user's try)."""
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        await ran(pilot)
        assert app.run_bar.status.startswith("done")
        app.query_one("#op-list").focus()
        await pilot.press("d")
        await pilot.pause(0.2)
        assert app.run_bar.status == "ready"  # the summary was of the run just deleted
        await pilot.press("d")
        await pilot.pause(0.2)
        assert ops(app) == [] and app.run_bar.status.startswith("no runs: pick an op (+)")


@run_async
async def test_copy_and_move_runs_keep_results_with_their_run(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        await ran(pilot)
        app.query_one("#op-list").focus()
        await pilot.press("c")  # a copy of gelu, right after it, without results
        await pilot.pause(0.2)
        assert ops(app) == ["gelu", "gelu", "softmax"] and app.ws.index == 1
        assert 1 not in app.ws.models
        await pilot.press("K")  # the copy moves up: the original (with results) is now run 1
        await pilot.pause(0.2)
        assert app.ws.index == 0 and saved_records(tmp_path) == [(1, "gelu")]
        await pilot.press("J", "J")
        await pilot.pause(0.2)
        assert app.ws.index == 2 and saved_records(tmp_path) == [(0, "gelu")]
        assert "gelu" in str(app.query_one("#op-list").get_option("run:2").prompt)


@run_async
async def test_runs_are_not_moved_under_a_run_in_flight(tmp_path):
    """d while a run is in flight deletes nothing and says why. The run's events wait until
    the d has been answered (a delay alone can let a loaded box end the run first)."""
    gate = threading.Event()
    fixture = fixture_engine()

    def engine(session, *, on_event, stop=None, options=None) -> dict:
        gate.wait(30)
        return fixture(session, on_event=on_event, stop=stop, options=options)

    app = make_app(tmp_path, engine=engine)
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        await pilot.press("r")
        await wait_for(pilot, lambda: app.running)
        app.query_one("#op-list").focus()
        await pilot.press("d")
        await pilot.pause(0.1)
        try:
            assert ops(app) == ["gelu", "softmax"]
            assert any("run is in progress" in m for m in messages(app))
        finally:
            gate.set()
        await wait_for(pilot, lambda: not app.running)


@run_async
async def test_the_palette_holds_every_action(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        titles = " | ".join(c.title for c in app.get_system_commands(app.screen))
        for words in ("Save the session", "Run the run on screen", "Run anyway", "dtype: float16",
                      "Edit the sweep", "Run every run of the session", "Delete run 0", "Duplicate run 0", "Move run 0", "Pane: Profile"):
            assert words in titles, words
        assert "Cancel the run" not in titles  # nothing runs: run, not cancel
        app._stop = __import__("threading").Event()  # as while a run is in progress: cancel, not run
        running = " | ".join(c.title for c in app.get_system_commands(app.screen))
        assert "Cancel the run" in running and "Run the run on screen" not in running and "Run anyway" not in running
        app._stop = None
        await palette(pilot, "dtype: bfloat16")
        assert app.ws.session.runs[0].dtype == "bfloat16"
        await palette(pilot, "Delete run 0")
        assert ops(app) == ["softmax"]
        await palette(pilot, "Undo delete")
        assert ops(app) == ["gelu", "softmax"]
        await palette(pilot, "Edit the sweep")
        await wait_for(pilot, lambda: app.focused is not None and app.focused.id == "sweep-params")
        await pilot.press("escape")
        await palette(pilot, "open session lecture06-gelu")  # sessions by name
        await wait_for(pilot, lambda: app.ws.path is not None and app.ws.path.name == "lecture06-gelu.yaml")


@run_async
async def test_a_saved_copy_of_a_shipped_session_is_what_opens_next_time(tmp_path):
    from workbench.session.api import resolve_session_path, shipped_path

    def app() -> WorkbenchApp:  # the real opener: the shipped default-cpu (fake catalog, no GPU)
        return WorkbenchApp(None, None, engine=fixture_engine(), data_dir=tmp_path,
                            catalog_loader=lambda k, d: fake_catalog(gpu=False))
    first = app()
    async with first.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        assert first.ws.path == shipped_path("default-cpu")
        first.query_one("#op-list").focus()
        await pilot.press("d")  # an edit: the first run goes
        await pilot.press("ctrl+s")
        await pilot.pause(0.3)
    copy = tmp_path / "sessions" / "default-cpu.yaml"
    assert copy.exists()
    second = app()
    async with second.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        assert second.ws.path == copy and len(second.ws.session.runs) == 2
        assert any("saved copy" in m for m in messages(second))
        assert "your copy" in str(second.query_one("#title-bar", Static).render())
        await palette(pilot, "Open shipped original")
        await wait_for(pilot, lambda: second.ws.path == shipped_path("default-cpu"))
        assert len(second.ws.session.runs) == 3
        # ctrl+s on the original wrote over the edited copy without a word (a new user's try): it asks
        edited = copy.read_text()
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: isinstance(second.screen, ConfirmScreen))
        assert "Replace your copy" in second.screen._question
        await pilot.press("n")
        await pilot.pause(0.2)
        assert copy.read_text() == edited and any("your copy stays as it is" in m for m in messages(second))
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: isinstance(second.screen, ConfirmScreen))
        await pilot.press("y")
        await wait_for(pilot, lambda: copy.read_text() != edited)
        await pilot.press("ctrl+s")  # the copy now holds this session: saved without asking
        await pilot.pause(0.3)
        assert not isinstance(second.screen, ConfirmScreen)
    assert resolve_session_path("default-cpu", tmp_path) == copy          # what --replay finds
    assert resolve_session_path("shipped:default-cpu", tmp_path) == shipped_path("default-cpu")
    assert resolve_session_path("default-cpu") == shipped_path("default-cpu")


@run_async
async def test_ctrl_o_on_a_missing_file_says_so_and_asks_before_a_new_session(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        app._opener = None  # the real open_session from here on (the fixture session at start)
        missing = tmp_path / "nope.yaml"
        app.open_path(missing)
        await wait_for(pilot, lambda: any("no such session file" in m for m in messages(app)))
        assert app.ws.session.name == "tui-fixture"
        await pilot.press("ctrl+o")
        await wait_for(pilot, lambda: isinstance(app.screen, OpenScreen))
        app.screen.query_one("#open-path", Input).value = str(missing)
        await pilot.press("enter")
        await pilot.pause(0.1)
        assert isinstance(app.screen, OpenScreen)
        assert "no such file" in str(app.screen.query_one("#open-problem", Static).render())
        await pilot.press("enter")  # asked twice: a new session there
        await wait_for(pilot, lambda: app.ws.path == missing)
        assert app.ws.session.runs == () and not missing.exists()


@run_async
async def test_ctrl_o_takes_a_sessions_name_as_the_command_line_does(tmp_path, monkeypatch):
    """ctrl+o, `default-cpu`, enter asked for a new session file named default-cpu in the
    working folder (a new user's try); `workbench default-cpu` opens the shipped one."""
    from workbench.session.paths import shipped_path

    monkeypatch.chdir(tmp_path)
    saved = tmp_path / "sessions" / "mine.yaml"
    saved.parent.mkdir(exist_ok=True)
    saved.write_text("name: mine\nruns: []\n")
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        opened = []
        app.open_path = lambda path, create=False: opened.append((path, create))
        for typed, want in (("default-cpu", shipped_path("default-cpu")), ("default-cpu.yaml", shipped_path("default-cpu")),
                            ("shipped:default-cpu", shipped_path("default-cpu")), ("mine", saved)):
            await pilot.press("ctrl+o")
            await wait_for(pilot, lambda: isinstance(app.screen, OpenScreen))
            assert app.screen.by_name("shipped:mine") is None and app.screen.by_name("x/mine") is None
            app.screen.query_one("#open-path", Input).value = typed
            await pilot.press("enter")
            await wait_for(pilot, lambda: not isinstance(app.screen, OpenScreen))
            assert opened.pop() == (want, False), typed
        await pilot.press("ctrl+o")  # a shipped: name that is none: said, never a file of that name
        await wait_for(pilot, lambda: isinstance(app.screen, OpenScreen))
        app.screen.query_one("#open-path", Input).value = "shipped:nosuch"
        await pilot.press("enter", "enter")
        await pilot.pause()
        assert isinstance(app.screen, OpenScreen) and not opened
        assert "no shipped session 'nosuch'" in str(app.screen.query_one("#open-problem", Static).render())


@run_async
async def test_the_open_dialog_keeps_the_sessions_that_hold_what_is_typed(tmp_path):
    """ctrl+o's list of known sessions is filtered as the path or name is typed (every word, any
    case, in the label or the path); none left says so; emptied, every session is back; a
    session picked from the filtered list opens."""
    from textual.widgets import OptionList

    from workbench.session.paths import shipped_names, shipped_path

    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        opened = []
        app.open_path = lambda path, create=False: opened.append((path, create))
        await pilot.press("ctrl+o")
        await wait_for(pilot, lambda: isinstance(app.screen, OpenScreen))
        known = app.screen.query_one("#open-known", OptionList)
        everything = known.option_count
        assert everything >= len(shipped_names()) >= 2
        field = app.screen.query_one("#open-path", Input)
        field.value = "DEFAULT cpu"
        await pilot.pause(0.1)
        labels = [str(known.get_option_at_index(i).prompt) for i in range(known.option_count)]
        assert labels and all("default" in label.lower() and "cpu" in label.lower() for label in labels), labels
        assert known.option_count < everything
        field.value = "no such words here"
        await pilot.pause(0.1)
        assert known.option_count == 0
        assert "no known session holds" in str(app.screen.query_one("#open-problem", Static).render())
        field.value = ""
        await pilot.pause(0.1)
        assert known.option_count == everything
        field.value = "/tmp/some/path.yaml"  # a path is no session's name: not said to match none
        await pilot.pause(0.1)
        assert "no known session" not in str(app.screen.query_one("#open-problem", Static).render())
        # tab or down from the field, then enter: the first session left opens (a filtered list
        # kept no highlighted row, and enter there did nothing; down stayed in the field)
        for move in ("tab", "down"):
            field.value = "CPU default"
            await pilot.pause(0.1)
            first = known.get_option_at_index(0).id
            await pilot.press(move)
            await pilot.pause(0.1)
            assert app.screen.focused is known, move
            await pilot.press("enter")
            await wait_for(pilot, lambda: not isinstance(app.screen, OpenScreen))
            assert opened.pop() == (Path(first), False), move
            await pilot.press("ctrl+o")
            await wait_for(pilot, lambda: isinstance(app.screen, OpenScreen))
            known = app.screen.query_one("#open-known", OptionList)
            field = app.screen.query_one("#open-path", Input)
        field.value = "default-cpu"
        await pilot.pause(0.1)
        known.focus()
        index = next(i for i in range(known.option_count) if known.get_option_at_index(i).id == str(shipped_path("default-cpu")))
        known.highlighted = index
        await pilot.press("enter")
        await wait_for(pilot, lambda: not isinstance(app.screen, OpenScreen))
        assert opened == [(shipped_path("default-cpu"), False)]


@run_async
async def test_a_shape_the_op_cannot_take_is_refused_naming_the_bound(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        await pilot.press("e")
        await pilot.pause(0.1)
        m = app.focused
        assert isinstance(m, Input) and m.name == "M"
        m.value = str(10 ** 29)
        await pilot.pause(0.2)
        problem = app.query_one("SpecEditor").problem
        assert "at most 2^63-1" in problem and "M" in problem
        shown = app.query_one("#spec-problem", Static)
        assert shown.region.width > 0 and shown.region.height >= 2  # wrapped, not cut
        assert app.ws.session.runs[0].shape["M"] == 16384
        await pilot.press("escape")
        assert not app.has_class("-spec") and app.focused.id == "op-list"


@run_async
async def test_errors_stay_in_the_log_and_notices_do_not_pile_up(tmp_path):
    from tui_helpers import GELU_H200

    data = json.loads(GELU_H200.read_text())
    data["doc"]["results"] = [{**r, "status": "failed", "error": f"RuntimeError: boom {i} [x]"}
                              for i, r in enumerate(data["doc"]["results"])]
    app = make_app(tmp_path, engine=fixture_engine(data))
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        await ran(pilot)
        errors = [m for m in messages(app) if "boom" in m]
        assert errors == [] and sum("row(s) failed" in m for m in messages(app)) == 1
        log = [t for level, t in app.log_pane.entries if level == "error"]
        assert sum("boom" in t for t in log) >= 6
        detail = str(app.query_one("#row-detail", Static).render())
        assert "RuntimeError: boom 0 [x]" in detail  # the whole error, brackets and all
        for i in range(8):
            app.report(f"notice {i}")
        assert len(app._notifications) <= 3
        await pilot.resize_terminal(50, 15)
        await pilot.pause(0.2)
        assert len(app._notifications) == 0  # nothing covers "terminal too small"


@run_async
async def test_focus_is_drawn_as_a_heavy_border_and_moves_with_the_keyboard(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        await pilot.pause(0.1)
        runs = app.query_one("#op-list")
        assert app.focused is runs and runs.styles.border_top[0] == "heavy"
        assert app.query_one("#impls").styles.border_top[0] == "round"
        await pilot.press("2")
        await pilot.pause(0.1)
        assert app.query_one("#panes").styles.border_top[0] == "heavy"
        assert runs.styles.border_top[0] == "round"
        restyled: list[int] = []  # a pane key moves focus within #panes: no restyle of its ~80 widgets
        update_nodes = app.stylesheet.update_nodes
        app.stylesheet.update_nodes = lambda nodes, **kw: update_nodes(_counted(nodes, restyled), **kw)
        for key in "3121":
            await pilot.press(key)
            await pilot.pause(0.05)
        assert app.query_one("#panes").has_class("-focus-box") and restyled and max(restyled) < 20, restyled


def _counted(nodes, sizes: list[int]):
    nodes = list(nodes)
    sizes.append(len(nodes))
    return nodes


@run_async
async def test_at_80x24_the_sidebar_is_narrow_and_the_spec_one_key_away(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        await ran(pilot)
        assert app.has_class("-narrow") and app.query_one("#sidebar").size.width <= 28
        assert not app.query_one("#spec").display
        await pilot.press("e")
        await pilot.pause(0.1)
        assert app.query_one("#spec").display and not app.query_one("#op-list").display
        fields = [w for w in app.query_one("#spec").query("Input, Select, SelectionList")]
        bottom = app.query_one("#main").region.bottom
        assert all(0 < w.region.bottom <= bottom for w in fields)  # every field in view
        await pilot.press("escape")
        table = app.query_one("#results-table", DataTable)
        table.focus()
        columns = [str(c.label) for c in table.columns.values()]
        assert columns[:4] == ["impl", "status", "median", "spread"] and columns[-1] == "notes"
        await pilot.press("l")
        await pilot.pause(0.1)
        first = list(table.columns.values())[4].get_render_width(table)
        assert table.scroll_x == min(first, table.max_scroll_x)  # one whole column per key
        for _ in range(len(columns)):
            await pilot.press("l")
        await pilot.pause(0.2)
        assert 0 < table.scroll_x == table.max_scroll_x  # the last column (notes) in view
        await pilot.press(*"h" * len(columns))
        await pilot.pause(0.2)
        assert table.scroll_x == 0


@run_async
async def test_help_explains_every_mark(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        await pilot.press("question_mark")
        await pilot.pause(0.1)
        assert isinstance(app.screen, HelpScreen)
        from workbench.screens.dialogs import MARKS

        marks = " ".join(mark for mark, _ in MARKS)
        for mark in ("◐", "✗", "✓", "↔", "⚠", "…", "█"):
            assert mark in marks, mark


async def _profile_after_a_run(app, pilot) -> DataTable:
    """The session run, the Profile pane shown (2): its table, with the keyboard."""
    await loaded(pilot)
    await ran(pilot)
    await pilot.press("2")
    table = app.query_one("#profile-table", DataTable)
    await wait_for(pilot, lambda: app.focused is table)
    return table


@run_async
async def test_enter_on_a_profile_row_shows_the_whole_kernel_name(tmp_path):
    from workbench.screens.dialogs import TextScreen

    app = make_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        table = await _profile_after_a_run(app, pilot)
        shown = str(table.get_row_at(table.cursor_row)[0])
        assert shown.startswith("vector") and "MulFunctor>" in shown and "void" not in shown
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, TextScreen))
        body = str(app.screen.query_one("#text-body", Static).render())
        assert body.startswith("void at::native::vectorized_elementwise_kernel<4, MulFunctor>")
        await pilot.press("escape")
        assert not isinstance(app.screen, TextScreen)


@run_async
async def test_the_profile_table_is_built_again_only_when_its_width_changes(tmp_path, monkeypatch):
    """Showing the Profile pane again (2 after 1) draws its table from its cells as they were: it
    rebuilt every row and re-rendered every cell on each show (the pane gets a Resize each time its
    tab comes back). A new width still refits the names to it."""
    from workbench.screens.panes.profile import ProfilePane

    built = []
    real = ProfilePane._show
    monkeypatch.setattr(ProfilePane, "_show", lambda self, row: built.append(row) or real(self, row))
    app = make_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        table = await _profile_after_a_run(app, pilot)
        narrow = str(table.get_row_at(0)[0])
        for key in "1212":
            await pilot.press(key)
            await pilot.pause()
        count = len(built)
        await pilot.press("1")
        await pilot.press("2")
        await wait_for(pilot, lambda: app.focused is table)
        await pilot.pause()
        assert len(built) == count  # shown again at its width: not rebuilt
        await pilot.resize_terminal(200, 40)
        await wait_for(pilot, lambda: len(built) > count and len(str(table.get_row_at(0)[0])) > len(narrow))
        assert "…" in narrow and "…" not in str(table.get_row_at(0)[0])  # the whole name fits now


@run_async
async def test_run_list_keys_act_on_the_highlighted_run_not_the_one_on_screen(tmp_path):
    """In tmux a first try pressed j then d: the run on screen went, not the highlighted one."""
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        app.query_one("#op-list").focus()
        await pilot.press("j", "d")
        await pilot.pause(0.2)
        assert ops(app) == ["gelu"]
        await pilot.press("u")
        await pilot.pause(0.2)
        assert ops(app) == ["gelu", "softmax"]


@run_async
async def test_an_edit_that_makes_a_run_check_refuses_is_not_applied_and_says_why(tmp_path):
    """A new user's try: sweep values `4, 8, 8` were applied, the run failed on duplicate labels,
    and ctrl+s saved a file that --check refused and the app could not reopen. The editor now
    asks --check's own rules of the whole run (Workspace.run_problems) before applying."""
    from workbench.screens.messages import ImplsPicked, SpecEdited
    from workbench.screens.spec_editor import SpecEditor

    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        before = app.ws.run
        editor = app.query_one(SpecEditor)
        app.post_message(SpecEdited({"M": "64", "N": "64"}, "float32", ("check", "bench"), "N", "4, 8, 8"))
        await wait_for(pilot, lambda: bool(editor.problem))
        assert editor.problem.startswith("sweep.values[2]: value 8 is listed twice"), editor.problem
        assert app.ws.run == before and app.ws.session.runs[0].sweep is None
        await pilot.press("r")
        await pilot.pause(0.2)
        assert any("not run: sweep.values[2]" in text for text in log_lines(app))
        # a sound sweep over triton's BLOCK_SIZE with triton alone ticked is applied
        app.post_message(ImplsPicked(("triton",)))
        await wait_for(pilot, lambda: [r.name for r in app.ws.run.impls or ()] == ["triton"])
        app.post_message(SpecEdited({"M": "64", "N": "64"}, "float32", ("check", "bench"), "BLOCK_SIZE", "64, 128"))
        await wait_for(pilot, lambda: app.ws.run.sweep is not None)
        assert editor.problem == "" and app.ws.run.sweep.params == ("BLOCK_SIZE",)
        # ticking manual, which has no BLOCK_SIZE, would make a run --check refuses: not applied
        app.post_message(ImplsPicked(("manual", "triton")))
        await wait_for(pilot, lambda: any("not applied" in m for m in messages(app)))
        assert [r.name for r in app.ws.run.impls] == ["triton"]
        assert any('"BLOCK_SIZE" is a parameter of triton only' in m for m in messages(app))


def log_lines(app) -> list[str]:
    from workbench.screens.panes.log import LogPane

    return [text for _, text in app.query_one(LogPane).entries]


@run_async
async def test_a_long_report_keeps_its_first_lines_in_the_notice_and_all_in_the_log(tmp_path):
    """At 80x24 a session file's nine problems ran off the top of the screen, losing the file
    name and the first problem (a new user's try): the notice keeps the start, the Log all."""
    app = make_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        text = "\n".join(["/x/bad.yaml: 9 problems in the session"]
                         + [f"  settings.field{i}: must be a number > 0, got {-i} (line {i})" for i in range(9)])
        app.report(text)
        await pilot.pause(0.1)
        shown = list(app._notifications)[-1].message
        assert shown.startswith("/x/bad.yaml: 9 problems") and "more line(s) in the Log (5)" in shown
        assert len(shown.splitlines()) < len(text.splitlines())
        assert text in log_lines(app)


def recording_engine(**kwargs):
    """fixture_engine, noting each run's op in `engine.ran` (R runs them one at a time)."""
    inner = fixture_engine(**kwargs)

    def engine(session, **rest):
        engine.ran.append(session.runs[0].op)
        return inner(session, **rest)
    engine.ran = []
    return engine


@run_async
async def test_R_runs_every_run_of_the_session_in_order(tmp_path):
    """There was no key for the whole session: a user pressed r on each run in turn."""
    engine = recording_engine()
    app = make_app(tmp_path, engine=engine)
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        app.query_one("#op-list").focus()
        await pilot.press("down")  # the highlight on run 1: R still starts at run 0
        await pilot.press("R")
        await wait_for(pilot, lambda: app.runs_finished == 2 and not app.running, timeout_s=20)
        assert engine.ran == ["gelu", "softmax"]
        assert app.ws.index == 1 and sorted(app.ws.models) == [0, 1]
        assert any("running all 2 run(s)" in text for _, text in app.log_pane.entries)
        assert app.log_pane.entries[-1][1].startswith("run all: 2 run(s), 12 row(s): ")  # the whole R, at its end
        assert app.run_bar.status.startswith("run all: 2 run(s)")


@run_async
async def test_escape_during_R_cancels_the_runs_after_it(tmp_path):
    engine = recording_engine(delay_s=0.2)
    app = make_app(tmp_path, engine=engine)
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        await pilot.press("R")
        await wait_for(pilot, lambda: app.running)
        assert app.queued_runs() == 1
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.runs_finished == 1 and not app.running, timeout_s=20)
        await pilot.pause(0.3)
        assert engine.ran == ["gelu"] and app.queued_runs() == 0 and not app.running
        summary = next(text for _, text in app.log_pane.entries if text.startswith("run all (cancelled)"))
        assert summary.startswith("run all (cancelled): 1 of 2 run(s) (1 not started), 6 row(s): ")
        assert "cancelled" in summary.split("row(s): ")[1] and "skipped" not in summary  # the cancel's rows


@contextlib.asynccontextmanager
async def _mid_run(tmp_path, delay_s: float = 0.3):
    """(app, pilot) with the session's first run in flight (a recording engine, delay_s a row)."""
    app = make_app(tmp_path, engine=recording_engine(delay_s=delay_s))
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        await pilot.press("r")
        await wait_for(pilot, lambda: app.running)
        yield app, pilot


@run_async
async def test_escape_in_a_spec_field_mid_run_leaves_the_field_and_the_run_goes_on(tmp_path):
    """The footer says "esc Back to the list": escape in a field leaves it, the run goes on; a
    second escape, out of the field, cancels the run."""
    from textual.widgets import Input

    async with _mid_run(tmp_path) as (app, pilot):
        await pilot.press("e")
        await wait_for(pilot, lambda: isinstance(app.focused, Input))
        await pilot.press("escape")
        await pilot.pause(0.1)
        assert app.running and not isinstance(app.focused, Input)
        await pilot.press("escape")
        await wait_for(pilot, lambda: not app.running, timeout_s=20)
        assert "cancel" in app.run_bar.status


@run_async
async def test_a_new_run_picked_mid_run_says_no_results_yet_not_that_a_run_is_starting(tmp_path):
    """A new op's run shown while another run streams is not the run starting (a new user saw
    "a run is starting" there, still after the other run ended)."""
    from textual.widgets import Static

    async with _mid_run(tmp_path) as (app, pilot):
        caption = app.query_one("#timing-caption", Static)
        other = next(op for op in app.ws.catalog.ops if op != app.ws.run.op)
        await app.pick("op", other)
        await pilot.pause(0.2)
        assert app.running and not app.running_shown
        assert "no results yet" in str(caption.render()) and "a run is starting" not in str(caption.render())


@run_async
async def test_quit_asked_during_R_holds_the_next_run_and_says_so(tmp_path):
    """The question said "The run has ended. Quit?" while R's next runs started behind it."""
    engine = recording_engine(delay_s=0.15)
    app = make_app(tmp_path, engine=engine)
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        await pilot.press("R")
        await wait_for(pilot, lambda: app.running)
        await pilot.press("q")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await wait_for(pilot, lambda: app.runs_finished == 1, timeout_s=20)
        await pilot.pause(0.3)
        assert not app.running and engine.ran == ["gelu"]  # softmax held while the question is open
        assert "1 more run(s) queued by R will not start" in app.screen._question
        await pilot.press("n")  # not quitting: R goes on
        await wait_for(pilot, lambda: app.runs_finished == 2 and not app.running, timeout_s=20)
        assert engine.ran == ["gelu", "softmax"]


@run_async
async def test_the_sweep_placeholder_names_a_field_of_the_op_on_screen(tmp_path):
    """"params e.g. N" showed for the sleep op, which has no N (a new user's try)."""
    from workbench.screens import editing
    from workbench.screens.catalog import OpInfo
    from workbench.screens.spec_editor import SpecEditor

    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        editor, params = app.query_one(SpecEditor), app.query_one("#sweep-params", Input)
        assert params.placeholder == "params e.g. N"  # gelu: M, N
        sleep = OpInfo("sleep", "host sleep", {"sleep_ms": 1}, ("float32",), "float32", ())
        await editor.show(sleep, editing.default_run(sleep))
        assert params.placeholder == "params e.g. sleep_ms"


@run_async
async def test_R_refuses_while_a_field_is_bad_and_says_why_during_a_run(tmp_path):
    """R showed run 0 first, which refilled the editor: a typed M=0 was dropped without a word and
    every run ran (a new user's try). During a run R said nothing (its binding was disabled)."""
    from workbench.screens.spec_editor import SpecEditor

    engine = recording_engine(delay_s=0.15)
    app = make_app(tmp_path, engine=engine)
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        app.query_one(SpecEditor).problem = 'M: must be a positive integer, got 0'
        await pilot.press("R")
        await pilot.pause(0.2)
        assert engine.ran == [] and not app.running
        assert any(m.startswith("not run: M: must be a positive integer, got 0 (fix the field first)")
                   for m in messages(app))
        app.query_one(SpecEditor).problem = ""
        await pilot.press("r")
        await wait_for(pilot, lambda: app.running)
        await pilot.press("R")
        await pilot.pause(0.1)
        assert any("a run is in progress" in m for m in messages(app)) and app.queued_runs() == 0
        await wait_for(pilot, lambda: not app.running, timeout_s=20)


@run_async
async def test_a_long_question_wraps_in_its_dialog(tmp_path):
    """At 80x24 "...holds other runs or setting" was all of the question: the title did not wrap."""
    app = make_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        question = ("Your saved copy smoke-quick.yaml holds other runs or settings than this shipped session. "
                    "Replace your copy with it?")
        app.push_screen(ConfirmScreen(question))
        await pilot.pause(0.2)
        title = app.screen.query_one(".dialog-title")
        assert title.size.height >= 2 and "Replace your copy with it?" in str(title.render())


@run_async
async def test_a_sort_keeps_the_highlighted_kernel_under_the_cursor(tmp_path):
    """s (or a header click) reorders the kernels: the cursor stayed on its row number, under
    another kernel; it follows its kernel now."""
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        table = await _profile_after_a_run(app, pilot)
        pane = app.query_one("ProfilePane")
        await pilot.press("j")
        await wait_for(pilot, lambda: table.cursor_row == 1)
        kernel = pane._highlighted_name()
        order = [str(table.get_row_at(r)[0]) for r in range(table.row_count)]
        for _ in range(3):  # a few sorts: at least one moves this kernel to another row
            await pilot.press("s")
            await pilot.pause()
            assert pane._highlighted_name() == kernel
            if table.cursor_row != 1:
                break
        assert table.cursor_row != 1 and [str(table.get_row_at(r)[0]) for r in range(table.row_count)] != order


@run_async
async def test_the_picked_implementation_stays_picked_across_a_rerun(tmp_path):
    """A re-run empties the Profile pane's implementation list until profiles come back: the pick
    went back to the first implementation."""
    from textual.widgets import Select

    from workbench.screens.panes.profile import _title

    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await _profile_after_a_run(app, pilot)
        select = app.query_one("#profile-impl", Select)
        options = [value for _, value in select._options if isinstance(value, str)]
        assert len(options) >= 2 and select.value == options[0]
        select.value = options[1]  # as a pick in its list does (a Changed message)
        pane = app.query_one("ProfilePane")
        await wait_for(pilot, lambda: pane._shown is not None and _title(pane._shown) == options[1])
        await pilot.press("1")
        await ran(pilot)  # the session again
        await wait_for(pilot, lambda: not app.running)
        await pilot.pause(0.2)
        assert select.value == options[1] and _title(pane._shown) == options[1]


@run_async
async def test_i_in_the_profile_pane_opens_the_implementation_list(tmp_path):
    from textual.widgets import Select

    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await _profile_after_a_run(app, pilot)
        select = app.query_one("#profile-impl", Select)
        await pilot.press("i")
        await wait_for(pilot, lambda: select.expanded)
        await pilot.press("down", "enter")
        await wait_for(pilot, lambda: not select.expanded)
        assert select.value == "triton"


@run_async
async def test_a_cpu_only_profile_is_sorted_by_cpu_time_until_a_sort_is_chosen(tmp_path):
    """Without device events every device µs is '-': sorted by it (the default), the table was in
    no order a reader could see; CPU µs, largest first, then. A sort chosen with s stays."""
    from tui_helpers import GELU_H200

    data = json.loads(GELU_H200.read_text())
    for record in data["doc"]["results"]:
        if record.get("profile"):
            record["profile"]["device_events"] = False
            for cpu, item in enumerate(record["profile"]["rows"]):
                item["self_cpu_us"] = 10.0 * cpu  # the profiler's order is the smallest first
    app = make_app(tmp_path, engine=fixture_engine(data))
    async with app.run_test(size=(200, 50)) as pilot:
        table = await _profile_after_a_run(app, pilot)
        header = [str(c.label) for c in table.ordered_columns]
        assert "CPU µs ▼" in header and "device µs" in header
        cpu = [float(table.get_row_at(r)[2]) for r in range(table.row_count)]
        assert cpu == sorted(cpu, reverse=True) and len(set(cpu)) > 1
        await pilot.press("s")
        await pilot.pause()
        chosen = [str(c.label) for c in table.ordered_columns]
        assert "CPU µs ▼" not in chosen
        pane = app.query_one("ProfilePane")
        pane._show(pane._shown)  # drawn again (a new profile, a width): the chosen sort stays
        assert [str(c.label) for c in table.ordered_columns] == chosen


@run_async
async def test_a_session_file_that_cannot_be_opened_stays_named_in_the_title(tmp_path):
    """A bad session file opens an empty session: the reason was only in a toast that faded,
    and the title read `scratch (unsaved)`. The title names the file until a session is saved."""
    from textual.widgets import Static

    def opener(path, gpu):
        raise ValueError("runs[0].dtype: unknown dtype \"float7\"")
    app = make_app(tmp_path, opener=opener, path=tmp_path / "bad.yaml")
    async with app.run_test(size=(120, 40)) as pilot:
        title = app.query_one("#title-bar", Static)
        await wait_for(pilot, lambda: app.ws.catalog is not None and "not opened" in str(title.render()))
        assert str(title.render()).startswith(f"⚠ {tmp_path / 'bad.yaml'} not opened (Log 5) · workbench · scratch")
        log = app.query_one("LogPane")
        await wait_for(pilot, lambda: any("float7" in text for _, text in log.entries))  # the reason, in the Log
