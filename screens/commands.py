"""Command-palette providers (ctrl+p): ops, implementations of the current op, and sessions.

Each provider reads the app's plain data (`palette_items(kind)`) and answers a choice by
posting a `Choice` message to the app, like any widget would.
"""

from __future__ import annotations

from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider

from .messages import Choice


class _ListProvider(Provider):
    """Items are (text, help, kind, value) from the app; a pick posts Choice(kind, value)."""

    KIND = ""

    def _items(self) -> list[tuple[str, str, str, object]]:
        return list(self.app.palette_items(self.KIND))

    def _command(self, kind: str, value: object):
        return partial(self.app.post_message, Choice(kind, value))

    async def discover(self) -> Hits:
        for text, help_text, kind, value in self._items():
            yield DiscoveryHit(text, self._command(kind, value), help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for text, help_text, kind, value in self._items():
            score = matcher.match(text)
            if score > 0:
                yield Hit(score, matcher.highlight(text), self._command(kind, value), help=help_text)


class OpsProvider(_ListProvider):
    KIND = "op"


class ImplsProvider(_ListProvider):
    KIND = "impl"


class SessionsProvider(_ListProvider):
    KIND = "session"
