"""`workbench --replay FILE`: run a session headless through the one core call, `run_plan`.

Events become a rich progress bar on stderr when stderr is a terminal, else one line per
finished row; the results document goes to stdout or -o in the chosen format. Ctrl-C sets the
stop flag (the engine cancels within 3 s) and the command exits 130; a second Ctrl-C aborts.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import threading
from pathlib import Path
from typing import Any, Callable, Iterator

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from workbench import events as ev
from workbench.cli.check import count_rows
from workbench.cli.common import (EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, Env, output_style,
                                  print_problems, run_options, write_output)
from workbench.provenance import fill_provenance, provenance, utc_now_iso
from workbench.report import fmt_num, render, shape_text, to_table


def run_replay(args: argparse.Namespace, argv: list[str], env: Env, err: Console) -> int:
    from workbench.session import (SessionError, file_sha256, load_session, resolve_session_path,
                                   with_resolved_plugins)

    path = resolve_session_path(args.replay)
    try:
        session = load_session(path, kernels=args.kernels)
    except SessionError as exc:
        print_problems(exc, err)
        return EXIT_USAGE
    baseline = _read_baseline(args.compare, err) if args.compare else None
    if args.compare and baseline is None:
        return EXIT_USAGE
    sha = file_sha256(path)
    ours = provenance(session.name, session_sha256=sha, argv=argv, started=utc_now_iso())
    try:
        from workbench.engine.plan import run_plan
    except ImportError as exc:
        err.print(f"error: the engine (workbench.engine.plan) is not available: {exc}", markup=False)
        return EXIT_USAGE
    options = run_options(args, env, argv=argv, session_sha256=sha)
    session = with_resolved_plugins(session, path.parent)
    if baseline is not None:  # different GPUs are never compared: say so before the run, not after
        from workbench.engine.plan import planned_device_name

        here = planned_device_name(session, options)
        there = (baseline.get("environment") or {}).get("device")
        if there and here != there:
            err.print(f"error: --compare {args.compare}: the baseline ran on {there!r}, this replay would run on "
                      f"{here!r}; results from different GPUs are not compared", markup=False)
            return EXIT_USAGE
    stop = threading.Event()
    with _progress(count_rows(session), env, err, args.verbose) as on_event, _sigint_sets(stop):
        doc = run_plan(session, on_event=on_event, stop=stop,
                       options=options)
    fill_provenance(doc, ours)
    code = EXIT_INTERRUPTED if stop.is_set() else _exit_code(doc)
    if baseline is not None:
        code = _compare(doc, baseline, args, env, err, code)
    write_output(_text(doc, args, env), args, env)
    if stop.is_set():
        err.print("interrupted: the results written are partial (unfinished rows are skipped)")
    return code


def _text(doc: dict[str, Any], args: argparse.Namespace, env: Env) -> str:
    if args.format != "table":
        return render(doc, args.format)
    width, color = output_style(env, args)
    return to_table(doc, width=width, color=color)


def _exit_code(doc: dict[str, Any]) -> int:
    failed = [r for r in doc.get("results") or [] if r.get("status") == "failed"]
    return EXIT_FAILED if failed else EXIT_OK


def _read_baseline(path: str, err: Console) -> dict[str, Any] | None:
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        err.print(f"error: --compare {path}: cannot read a results document: {exc}", markup=False)
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), list):
        err.print(f"error: --compare {path}: not a results document (no `results` list)", markup=False)
        return None
    return doc


def _compare(doc: dict[str, Any], baseline: dict[str, Any], args, env: Env, err: Console, code: int) -> int:
    from workbench.compare import compare_documents, comparison_table

    comparison = compare_documents(doc, baseline, args.threshold)
    doc["comparison"] = comparison.as_dict(args.compare)
    if comparison.different_gpu:
        err.print(f"warning: the baseline ran on {comparison.baseline_device!r}, this run on "
                  f"{comparison.device!r}; results from different GPUs are not compared", markup=False)
        return code if code == EXIT_INTERRUPTED else EXIT_USAGE
    err.print(comparison_table(comparison))
    if comparison.regressions and code == EXIT_OK:
        return EXIT_FAILED
    return code


# -- progress and Ctrl-C ---------------------------------------------------------------------
@contextlib.contextmanager
def _progress(total: int, env: Env, err: Console, verbose: bool) -> Iterator[Callable[[ev.Event], None]]:
    """An on_event callback: a progress bar on a terminal, else a line per finished row."""
    state = {"done": 0}
    bar = None
    if env.stderr_tty:
        bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                       TimeElapsedColumn(), console=err, transient=True)
        task = bar.add_task("starting", total=total)

    def on_event(event: ev.Event) -> None:
        if isinstance(event, ev.Started) and bar is not None:
            bar.update(task, description=f"{event.op} {event.row[1]} {event.spec_label}")
        elif isinstance(event, ev.Result):
            state["done"] += 1
            line = _row_line(event.record, state["done"], total)
            if bar is not None:
                bar.update(task, advance=1)
                if event.record.get("status") == "failed":
                    bar.console.print(line, markup=False, highlight=False)
            else:
                err.print(line, markup=False, highlight=False)
        elif isinstance(event, ev.Log) and (verbose or event.level != "info"):
            (bar.console if bar else err).print(f"{event.level}: {event.text}", markup=False, highlight=False)

    if bar is None:
        yield on_event
        return
    with bar:
        yield on_event


def _row_line(record: dict[str, Any], done: int, total: int) -> str:
    timing = record.get("timing") or {}
    sweep = record.get("sweep_value")
    where = shape_text(record.get("shape")) + (f" @{sweep}" if sweep is not None else "")
    text = f"[{done}/{total}] {record.get('op')} {record.get('label')} {where} {record.get('dtype') or ''}: " \
           f"{record.get('status')}"
    if timing.get("median_ms") is not None:
        text += f" {fmt_num(timing['median_ms'])} ms"
    if record.get("error"):
        text += f" ({str(record['error']).splitlines()[0][:160]})"
    return text


@contextlib.contextmanager
def _sigint_sets(stop: threading.Event) -> Iterator[None]:
    """First Ctrl-C sets `stop`; a second one raises KeyboardInterrupt. Main thread only."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
