"""Log: every event in words, warnings and errors (what a child printed arrives as Log events)."""

from __future__ import annotations

from rich.text import Text

from workbench import events as ev

from . import fmt
from .keys import KeyRichLog

MAX_LINES = 5000
LEVEL_STYLES = {"info": "", "warning": "yellow", "error": "bold red"}


class LogPane(KeyRichLog):
    """A scrolling log; the app adds lines with `add`. No timestamps (snapshots stay stable)."""

    def __init__(self, **kwargs) -> None:
        # min_width: RichLog renders every line at least 78 cells wide by default, which a narrow
        # pane (80x24 with the sidebar) crops on the right instead of wrapping
        super().__init__(markup=False, wrap=True, max_lines=MAX_LINES, auto_scroll=True, min_width=1,
                         **kwargs)
        self.entries: list[tuple[str, str]] = []  # (level, text), also while the pane is hidden

    def add(self, text: str, level: str = "info") -> None:
        self.entries = [*self.entries[-MAX_LINES + 1:], (level, text)]
        mark = {"warning": "! ", "error": "✗ "}.get(level, "  ")
        self.write(Text(mark + text, style=LEVEL_STYLES.get(level, "")))


def describe(event: ev.Event) -> tuple[str, str] | None:
    """(text, level) for an engine event worth a log line; None for samples."""
    _, label, sweep = event.row
    where = label if sweep is None else f"{label} @ {sweep}"
    describer = _DESCRIBE.get(type(event))
    return describer(where, event) if describer else None


def _result(where: str, e: ev.Result) -> tuple[str, str]:
    record = e.record
    status = record.get("status", "ok")
    median = (record.get("timing") or {}).get("median_ms")
    extra = f" · median {fmt.ms(median)}" if median is not None else ""
    reason = f": {fmt.tui_text(record['error'])}" if record.get("error") else ""
    level = {"ok": "info", "failed": "error"}.get(status, "warning")
    return f"{where}: {status}{reason}{extra}", level


def _ptx(where: str, ptx: dict) -> tuple[str, str]:
    """'triton: PTX of 1 kernel(s)', or, with none, why (a kernel that no longer compiles: where)."""
    count = len(ptx.get("kernels") or ())
    if count or not ptx.get("notes"):
        return f"{where}: PTX of {count} kernel(s)", "info"
    return f"{where}: no PTX: {fmt.tui_text(ptx['notes'][0])}", "warning"


_DESCRIBE = {
    ev.Started: lambda w, e: (f"{w}: started {e.op} {e.spec_label} on {e.device}", "info"),
    ev.Built: lambda w, e: (f"{w}: built in {fmt.ms(e.build_ms)}", "info"),
    ev.Checked: lambda w, e: (f"{w}: check {fmt.check(e.check)}",
                              "info" if e.check.get("passed") else "error"),
    ev.Result: _result,
    ev.Profile: lambda w, e: (f"{w}: profile with {len(e.profile.get('rows', ()))} rows", "info"),
    ev.Ptx: lambda w, e: _ptx(w, e.ptx),
    ev.Error: lambda w, e: (f"{w}: {fmt.tui_text(e.message)}", "error"),
    ev.Log: lambda w, e: (f"{w}: {e.text}", e.level),
}
