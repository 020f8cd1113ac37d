"""Diagnosis: what each row's numbers say and what to do (workbench/diagnosis), and A/B.

The table lists the run's rows with their findings; the highlighted row's findings are spelled
out below it (evidence in numbers, then the prescription), and the Nsight Compute report its
`counters` kept, with the commands that open it. `x` marks a row as A, then B (a third
mark replaces the oldest); `a` asks for an A/B of the two marked rows: both are timed round-robin
in one worker and the ratio comes back with its confidence interval (screens/ab_action.py).

Attributes down: `model` (a RunModel: its records, environment and A/B entries).
Messages up: `DiagnosisPane.CompareRequested(a, b)`, each (label, sweep_value).
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import DataTable, Static

from workbench.results.record import Record, read_record

from .. import fmt
from ..keys import KeyDataTable
from ..model import Row, RunModel
from ..statics import update_static

COLUMNS = ("A/B", "impl", "problems", "findings")
MARKS = ("A", "B")


class DiagnosisPane(Vertical):
    DEFAULT_CSS = """
    DiagnosisPane #diagnosis-table { height: 1fr; max-height: 12; }
    DiagnosisPane #diagnosis-scroll { height: 1fr; border-top: hkey $primary-background-lighten-2; padding: 0 1; }
    """
    BINDINGS = [Binding("x", "mark", "Mark A/B"), Binding("a", "compare", "A/B the marked rows")]

    model: reactive[RunModel | None] = reactive(None, always_update=True, init=False, repaint=False)
    # the spec being edited (shape, dtype, swept fields), set with the Timing pane's: results of
    # another spec are marked, as there
    current: reactive[tuple | None] = reactive(None, always_update=True, init=False, repaint=False)

    class CompareRequested(Message):
        """Time rows `a` and `b` ((label, sweep_value) each) against each other."""

        def __init__(self, a: tuple[str, Any], b: tuple[str, Any]) -> None:
            super().__init__()
            self.a, self.b = a, b

    def __init__(self) -> None:
        super().__init__()
        self.marks: list[tuple[str, Any]] = []
        self._keys: list[tuple[str, Any]] = []
        self._findings: dict[tuple[str, Any], list[dict]] = {}
        self._reports: dict[tuple[str, Any], str] = {}
        self._kept: dict[tuple[str, Any], bool] = {}

    def compose(self) -> ComposeResult:
        yield Static("", id="diagnosis-summary", classes="summary")
        yield KeyDataTable(id="diagnosis-table", cursor_type="row", zebra_stripes=True)
        with VerticalScroll(id="diagnosis-scroll"):
            yield Static("", id="diagnosis-detail")
            yield Static("", id="ab-results")

    def on_mount(self) -> None:
        self.query_one("#diagnosis-table", DataTable).add_columns(*COLUMNS)
        self._show(self.model)

    # -- attributes down --------------------------------------------------------------------
    def watch_model(self, model: RunModel | None) -> None:
        if self.is_mounted:
            self._show(model)

    def watch_current(self, current: tuple | None) -> None:
        if self.is_mounted:
            self._show(self.model)

    def _show(self, model: RunModel | None) -> None:
        rows = [r for r in (model.rows.values() if model else ()) if r.record]
        records = [r.record for r in rows if r.record is not None]
        environment = (model.environment if model else None) or {}
        from workbench.diagnosis import diagnose_record  # (imported after the first frame)

        self._findings = {(r.label, r.sweep_value): diagnose_record(record, environment, records)
                          for r, record in zip(rows, records)}
        self._reports = {(r.label, r.sweep_value): report_text(r.record) for r in rows}
        self._keys = [(r.label, r.sweep_value) for r in rows]
        self._kept = {(r.label, r.sweep_value): r.kept for r in rows}
        self.marks = [m for m in self.marks if m in self._keys]
        self._fill(rows)
        problems = sum(f["severity"] == "problem" for found in self._findings.values() for f in found)
        summary = Text(f"{problems} problem(s) in {len(rows)} row(s) · x marks A then B, a times them round-robin"
                       if rows else "no results yet: run check + bench (profile, ptx and counters add evidence)")
        from .timing import stale_note

        stale = stale_note(rows, self.current)
        update_static(self.query_one("#diagnosis-summary", Static),
                      Text.assemble((stale, "bold yellow"), "\n", summary) if stale else summary)
        update_static(self.query_one("#ab-results", Static), Text(ab_text(getattr(model, "ab", ()) if model else ())))
        self._show_detail()

    def _fill(self, rows: list[Row]) -> None:
        table = self.query_one(KeyDataTable)
        cursor = table.cursor_row
        table.replace_rows(self._cells(row) for row in rows)
        if rows:
            table.move_cursor(row=min(cursor, len(rows) - 1), animate=False)

    def _cells(self, row: Row) -> tuple[str, ...]:
        key = (row.label, row.sweep_value)
        found = self._findings.get(key, [])
        mark = MARKS[self.marks.index(key)] if key in self.marks else ""
        return (mark, fmt.row_title(row.label, row.sweep_value) + (" (kept)" if row.kept else ""),
                str(sum(f["severity"] == "problem" for f in found)), ", ".join(f["rule"] for f in found) or "-")

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_detail()

    def _show_detail(self) -> None:
        key = self._current()
        text = detail_text(fmt.row_title(*key), self._findings.get(key, [])) if key else ""
        if key and self._kept.get(key):
            from .timing import KEPT_TEXT

            text += f"\n({KEPT_TEXT})"
        if key and self._reports.get(key):
            text += "\n\n" + self._reports[key]
        update_static(self.query_one("#diagnosis-detail", Static), Text(text))  # plain: evidence holds [ ]

    def _current(self) -> tuple[str, Any] | None:
        row = self.query_one(KeyDataTable).cursor_row
        return self._keys[row] if 0 <= row < len(self._keys) else None

    # -- actions ----------------------------------------------------------------------------
    def action_mark(self) -> None:
        key = self._current()
        if key is None:
            return
        if key in self.marks:
            self.marks.remove(key)
        else:
            self.marks = (self.marks + [key])[-2:]
        self._show(self.model)

    def action_compare(self) -> None:
        if len(self.marks) != 2:
            self.notify("mark two rows with x first (A, then B)", severity="warning")
            return
        problem = ab_pair_problem(*self.marks)
        if problem:
            self.notify(problem, severity="warning")
            return
        self.post_message(self.CompareRequested(self.marks[0], self.marks[1]))


def ab_pair_problem(a: tuple[str, Any], b: tuple[str, Any]) -> str | None:
    """Why rows `a` and `b` ((label, sweep_value) each) cannot be an A/B, or None. An A/B times
    two implementations on one input: two sweep points are two inputs (one implementation at two
    sizes is a sweep's chart, not an A/B), and one row against itself tells nothing."""
    if a[1] is not None and b[1] is not None and a[1] != b[1]:
        return (f"A/B times two implementations at one shape: {fmt.row_title(*a)} and "
                f"{fmt.row_title(*b)} are two sweep points; mark two rows of one point")
    if a[0] == b[0]:
        return f"A/B needs two implementations: both marked rows are {fmt.printable(a[0])}"
    return None


def detail_text(label: str, findings: list[dict]) -> str:
    """A row's findings in full: name, evidence, prescription."""
    if not findings:
        return f"{label}: nothing to report"
    parts = []
    for finding in findings:
        mark = "■" if finding["severity"] == "problem" else "·"
        parts.append(f"{mark} {finding['rule']}: {fmt.tui_text(finding['evidence'])}\n"
                     f"  → {fmt.tui_text(finding['suggestion'])}")
    return f"{label}\n" + "\n".join(parts)


def report_text(record: Record | dict | None) -> str:
    """The row's kept Nsight Compute report and how to open it ("" without one)."""
    measured = read_record(record).measured if record else None
    path = measured.report_path if measured else None
    if not path:
        return ""
    from workbench.counters import open_commands  # (imported after the first frame)

    return f"Nsight Compute report: {path}\n  open: {open_commands(path)}"


def ab_text(entries) -> str:
    entries = list(entries)
    if not entries:
        return ""
    from workbench.results.report_diagnosis import ab_line

    return "A/B (ratio = A time / B time, round-robin in one worker)\n" + "\n".join(ab_line(e) for e in entries)
