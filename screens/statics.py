"""Static.update, skipped when the content is what the Static shows already.

Textual's Static.update refreshes with layout=True: every call reflows the whole screen and
renders again each widget whose region it touches (~30 widgets at 200x50). A streaming run's
redraw set the Timing pane's caption and row detail, and the Diagnosis pane's three texts,
about twice a flush with the same content (~2 layout passes a flush, mostly for nothing)."""

from __future__ import annotations

from textual.visual import VisualType
from textual.widgets import Static


def update_static(static: Static, content: VisualType) -> bool:
    """`static.update(content)` unless it holds an equal content already (a str the same str; a
    rich Text the same text, spans and base style); returns whether it updated."""
    shown = static.content
    if type(shown) is type(content) and shown == content and getattr(shown, "style", None) == getattr(content, "style", None):
        return False
    static.update(content)
    return True
