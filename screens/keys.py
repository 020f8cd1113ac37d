"""Widgets that answer j/k beside the arrow keys (vi-style), and nothing else new."""

from __future__ import annotations

from typing import Iterable

from rich.segment import Segment
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

    def render_lines(self, crop):
        if self._restyle_owed:  # shown again before that frame: restyled before it is drawn
            self._restyle_if_blurred()
        self._check_styles()
        return super().render_lines(crop)

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
