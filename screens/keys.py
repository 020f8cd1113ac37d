"""Widgets that answer j/k beside the arrow keys (vi-style), and nothing else new."""

from __future__ import annotations

from typing import Iterable

from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import DataTable, OptionList, RichLog, SelectionList

LIST_KEYS = [Binding("j", "cursor_down", "Down", show=False),
              Binding("k", "cursor_up", "Up", show=False)]
SCROLL_KEYS = [Binding("j", "scroll_down", "Down", show=False),
                Binding("k", "scroll_up", "Up", show=False)]


class KeyOptionList(OptionList):
    BINDINGS = LIST_KEYS


class KeySelectionList(SelectionList):
    BINDINGS = LIST_KEYS


class KeyDataTable(DataTable):
    BINDINGS = LIST_KEYS

    def replace_rows(self, rows: Iterable[Iterable]) -> None:
        """All rows anew; auto-width columns shrink back to fit (clear() keeps their widths)."""
        self.clear()
        for column in self.columns.values():
            if column.auto_width:
                column.content_width = column.label.cell_len
        for row in rows:
            self.add_row(*row)


class KeyScroll(VerticalScroll):
    BINDINGS = SCROLL_KEYS


class KeyRichLog(RichLog):
    BINDINGS = SCROLL_KEYS
