"""Widgets that answer j/k beside the arrow keys (vi-style), and nothing else new."""

from __future__ import annotations

from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import DataTable, OptionList, RichLog, SelectionList

_LIST_KEYS = [Binding("j", "cursor_down", "Down", show=False),
              Binding("k", "cursor_up", "Up", show=False)]
_SCROLL_KEYS = [Binding("j", "scroll_down", "Down", show=False),
                Binding("k", "scroll_up", "Up", show=False)]


class KeyOptionList(OptionList):
    BINDINGS = _LIST_KEYS


class KeySelectionList(SelectionList):
    BINDINGS = _LIST_KEYS


class KeyDataTable(DataTable):
    BINDINGS = _LIST_KEYS


class KeyScroll(VerticalScroll):
    BINDINGS = _SCROLL_KEYS


class KeyRichLog(RichLog):
    BINDINGS = _SCROLL_KEYS
