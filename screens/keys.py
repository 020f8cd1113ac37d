"""Widgets that answer j/k beside the arrow keys (vi-style), and nothing else new."""

from __future__ import annotations

from typing import Any, Callable, Iterable

from rich.segment import Segment
from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets._toggle_button import ToggleButton
from textual.widgets.option_list import OptionDoesNotExist
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Input, OptionList, RichLog, Select, SelectionList

LIST_KEYS = [Binding("j", "cursor_down", "Down", show=False),
              Binding("k", "cursor_up", "Up", show=False)]
# on the run list (screens.run_actions does the work); u, undo, works everywhere
RUN_LIST_KEYS = [Binding("d,delete", "app.delete_run", "Delete run"),
                 Binding("c", "app.duplicate_run", "Copy run"),
                 Binding("K", "app.move_run(-1)", "Move run up", show=False),
                 Binding("J", "app.move_run(1)", "Move run down", show=False)]
SCROLL_KEYS = [Binding("j", "scroll_down", "Down", show=False),
                Binding("k", "scroll_up", "Up", show=False)]


class KeyOptionList(OptionList):
    BINDINGS = LIST_KEYS


class KeySelectionList(SelectionList):
    """A checklist whose boxes say it in the glyph, not only in colour: `✓` ticked, blank not
    (the stock `X` in both states looked ticked in 256-colour terminals and tmux)."""

    BINDINGS = LIST_KEYS
    TICK, NO_TICK = "✓", " "

    def render_line(self, y: int) -> Strip:
        line = super().render_line(y)
        segments = list(line)
        try:
            selection = self.get_option_at_index(self.scroll_offset.y + y)
        except OptionDoesNotExist:
            return line
        if len(segments) < 2 or segments[1].text != ToggleButton.BUTTON_INNER:
            return line
        glyph = self.TICK if selection.value in self._selected else self.NO_TICK
        segments[1] = Segment(glyph, segments[1].style, segments[1].control)
        return Strip(segments, line.cell_length)


class KeyDataTable(DataTable):
    """j/k move the cursor; h/l and left/right scroll the columns that do not fit, a whole
    column at a time (a row-cursor DataTable scrolls one character per key)."""

    BINDINGS = LIST_KEYS + [Binding("h,left", "columns(-1)", "Scroll left", show=False),
                            Binding("l,right", "columns(1)", "Scroll right", show=False)]

    def action_columns(self, delta: int) -> None:
        """Bring the next (delta 1) or previous (-1) scrolled column to the left edge."""
        if self.cursor_type in ("cell", "column"):
            (self.action_cursor_right if delta > 0 else self.action_cursor_left)()
            return
        widths = [column.get_render_width(self) for column in self.ordered_columns]
        fixed = sum(widths[:self.fixed_columns])
        starts = [sum(widths[:i]) - fixed for i in range(self.fixed_columns, len(widths))]
        if delta > 0:
            target = next((x for x in starts if x > self.scroll_x + 0.5), self.max_scroll_x)
        else:
            target = next((x for x in reversed(starts) if x < self.scroll_x - 0.5), 0)
        self.scroll_to(x=min(target, self.max_scroll_x), animate=False)

    def partial_column(self) -> tuple[int, int]:
        """(where on the line, how many cells) of the scrolled column cut at its left by the
        sideways scroll, (0, 0) when the scroll sits on a column's start. The last `l` goes to
        the furthest scroll, seldom a column's start: what showed there was the cut column's
        tail ('event' of cuda_event beside the spread column, under another column's header)."""
        if self.fixed_columns <= 0 or self.scroll_x <= 0:
            return 0, 0
        widths = [column.get_render_width(self) for column in self.ordered_columns]
        fixed = sum(widths[:self.fixed_columns]) + (self._row_label_column_width if self.show_row_labels else 0)
        scroll, start = int(self.scroll_x), 0
        for width in widths[self.fixed_columns:]:
            if start < scroll < start + width:
                return fixed, min(start + width - scroll, max(0, self.size.width - fixed))
            start += width
        return 0, 0

    def render_line(self, y: int) -> Strip:
        line = super().render_line(y)
        at, cells = self._partial_now if self._partial_now is not None else self.partial_column()
        if not cells or line.cell_length < at + cells:
            return line
        style = next(iter(line.crop(at, at + 1)), Segment("")).style
        return Strip.join([line.crop(0, at), Strip.blank(cells, style), line.crop(at + cells, line.cell_length)])

    # A pane key moves the keyboard into this table (and out of the one it leaves): Textual
    # restyles it (:focus) and DataTable's notify_style_update throws away every rendered cell,
    # row and line, so the whole table was rendered again, cell by cell through rich, before the
    # pane's frame (a third of a pane key on the 2-core CPU, from a profile). Those caches are
    # keyed by the focus state (_pseudo_class_state) and the base style already, so here they
    # are kept across a focus change and emptied only when the styles a state renders with
    # changed (a theme, a class): `_check_styles`, at each render. And a Resize of the same size
    # (every Show of the pane sends one) no longer invalidates them (`_on_resize`).
    _drawn_with: dict | None = None  # pseudo-class state -> the styles its cached lines were drawn with
    _styles_seen: tuple | None = None  # the pseudo-class state _check_styles last looked at, None: look again
    _resized_to = None
    _restyle_owed = False  # blurred while hidden: its restyle waits for the next frame

    def notify_style_update(self) -> None:
        Widget.notify_style_update(self)  # DataTable's own clears the caches: _check_styles decides
        self._get_styles_to_render_cell.cache_clear()  # (keyed without the focus state)
        self._styles_seen = None  # styles changed (Textual calls this on every restyle): look again
        self.refresh()

    _rich_style_now = None  # rich_style while render_lines draws, else None
    _stripe_now = None  # the zebra stripe's style (datatable--even-row) while render_lines draws
    _partial_now: tuple[int, int] | None = None  # partial_column() while render_lines draws

    @property
    def rich_style(self):
        """Textual's rich_style, found once per render_lines: DataTable.render_line asks for it
        on every line and Textual works it out anew each time, walking every ancestor's styles
        (about half of a 40-line Profile table's frame on the 2-core CPU, from a profile). The
        styles cannot change while one frame is drawn."""
        now = self._rich_style_now
        return now if now is not None else super().rich_style

    def render_lines(self, crop):
        if self._restyle_owed:  # shown again before that frame: restyled before it is drawn
            self._restyle_if_blurred()
        self._check_styles()
        self._rich_style_now = None
        self._rich_style_now = self.rich_style
        self._signatures_now = {}
        self._stripe_now = self.get_component_styles("datatable--even-row").rich_style if self.zebra_stripes else None
        self._partial_now = self.partial_column()
        try:
            return super().render_lines(crop)
        finally:
            self._rich_style_now = self._signatures_now = self._stripe_now = self._partial_now = None

    def _check_styles(self) -> None:
        """Caches emptied when the styles this state renders with changed. The styles are only
        gathered again after a restyle (notify_style_update) or in another pseudo-class state:
        gathering them (a rich style per component class, each walking the ancestors) took about
        a sixth of a streaming Timing table's render on the 2-core CPU (cProfile)."""
        state = self.get_pseudo_class_state()
        if state == self._styles_seen:
            return
        self._styles_seen = state
        styles = (self.rich_style, *(self.get_component_rich_style(name, partial=True)
                                     for name in sorted(self.COMPONENT_CLASSES)))
        drawn = self._drawn_with
        if drawn is None or drawn.get(state, styles) != styles:
            self._clear_caches()  # every state's lines: they were drawn with the old rules
            self._cell_lines = self._row_lines = None  # (not emptied by _clear_caches: clear() calls it on every update)
            self._drawn_with = drawn = {}
        drawn[state] = styles

    def watch_has_focus(self, has_focus: bool) -> None:
        """Restyled when the focus leaves it only after the next frame if it is leaving the
        screen too (a pane key: its pane is hidden): not drawn, its restyle held up the frame
        of the pane coming on screen (the table gaining the focus is restyled at once). Shown
        again before that frame, it is restyled before it is drawn (`render_lines`): drawn
        with the focused styles, its lines would be kept for the blurred state."""
        if not has_focus and any(not node.display for node in self.ancestors_with_self if node is not self.screen):
            self._restyle_owed = True
            self.call_after_refresh(self._restyle_if_blurred)
            return
        self._restyle_owed = False
        super().watch_has_focus(has_focus)

    def _restyle_if_blurred(self) -> None:
        owed, self._restyle_owed = self._restyle_owed, False
        if owed and not self.has_focus and self.is_attached:
            self.update_node_styles()

    # DataTable keys its rendered cells by `_update_count`, which every change bumps (a row
    # added, a cell updated, clear()): a streaming run replaces the Timing table's rows at each
    # redraw, and every cell went through rich again, ~9 ms of each 18 ms frame of a streaming
    # run on the 2-core CPU (cProfile), the frames a pane key waits behind. Here a cell's lines
    # are also kept by what they are drawn from: its place, its text and the look it is drawn
    # with; a cell whose text did not change is not rendered again.
    _cell_lines: dict | None = None  # (place, content, look) -> the cell's lines
    _row_lines: dict | None = None  # (row's place and content, look) -> one line of the row, drawn
    CELL_LINES_MAX = 4096  # entries of each; a full cache is emptied
    _signatures_now: dict | None = None  # row key -> _row_signature, while one render_lines runs

    def _kept(self, cache_name: str, key: tuple, render: Callable[[], Any]) -> Any:
        """What `render()` draws, kept in the cache named (`_cell_lines`, `_row_lines`) under
        `key`: drawn on a miss only, the cache emptied when it holds CELL_LINES_MAX entries."""
        cache = getattr(self, cache_name)
        if cache is None:
            cache = {}
            setattr(self, cache_name, cache)
        drawn = cache.get(key)
        if drawn is None:
            drawn = render()
            if len(cache) >= self.CELL_LINES_MAX:
                cache.clear()
            cache[key] = drawn
        return drawn

    def _render_cell(self, row_index: int, column_index: int, base_style, width: int, cursor: bool = False,
                     hover: bool = False):
        if self.zebra_stripes and 0 <= column_index < self.fixed_columns and row_index >= self.fixed_rows:
            # DataTable draws the fixed columns in datatable--fixed alone: the stripes stopped
            # short of them (impl, status, median, spread); the stripe over that style, as the
            # scrolling cells have it over theirs
            if row_index % 2 == 0:
                stripe = self._stripe_now
                if stripe is None:
                    stripe = self.get_component_styles("datatable--even-row").rich_style
                base_style = base_style + stripe
        label, cells = self._get_row_renderables(row_index)
        cell = label if column_index == -1 else (cells[column_index] if 0 <= column_index < len(cells) else None)
        content = _content_key(cell)
        if content is None:
            return super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
        if row_index == -1:
            height: tuple = (self.header_height,)
        else:
            row = self.rows[self._row_locations.get_key(row_index)]
            height = (row.height, row.auto_height)
        key = (row_index, column_index, content, height, base_style, width, cursor, hover, self._show_hover_cursor,
               self._pseudo_class_state, self.fixed_rows, self.fixed_columns, self.show_cursor, self.cell_padding,
               self.cursor_foreground_priority, self.cursor_background_priority)
        return self._kept("_cell_lines", key, lambda: super(KeyDataTable, self)._render_cell(
            row_index, column_index, base_style, width, cursor, hover))

    def _render_line_in_row(self, row_key, line_no: int, base_style, cursor_location, hover_location):
        """DataTable's line of a row, kept (as its cells are) by the row's place and content and
        the look it is drawn with, not by `_update_count`: each line also worked out the row's
        component styles (each a walk of the ancestors), the larger part of a row's line once
        its cells were kept."""
        signature = self._row_signature(row_key)
        if signature is None:
            return super()._render_line_in_row(row_key, line_no, base_style, cursor_location, hover_location)
        columns = self.ordered_columns
        key = (signature, line_no, base_style, cursor_location, hover_location, self.cursor_type, self.show_cursor,
               self._show_hover_cursor, self._pseudo_class_state, self.size.width, self._row_label_column_width,
               tuple(column.get_render_width(self) for column in columns), self.fixed_rows, self.fixed_columns,
               self.zebra_stripes, self._labelled_row_exists, self.show_row_labels, self.cell_padding)
        return self._kept("_row_lines", key, lambda: super(KeyDataTable, self)._render_line_in_row(
            row_key, line_no, base_style, cursor_location, hover_location))

    def _row_signature(self, row_key) -> tuple | None:
        """(place, height, label, cells) of a row as dict keys (_content_key), or None when a cell
        is not plain Text (not kept by content). Worked out once per row in a render_lines (a
        row of several lines asks for it on each)."""
        now = self._signatures_now
        if now is None:
            return self._work_out_signature(row_key)
        if row_key not in now:
            now[row_key] = self._work_out_signature(row_key)
        return now[row_key]

    def _work_out_signature(self, row_key) -> tuple | None:
        if row_key is self._header_row_key:
            index, label, cells, height = -1, None, [column.label for column in self.ordered_columns], \
                (self.header_height,)
        elif row_key in self._row_locations:
            index = self._row_locations.get(row_key)
            label, cells = self._get_row_renderables(index)
            row = self.rows[row_key]
            height = (row.height, row.auto_height)
        else:
            return None
        keys = tuple(_content_key(cell) for cell in cells)
        label_key = () if label is None else _content_key(label)
        if label_key is None or None in keys:
            return None
        return index, height, label_key, keys

    def _on_resize(self, event: events.Resize) -> None:
        if event.size == self._resized_to:
            event.prevent_default()  # not DataTable._on_resize: its bump of _update_count
        self._resized_to = event.size

    def replace_rows(self, rows: Iterable[Iterable]) -> None:
        """All rows anew; auto-width columns shrink back to fit (clear() keeps their widths).
        Until the table's next idle measures the new cells, the columns are at header width
        (a frame painted meanwhile is drawn so; `_update_dimensions` redraws it)."""
        self.clear()
        for column in self.columns.values():
            if column.auto_width:
                column.content_width = column.label.cell_len
        for row in rows:
            self.add_row(*row)

    def _update_dimensions(self, new_rows) -> None:
        """DataTable measures new cells on its idle, after the screen may already have painted
        the table at the old column widths; its line caches are keyed by `_update_count`, not by
        the widths, so those lines stayed on screen until something else bumped the count (a
        pane switch: the results table after a run showed `manu`, `trit ok 171.2` at 80x24).
        The count is bumped here, after the measuring, so the next frame draws at the widths
        just measured."""
        super()._update_dimensions(new_rows)
        self._update_count += 1
        self.refresh()


def _content_key(cell) -> tuple | None:
    """What a DataTable cell's lines are drawn from, as a dict key: a Text's characters, styles
    and layout settings; None for any other renderable (not kept by content)."""
    if not isinstance(cell, Text):
        return None
    try:
        key = (cell.plain, cell.style, cell.justify, cell.overflow, cell.no_wrap, cell.end, cell.tab_size,
               tuple(cell.spans))
        hash(key)
    except TypeError:  # a style that cannot be a key
        return None
    return key


class KeyScroll(VerticalScroll):
    BINDINGS = SCROLL_KEYS


class KeyRichLog(RichLog):
    BINDINGS = SCROLL_KEYS


class OrderedInput(Input):
    """An Input whose bound keys keep their place among typed characters."""

    async def _on_key(self, event: events.Key) -> None:
        """The field's own bound keys (backspace, arrows, home, end, tab...) run here, in turn
        with the typed characters. Textual runs them only when the key has bubbled back up to
        the app, so in a fast burst a digit queued behind a backspace landed first (`1024`,
        backspace 7 7 gave 10247: Textualize/textual#6605).

        A key that reaches the field after the focus has left it (typed in a burst behind a tab,
        all of them queued here before the tab moved the focus: `64 tab 32` gave M 6432) goes
        back to the app, which hands it to the widget that has the focus now."""
        if self.app.focused is not None and self.app.focused is not self:
            event.stop()
            event.prevent_default()
            self.app.post_message(events.Key(event.key, event.character))
            return
        for binding in self._bindings.key_to_bindings.get(event.key, ()):
            if not binding.priority and await self.app.run_action(binding.action, self):
                event.stop()
                event.prevent_default()  # not Input._on_key too (Textual calls each class's)
                return


class FieldInput(OrderedInput):
    """A sidebar field: tab / shift+tab move to the next / previous field, escape leaves it
    (focus back to the op list; while a run is active escape cancels it, as everywhere)."""

    BINDINGS = [Binding("tab", "app.focus_next", "Next field", show=False),
                Binding("shift+tab", "app.focus_previous", "Previous field", show=False),
                Binding("escape", "leave", "Back to the list")]

    def action_leave(self) -> None:
        leave_field(self)


def leave_field(widget) -> None:
    """Escape in a sidebar field: back to the op list (the app's leave_field), else the field
    just loses the keyboard. A run in flight goes on (the footer says "Back to the list"; a new
    user lost a run leaving a shape field): escape there, out of the field, cancels it."""
    app = widget.app
    leave = getattr(app, "leave_field", None)
    if leave is not None:
        leave()
    else:
        widget.blur()


class FieldSelect(Select):
    """The spec editor's dtype: escape leaves it as it leaves a FieldInput (Select takes no
    escape while closed, which would keep the editor); open, escape closes the list."""

    BINDINGS = [Binding("escape", "leave", "Back to the list", show=False)]

    def action_leave(self) -> None:
        if getattr(self, "expanded", False):
            self.expanded = False
            return
        leave_field(self)


class FieldSelectionList(KeySelectionList):
    """The spec editor's actions checklist: escape leaves it, as in the other fields."""

    BINDINGS = KeySelectionList.BINDINGS + [Binding("escape", "leave", "Back to the list", show=False)]

    def action_leave(self) -> None:
        leave_field(self)
