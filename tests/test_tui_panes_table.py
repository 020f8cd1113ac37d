"""The panes are declared once (screens/panes/__init__.py, `PANES`): the table is well formed, and
the app shows what it declares (a tab and a key per pane, a palette entry, the help)."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from workbench.screens.panes import PANES, Pane, check_table

PANES_DIR = Path(__file__).resolve().parents[1] / "screens" / "panes"


def test_a_duplicate_id_or_key_in_the_table_is_refused_naming_it():
    timing = PANES[0]
    with pytest.raises(ValueError, match=r"pane id 'timing' is in the table twice"):
        check_table((timing, dataclasses.replace(timing, key="9", title="Other", help="")))
    with pytest.raises(ValueError, match=r"pane 'other': key '1' is taken by pane 'timing'"):
        check_table((timing, dataclasses.replace(timing, id="other", title="Other", help="")))
    with pytest.raises(ValueError, match=r"pane 'other': title 'Timing' is taken by pane 'timing'"):
        check_table((timing, dataclasses.replace(timing, id="other", key="9", help="")))
    with pytest.raises(ValueError, match=r"pane id 'Bad id'"):
        check_table((dataclasses.replace(timing, id="Bad id"),))
    check_table(PANES)  # the shipped table passes


def test_every_row_names_its_widget_and_every_pane_module_has_a_row():
    for pane in PANES:
        cls = pane.widget_class()
        assert cls.__name__ == pane.cls and cls.__module__ == f"workbench.screens.panes.{pane.module}"
        own_keys = [b for b in cls.__dict__.get("BINDINGS", []) if getattr(b, "description", "")]
        assert bool(pane.help) == bool(own_keys), f"{pane.id}: a help group exactly when the pane has keys"
    # a pane file without a row would never be shown: every module-level class named *Pane has one
    declared = {(pane.module, pane.cls) for pane in PANES}
    for path in sorted(p for p in PANES_DIR.glob("*.py") if p.name != "__init__.py"):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef) and node.name.endswith("Pane"):
                assert (path.stem, node.name) in declared, f"{path.name}: {node.name} has no row in PANES"


def test_pane_keys_do_not_take_another_key_of_the_app():
    from workbench.screens.app import GENERAL_KEYS, WorkbenchApp

    pane_actions = {f"pane('{pane.id}')" for pane in PANES}
    others = {key.strip() for b in [*WorkbenchApp.BINDINGS, *GENERAL_KEYS] if b.action not in pane_actions
              for key in b.key.split(",")}
    assert not others & {pane.key for pane in PANES}


def test_tab_labels_follow_the_table():
    from workbench.screens.fitting import tab_labels

    ids = [pane.id for pane in PANES]
    assert list(tab_labels(ids, 500).values()) == [f"{p.key} {p.title}" for p in PANES]
    assert list(tab_labels(ids, 1).values()) == [p.key for p in PANES]


def test_a_new_row_is_a_new_pane(monkeypatch):
    """The palette and the labels read the table itself: a row added is offered (no second list)."""
    from workbench.screens import commands, fitting, panes

    extra = Pane("extra", "Extra", "Extr", "7", "", "log", "LogPane", "LogPane", results=False)
    table = (*PANES, extra)
    monkeypatch.setattr(commands, "PANES", table)
    monkeypatch.setattr(panes, "BY_ID", {p.id: p for p in table})
    monkeypatch.setattr(fitting, "BY_ID", {p.id: p for p in table})
    monkeypatch.setattr(fitting, "PANE_TITLES", {p.id: p.title for p in table})
    monkeypatch.setattr(fitting, "SHORT_TITLES", {p.id: p.short for p in table})
    assert fitting.tab_labels([p.id for p in table], 500)["extra"] == "7 Extra"

    class App:  # what action_commands reads of the app
        ws = type("Ws", (), {"index": None, "removed": [], "op": None, "path": None})()
        data_dir = Path("/nonexistent")
        running = False

        def run_action(self, action):
            return action

    titles = [c.title for c in commands.action_commands(App())]
    assert "Pane: Extra (7)" in titles


@pytest.mark.slow  # the whole Textual app (its resource tracker is a child process)
def test_every_pane_is_reachable_by_its_key_in_the_palette_and_in_help(tmp_path):
    from tui_helpers import fake_catalog, fake_opener, fixture_engine, loaded, run_async
    from textual.widgets import TabbedContent

    from workbench.screens.app import WorkbenchApp
    from workbench.screens.commands import action_commands
    from workbench.screens.dialogs import HelpScreen, bindings_table

    app = WorkbenchApp(None, None, engine=fixture_engine(), opener=fake_opener(),
                       catalog_loader=lambda kernels, device: fake_catalog(), data_dir=tmp_path)

    @run_async
    async def drive() -> None:
        async with app.run_test(size=(120, 40)) as pilot:
            await loaded(pilot)
            tabs = app.query_one(TabbedContent)
            assert [pane.id for pane in tabs.query("TabPane")] == [p.id for p in PANES]
            titles = [c.title for c in action_commands(app)]
            for pane in PANES:
                await pilot.press(pane.key)
                await pilot.pause()
                assert tabs.active == pane.id, pane.id
                assert app.query_one(f"#{pane.id}").query_one(pane.widget_class()) is not None
                assert f"Pane: {pane.title} ({pane.key})" in titles
                await pilot.press("question_mark")
                await pilot.pause()
                help_screen = app.screen
                assert isinstance(help_screen, HelpScreen)
                lines = ["".join(s.text for s in line).strip() for line in app.console.render_lines(
                    bindings_table(help_screen._groups), app.console.options.update_width(100), pad=False)]
                assert any(line.split()[:2] == [pane.key, pane.title] for line in lines), (pane.id, lines)
                if pane.help:  # its own keys: a group of their own, first (the pane on show)
                    assert help_screen._groups[0][0] == pane.help
                await pilot.press("escape")
                await pilot.pause()
    drive()


def test_a_results_pane_is_not_repainted_whole_when_its_results_change():
    """A results pane is a container: setting its model (every redraw of a streaming run) or
    another of its reactives must not repaint the pane's whole region (each widget in it, their
    unchanged lines too); its widgets repaint themselves. So its reactives are repaint=False."""
    for pane in PANES:
        if not pane.results:
            continue
        cls = pane.widget_class()
        assert "model" in cls._reactives, pane.id
        for name, declared in cls._reactives.items():
            if name in vars(cls):  # its own (Textual's widgets' reactives are Textual's)
                assert not declared._repaint, f"{pane.cls}.{name} repaints the whole pane"
