"""The replay table's diagnosis and A/B sections (report.py prints them after the runs' tables).

Pure functions of the document: one table of findings (rule, evidence, prescription) per run
that has any, and one table of A/B comparisons (ratio A/B with its interval and verdict).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from rich.table import Table
from rich.text import Text

from workbench.results.record import Record, read_record

SEVERITY_STYLE = {"problem": "bold", "note": "dim"}
VERDICT_STYLE = {"faster": "green", "slower": "bold red", "no difference": "", "failed": "bold red"}


def diagnosis_table(records: Iterable[Mapping[str, Any] | Record], title: str) -> Table | None:
    """Findings of a run's records, or None when none has any."""
    rows = [(r, f) for r in map(read_record, records) for f in r.diagnosis]
    if not rows:
        return None
    table = Table(title=title, title_justify="left", header_style="bold", pad_edge=False)
    for name in ("impl", "sweep", "finding", "evidence", "prescription"):
        table.add_column(name, overflow="fold")
    for record, finding in rows:
        sweep = record.sweep_value
        table.add_row(str(record.label), "-" if sweep is None else str(sweep),
                      Text(str(finding.rule), SEVERITY_STYLE.get(finding.severity or "", "")),
                      str(finding.evidence), str(finding.suggestion))
    return table


def ab_line(entry: Mapping[str, Any]) -> str:
    """'triton / pytorch = 0.791x (95% CI 0.787-0.795, 200 pairs): triton faster, 1.26x' (or the error)."""
    if entry.get("status") != "ok":
        return f"{entry.get('a')} vs {entry.get('b')}: {entry.get('status')}: {entry.get('error')}"
    confidence = round(100 * (entry.get("confidence") or 0.95))
    verdict, ratio = entry["verdict"], entry["ratio"]
    if verdict in ("faster", "slower") and ratio > 0:  # say whose: "manual / triton = 0.03x: faster" named no one
        times = 1 / ratio if verdict == "faster" else ratio
        verdict = f"{entry['a']} {verdict}, {times:.3g}x"
    # host time of numpy's emulation on a side (the timer of both then): not a kernel's speed
    interpreted = " (a side ran under the Triton interpreter: host time, not GPU speed)" \
        if entry.get("timer") == "interpreter" else ""
    return (f"{entry['a']} / {entry['b']} = {ratio:.4g}x ({confidence}% CI {entry['ci_low']:.4g}-"
            f"{entry['ci_high']:.4g}, {entry['n']} pairs): {verdict}{interpreted}")


def ab_table(entries: list[Mapping[str, Any]]) -> Table | None:
    """The document's `ab` entries, or None when there are none."""
    if not entries:
        return None
    table = Table(title="A/B (round-robin in one worker; ratio = A time / B time)", title_justify="left",
                  header_style="bold", pad_edge=False)
    for name in ("run", "op", "sweep", "A", "B", "A ms", "B ms", "ratio", "95% CI", "n", "verdict"):
        table.add_column(name, justify="right" if name in ("A ms", "B ms", "ratio", "n") else "left", overflow="fold")
    for e in entries:
        ok = e.get("status") == "ok"
        word = e.get("verdict") if ok else f"{e.get('status')}: {e.get('error')}"
        table.add_row(str(e.get("run_index")), str(e.get("op")), "-" if e.get("sweep_value") is None else str(e["sweep_value"]),
                      str(e.get("a")), str(e.get("b")), _num(e.get("a_median_ms")), _num(e.get("b_median_ms")),
                      _num(e.get("ratio")), f"{_num(e.get('ci_low'))}-{_num(e.get('ci_high'))}" if ok else "-",
                      str(e.get("n") or "-"), Text(str(word), VERDICT_STYLE.get(e.get("verdict") if ok else "failed", "")))
    return table


def _num(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, (int, float)) and not isinstance(value, bool) else "-"
