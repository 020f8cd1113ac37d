"""Widgets that fit a narrow terminal (80x24 in tmux) instead of cutting text mid-word.

`PaneTabs`: the pane tabs, with shorter labels (`1 Time`, `1 Tim`, then the numbers alone) when the full
ones do not fit, so that every tab shows; its panes (`PaneBox`) and their switcher are drawn
as blank backgrounds (Textual's `BLANK`). `FittedFooter`: the key hints, the least needed
dropped first until the rest fit beside the palette hint (Textual's Footer cut `b Sideb`).
"""

from __future__ import annotations

from textual.reactive import reactive
from textual.widgets import ContentSwitcher, Footer, TabbedContent, TabPane, Tabs
from textual.widgets._footer import FooterKey

from .panes import BY_ID, PANES

PANE_TITLES = {pane.id: pane.title for pane in PANES}
SHORT_TITLES = {pane.id: pane.short for pane in PANES}
TINY_TITLES = {pane: title[:3] for pane, title in SHORT_TITLES.items()}  # the spec editor at 80x24
TAB_PADDING = 2  # a Tab's padding: one cell each side (Textual's default CSS)
# footer hints dropped first when not all fit (keys as Binding.key); then the others from the
# right; `?` (help, which lists every key) goes last
DROP_FIRST = ("ctrl+o", "ctrl+s", "q", "b", "e")
KEEP_LAST = ("question_mark",)


def tab_labels(pane_ids: list[str], width: int) -> dict[str, str]:
    """`pane id -> label` (`1 Timing` ...: its key, its title) whose tabs fit in `width` cells:
    full titles, else short ones (`1 Time`, then `1 Tim`), else the keys alone."""
    for titles in (PANE_TITLES, SHORT_TITLES, TINY_TITLES, {}):
        labels = {pane: f"{BY_ID[pane].key} {titles[pane]}" if titles else BY_ID[pane].key for pane in pane_ids}
        if sum(len(label) + TAB_PADDING for label in labels.values()) <= width:
            break
    return labels


class PaneBox(TabPane):
    """A pane's TabPane, drawn as its blank background (Textual's `BLANK`: one blank strip per
    line, not each line through the StylesCache). It has no border, padding or content of its
    own, and the pane widget inside covers it; a pane key repainted the newly shown TabPane in
    full, every line (~2 ms at 200x50 on the 2-core CPU box, of a ~30 ms key frame)."""

    BLANK = True


class PaneTabs(TabbedContent):
    """The panes (`PaneBox`es); the tab labels follow the width (`tab_labels`). The
    ContentSwitcher that TabbedContent composes around them is drawn blank as well (its
    `current` repaints it in full at every pane key, as PaneBox)."""

    # TabbedContent's `active` repaints the whole widget: every line of the pane's box (its
    # border) drawn again on each pane key, though nothing of it changes (the tabs and the
    # pane shown repaint themselves)
    active: reactive[str] = reactive("", init=False, repaint=False)

    def on_mount(self) -> None:
        self.query_children(ContentSwitcher).first().BLANK = True  # type: ignore[misc]  # an instance's, as PaneBox's
        self.screen.screen_layout_refresh_signal.subscribe(self, self._underline_follows, immediate=True)

    def _on_tab_pane_focused(self, event: TabPane.Focused) -> None:
        """A widget in a pane got the keyboard: TabbedContent makes that pane the active one
        when the message arrives, which can be after later pane keys moved on (after `2 3 6`
        typed at once, the Profile and PTX tables' messages came after the Diagnosis pane was
        shown and showed them again: the Diagnosis table, focused meanwhile, was hidden and the
        keyboard fell to the box below it). Here panes change only through `active` (pane keys,
        a tab click, the palette); the focus chain never reaches a hidden pane, so a message
        from a pane that is not the active one is stale and dropped."""
        if event.tab_pane.id != self.active:
            event.stop()
            event.prevent_default()  # not TabbedContent's own handler either

    def on_resize(self) -> None:
        self.fit_labels()  # now, not after a refresh: the tabs' underline follows in this layout

    def fit_labels(self) -> None:
        panes = [pane.id for pane in self.query_children("ContentSwitcher").first().children if pane.id]
        for pane, label in tab_labels(panes, self.content_size.width).items():
            tab = self.get_tab(pane)
            if str(tab.label) != label:
                tab.label = label

    def _underline_follows(self, _screen) -> None:
        """After each layout: the underline spans the active tab as laid out. Textual moves it
        only on a tab switch or a resize of the tab bar, and a relabel (`fit_labels`) resizes
        the tabs inside it; asking for it after a refresh raced the tabs' own layout, and on a
        loaded machine the underline stayed under the old label's width (seen in CI)."""
        if not self.is_attached:
            return
        tabs = self.query_one(Tabs)
        underline = tabs.query_one("Underline")
        active = tabs.active_tab
        if active is None or not underline.show_highlight or self.app.animator.is_being_animated(underline, "highlight_end"):
            return
        start, end = active.virtual_region.shrink(active.styles.gutter).column_span
        if (underline.highlight_start, underline.highlight_end) != (start, end):
            underline.highlight_start, underline.highlight_end = start, end


def _hint_width(key) -> int:
    """Cells of a compact footer hint: key, a space, description, and a gap (or the palette
    hint's left border)."""
    return len(key.key_display) + (1 + len(key.description) if key.description else 0) + 1


def _drop_order(keys: list) -> list:
    def rank(item: tuple[int, object]) -> tuple[int, int]:
        index, key = item
        if key.key in DROP_FIRST:
            return 0, DROP_FIRST.index(key.key)
        return (2 if key.key in KEEP_LAST else 1), -index
    return [key for _, key in sorted(enumerate(keys), key=rank)]


class FittedFooter(Footer):
    """Textual's Footer, less the hints that would not fit (`DROP_FIRST` go first)."""

    _width = 0
    _shown: tuple | None = None  # the hints of the last recompose asked for
    _pending = False  # a recompose asked for and not yet done

    def compose(self):
        widgets = list(super().compose())
        if self.compact:  # the class its data-bound watcher would add once mounted, a restyle each
            for widget in widgets:  # (~20 restyles a recompose, one a pane key; the first frame)
                if isinstance(widget, FooterKey):
                    widget.add_class("-compact", update=False)
        keys = [w for w in widgets if hasattr(w, "key_display") and not w.has_class("-command-palette")]  # FooterKey
        room = self.size.width - sum(_hint_width(w) for w in widgets if w.has_class("-command-palette"))
        used = sum(_hint_width(k) for k in keys)
        dropped: list = []
        for key in _drop_order(keys):
            if used <= room or not self.size.width:
                break
            dropped.append(key)
            used -= _hint_width(key)
        for key in reversed(dropped[:-1]):  # a short hint dropped before a long one may fit again
            if used + _hint_width(key) <= room:
                dropped.remove(key)
                used += _hint_width(key)
        yield from (w for w in widgets if not any(w is key for key in dropped))

    def bindings_changed(self, screen) -> None:
        """Recompose once the bindings have settled, and only when the hints shown would differ.
        Textual's Footer rebuilds every key widget on each bindings update, and a pane key is
        three of them (focus leaves, the pane switches, focus arrives): three recomposes of ~12
        widgets a key press, drawn while the pane's frame waited. Here the updates within
        one frame fold into one, done right after the pane has been drawn."""
        self._bindings_ready = True
        if not screen.app.app_focus or not self.is_attached or screen is not self.screen:
            return
        if not self._pending:  # right after the next frame (the pane's): a timer lags behind a
            self._pending = True  # pane switch on a loaded CPU
            if self._shown is None:  # the first hints: now, ahead of the work queued after the
                self.call_next(self._settle)  # first paint (the hidden panes' mounts, the ops' load)
            else:
                self.call_after_refresh(self._settle)

    async def _settle(self) -> None:
        self._pending = False
        if not self.is_attached:
            return
        shown = tuple((binding.key, binding.description, binding.action, enabled, tooltip)
                      for _, binding, enabled, tooltip in self.screen.active_bindings.values() if binding.show)
        if shown != self._shown:
            self._shown = shown
            if not self._relabel():
                await self.recompose()

    def _relabel(self) -> bool:
        """Give the hints on screen the new hints' keys and words, when they are as many and of
        the same kind and classes (a pane key: `m Metric` for `s Sort`); whether it did. Nothing
        removed, mounted or restyled: a recompose was ~20 ms of CPU a pane key on the 2-core box."""
        try:
            new = list(self.compose())
        except Exception:  # noqa: BLE001 - grouped hints need the compose stack: recompose
            return False
        old = list(self.children)
        if len(new) != len(old) or any(type(a) is not FooterKey or type(b) is not FooterKey
                                       or a.classes != b.classes for a, b in zip(old, new)):
            return False
        for shown, wanted in zip(old, new):
            fields = ("key", "key_display", "description", "action", "_disabled", "tooltip")
            if any(getattr(shown, name) != getattr(wanted, name) for name in fields):
                for name in fields:
                    setattr(shown, name, getattr(wanted, name))
                shown.refresh(layout=True)
        return True

    def on_resize(self) -> None:
        if self.size.width != self._width:
            self._width = self.size.width
            self.call_after_refresh(self.recompose)
