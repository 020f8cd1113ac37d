"""The TUI's parsed-CSS store (screens/css_cache.py): a second start parses no CSS it parsed
before, gets the same rules, and never reads a store someone else could have written."""

from __future__ import annotations

import os
import pickle

import pytest
from textual.css import stylesheet as textual_stylesheet

from workbench.screens.css_cache import CachedStylesheet, ParseStore, store_path

CSS = "Static { background: $primary; color: red; } #title-bar { height: 1; }"
SOURCE = ("/somewhere/app.tcss", "")


def _parse_counter(monkeypatch) -> list:
    """Count Textual's real parses (the function Stylesheet._parse_rules calls)."""
    calls = []
    real = textual_stylesheet.parse

    def counted(*args, **kwargs):
        calls.append(args[1])
        return real(*args, **kwargs)

    monkeypatch.setattr(textual_stylesheet, "parse", counted)
    return calls


def _sheet(folder, variables=None) -> CachedStylesheet:
    sheet = CachedStylesheet(variables=variables or {"primary": "#004578"}, store=ParseStore(folder))
    sheet.add_source(CSS, read_from=SOURCE)
    sheet.parse()
    return sheet


def test_a_second_start_takes_the_rules_from_the_store_without_parsing(tmp_path, monkeypatch):
    calls = _parse_counter(monkeypatch)
    first = _sheet(tmp_path / "tui")
    assert len(calls) == 1
    assert first.store.save()
    assert oct(os.stat(tmp_path / "tui").st_mode & 0o777) == "0o700"
    assert oct(os.stat(store_path(tmp_path / "tui")).st_mode & 0o777) == "0o600"
    second = _sheet(tmp_path / "tui")
    assert len(calls) == 1  # no parse: the stored rules
    assert [r.css for r in second.rules] == [r.css for r in first.rules]
    assert "#004578" in second.rules[0].css.lower()  # the variable substituted as when parsed
    assert not second.store.save()  # nothing new: not written again


def test_other_css_variables_or_another_source_are_parsed_afresh(tmp_path, monkeypatch):
    calls = _parse_counter(monkeypatch)
    _sheet(tmp_path).store.save()
    themed = _sheet(tmp_path, {"primary": "#ff0000"})
    assert len(calls) == 2
    assert "#FF0000" in themed.rules[0].css.upper()
    sheet = CachedStylesheet(variables={"primary": "#004578"}, store=ParseStore(tmp_path))
    sheet.add_source(CSS, read_from=("/elsewhere/app.tcss", ""))
    sheet.parse()
    assert len(calls) == 3


def test_a_save_keeps_what_the_store_held_and_adds_what_was_parsed(tmp_path, monkeypatch):
    _sheet(tmp_path).store.save()
    sheet = CachedStylesheet(variables={"primary": "#004578"}, store=ParseStore(tmp_path))
    sheet.add_source("Label { color: blue; }", read_from=SOURCE)  # the app's CSS was edited
    sheet.parse()
    assert sheet.store.save()
    assert len(ParseStore(tmp_path).loaded) == 2
    # a start that parses nothing new writes nothing (a subset of the store used is no change)
    again = CachedStylesheet(variables={"primary": "#004578"}, store=ParseStore(tmp_path))
    again.add_source(CSS, read_from=SOURCE)
    again.parse()
    assert not again.store.save()
    # past MAX_ENTRIES, only this start's entries are written
    monkeypatch.setattr("workbench.screens.css_cache.MAX_ENTRIES", 1)
    third = CachedStylesheet(variables={"primary": "#000000"}, store=ParseStore(tmp_path))
    third.add_source(CSS, read_from=SOURCE)
    third.parse()
    assert third.store.save() and len(ParseStore(tmp_path).loaded) == 1


def test_a_store_whose_rules_fail_is_dropped_and_the_css_parsed(tmp_path, monkeypatch):
    """A store that loads but whose rules break Textual's parse (seen: a 0600 pickle with the
    right keys and other values crashed every start, and the exit wrote it back): parsed afresh,
    and a save holds only what was parsed."""
    _sheet(tmp_path).store.save()
    real = textual_stylesheet.Stylesheet.parse

    def breaks_with_stored_rules(self):
        if self.store.loaded:
            raise AttributeError("'str' object has no attribute 'errors'")
        return real(self)

    monkeypatch.setattr(textual_stylesheet.Stylesheet, "parse", breaks_with_stored_rules)
    sheet = _sheet(tmp_path)
    assert "#004578" in sheet.rules[0].css.lower()
    assert "its rules failed" in sheet.store.problem and not sheet.store.loaded
    assert sheet.store.save()


def test_rules_with_errors_are_not_stored(tmp_path):
    sheet = CachedStylesheet(variables={}, store=ParseStore(tmp_path))
    sheet.add_source("Static { colour: red; }", read_from=SOURCE)
    with pytest.raises(Exception):
        sheet.parse()
    assert not sheet.store.save()
    assert not store_path(tmp_path).exists()


@pytest.mark.parametrize("how", ["group-writable file", "open folder", "symlink", "not a pickle", "not a store",
                                 "not rules"])
def test_a_store_others_could_have_written_or_that_does_not_load_is_not_used(tmp_path, monkeypatch, how):
    calls = _parse_counter(monkeypatch)
    folder = tmp_path / "tui"
    _sheet(folder).store.save()
    path = store_path(folder)
    if how == "group-writable file":
        os.chmod(path, 0o620)
    elif how == "open folder":
        os.chmod(folder, 0o755)
    elif how == "symlink":
        real = tmp_path / "elsewhere.pickle"
        os.replace(path, real)
        os.symlink(real, path)
    elif how == "not a pickle":
        path.write_bytes(b"\x80\x05 truncated")
    elif how == "not a store":
        path.write_bytes(pickle.dumps(["a list", "not a dict"]))
    else:  # the right keys, other values
        path.write_bytes(pickle.dumps({key: ["garbage", None, 1] for key in ParseStore(folder).loaded}))
    store = ParseStore(folder)
    assert store.loaded == {} and store.problem and str(path) in store.problem
    sheet = CachedStylesheet(variables={"primary": "#004578"}, store=store)
    sheet.add_source(CSS, read_from=SOURCE)
    sheet.parse()
    assert len(calls) == 2  # parsed again, as without a store
    assert "#004578" in sheet.rules[0].css.lower()


@pytest.mark.slow
def test_the_app_styled_from_the_store_looks_as_the_app_that_parsed(tmp_path, monkeypatch):
    """The whole app: a first start parses and saves once its ops are loaded (a closed terminal
    ends the app without the save at its end), a second start parses none of the CSS its first
    frame uses and styles every widget the same."""
    import asyncio

    from textual.widgets import Static

    from tui_helpers import fake_catalog, fake_opener, fixture_engine, loaded, wait_for
    from workbench.screens.app import LazyPane, WorkbenchApp

    calls = _parse_counter(monkeypatch)

    async def start() -> dict:
        app = WorkbenchApp(None, None, engine=fixture_engine(), catalog_loader=lambda kernels, device: fake_catalog(),
                           opener=fake_opener(), data_dir=tmp_path / "data", css_cache=tmp_path / "tui")
        async with app.run_test(size=(120, 40)) as pilot:
            await loaded(pilot)
            while app.query(LazyPane):  # every pane mounted: all of the app's CSS parsed
                await pilot.pause(0.02)
            styles = {f"{type(w).__name__}#{w.id}": (str(w.styles.background), str(w.styles.color), w.region)
                      for w in app.screen.walk_children(Static)}
            await wait_for(pilot, lambda: store_path(tmp_path / "tui").exists())
        return styles

    first = asyncio.run(start())
    parsed = len(calls)
    assert parsed > 20  # app.tcss and the widgets' DEFAULT_CSS
    second = asyncio.run(start())
    assert len(calls) == parsed  # none parsed again
    assert second == first and len(first) > 20


@pytest.mark.slow
def test_a_store_the_app_may_not_use_is_said_in_the_log(tmp_path):
    """A folder others may enter is neither read nor written; the Log says so once (the speed-up
    was lost without a word: a new user's try)."""
    import asyncio

    from tui_helpers import fake_catalog, fake_opener, fixture_engine, loaded, wait_for
    from workbench.screens.app import WorkbenchApp
    from workbench.screens.panes.log import LogPane

    folder = tmp_path / "tui"
    _sheet(folder).store.save()
    os.chmod(folder, 0o755)

    async def start() -> list[str]:
        app = WorkbenchApp(None, None, engine=fixture_engine(), catalog_loader=lambda kernels, device: fake_catalog(),
                           opener=fake_opener(), data_dir=tmp_path / "data", css_cache=folder)
        async with app.run_test(size=(120, 40)) as pilot:
            await loaded(pilot)
            log = app.query_one(LogPane)
            await wait_for(pilot, lambda: any("parsed CSS" in text for _, text in log.entries))
            return [text for _, text in log.entries if "parsed CSS" in text]

    lines = asyncio.run(start())
    assert len(lines) == 1 and str(folder) in lines[0]


MEMO_CSS = """
.warm Label { color: red; }
.cool Label { color: blue; }
Label.loud { text-style: bold; }
Label:disabled { color: gray; }
"""


def _memo_app(sheet_class):
    from textual.app import App
    from textual.containers import Vertical
    from textual.widgets import Label

    class Demo(App):
        CSS = MEMO_CSS

        def __init__(self) -> None:
            super().__init__()
            if sheet_class is not None:
                self.stylesheet = sheet_class(variables=self.get_css_variables())

        def compose(self):
            with Vertical(id="box", classes="warm"):
                yield Label("x", id="label")

    return Demo()


def _states(sheet_class) -> list:
    """The label's color and style through ancestor-class, own-class and disabled changes,
    some of them back to a state seen before (memo hits); and the rules matched on each."""
    import asyncio

    from textual.css.stylesheet import Stylesheet

    seen, matched = [], []
    real_check = Stylesheet._check_rule.__func__

    def counted(cls, rule_set, css_path_nodes):
        matched.append(rule_set)
        return real_check(cls, rule_set, css_path_nodes)

    async def drive() -> None:
        app = _memo_app(sheet_class)
        async with app.run_test() as pilot:
            box, label = app.query_one("#box"), app.query_one("#label")
            steps = [lambda: None, lambda: (box.set_class(False, "warm"), box.set_class(True, "cool")),
                     lambda: (box.set_class(False, "cool"), box.set_class(True, "warm")),
                     lambda: label.add_class("loud"), lambda: label.remove_class("loud"),
                     lambda: setattr(box, "disabled", True), lambda: setattr(box, "disabled", False),
                     lambda: (box.set_class(False, "warm"), box.set_class(True, "cool"))]
            for step in steps:
                step()
                await pilot.pause()
                matched.clear()
                app.update_styles(label)
                seen.append((label.styles.color, label.styles.text_style, bool(matched)))

    Stylesheet._check_rule = classmethod(counted)
    try:
        asyncio.run(drive())
    finally:
        Stylesheet._check_rule = classmethod(real_check)
    return seen


def test_the_memo_gives_the_rules_textual_matches_and_skips_matching_a_state_seen_before():
    """MemoStylesheet: the same styles as Textual's Stylesheet through changes of an ancestor's
    classes, the node's own and an ancestor's `disabled` (which Label:disabled sees), and no
    matching for a state it has seen (each restyle is done twice: the second is a memo hit)."""
    from textual.css.stylesheet import Stylesheet

    from workbench.screens.css_cache import MemoStylesheet

    plain, memo = _states(Stylesheet), _states(MemoStylesheet)
    assert [state[:2] for state in memo] == [state[:2] for state in plain]
    assert [str(state[0]) for state in plain[:3]] == [str(plain[0][0]), str(plain[1][0]), str(plain[0][0])]
    assert plain[0][0] != plain[1][0] and plain[5][0] not in (plain[0][0], plain[1][0])  # the CSS took hold
    assert all(state[2] for state in plain)  # Textual matches every time
    assert not any(state[2] for state in memo)  # each state was met (the step's own restyle) before


def test_a_memo_hit_animates_through_textual_where_the_rules_declare_a_transition(monkeypatch):
    """MemoStylesheet's own setting of the changed rules stands for Textual's animated replace
    only where no transition is declared; with one, the hit goes through replace_rules."""
    import asyncio

    from textual.app import App
    from textual.widgets import Label

    from workbench.screens.css_cache import MemoStylesheet

    class Faded(App):
        CSS = "Label { transition: opacity 200ms; } Label.dim { opacity: 50%; } Label.loud { text-style: bold; }"

        def __init__(self) -> None:
            super().__init__()
            self.stylesheet = MemoStylesheet(variables=self.get_css_variables())

        def compose(self):
            yield Label("x", id="label")

    animated: list[bool] = []
    real = MemoStylesheet.replace_rules.__func__

    def spied(cls, node, rules, animate=False):
        animated.append(animate)
        return real(cls, node, rules, animate)

    monkeypatch.setattr(MemoStylesheet, "replace_rules", classmethod(spied))

    async def drive() -> None:
        app = Faded()
        async with app.run_test() as pilot:
            label = app.query_one("#label")
            for _ in range(2):  # the second pass: memo hits
                label.add_class("dim")
                await pilot.pause()
                label.remove_class("dim")
                await pilot.pause()
            animated.clear()
            label.add_class("dim")  # a state seen before
            await pilot.pause()

    asyncio.run(drive())
    assert animated == [True]
