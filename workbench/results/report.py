"""The results document as output: JSON (the document itself), CSV (one row per result, scalar
fields with dotted names) and a rich table (one per run). CONTRACTS.md, "Results".

Pure functions of the document; no environment reads (the CLI decides colour and width).
"""

from __future__ import annotations

import csv
import io
from typing import Any, Iterable, Mapping

from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

from workbench import fmt
from workbench.results.report_diagnosis import ab_table, diagnosis_table
from workbench.results.document import INTERPRETER_FLAG
from workbench.results.record import Check, Flag, Record, Timing, Traffic, read_record

STATUS_STYLE = {"ok": "green", "failed": "bold red", "unavailable": "dim", "skipped": "yellow"}


# -- JSON and CSV ---------------------------------------------------------------------------
def to_json(doc: Mapping[str, Any]) -> str:
    """The results document as JSON text (workbench.results.document.dumps: NaN/Inf become null)."""
    from workbench.results import document as results

    return results.dumps(doc)


def to_csv(doc: Mapping[str, Any]) -> str:
    """One row per result, scalar fields with dotted names (`timing.median_ms`); columns are the
    union of the rows' fields, first seen first (flattening: workbench.results.document.flatten). A field
    that is a dict in some rows and None in others (`timing.sm_clock_mhz`) has only its dotted
    columns (`timing.sm_clock_mhz.median`), empty in the rows where it is None."""
    from workbench.results import document as results

    rows = [results.flatten(r) for r in doc.get("results", [])]
    seen = list(dict.fromkeys(k for row in rows for k in row))
    parents = {k.rsplit(".", i)[0] for k in seen for i in range(1, k.count(".") + 1)}
    columns = [k for k in seen if k not in parents]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: _csv_cell(v) for k, v in row.items() if k not in parents})
    return buffer.getvalue()


def _csv_cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return value


# -- table -----------------------------------------------------------------------------------
fmt_num = fmt.number  # the one number formatter of the CLI and the TUI (workbench/fmt.py)


def shape_text(shape: Mapping[str, Any] | None) -> str:
    return "x".join(str(v) for v in (shape or {}).values()) or "-"


def _check_cell(check: Check | None) -> Text:
    style = "" if check is None else "green" if check.passed else "bold red"
    return Text(fmt.check(check.to_dict() if check is not None else None), style)


def _notes(data: Mapping[str, Any] | Record) -> str:
    record = read_record(data)
    timing = record.timing
    notes = []
    if record.error:
        notes.append(fmt.clip(str(record.error).splitlines()[0], 240))
    if timing is not None and timing.launch_bound:
        notes.append("launch-bound")
    if timing is not None and timing.clock_fell:
        notes.append("clock fell")
    flags = [str(flag) for flag in record.flags]
    if timing is not None and timing.timer == "interpreter" and Flag.INTERPRETER not in record.flag_kinds():
        notes.append(INTERPRETER_FLAG)  # a record without the engine's flag (older documents)
    if timing is not None and timing.flush_l2 is False and str(record.device or "").startswith("cuda"):
        notes.append("L2 not flushed")
    notes += [flag for flag in flags if flag not in notes]
    return "; ".join(dict.fromkeys(notes))


def _ceiling_cell(traffic: Traffic | None) -> str:
    pct = traffic.pct_of_ceiling if traffic is not None else None
    if traffic is None or pct is None:
        return "-"
    name = str(traffic.ceiling or "").replace("_gbps", "").replace("_tflops", "")
    return f"{pct:.1f}% {name}".rstrip()


# Columns a narrow table leaves out, the first first (else --replay at 80 columns squeezes 13
# columns to 3-5 characters each and breaks numbers across lines). The rest stay.
DROP_ORDER = ("timer", "build ms", "n", "TFLOP/s", "% ceiling", "GB/s", "p20–p80 ms", "check", "shape")
NUMERIC = frozenset({"median ms", "n", "GB/s", "TFLOP/s", "build ms"})
# Past this many rows a run's table is plain aligned text, not a rich Table: rich took 16 s for
# 4000 rows, and a replay stopped by Ctrl-C at ~3.7k rows took over 10 s to exit (measured).
PLAIN_ROWS = 300


def result_table(records: list[Mapping[str, Any]], title: str, width: int | None = None,
                 console: Console | None = None) -> Table | Text:
    """One run's results as a rich Table (past PLAIN_ROWS rows: aligned plain text, the same
    columns). With `width` the columns of DROP_ORDER are left out, the first first, until every
    column but the notes fits whole (only the notes wrap), and the caption names what was left
    out. (console: unused, kept for callers.)"""
    swept = any(r.get("sweep_value") is not None for r in records)
    columns = ["impl", "shape", *(["sweep"] if swept else []), "status", "median ms", "p20–p80 ms",
               "n", "GB/s", "TFLOP/s", "% ceiling", "build ms", "check", "timer", "notes"]
    rows = [_cells(r) for r in records]
    natural = {name: max([cell_len(name), *(cell_len(row[name][0]) for row in rows)]) for name in columns}
    natural["notes"] = cell_len("notes")  # the notes wrap: they take what is left
    left_out: list[str] = []
    if width is not None:
        for name in DROP_ORDER:
            kept = [c for c in columns if c not in left_out]
            if sum(natural[c] + 3 for c in kept) + 1 <= width:  # a cell's padding and its border
                break
            left_out.append(name)
    kept = [c for c in columns if c not in left_out]
    caption = (f"at {width} columns, left out: {', '.join(left_out)} (a wider terminal, or -o FILE.json, has them)"
               if left_out else None)
    if len(rows) > PLAIN_ROWS:
        return _plain_table(rows, title, kept, natural, caption)
    table = Table(title=Text(title), title_justify="left", header_style="bold", pad_edge=False,
                  caption=caption, caption_justify="left")
    for name in kept:
        table.add_column(name, justify="right" if name in NUMERIC else "left", overflow="fold",
                         no_wrap=name != "notes")
    for row in rows:
        table.add_row(*(Text(*row[name]) for name in kept))
    return table


def _cells(data: Mapping[str, Any]) -> dict[str, tuple[str, str]]:
    """A record's cells: column name -> (text, style)."""
    r = read_record(data)
    timing, traffic = r.timing or Timing(), r.traffic or Traffic()
    spread = (f"{fmt_num(timing.p20_ms)}–{fmt_num(timing.p80_ms)}" if timing.p20_ms is not None else "-")
    status, check = str(r.status), _check_cell(r.check)
    sweep = r.sweep_value
    return {"impl": (fmt.printable(r.label), ""), "shape": (shape_text(r.shape), ""),
            "sweep": (fmt_num(sweep) if isinstance(sweep, (int, float)) else str(sweep if sweep is not None else "-"), ""),
            "status": (status, STATUS_STYLE.get(status, "")), "median ms": (fmt_num(timing.median_ms), ""),
            "p20–p80 ms": (spread, ""), "n": (fmt_num(timing.n), ""),
            "GB/s": (fmt_num(traffic.gbps), ""), "TFLOP/s": (fmt_num(traffic.tflops), ""),
            "% ceiling": (_ceiling_cell(r.traffic), ""), "build ms": (fmt_num(r.build_ms, 3), ""),
            "check": (check.plain, str(check.style)), "timer": (str(timing.timer or "-"), ""),
            "notes": (fmt.printable(_notes(r)), "")}


def _plain_table(rows: list[dict[str, tuple[str, str]]], title: str, columns: list[str], natural: dict[str, int],
                 caption: str | None) -> Text:
    """A long table as aligned text: a header, a rule, a line a row (the notes last, unaligned)."""
    def line(cells: dict[str, str]) -> str:
        parts = [(cells[c].rjust if c in NUMERIC else cells[c].ljust)(natural[c]) if c != "notes" else cells[c]
                 for c in columns]
        return "  ".join(parts).rstrip()
    out = Text(no_wrap=False, overflow="fold")
    out.append(title + "\n")
    out.append(line({c: c for c in columns}) + "\n", "bold")
    out.append("  ".join("-" * natural[c] for c in columns) + "\n")
    for row in rows:
        out.append(line({c: row[c][0] for c in columns}) + "\n")
    if caption:
        out.append(caption + "\n")
    out.rstrip()
    return out


def run_title(records: list[Mapping[str, Any]], index: int) -> str:
    first = records[0]
    return fmt.printable(f"run {index}: {first.get('op')} {first.get('dtype') or ''}".rstrip())


def group_by_run(results: Iterable[Mapping[str, Any]]) -> list[tuple[int, list[Mapping[str, Any]]]]:
    groups: dict[int, list[Mapping[str, Any]]] = {}
    for record in results:
        groups.setdefault(int(record.get("run_index") or 0), []).append(record)
    return sorted(groups.items())


def environment_line(doc: Mapping[str, Any]) -> str:
    env, prov = doc.get("environment") or {}, doc.get("provenance") or {}
    parts = [f"session {prov.get('session')}", f"device {env.get('device') or '-'}",
             f"torch {env.get('torch') or '-'}", f"triton {env.get('triton') or '-'}"]
    ceilings = env.get("ceilings") or {}
    if ceilings.get("copy_gbps"):
        parts.append(f"copy ceiling {fmt_num(ceilings['copy_gbps'])} GB/s")
    return fmt.printable(" · ".join(parts))


def print_tables(doc: Mapping[str, Any], console: Console) -> None:
    """Print one table per run, under a line naming the session and the device."""
    console.print(Text(environment_line(doc), "dim"))
    results = doc.get("results") or []
    if not results:
        console.print("no results")
    for index, records in group_by_run(results):
        console.print(result_table(records, run_title(records, index), console.width))
    for index, records in group_by_run(results):  # the diagnosis, then A/B (report_diagnosis.py)
        findings = diagnosis_table(records, f"diagnosis, {run_title(records, index)}")
        if findings is not None:
            console.print(findings)
    ab = ab_table(doc.get("ab") or [])
    if ab is not None:
        console.print(ab)


def to_table(doc: Mapping[str, Any], *, width: int = 200, color: bool = False) -> str:
    """The tables as text (for -o or a pipe): no colour unless asked."""
    console = Console(file=io.StringIO(), width=width, color_system="auto" if color else None,
                      force_terminal=color, no_color=not color, highlight=False)
    print_tables(doc, console)
    return "\n".join(line.rstrip() for line in console.file.getvalue().splitlines()) + "\n"


def render(doc: Mapping[str, Any], fmt: str, *, width: int = 200) -> str:
    """The document in `fmt` (table | json | csv | jsonl) as text."""
    if fmt == "json":
        return to_json(doc)
    if fmt == "jsonl":
        from workbench.results.journal import to_jsonl

        return to_jsonl(doc)
    if fmt == "csv":
        return to_csv(doc)
    return to_table(doc, width=width)
