"""The results document as output: JSON (the document itself), CSV (one row per result, scalar
fields with dotted names) and a rich table (one per run). CONTRACTS.md, "Results".

Pure functions of the document; no environment reads (the CLI decides colour and width).
"""

from __future__ import annotations

import csv
import io
from typing import Any, Iterable, Mapping

from rich.console import Console
from rich.table import Table
from rich.text import Text

from workbench import fmt
from workbench.results.report_diagnosis import ab_table, diagnosis_table
from workbench.results.document import INTERPRETER_FLAG

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


def _check_cell(check: Mapping[str, Any] | None) -> Text:
    style = "" if not check else "green" if check.get("passed") else "bold red"
    return Text(fmt.check(check), style)


def _notes(record: Mapping[str, Any]) -> str:
    timing = record.get("timing") or {}
    notes = []
    if record.get("error"):
        notes.append(fmt.clip(str(record["error"]).splitlines()[0], 240))
    if timing.get("launch_bound"):
        notes.append("launch-bound")
    if timing.get("clock_fell"):
        notes.append("clock fell")
    flags = [str(flag) for flag in record.get("flags") or []]
    if timing.get("timer") == "interpreter" and INTERPRETER_FLAG not in flags:
        notes.append(INTERPRETER_FLAG)  # a record without the engine's flag (older documents)
    if timing and timing.get("flush_l2") is False and str(record.get("device") or "").startswith("cuda"):
        notes.append("L2 not flushed")
    notes += [flag for flag in flags if flag not in notes]
    return "; ".join(dict.fromkeys(notes))


def _ceiling_cell(traffic: Mapping[str, Any]) -> str:
    pct = traffic.get("pct_of_ceiling")
    if pct is None:
        return "-"
    name = str(traffic.get("ceiling") or "").replace("_gbps", "").replace("_tflops", "")
    return f"{pct:.1f}% {name}".rstrip()


def result_table(records: list[Mapping[str, Any]], title: str) -> Table:
    """One run's results as a rich Table."""
    swept = any(r.get("sweep_value") is not None for r in records)
    table = Table(title=title, title_justify="left", header_style="bold", pad_edge=False)
    columns = ["impl", "shape", *(["sweep"] if swept else []), "status", "median ms", "p20–p80 ms",
               "n", "GB/s", "TFLOP/s", "% ceiling", "build ms", "check", "timer", "notes"]
    for name in columns:
        numeric = name in {"median ms", "n", "GB/s", "TFLOP/s", "build ms"}
        table.add_column(name, justify="right" if numeric else "left", overflow="fold")
    for r in records:
        timing, traffic = r.get("timing") or {}, r.get("traffic") or {}
        spread = (f"{fmt_num(timing.get('p20_ms'))}–{fmt_num(timing.get('p80_ms'))}"
                  if timing.get("p20_ms") is not None else "-")
        status = str(r.get("status"))
        cells = [str(r.get("label")), shape_text(r.get("shape")),
                 *([fmt_num(r.get("sweep_value")) if isinstance(r.get("sweep_value"), (int, float))
                    else str(r.get("sweep_value") if r.get("sweep_value") is not None else "-")] if swept else []),
                 Text(status, STATUS_STYLE.get(status, "")), fmt_num(timing.get("median_ms")), spread,
                 fmt_num(timing.get("n")), fmt_num(traffic.get("gbps")), fmt_num(traffic.get("tflops")),
                 _ceiling_cell(traffic), fmt_num(r.get("build_ms"), 3), _check_cell(r.get("check")),
                 str(timing.get("timer") or "-"), _notes(r)]
        table.add_row(*cells)
    return table


def run_title(records: list[Mapping[str, Any]], index: int) -> str:
    first = records[0]
    return f"run {index}: {first.get('op')} {first.get('dtype') or ''}".rstrip()


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
    return " · ".join(parts)


def print_tables(doc: Mapping[str, Any], console: Console) -> None:
    """Print one table per run, under a line naming the session and the device."""
    console.print(Text(environment_line(doc), "dim"))
    results = doc.get("results") or []
    if not results:
        console.print("no results")
    for index, records in group_by_run(results):
        console.print(result_table(records, run_title(records, index)))
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
