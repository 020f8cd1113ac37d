"""The PTX pane's split view: the kernel source on the left, one compile stage on the right
(above and below where the pane is narrower than SIDE_BY_SIDE cells).

Moving the cursor on a source line marks the instructions it became on the right (and scrolls
to the first); moving it on the right marks the source lines an instruction came from. The
source gutter shows each line's counts (`ldg4×2`, `shfl×7`, `wgmma×8`); `Δ` marks a line whose
counts differ from the other specialisation being compared. The state and the map live in
`ptx_view.SplitState` (plain Python); these widgets draw it.

Attributes down: `show(state)`; messages up: none (the pane reads `state` when it needs it).
"""

from __future__ import annotations

import textwrap

from typing import Sequence

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widgets import Static

from .ptx_view import STAGE_LABELS, HighlightedLines, SplitState

MARK = Style(bgcolor="grey27")
CURSOR = Style(bgcolor="dark_blue", bold=True)
GUTTER = Style(color="grey62")
GUTTER_MARK = Style(color="yellow", bold=True)
GUTTER_COUNTS = 13  # cells of per-line counts in the source gutter
SIDE_BY_SIDE = 100  # cells: narrower than this, the source sits above the stage


class CodeLines(ScrollView, can_focus=True):
    """Lines of code with a fixed gutter, a cursor line and marked lines, drawn line by line
    (Textual's line API), so a 1 MB LLIR scrolls as fast as a 20-line kernel."""

    DEFAULT_CSS = """
    CodeLines { height: 1fr; width: 1fr; overflow-x: auto; overflow-y: auto; }
    CodeLines:focus { background: $boost; }
    """
    BINDINGS = [Binding("up,k", "move(-1)", "Up", show=False), Binding("down,j", "move(1)", "Down", show=False),
                Binding("pageup", "page(-1)", "Page up", show=False),
                Binding("pagedown", "page(1)", "Page down", show=False),
                Binding("home,g", "edge(-1)", "First", show=False), Binding("end,G", "edge(1)", "Last", show=False),
                Binding("left,h", "sideways(-8)", "Left", show=False),
                Binding("right,l", "sideways(8)", "Right", show=False)]

    class Moved(Message):
        """The cursor moved to `line` (1-based) in `code`."""

        def __init__(self, code: "CodeLines", line: int) -> None:
            super().__init__()
            self.code, self.line = code, line

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.code_lines: Sequence[Text] = []
        self.gutter_texts: list[str] = []
        self.gutter_width = 0
        self.marks: set[int] = set()
        self.cursor_line = 1

    def set_lines(self, lines: Sequence[Text], gutter: list[str], width: int) -> None:
        """New content: highlighted lines, a gutter text per line, the widest line in cells."""
        self.code_lines, self.gutter_texts = lines, gutter
        self.gutter_width = max((len(g) for g in gutter), default=0) + 1
        self.marks, self.cursor_line = set(), 1
        self.virtual_size = Size(width + self.gutter_width + 1, len(lines))
        self.scroll_to(0, 0, animate=False)
        self.refresh()

    def set_marks(self, lines: Sequence[int], scroll: bool = True, focus: int | None = None) -> None:
        """Mark these 1-based lines; bring `focus` (else the first mark) into view unless a
        mark (the focus, when given) is visible already."""
        self.marks = set(lines)
        want = [focus] if focus is not None else lines
        if scroll and want and not any(self._visible(line) for line in want):
            self._center(min(want))
        self.refresh()

    def move_to(self, line: int, announce: bool = True) -> None:
        self.cursor_line = max(1, min(line, len(self.code_lines) or 1))
        if not self._visible(self.cursor_line):
            self._center(self.cursor_line)
        self.refresh()
        if announce:
            self.post_message(self.Moved(self, self.cursor_line))

    def on_resize(self, event) -> None:
        """Keep the cursor line in view when the view shrinks. A fresh-clone try at 80x24: the
        split opened centred on line 144 for a taller pane, the pane then shrank to six rows, and
        the header named line 144 while lines 137-142 showed."""
        if self.code_lines and not self._visible(self.cursor_line):
            self._center(self.cursor_line)

    def _visible(self, line: int) -> bool:
        top, height = int(self.scroll_offset.y), self.scrollable_content_region.height
        return bool(height) and top < line <= top + height

    def _center(self, line: int) -> None:
        if not self.scrollable_content_region.height:  # not laid out yet: once it is
            self.call_after_refresh(self._center, line)
            return
        height = self.scrollable_content_region.height
        self.scroll_to(y=max(line - 1 - height // 2, 0), animate=False, immediate=True)

    def action_move(self, step: int) -> None:
        self.move_to(self.cursor_line + step)

    def action_page(self, step: int) -> None:
        self.move_to(self.cursor_line + step * max(self.scrollable_content_region.height - 1, 1))

    def action_edge(self, step: int) -> None:
        self.move_to(1 if step < 0 else len(self.code_lines))

    def action_sideways(self, cells: int) -> None:
        self.scroll_to(x=max(self.scroll_offset.x + cells, 0), animate=False)

    def on_click(self, event) -> None:
        offset = event.get_content_offset(self)
        if offset is not None:
            self.move_to(int(self.scroll_offset.y) + offset.y + 1)

    def render_line(self, y: int) -> Strip:
        index = int(self.scroll_offset.y) + y
        width = self.scrollable_content_region.width
        if index >= len(self.code_lines):
            return Strip.blank(width, self.rich_style)
        line_no = index + 1
        text = self.code_lines[index].copy()
        text.expand_tabs()
        code = Strip(list(text.render(self.app.console))).crop(int(self.scroll_offset.x),
                                                               int(self.scroll_offset.x) + width)
        # the gutter takes at most a third of a narrow side (80 columns split in two)
        cells = max(min(self.gutter_width, width // 3), 6)
        gutter_text = self.gutter_texts[index] if index < len(self.gutter_texts) else ""
        if len(gutter_text) >= cells:
            gutter_text = gutter_text[:cells - 2] + "…"
        gutter_text = gutter_text.ljust(cells)
        gutter = Strip([Segment(gutter_text, GUTTER_MARK if "Δ" in gutter_text else GUTTER)])
        strip = Strip.join([gutter, code]).extend_cell_length(width).crop(0, width)
        if line_no == self.cursor_line:
            return strip.apply_style(CURSOR)
        return strip.apply_style(MARK) if line_no in self.marks else strip


class SplitView(Vertical):
    """Source | stage, with a title bar per side and a status line for the cursor's source line."""

    DEFAULT_CSS = """
    SplitView { height: 1fr; }
    SplitView #split-sides { height: 1fr; }
    SplitView .split-side { width: 1fr; height: 1fr; }
    SplitView .split-title { height: 1; background: $boost; text-style: bold; }
    SplitView #split-status { height: auto; max-height: 2; color: $text-muted; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.state: SplitState | None = None
        self._stage_shown: tuple[str, str] | None = None

    def compose(self) -> ComposeResult:
        yield Static("", id="split-status")
        with Horizontal(id="split-sides"):
            with Vertical(classes="split-side"):
                yield Static("source", id="split-source-title", classes="split-title")
                yield CodeLines(id="split-source")
            with Vertical(classes="split-side"):
                yield Static("", id="split-stage-title", classes="split-title")
                yield CodeLines(id="split-stage")

    def on_resize(self, event) -> None:
        """Side by side where there is room, else the source above the stage."""
        self.query_one("#split-sides").styles.layout = "horizontal" if event.size.width >= SIDE_BY_SIDE else "vertical"

    def show(self, state: SplitState | None, title: str = "", reason: str = "") -> None:
        """Draw `state` (None: `reason`, why nothing is shown); keep the source cursor where it
        was if the source is the same."""
        old = self.state
        self.state = state
        source, stage = self.query_one("#split-source", CodeLines), self.query_one("#split-stage", CodeLines)
        if state is None:
            # in whole words to the source side's width: the code view does not wrap (at 80x24 a
            # new user read "...a Triton or CUDA kernel (librar")
            words = textwrap.wrap(reason or "no source map for this kernel", max(24, (source.size.width or 40) - 3))
            source.set_lines([Text(line) for line in words], [""] * len(words), max(map(len, words)))
            stage.set_lines([], [], 0)
            self._stage_shown = None
            self.query_one("#split-status", Static).update("")
            return
        self.query_one("#split-source-title", Static).update(title or "source")
        if old is None or old.source != state.source or not source.code_lines:
            lines = HighlightedLines("source", state.source, state.language)
            source.set_lines(lines, _source_gutter(state, len(lines)), lines.width())
            source.move_to(state.first_line(), announce=False)
        else:
            gutter = _source_gutter(state, len(source.code_lines))
            source.gutter_texts, source.gutter_width = gutter, max(map(len, gutter), default=0) + 1
        self.show_stage()

    def show_stage(self) -> None:
        """Draw the state's right-hand stage and the marks of the source cursor's line."""
        state = self.state
        if state is None:
            return
        stage = self.query_one("#split-stage", CodeLines)
        text = state.stage_texts.get(state.stage, "")
        if (state.stage, text) != self._stage_shown:  # a redraw during a run keeps the place
            lines = HighlightedLines(state.stage, text)
            stage.set_lines(lines, [f"{n:>5}" for n in range(1, len(lines) + 1)], lines.width())
            self._stage_shown = (state.stage, text)
        title = Text()
        for s in state.stages:
            title.append(f" {STAGE_LABELS[s]} ", "reverse" if s == state.stage else "dim")
        self.query_one("#split-stage-title", Static).update(title.append("  s: next stage", "dim"))
        self.follow_source(self.query_one("#split-source", CodeLines).cursor_line)

    def jump(self, step: int) -> bool:
        """Move the source cursor to the next (step 1) or previous (-1) line with counts in its
        gutter, wrapping around; False when there is none."""
        if self.state is None:
            return False
        lines = self.state.counted_lines()
        source = self.query_one("#split-source", CodeLines)
        if not lines:
            return False
        after = [n for n in lines if (n > source.cursor_line if step > 0 else n < source.cursor_line)]
        source.move_to((after[0] if step > 0 else after[-1]) if after else (lines[0] if step > 0 else lines[-1]))
        return True

    def follow_source(self, source_line: int) -> None:
        if self.state is None:
            return
        lines = self.state.stage_lines(source_line)
        key = self.state.key_line(lines)  # a load, store, shuffle or mma among them, shown first
        self.query_one("#split-stage", CodeLines).set_marks(lines, focus=key)
        self.query_one("#split-source", CodeLines).set_marks([], scroll=False)
        self.query_one("#split-status", Static).update(self.state.status(source_line))

    @on(CodeLines.Moved)
    def _moved(self, event: CodeLines.Moved) -> None:
        event.stop()
        if self.state is None:
            return
        if event.code.id == "split-source":
            self.follow_source(event.line)
            return
        lines = self.state.source_lines(event.line)
        source = self.query_one("#split-source", CodeLines)
        source.set_marks(lines)
        label = STAGE_LABELS.get(self.state.stage, self.state.stage)
        where = ", ".join(map(str, lines)) if lines else "no source line"
        self.query_one("#split-status", Static).update(f"{label} line {event.line} ← source {where}")


def _source_gutter(state: SplitState, n_lines: int) -> list[str]:
    """`  143 ldg4×2` per source line: the line number and its counts, cut to GUTTER_COUNTS cells
    (the status line has them in full)."""
    def cut(text: str) -> str:
        return text if len(text) <= GUTTER_COUNTS else text[:GUTTER_COUNTS - 1] + "…"
    return [f"{n:>4} {cut(state.gutter(n))}" for n in range(1, n_lines + 1)]
