"""Widgets that answer j/k beside the arrow keys (vi-style), and nothing else new."""

from __future__ import annotations

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


class KeyScroll(VerticalScroll):
    BINDINGS = SCROLL_KEYS


class KeyRichLog(RichLog):
    BINDINGS = SCROLL_KEYS
