"""Modal screens: help (built from the bindings), confirm, and open a session."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from rich.table import Table
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, OptionList, Static
from textual.widgets.option_list import Option

from .fitting import FittedFooter
from .keys import KeyOptionList, OrderedInput


# Every mark drawn on screen, and what it says (the ? screen lists them under the keys).
MARKS = (
    ("✓", "implementation or action ticked: it runs"),
    ("◐", "can do some of the ticked actions here, not all (the detail below the list says which)"),
    ("✗", "can do none of the ticked actions here (struck through; the detail says why)"),
    ("↔N", "in the run list: the run sweeps N"),
    ("(ptx)", "in the run list: the run does not bench, only the actions named"),
    ("+ op", "in the run list: Enter or e starts a new run of that op (it joins the session when run or saved)"),
    ("━ border", "the focused section or pane: the keyboard is there"),
    ("⚠", "the results shown are for another spec than the one being edited (r runs it), or a field of "
          "that spec is not valid (r runs nothing until it is)"),
    ("◆ ● ▲ ■ ✚ ★", "one glyph per implementation in the charts, as in the legend under them"),
    ("─", "in the Timing chart: p20..p80 of the samples around the median"),
    ("…", "a cell or name cut to fit: the full text is on the line under the table"),
    ("█", "in the Traffic pane: bytes moved, relative to the implementation moving most"),
    ("! ✗", "in the Log pane: a warning, an error"),
)


def marks_table() -> Table:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    table.add_row("[u]Marks on screen[/u]", "")
    for mark, meaning in MARKS:
        table.add_row(mark, meaning)
    return table


def bindings_table(groups: Iterable[tuple[str, Iterable]]) -> Table:
    """A table of (where, bindings): key as the footer shows it, and what it does. A key that
    does the same in an earlier group (the app's `m` and the Timing pane's) is listed once, there;
    a group left with no key is left out."""
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    listed: set[tuple[str, str]] = set()
    for where, bindings in groups:
        rows, seen = [], set()
        for binding in bindings:
            if binding.description and binding.action not in seen and (binding.key, binding.action) not in listed:
                seen.add(binding.action)
                listed.add((binding.key, binding.action))
                rows.append((binding.key_display or binding.key, binding.description))
        if rows:
            table.add_row(f"[u]{where}[/u]", "")
            for row in rows:
                table.add_row(*row)
    return table


class HelpScreen(ModalScreen[None]):
    """Every binding, grouped by where it works; escape, ? or q closes."""

    BINDINGS = [Binding("escape,question_mark,q", "dismiss", "Close"),
                Binding("j", "scroll(1)", "Down", show=False), Binding("k", "scroll(-1)", "Up", show=False)]

    def __init__(self, groups: list[tuple[str, list]], on_show: str | None = None) -> None:
        super().__init__()
        self._groups = groups
        self._on_show = on_show  # the group of the pane on show: scrolled into view if it is not

    def on_mount(self) -> None:
        self.call_after_refresh(self._show_group)

    def action_scroll(self, lines: int) -> None:
        """j / k: as everywhere else in the app, beside the arrows."""
        scroll = self.query_one(VerticalScroll)
        scroll.scroll_relative(y=lines, animate=False)

    def _show_group(self) -> None:
        """Scroll so the pane-on-show's group is whole in view (small terminals), else leave it."""
        if not self._on_show:
            return
        scroll, table = self.query_one(VerticalScroll), self.query_one("#help-table", Static)
        names = [where for where, _ in self._groups]
        if self._on_show not in names:
            return
        width = table.content_region.width or table.size.width
        lines = self.app.console.render_lines(bindings_table(self._groups),
                                              self.app.console.options.update_width(width), pad=False)
        texts = ["".join(seg.text for seg in line).strip() for line in lines]
        start = next((i for i, t in enumerate(texts) if t == self._on_show), None)
        if start is None:
            return
        later = [i for i, t in enumerate(texts) if t in names and i > start]
        end = later[0] if later else len(texts)
        top, height = scroll.scroll_offset.y, scroll.scrollable_content_region.height
        if start < top or end > top + height:
            scroll.scroll_to(y=start, animate=False, immediate=True)

    def compose(self) -> ComposeResult:
        with Vertical(id="help-box", classes="dialog"):
            yield Label("Keys (single keys are off while typing in a field)", classes="dialog-title")
            with VerticalScroll():
                yield Static(bindings_table(self._groups), id="help-table")
                yield Static(marks_table(), id="help-marks")
        yield FittedFooter(compact=True)  # the dialog's keys, not the screen's under it


class ConfirmScreen(ModalScreen[bool]):
    """A yes/no question: y or enter says yes, n or escape says no."""

    BINDINGS = [Binding("y,enter", "answer(True)", "Yes"), Binding("n,escape", "answer(False)", "No")]

    def __init__(self, question: str) -> None:
        super().__init__()
        self._question = question

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self._question, classes="dialog-title")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Yes (y)", id="yes", variant="error", compact=True)
                yield Button("No (n)", id="no", compact=True)
        yield FittedFooter(compact=True)

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)

    def ask(self, question: str) -> None:
        """Change the question while it is on screen (the run it asked about has ended)."""
        self._question = question
        if self.is_mounted:
            self.query_one(".dialog-title", Label).update(question)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")


def shipped_problem(text: str) -> str:
    """Why `shipped:NAME` names no shipped session, with the names it can take."""
    from workbench.session.paths import SHIPPED_PREFIX, did_you_mean, shipped_names

    name = text.removeprefix(SHIPPED_PREFIX).removesuffix(".yaml")
    return f"no shipped session {name!r};{did_you_mean(name)} shipped: {', '.join(shipped_names())}"


class OpenScreen(ModalScreen[tuple[Path, bool] | None]):
    """Pick a known session or type a path or a session's name (by_name); enter opens, escape
    cancels. A typed path that does not exist is named, and enter again starts a new session
    there. The list keeps the sessions whose label or path holds every word typed (`matching`);
    tab or down goes to it. Answers (path, create)."""

    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel"), Binding("down", "to_list", "List", show=False)]

    def __init__(self, known: list[tuple[str, Path]]) -> None:
        super().__init__()
        self._known = known
        self._missing: Path | None = None  # the missing path enter was pressed on once

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id="open-box"):
            yield Label("Open a session", classes="dialog-title")
            yield OrderedInput(placeholder="path/to/session.yaml or a session's name (enter to open)", id="open-path")
            yield Static("", id="open-problem", classes="problem")
            yield KeyOptionList(*[Option(label, id=str(path)) for label, path in self._known],
                                id="open-known")
        yield FittedFooter(compact=True)

    @on(Input.Submitted, "#open-path")
    def _typed(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        if not text:
            return
        path = Path(text).expanduser()
        named = None if path.exists() else self.by_name(text)
        if named is not None:
            self.dismiss((named, False))
            return
        from workbench.session.paths import SHIPPED_PREFIX

        if text.startswith(SHIPPED_PREFIX):  # never a file of that name
            self.query_one("#open-problem", Static).update(f"{text}: {shipped_problem(text)}")
            return
        if path.exists() or path == self._missing:
            self.dismiss((path, not path.exists()))
            return
        self._missing = path
        self.query_one("#open-problem", Static).update(
            f"{path}: no such file. Enter again starts a new session there (ctrl+s writes it); "
            "escape cancels.")

    def by_name(self, text: str) -> Path | None:
        """A session typed by name, as `workbench NAME` and `--replay NAME` take it: NAME or
        NAME.yaml finds the user's saved session of that name, else the shipped one
        (known_sessions lists the saved ones first); `shipped:NAME` the shipped original. None
        for anything else (a path: the caller's)."""
        from workbench.session.paths import SHIPPED_PREFIX, is_shipped

        shipped = text.startswith(SHIPPED_PREFIX)
        name = text.removeprefix(SHIPPED_PREFIX).removesuffix(".yaml")
        if not name or "/" in name or name != name.strip():
            return None
        return next((path for _, path in self._known if path.stem == name and (not shipped or is_shipped(path))),
                    None)

    @on(Input.Changed, "#open-path")
    def _changed(self, event: Input.Changed) -> None:
        self._missing = None
        self.query_one("#open-problem", Static).update("")
        shown = self.matching(event.value)
        known = self.query_one("#open-known", OptionList)
        known.clear_options()
        known.add_options([Option(label, id=str(path)) for label, path in shown])
        if shown:  # tab or down, then enter, opens the first match
            known.highlighted = 0
        if not shown and self._known and "/" not in event.value:  # (a path typed is no session's name)
            self.query_one("#open-problem", Static).update(
                f"no known session holds {event.value.strip()!r} (enter opens it as a path or a name)")

    def action_to_list(self) -> None:
        """down in the path field: the list of known sessions gets the keyboard."""
        known = self.query_one("#open-known", OptionList)
        if self.focused is not known and known.option_count:
            known.focus()
            if known.highlighted is None:
                known.highlighted = 0

    def matching(self, text: str) -> list[tuple[str, Path]]:
        """The known sessions whose label or path holds every word of `text`, ignoring case
        (`soft h100` keeps `lecture06-softmax-h100 (shipped)`); every one for no words."""
        words = text.lower().split()
        return [(label, path) for label, path in self._known
                if all(word in f"{label} {path}".lower() for word in words)]

    @on(OptionList.OptionSelected, "#open-known")
    def _picked(self, event: OptionList.OptionSelected) -> None:
        self.dismiss((Path(event.option.id), False))


class TextScreen(ModalScreen[None]):
    """A long text in full (a kernel's whole name), wrapped and scrollable; escape closes."""

    BINDINGS = [Binding("escape,enter,q", "dismiss", "Close")]

    def __init__(self, title: str, text: str) -> None:
        super().__init__()
        self._title, self._text = title, text

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(f"{self._title} (escape closes)", classes="dialog-title")
            with VerticalScroll():
                yield Static(self._text, markup=False, id="text-body")
        yield FittedFooter(compact=True)
