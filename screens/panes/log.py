"""Log: every event in words, warnings and errors (what a child printed arrives as Log events)."""

from __future__ import annotations

import time

from rich.text import Text

from workbench import events as ev
from workbench.results.record import read_record

from .. import fmt
from ..keys import KeyRichLog

MAX_LINES = 5000
LEVEL_STYLES = {"info": "", "warning": "yellow", "error": "bold red"}


def clock() -> str:
    """The time a line is added, HH:MM:SS (tests that compare screens replace this)."""
    return time.strftime("%H:%M:%S")


class LogPane(KeyRichLog):
    """A scrolling log; the app adds lines with `add`, each with the time it came (HH:MM:SS,
    `clock`), so how long a row took can be read off the Log. It follows new lines while its
    view is at the end; scrolled up, the view stays where it is.

    RichLog renders a line once, at the width it has when written: one written while the pane is
    hidden (width 0) came out one character per line, and a resize never re-wrapped. So a line
    is written only while the pane has the width the log was rendered at; otherwise, and on
    every change of width, the whole log is rendered anew from `entries` (`_sync`). The width is
    given to `write`: left to itself RichLog wraps at the console's width, not the pane's, and
    the scrollbar's gutter is kept so that the width does not change when the scrollbar comes.
    """

    DEFAULT_CSS = "LogPane { scrollbar-gutter: stable; overflow-x: hidden; }"

    def __init__(self, **kwargs) -> None:
        super().__init__(markup=False, wrap=True, max_lines=MAX_LINES, auto_scroll=True, **kwargs)
        self.entries: list[tuple[str, str]] = []  # (level, text), also while the pane is hidden
        self.stamps: list[str] = []  # the time each entry came, HH:MM:SS
        self.rendered_width = 0  # the width, in cells, the lines on screen were rendered at

    def add(self, text: str, level: str = "info") -> None:
        stamp = clock()
        self.entries = [*self.entries[-MAX_LINES + 1:], (level, text)]
        self.stamps = [*self.stamps[-MAX_LINES + 1:], stamp]
        if self.rendered_width and self._width() == self.rendered_width:
            # follows new lines only from the end: a view scrolled up (k) to read stays put
            self.write(_line(level, text, stamp), width=self.rendered_width,
                       scroll_end=self.is_vertical_scroll_end)
        else:  # hidden, not laid out yet, or resized: rendered by _sync at the width it gets
            self.rendered_width = 0
            self.call_later(self._sync)

    def on_resize(self) -> None:
        self.call_later(self._sync)  # after RichLog's own Resize handler (it learns the size)

    def on_show(self) -> None:
        self.call_later(self._sync)

    def _width(self) -> int:
        return self.scrollable_content_region.width  # 0 while its tab is hidden

    def _sync(self) -> None:
        """Render every entry anew when the pane has a width other than the log's lines. A view
        scrolled up from the end stays as many lines up (`5 k k k` typed at once: the k's came
        before this, and the rewrite scrolled back to the end)."""
        width = self._width()
        if width <= 0 or width == self.rendered_width:
            return
        up = max(0, round(self.max_scroll_y - self.scroll_y)) if self.lines else 0
        self.clear()
        self.rendered_width = width
        for (level, text), stamp in zip(self.entries, self.stamps):
            self.write(_line(level, text, stamp), width=width, scroll_end=False)
        # now, not after the next frame (RichLog's auto-scroll): a k that comes before that
        # frame scrolls from here
        self.scroll_to(y=max(0, self.max_scroll_y - up), animate=False, immediate=True)


def _line(level: str, text: str, stamp: str = "") -> Text:
    mark = {"warning": "! ", "error": "✗ "}.get(level, "  ")
    line = Text(f"{stamp} " if stamp else "", style="dim")
    line.append(mark + text, style=LEVEL_STYLES.get(level, ""))
    return line


def describe(event: ev.Event) -> tuple[str, str] | None:
    """(text, level) for an engine event worth a log line; None for samples."""
    _, label, sweep = event.row
    where = label if sweep is None else f"{label} @ {sweep}"
    describer = _DESCRIBE.get(type(event))
    return describer(where, event) if describer else None


def _result(where: str, e: ev.Result) -> tuple[str, str]:
    record = read_record(e.record)  # the runner's event already carries a Record: returned as it is
    status = "ok" if "status" in record.absent else record.status
    median = record.timing.median_ms if record.timing else None
    extra = f" · median {fmt.ms(median)}" if median is not None else ""
    reason = f": {fmt.tui_text(record.error)}" if record.error else ""
    level = {"ok": "info", "failed": "error"}.get(status, "warning")
    return f"{where}: {status}{reason}{extra}", level


def _ptx(where: str, ptx: dict) -> tuple[str, str]:
    """'triton: PTX of 1 kernel(s)', or, with none, why (a kernel that no longer compiles: where)."""
    count = len(ptx.get("kernels") or ())
    if count or not ptx.get("notes"):
        return f"{where}: PTX of {count} kernel(s)", "info"
    return f"{where}: no PTX: {fmt.tui_text(ptx['notes'][0])}", "warning"


def _inputs(check: dict) -> str:
    """' (special inputs)': which input set a check line is about (a row is checked on its first
    inputs, the op's special values and a timed call's output: three lines that read the same)."""
    sets = check.get("sets_checked") or ()
    name = sets[-1] if check.get("passed") and sets else check.get("input_set")  # a failure: its set
    return f" ({name} inputs)" if name else ""


_DESCRIBE = {
    ev.Started: lambda w, e: (f"{w}: started {e.op} {e.spec_label} on {e.device}", "info"),
    ev.Built: lambda w, e: (f"{w}: built in {fmt.ms(e.build_ms)}", "info"),
    ev.Checked: lambda w, e: (f"{w}: check {fmt.check(e.check)}" + _inputs(e.check),
                              "info" if e.check.get("passed") else "error"),
    ev.Result: _result,
    ev.Profile: lambda w, e: (f"{w}: profile with {len(e.profile.get('rows', ()))} row(s)", "info"),
    ev.Ptx: lambda w, e: _ptx(w, e.ptx),
    ev.Error: lambda w, e: (f"{w}: {fmt.tui_text(e.message)}", "error"),
    ev.Log: lambda w, e: (f"{w}: {e.text}", e.level),
}
