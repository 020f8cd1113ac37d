"""A pane key repaints only what changes (issue 39 item 3): the tables keep their rendered cells
across a focus change and a hide/show (screens/keys.KeyDataTable), drawn as a fresh table draws
them, also after a theme change; the screen and the pane box are not repainted whole
(app.MainScreen.focused, fitting.PaneTabs.active)."""

from __future__ import annotations

import pytest
from textual.app import App, ComposeResult
from textual.containers import Vertical
from textual.geometry import Region
from textual.widgets import DataTable

from tui_helpers import run_async, wait_for
from workbench.screens.keys import KeyDataTable

ROWS = [("manual", "ok", "764 µs", "-16/+3674%"), ("pytorch", "ok", "279 µs", "-1.3/+4%"),
        ("compiled", "running", "-", "-"), ("triton", "queued", "-", "-")]


class _Tables(App):
    """The table under test (in a box that hides like a pane), a plain DataTable with the same
    rows to compare with, and a third table that takes the focus away. `-alt` restyles the rows
    only (not the table's own style, which the cells' cache keys hold)."""

    CSS = "DataTable.-alt > .datatable--even-row { background: red; } DataTable.-alt > .datatable--odd-row { color: green; }"

    def compose(self) -> ComposeResult:
        with Vertical(id="box"):
            yield KeyDataTable(id="kept", cursor_type="row", zebra_stripes=True)
        yield DataTable(id="plain", cursor_type="row", zebra_stripes=True)
        yield KeyDataTable(id="other")

    def on_mount(self) -> None:
        for table in self.query("#kept, #plain").results(DataTable):
            table.add_columns("impl", "status", "median", "spread")
            table.add_rows(ROWS)
        self.query_one("#other", DataTable).add_columns("x")


def _app(tmp_path):
    """The whole app on the GeLU fixture, ops loaded from the fake catalog."""
    from tui_helpers import fake_catalog, fake_opener, fixture_engine
    from workbench.screens.app import WorkbenchApp

    return WorkbenchApp(None, None, engine=fixture_engine(), opener=fake_opener(),
                        catalog_loader=lambda kernels, device: fake_catalog(), data_dir=tmp_path)


def _lines(table: DataTable) -> list[tuple]:
    """What the table draws, cell text and style."""
    strips = table.render_lines(Region(0, 0, table.size.width, table.size.height))
    return [tuple((segment.text, segment.style) for segment in strip) for strip in strips]


def _count_cell_renders(table: DataTable, counter: list[int]) -> None:
    """counter[0] += 1 for each cell the table renders anew (a miss of its cell cache)."""
    render = table._render_cell

    def counted(row_index, column_index, style, width, cursor=False, hover=False):
        key = (table._row_locations.get_key(row_index) if row_index >= 0 else table._header_row_key,
               table._column_locations.get_key(column_index), style, cursor, hover,
               table._show_hover_cursor, table._update_count, table._pseudo_class_state)
        counter[0] += key not in table._cell_render_cache
        return render(row_index, column_index, style, width, cursor, hover)
    table._render_cell = counted


async def _focus(pilot, widget) -> None:
    """The keyboard to `widget`, and a pause after it got it (Widget.focus is deferred)."""
    widget.focus()
    await wait_for(pilot, lambda: widget.app.focused is widget)
    await pilot.pause()


async def _settled(pilot, table: DataTable) -> None:
    """Until the table has measured its rows and taken its size (each bumps its _update_count,
    which its cell cache is keyed by): a pause alone returns early on a loaded machine (Textual's
    wait_for_idle reads an unscheduled process as idle)."""
    await wait_for(pilot, lambda: table.app.focused is table and not table._require_update_dimensions
                   and not table._new_rows and getattr(table, "_resized_to", table.size) == table.size)
    await pilot.pause()


def test_a_focus_change_and_a_hide_show_keep_the_tables_cells_and_draw_them_as_before():
    app = _Tables()

    @run_async
    async def drive() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            kept, other = app.query_one("#kept", KeyDataTable), app.query_one("#other", KeyDataTable)
            kept.focus()
            await _settled(pilot, kept)
            focused = _lines(kept)
            misses = [0]
            _count_cell_renders(kept, misses)
            for _ in range(2):  # as pane keys do: the box hidden, focus away; shown, focus back
                app.query_one("#box").display = False
                other.focus()
                await wait_for(pilot, lambda: app.focused is other)  # (a frame meanwhile: hidden)
                app.query_one("#box").display = True
                kept.focus()
                await wait_for(pilot, lambda: app.focused is kept)
                await pilot.pause()
                assert _lines(kept) == focused
            assert misses[0] == 0  # (DataTable rendered every cell again after each focus change)
    drive()


def test_rows_replaced_with_the_same_text_are_drawn_from_kept_cells_and_a_changed_cell_anew(monkeypatch):
    """A streaming run replaces the Timing table's rows at every redraw, and DataTable keyed each
    rendered cell and row line by its update count: every cell went through rich again. The
    table keeps them by place, text and look (KeyDataTable._render_cell, _render_line_in_row):
    the same rows again render no cell, a changed cell is rendered, and the table draws what a
    plain DataTable given the same rows draws."""
    app = _Tables()
    rendered = []
    real = DataTable._render_cell

    def counted(self, row_index, column_index, *args, **kwargs):
        if self.id == "kept":
            rendered.append((row_index, column_index))
        return real(self, row_index, column_index, *args, **kwargs)
    monkeypatch.setattr(DataTable, "_render_cell", counted)
    lines_drawn = []
    real_line = DataTable._render_line_in_row

    def counted_line(self, row_key, *args, **kwargs):
        if self.id == "kept":
            lines_drawn.append(row_key)
        return real_line(self, row_key, *args, **kwargs)
    monkeypatch.setattr(DataTable, "_render_line_in_row", counted_line)

    @run_async
    async def drive() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            kept, plain = app.query_one("#kept", KeyDataTable), app.query_one("#plain", DataTable)
            other = app.query_one("#other", KeyDataTable)
            await _focus(pilot, other)  # both tables blurred: drawn alike
            await pilot.pause()
            assert _lines(kept) == _lines(plain)

            async def replace(rows) -> None:
                rendered.clear()
                lines_drawn.clear()
                kept.replace_rows(rows)
                plain.clear()
                plain.add_rows(rows)
                await wait_for(pilot, lambda: not kept._new_rows and not plain._new_rows
                               and not kept._require_update_dimensions)
                await pilot.pause()

            await replace(ROWS)
            assert _lines(kept) == _lines(plain)
            assert rendered == [] and lines_drawn == []
            changed = [ROWS[0], ("pytorch", "ok", "281 µs", "-1.3/+4%"), *ROWS[2:]]
            await replace(changed)
            assert _lines(kept) == _lines(plain)
            assert (1, 2) in rendered and all(row == 1 for row, _ in rendered)  # that row's line, its cells kept
            assert "281 µs" in "".join(text for line in _lines(kept) for text, _ in line)
    drive()


def test_a_table_works_out_its_rich_style_once_per_render_not_per_line(monkeypatch):
    """DataTable.render_line asks for the table's rich_style on every line, and Textual works it
    out anew each time (a walk of every ancestor's styles): half of a 40-line Profile table's
    frame. KeyDataTable finds it once per render_lines."""
    from textual.dom import DOMNode

    app = _Tables()
    asked = {"kept": 0, "plain": 0}
    real = DOMNode.rich_style

    def counted(self):
        if self.id in asked:
            asked[self.id] += 1
        return real.fget(self)
    monkeypatch.setattr(DOMNode, "rich_style", property(counted))

    @run_async
    async def drive() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            kept, plain = app.query_one("#kept", KeyDataTable), app.query_one("#plain", DataTable)
            rows = [(f"impl{i}", "ok", f"{i} µs", "-") for i in range(20)]
            kept.add_rows(rows)
            plain.add_rows(rows)
            await _focus(pilot, app.query_one("#other", KeyDataTable))
            await pilot.pause()
            for table in (kept, plain):
                table._styles_cache.clear()  # every line drawn again
                asked[table.id] = 0
                _lines(table)
            assert asked["plain"] >= 10  # (the check can fail: DataTable asks per line)
            assert asked["kept"] <= 2
            assert kept._rich_style_now is None  # (only while it draws)
    drive()


def test_a_table_blurred_while_hidden_and_shown_before_the_next_frame_draws_blurred():
    """Blurred while its box is hidden, the table's restyle waits for the next frame
    (KeyDataTable.watch_has_focus); shown again before that frame (two pane keys within one, or
    a loaded box), its first lines are the blurred look, and the cells kept for either focus
    state stay (found by CI under load: the lines of the focused look were drawn for the blurred
    state and every cell was rendered again)."""
    app = _Tables()

    @run_async
    async def drive() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            kept, other = app.query_one("#kept", KeyDataTable), app.query_one("#other", KeyDataTable)
            await _focus(pilot, kept)
            await _settled(pilot, kept)
            await _focus(pilot, other)
            blurred = _lines(kept)
            await _focus(pilot, kept)
            assert _lines(kept) != blurred
            misses = [0]
            _count_cell_renders(kept, misses)
            box = app.query_one("#box")
            box.display = False
            kept.has_focus = False  # as its Blur does (no frame in between: no await)
            box.display = True
            assert _lines(kept) == blurred
            assert misses[0] == 0
    drive()


def test_a_table_gathers_its_styles_again_only_after_a_restyle_or_in_another_focus_state():
    """Each render compared the styles a state draws with against those its kept lines were
    drawn with (a rich style per component class, each walking the ancestors: a sixth of a
    streaming table's render); now only after a restyle or a focus change."""
    app = _Tables()

    @run_async
    async def drive() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            kept, other = app.query_one("#kept", KeyDataTable), app.query_one("#other", KeyDataTable)
            await _focus(pilot, kept)
            await _settled(pilot, kept)
            gathered = [0]
            real = kept.get_component_rich_style

            def counted(*args, **kwargs):
                gathered[0] += 1
                return real(*args, **kwargs)
            kept.get_component_rich_style = counted
            _lines(kept)
            kept.add_row("new", "row", "x", "y")  # new data: rendered anew, with the styles it had
            await pilot.pause()
            _lines(kept)
            assert gathered[0] == 0
            await _focus(pilot, other)  # another focus state: its styles are looked at
            _lines(kept)
            assert gathered[0] > 0
            seen = gathered[0]
            _lines(kept)
            assert gathered[0] == seen
            kept.add_class("-alt")  # a restyle: looked at again
            await pilot.pause()
            _lines(kept)
            assert gathered[0] > seen
    drive()


@pytest.mark.parametrize("change", ["class", "theme"])
def test_after_a_style_change_the_table_draws_as_a_fresh_table_in_either_focus_state(change):
    """The kept cells are dropped when the styles they were drawn with change (a class that
    restyles only the rows, the theme), also those of the focus state the table is not in at the
    change (it had the focus then)."""
    app = _Tables()

    @run_async
    async def drive() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            kept, plain = app.query_one("#kept", KeyDataTable), app.query_one("#plain", DataTable)
            other = app.query_one("#other", KeyDataTable)
            await _focus(pilot, kept)
            await _focus(pilot, other)  # the blurred look drawn and kept
            before = _lines(kept)
            assert before == _lines(plain)
            await _focus(pilot, kept)
            if change == "class":
                for table in (kept, plain):
                    table.add_class("-alt")
            else:
                app.theme = "textual-light"
            await pilot.pause()
            await _focus(pilot, plain)
            focused = _lines(plain)
            await _focus(pilot, kept)
            assert _lines(kept) == focused
            await _focus(pilot, other)
            assert _lines(kept) == _lines(plain) != before  # blurred, as restyled
    drive()


@pytest.mark.slow  # the whole Textual app (its resource tracker is a child process)
def test_a_pane_key_repaints_the_pane_not_the_screen_or_the_pane_box(tmp_path):
    from textual._styles_cache import StylesCache
    from textual.scrollbar import ScrollBar
    from textual.widgets import TabbedContent

    from tui_helpers import loaded
    from workbench.screens.fitting import FittedFooter

    app = _app(tmp_path)
    drawn: list = []
    render_widget = StylesCache.render_widget
    render_line = StylesCache.render_line

    def spy_widget(self, widget, crop):
        drawn.append([widget])
        return render_widget(self, widget, crop)

    def spy_line(self, *args, **kwargs):
        drawn[-1].append(True)  # a line of that widget drawn anew (not from its cache)
        return render_line(self, *args, **kwargs)

    @run_async
    async def drive() -> None:
        async with app.run_test(size=(200, 50)) as pilot:
            await loaded(pilot)
            tabs = app.query_one(TabbedContent)
            await pilot.press("1")  # the keyboard into the panes' box (its border lights up: a repaint)
            for key, pane in (("2", "profile"), ("1", "timing"), ("2", "profile"), ("1", "timing")):
                await pilot.pause(0.3)
                drawn.clear()
                StylesCache.render_widget, StylesCache.render_line = spy_widget, spy_line
                try:
                    await pilot.press(key)
                    await pilot.pause()
                finally:
                    StylesCache.render_widget, StylesCache.render_line = render_widget, render_line
                assert tabs.active == pane
                redrawn = {entry[0] for entry in drawn if len(entry) > 1}
                outside = [w for w in redrawn if tabs not in w.ancestors_with_self
                           and not isinstance(w, ScrollBar) and FittedFooter not in map(type, w.ancestors_with_self)]
                assert not outside, (key, outside)  # the screen (focus moved), the sidebar: not drawn again
                assert tabs not in redrawn  # the pane box's border: not drawn again
    drive()


def test_no_rule_styles_the_inside_of_a_box_by_its_focus_class():
    """app._focus_moved restyles the two boxes only (not their subtrees) when the keyboard moves
    between them: that is right only while every rule naming -focus-box styles the box itself."""
    import re
    from pathlib import Path

    css = re.sub(r"/\*.*?\*/", "", (Path(__file__).resolve().parents[1] / "screens" / "app.tcss").read_text(),
                 flags=re.S)
    selectors = [s.strip() for block in re.findall(r"([^{}]+)\{", css) for s in block.split(",")]
    named = [s for s in selectors if "-focus-box" in s]
    assert named  # the rule that draws the heavy border
    for selector in named:
        assert "-focus-box" in re.split(r"[\s>]+", selector)[-1], selector


@pytest.mark.slow  # the whole Textual app (its resource tracker is a child process)
def test_the_keyboard_moving_into_the_panes_restyles_the_two_boxes_not_every_pane(tmp_path):
    from tui_helpers import loaded

    app = _app(tmp_path)

    @run_async
    async def drive() -> None:
        async with app.run_test(size=(120, 40)) as pilot:
            await loaded(pilot)
            await pilot.pause(0.1)
            runs, panes = app.query_one("#op-list"), app.query_one("#panes")
            assert app.focused is runs
            sizes: list[int] = []
            update_nodes = app.stylesheet.update_nodes

            def counted(nodes, **kwargs):
                nodes = list(nodes)
                sizes.append(len(nodes))
                return update_nodes(nodes, **kwargs)
            app.stylesheet.update_nodes = counted
            for key, box in (("2", panes), ("escape", None), ("1", panes)):
                if box is None:  # back to the run list (a click there, or tab)
                    runs.focus()
                else:
                    await pilot.press(key)
                await pilot.pause(0.1)
                lit = box or runs
                assert lit.has_class("-focus-box") and lit.styles.border_top[0] == "heavy"
                unlit = runs if box else panes
                assert not unlit.has_class("-focus-box") and unlit.styles.border_top[0] == "round"
            assert sizes and max(sizes) < 20, sizes  # the panes' box's ~80 widgets were restyled
    drive()


@pytest.mark.slow  # the whole Textual app (its resource tracker is a child process)
def test_the_name_of_the_field_being_edited_is_lit_and_follows_tab(tmp_path):
    """`.field:focus-within .field-name`: lit on `e` (the box's restyle did it by the way before
    the boxes were restyled alone) and on tab to the next field (never did: Textual restyles on
    focus only below an ancestor whose own rules use :focus-within)."""
    from tui_helpers import loaded

    app = _app(tmp_path)

    def lit(name: str) -> bool:
        field = next(f for f in app.query(".field") if f.query(".field-name").first().content == name)
        return bool(field.query_one(".field-name").styles.text_style.bold)

    @run_async
    async def drive() -> None:
        async with app.run_test(size=(120, 40)) as pilot:
            await loaded(pilot)
            await pilot.press("e")
            await pilot.pause(0.2)
            assert app.focused.name == "M" and lit("M") and not lit("N")
            await pilot.press("tab")
            await pilot.pause(0.2)
            assert app.focused.name == "N" and lit("N") and not lit("M")
    drive()


@pytest.mark.slow  # the whole Textual app (its resource tracker is a child process)
def test_a_table_whose_pane_a_key_hides_is_restyled_as_blurred_after_the_frame(tmp_path):
    """KeyDataTable.watch_has_focus: the restyle of the table leaving with its pane waits for
    the frame of the pane coming on screen, and then happens (its blurred cursor, as before it
    ever had the focus)."""
    from tui_helpers import loaded

    app = _app(tmp_path)

    @run_async
    async def drive() -> None:
        async with app.run_test(size=(120, 40)) as pilot:
            await loaded(pilot)
            table = app.query_one("#results-table", KeyDataTable)
            blurred = table.get_component_rich_style("datatable--cursor")
            await pilot.press("1")
            await pilot.pause(0.2)
            focused = table.get_component_rich_style("datatable--cursor")
            assert app.focused is table and focused != blurred
            await pilot.press("2")
            await pilot.pause(0.2)
            assert app.focused is not table and table.get_component_rich_style("datatable--cursor") == blurred
            await pilot.press("1")
            await pilot.pause(0.2)
            assert table.get_component_rich_style("datatable--cursor") == focused
    drive()


def test_a_press_splits_into_the_way_in_the_apps_work_and_the_way_out(tmp_path):
    """benchmarks/tui_key_split: the key event and the first frame after it inside a press's
    (sent, seen) window; a press the app never took is None, not a figure."""
    from benchmarks.tui_key_split import press_split, read

    log = tmp_path / "split.log"
    log.write_text("frame 9.990000 1.000000\nkey 10.004000 1.500000\nframe 10.050000 1.530000\n"
                   "frame 10.070000 1.540000\nkey 20.010000 2.000000\n")
    rows = read(log)
    assert press_split(rows, 10.0, 10.06) == {"to_app_ms": 4.0, "app_wall_ms": 46.0, "app_cpu_ms": 30.0,
                                              "to_screen_ms": 10.0}
    assert press_split(rows, 20.0, 20.05) is None  # no frame after the key within the press
    assert press_split(rows, 30.0, 30.05) is None
    assert read(tmp_path / "missing.log") == []


def test_a_pane_key_arranges_the_screen_once_and_draws_the_pane_and_its_switcher_blank(tmp_path):
    """app.LaidOutCompositor: the layout's own arrangement serves the frame (before, the first
    `region` asked after it arranged the whole screen again); fitting.PaneBox and the switcher
    around it are drawn as their blank background, never line by line through the StylesCache."""
    from textual._compositor import Compositor
    from textual._styles_cache import StylesCache
    from textual.widgets import ContentSwitcher, TabbedContent

    from tui_helpers import loaded
    from workbench.screens.fitting import PaneBox

    app = _app(tmp_path)
    arranged: list[str] = []
    styled: list = []
    arrange, reflow, render_widget = Compositor._arrange_root, Compositor.reflow, StylesCache.render_widget
    render_update = Compositor.render_update

    def spy_frame(self, *args, **kwargs):
        arranged.append("frame")
        return render_update(self, *args, **kwargs)

    def spy_reflow(self, parent, size):
        arranged.append("layout")
        return reflow(self, parent, size)

    def spy_arrange(self, root, size, visible_only=True):
        if not visible_only:
            arranged.append("arrange")
        return arrange(self, root, size, visible_only)

    def spy_widget(self, widget, crop):
        styled.append(widget)
        return render_widget(self, widget, crop)

    @run_async
    async def drive() -> None:
        async with app.run_test(size=(200, 50)) as pilot:
            await loaded(pilot)
            tabs = app.query_one(TabbedContent)
            app.query_one("#sidebar").scroll_to(y=1, animate=False)  # a scroll: Textual marks its full map stale
            for key, pane in (("2", "profile"), ("1", "timing"), ("2", "profile")):
                await pilot.pause(0.3)
                arranged.clear()
                styled.clear()
                Compositor._arrange_root, Compositor.reflow, StylesCache.render_widget = spy_arrange, spy_reflow, spy_widget
                Compositor.render_update = spy_frame
                try:
                    await pilot.press(key)
                    await pilot.pause()
                finally:
                    Compositor._arrange_root, Compositor.reflow, StylesCache.render_widget = arrange, reflow, render_widget
                    Compositor.render_update = render_update
                assert tabs.active == pane
                assert "layout" in arranged, key
                # from a layout to its frame: the layout's own arrangement only (Textual's stale
                # full map arranged the screen again for the frame's first `region`)
                layouts = " ".join(arranged).split("layout")[1:]
                assert all(part.split("frame")[0].split() == ["arrange"] for part in layouts), (key, arranged)
                assert styled, key  # the frame was drawn while spied
                assert not [w for w in styled if isinstance(w, (PaneBox, ContentSwitcher))], key
    drive()


def test_a_row_of_several_lines_is_signed_once_per_render(monkeypatch):
    """KeyDataTable._row_signature: worked out once per row within a render_lines, not once per
    line of the row (each working-out makes a key of every cell)."""

    class _Tall(App):
        def compose(self) -> ComposeResult:
            yield KeyDataTable(id="tall")

        def on_mount(self) -> None:
            table = self.query_one(KeyDataTable)
            table.add_columns("impl", "median")
            for impl, median in (("manual", "764 µs"), ("pytorch", "279 µs")):
                table.add_row(impl, median, height=3)

    worked: list = []
    real = KeyDataTable._work_out_signature

    def counted(self, row_key):
        worked.append(row_key)
        return real(self, row_key)

    @run_async
    async def drive() -> None:
        app = _Tall()
        async with app.run_test(size=(40, 12)) as pilot:
            table = app.query_one(KeyDataTable)
            await pilot.pause()
            monkeypatch.setattr(KeyDataTable, "_work_out_signature", counted)
            table._clear_caches()  # DataTable's own line cache: every line drawn through the row's
            table._row_lines = None  # and anew there, each asking for its row's signature
            lines = _lines(table)
            assert len(lines) == table.size.height and any("pytorch" in "".join(t for t, _ in line) for line in lines)
            assert sorted(map(str, worked)) == sorted(map(str, set(worked)))  # each row once
            assert len(worked) <= 3  # the header and the two rows
    drive()


def test_the_cursor_rows_fixed_cells_dim_with_the_rest_when_the_table_loses_the_keyboard(tmp_path):
    """app.tcss: the fixed columns' cursor cells (impl, status, median, spread) were lit as
    focused after the keyboard left the table, while its other cells dimmed (a new user's try:
    two boxes looked focused)."""
    from tui_helpers import loaded, ran

    app = _app(tmp_path)

    def backgrounds(table) -> set:
        line = table.render_lines(Region(0, 1, table.size.width, 1))[0]  # the first row, the cursor's
        return {segment.style.bgcolor for segment in line if segment.text.strip() and segment.style}

    @run_async
    async def drive() -> None:
        async with app.run_test(size=(200, 50)) as pilot:
            await loaded(pilot)
            await pilot.press("r")
            await ran(pilot)
            await pilot.press("1")
            await pilot.pause(0.3)
            table = app.query_one("#results-table", DataTable)
            assert table.fixed_columns and table.has_focus
            focused = backgrounds(table)
            await pilot.press("tab")
            await pilot.pause(0.3)
            assert not table.has_focus
            blurred = backgrounds(table)
            assert len(focused) == 1 and len(blurred) == 1 and focused != blurred, (focused, blurred)
    drive()


@run_async
async def test_zebra_stripes_run_through_the_fixed_columns():
    """DataTable drew the fixed columns (impl, status, median, spread) in datatable--fixed alone:
    the stripes stopped short of them (a new user's try)."""

    class Striped(App):
        def compose(self) -> ComposeResult:
            yield KeyDataTable(id="t", cursor_type="row", zebra_stripes=True, show_cursor=False)

    app = Striped()
    async with app.run_test(size=(60, 10)) as pilot:
        table = app.query_one("#t", KeyDataTable)
        table.add_columns("impl", "status", "median", "notes")
        table.fixed_columns = 2
        for n in range(4):
            table.add_row(f"impl{n}", "ok", f"{n}.0", "x")
        await pilot.pause()

        def background(y: int, x: int):
            segments = list(table.render_line(y))
            at = 0
            for segment in segments:
                if at + len(segment.text) > x:
                    return segment.style.bgcolor
                at += len(segment.text)

        fixed = [background(y, 1) for y in (1, 2, 3, 4)]  # line 0 is the header
        scrolling = [background(y, 30) for y in (1, 2, 3, 4)]
        assert scrolling[0] != scrolling[1] and scrolling[0] == scrolling[2]  # the stripes of the scrolling part
        assert fixed[0] != fixed[1] and fixed[0] == fixed[2] and fixed[1] == fixed[3]


@run_async
async def test_the_last_sideways_scroll_shows_no_tail_of_a_cut_column():
    """After many `l`, the furthest scroll cut a column at its left: its values' tails ('event'
    of cuda_event) stood beside the spread column, under the next column's header."""

    class Wide(App):
        def compose(self) -> ComposeResult:
            yield KeyDataTable(id="t", cursor_type="row")

    app = Wide()
    async with app.run_test(size=(30, 8)) as pilot:
        table = app.query_one("#t", KeyDataTable)
        table.add_columns("impl", "timer", "notes")
        table.fixed_columns = 1
        table.add_row("manual", "cuda_event", "a long note here")
        table.add_row("triton", "cuda_event", "another")
        table.focus()
        await pilot.pause()
        for _ in range(6):
            await pilot.press("l")
        await pilot.pause()
        text = ["".join(s.text for s in table.render_line(y)) for y in range(3)]
        assert table.scroll_x == table.max_scroll_x > 0 and table.partial_column()[1] > 0
        assert not any("ent" in line for line in text) and text[1].startswith(" manual")
        assert "a long note here" in text[1]  # the column after it, whole
        await pilot.press("h", "h", "h", "h", "h", "h")
        await pilot.pause()
        assert table.scroll_x == 0 and "cuda_event" in "".join(s.text for s in table.render_line(1))


def test_a_press_lists_the_main_threads_slices_around_it(tmp_path):
    """benchmarks/tui_key_split: the slice lines (what the main thread ran, wall and CPU) are
    read apart from the key and frame lines, and a press gets those that overlap it, from
    before_s before it was sent until it was seen."""
    from benchmarks.tui_key_split import press_slices, press_split, read, read_slices

    log = tmp_path / "split.log"
    log.write_text("slice 9.900000 0.010000 0.009000 timer:Old=10.0\n"
                   "slice 9.980000 0.030000 0.012000 WorkbenchApp:EngineEvents=29.0,Log:Update=1.0\n"
                   "key 10.010000 1.500000\nslice 10.010000 0.004000 0.004000 WorkbenchApp:Key=3.9\n"
                   "frame 10.040000 1.530000\nslice 10.100000 0.005000 0.005000 timer:Later=5.0\n")
    assert [row[0] for row in read(log)] == ["key", "frame"]
    slices = read_slices(log)
    assert len(slices) == 4
    assert press_slices(slices, 10.0, 10.05) == [[-20.0, 30.0, 12.0, "WorkbenchApp:EngineEvents=29.0,Log:Update=1.0"],
                                                 [10.0, 4.0, 4.0, "WorkbenchApp:Key=3.9"]]
    assert press_slices(slices, 10.0, 10.05, before_s=0.2)[0][3] == "timer:Old=10.0"
    assert press_split(read(log), 10.0, 10.05)["app_cpu_ms"] == 30.0
    assert read_slices(tmp_path / "missing.log") == []


def test_the_split_launcher_logs_a_slow_slice_with_what_ran_in_it(tmp_path):
    """benchmarks/tui_key_split.install: an event-loop callback of SLICE_MIN_S or more is one
    slice line naming the message dispatched in it; a quick one is not logged."""
    import asyncio
    import time

    from textual.app import App

    from benchmarks import tui_key_split

    log = tmp_path / "split.log"

    class Slow(App):
        def on_mount(self) -> None:
            self.set_timer(0.05, self.crawl)

        def crawl(self) -> None:
            time.sleep(0.02)
            self.exit()

    saved = {name: getattr(cls, name) for cls, name in _split_patched()}
    try:
        tui_key_split.install(str(log))

        async def drive():
            async with Slow().run_test() as pilot:
                await pilot.pause(0.3)
        asyncio.run(drive())
    finally:
        for (cls, name), method in zip(_split_patched(), saved.values()):
            setattr(cls, name, method)
    slices = tui_key_split.read_slices(log)
    assert any(wall >= 0.02 and "next:" in what and "Slow.crawl=" in what for _, wall, _, what in slices), slices
    assert all(wall >= tui_key_split.SLICE_MIN_S for _, wall, _, _ in slices)


def _split_patched():
    """What benchmarks/tui_key_split.install wraps (put back after a test)."""
    import asyncio.events

    from textual.app import App
    from textual.message_pump import MessagePump
    from textual.timer import Timer

    return [(App, "on_event"), (App, "_display"), (asyncio.events.Handle, "_run"),
            (MessagePump, "_dispatch_message"), (Timer, "_tick"),
            (MessagePump, "_flush_next_callbacks")]


def test_the_tuitmux_stage_names_the_slowest_split_press_and_what_ran_in_it():
    """benchmarks/stages/tuitmux.split_rows: the medians of each part, then the slowest press
    (not the last, not the first) with its longest slices, longest first; a split run whose
    presses were none is said, not a figure."""
    from benchmarks.stages.tuitmux import split_rows

    result = {"key_ms": [20.0, 61.0, 25.0], "key_median_ms": 25.0, "key_max_ms": 61.0,
              "key_to_app_median_ms": 4.0, "key_app_wall_median_ms": 15.0, "key_app_cpu_median_ms": 14.0,
              "key_to_screen_median_ms": 4.0,
              "key_split": [{"to_app_ms": 3.0, "app_wall_ms": 12.0, "app_cpu_ms": 12.0, "to_screen_ms": 4.0, "slices": []},
                            {"to_app_ms": 20.0, "app_wall_ms": 35.0, "app_cpu_ms": 18.0, "to_screen_ms": 5.0,
                             "slices": [[-15.0, 22.0, 21.0, "WorkbenchApp:EngineEvents=21.5"],
                                        [20.0, 3.0, 3.0, "WorkbenchApp:Key=2.9"],
                                        [23.0, 30.0, 15.0, "timer:Screen._on_timer_update=29.9"],
                                        [60.0, 2.0, 2.0, "MainScreen:TabActivated=1.9"]]},
                            None]}
    rows = split_rows(result)
    assert rows[0]["parts"] == "to_app 4.0 / app_wall 15.0 / app_cpu 14.0 / to_screen 4.0"
    assert rows[1]["median"] == 61.0
    assert rows[1]["parts"] == "to_app 20.0 / app_wall 35.0 (cpu 18.0) / to_screen 5.0"
    assert rows[1]["slices"].split("; ") == ["@+23 30.0/15.0 ms timer:Screen._on_timer_update=29.9",
                                             "@-15 22.0/21.0 ms WorkbenchApp:EngineEvents=21.5",
                                             "@+20 3.0/3.0 ms WorkbenchApp:Key=2.9"]
    assert "status" in split_rows({"key_ms": [5.0], "key_split": [None]})[0]
