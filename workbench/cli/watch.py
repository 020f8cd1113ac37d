"""`workbench --replay FILE --watch`: run the session, then re-run what each save changes.

The first cycle runs every row and prints the results table. Then the session file and every
plugin file it uses are watched (workbench/watch/files.py); on each save the rows whose code or
description changed are rebuilt, re-checked and re-run (workbench/watch/cycle.py: one pool of warm
workers for the whole watch, reloading an edited plugin in place, engine/reload.py), and one line per
re-run row says how it moved against its previous result: time, GB/s, the PTX counts that
changed. A file that fails to import or compile is reported with its file and line, on stderr,
and the last good result stays. `-o PATH` is rewritten after every cycle: a row whose edit
failed is failed there (its status and error are the new code's), its last good figures kept
under `last_good` with the sha256 of the files they were measured from (docs/CONTRACTS.md,
"Watch mode"). SIGINT, SIGTERM or SIGHUP ends the watch (exit 128 + the signal: 130 for Ctrl-C).

The warm daemon (issue #39; docs/engine.md, "Warm daemon"): the first cycle, which runs every
row, goes to this user's warm daemon as a replay does (started when there is none; --no-daemon,
WORKBENCH_DAEMON=0 or --strict keep it here), so a watch started again answers without a torch
import. The cycles after an edit run here, in the watch's own pool, whose idle worker re-imports
an edited plugin in place (engine/reload.py; the daemon cannot: its workers are another
process's): that worker is started once the first cycle is over, while the watch waits for the
first save, so nothing starts beside a row being timed.
"""

from __future__ import annotations

import argparse
import threading
from pathlib import Path

from rich.console import Console

from workbench.cli.common import (EXIT_INTERRUPTED, EXIT_SIGNAL_BASE, Env, output_style, run_options, write_output,
                                  write_stdout)
from workbench.cli.plugin_check import current_records, warn_changed
from workbench.cli.progress import row_line
from workbench.cli.stopping import Aborted, stop_on_signals


def run_watch(args: argparse.Namespace, argv: list[str], env: Env, err: Console) -> int:
    stop = threading.Event()
    with stop_on_signals(stop) as stopped:
        try:
            _watch(args, argv, env, err, stop)
        except Aborted as exc:
            return EXIT_SIGNAL_BASE + exc.signum
    return stopped.exit_code or EXIT_INTERRUPTED


def _watch(args: argparse.Namespace, argv: list[str], env: Env, err: Console, stop: threading.Event) -> None:
    from workbench.cli.daemon import daemon_choice
    from workbench.engine.plan import new_pool

    choice = daemon_choice(args)  # the first cycle in the warm daemon, unless opted out (module docstring)
    # one pool for the whole watch: an edit reloads its warm workers in place (engine/reload.py)
    with new_pool(run_options(args, env, argv=argv)) as pool:
        _cycles(args, argv, env, err, stop, pool, choice if choice.use else None)


def _daemon_engine(choice, err: Console):
    """run_plan's stand-in for a cycle: the run in the warm daemon (cli/daemon.run_engine: here
    when the daemon is busy, refuses or cannot start, with one line)."""
    from workbench.cli.daemon import run_engine

    def engine(session, *, on_event, stop, options) -> dict:
        return run_engine(session, on_event=on_event, stop=stop, options=options, choice=choice, err=err)
    return engine


def _warm_here(pool, session_path: Path, args: argparse.Namespace, options) -> None:
    """Start, in the background, the watch's own worker for the session's first row (the
    cycles after an edit run here: module docstring); a failure only means the next cycle
    starts it."""
    def start() -> None:
        try:
            from workbench.engine.plan import first_key
            from workbench.session.api import load_session, with_resolved_plugins

            session = with_resolved_plugins(load_session(session_path, kernels=args.kernels), session_path.parent)
            key = first_key(session, options)
            if key is not None:
                pool.prestart(key)
        except Exception:  # noqa: BLE001 - the cycle that needs the worker starts it (and says why not)
            pass
    threading.Thread(target=start, name="workbench-watch-warm", daemon=True).start()


def _cycles(args: argparse.Namespace, argv: list[str], env: Env, err: Console, stop: threading.Event,
            pool, choice=None) -> None:
    from workbench.watch.files import FileWatcher
    from workbench.session.api import file_sha256, resolve_session_path, results_path
    from workbench.watch.cycle import WatchState, watched_files

    path = resolve_session_path(args.replay, env.data_dir)
    state = WatchState(path, kernels=args.kernels, workers=pool)
    watcher = FileWatcher(watched_files(path, state.kernels))  # a save during the first run counts too
    changed: list[Path] = []
    while not stop.is_set():
        options = run_options(args, env, argv=argv, session_sha256=_sha(path, file_sha256))
        if state.number == 0:
            _warn_first(state, path, args, env, err, results_path)
        first = state.number == 0  # then a line per row on stderr; after it, a line per re-run row on stdout
        engine = _daemon_engine(choice, err) if first and choice is not None else None
        cycle = state.run_cycle(options=options, on_event=_progress(err, args.verbose, rows=first), stop=stop,
                                changed=changed, on_line=None if first else _line, engine=engine)
        _report(cycle, args, env, err)
        if stop.is_set():
            break
        if engine is not None:
            _warm_here(pool, path, args, options)
        watcher.set_paths(cycle.files)
        err.print(f"watching {len(cycle.files)} file(s) ({', '.join(p.name for p in cycle.files)}); "
                  "save one to re-run what it changed, Ctrl-C to stop", markup=False)
        changed = watcher.wait(stop) or []
        if changed:
            err.print(f"changed: {', '.join(str(p) for p in changed)}", markup=False)


def _sha(path: Path, file_sha256) -> str | None:
    try:
        return file_sha256(path)
    except OSError:
        return None


def _warn_first(state, path: Path, args, env: Env, err: Console, results_path) -> None:
    """Before the first cycle, as replay does: plugin files changed since earlier results?"""
    from workbench.errors import WorkbenchError
    from workbench.session.api import load_session, with_resolved_plugins

    try:
        session = with_resolved_plugins(load_session(path, kernels=args.kernels), path.parent)
    except WorkbenchError:
        return  # the cycle reports it
    current = current_records(session, state.kernels, env.cache_dir)
    warn_changed([results_path(path, env.data_dir), args.output], current, err)


def _progress(err: Console, verbose: bool, rows: bool):
    """Warnings (and with -v the children's info lines) on stderr; with `rows`, a line per row as
    it finishes (`  gelu triton 2x8 float32: ok 0.51 ms`)."""
    def on_event(event) -> None:
        from workbench import events as ev

        if isinstance(event, ev.Result) and rows:
            line = row_line(event.record, 0, 0).split("] ", 1)[-1]  # no place: only changed rows run
            err.print(f"  {line}", markup=False, highlight=False)
        elif isinstance(event, ev.Log) and (verbose or event.level != "info"):
            err.print(f"{event.level}: {event.text}", markup=False, highlight=False)
    return on_event


MARKS = {"info": "  ", "warning": "! ", "error": "✗ "}


def _line(key, text: str, level: str) -> None:
    """A re-run row against its previous result, as it finishes (stdout: the watch's data)."""
    from workbench.watch.cycle import where

    write_stdout(f"{MARKS.get(level, '  ')}{where(key)}: {text}\n")


def _report(cycle, args: argparse.Namespace, env: Env, err: Console) -> None:
    """The first cycle's table, then a line per re-run row; -o rewritten with the document."""
    from workbench.results.report import render, to_table

    if cycle.error:
        err.print(f"error: {cycle.error}", markup=False, highlight=False)
        err.print("nothing re-ran; the last results stay" if cycle.doc else "nothing ran yet", markup=False)
        # stdout's numbering shows every cycle, a failed one too (its error is on stderr alone)
        write_stdout(f"watch #{cycle.number}: not run: the edit did not load (the error is on stderr)\n")
    elif cycle.number == 1:
        width, color = output_style(env, argparse.Namespace(output=None))
        write_stdout(to_table(cycle.doc, width=width, color=color))
    elif not cycle.reran:
        write_stdout(f"watch #{cycle.number}: nothing to re-run (the edit changed no row's code)\n")
    else:
        kept = len(cycle.doc.get("results") or ()) - len(cycle.reran)
        failed = sum(r.get("status") == "failed" for r in cycle.doc.get("results") or ()
                     if (r.get("run_index"), r.get("label"), r.get("sweep_value")) in cycle.reran)
        failed_text = f" ({failed} failed)" if failed else ""  # their last good figures: `last_good`
        write_stdout(f"watch #{cycle.number}: {len(cycle.reran)} row(s) re-run{failed_text}, {kept} kept\n")
    if args.output and cycle.doc is not None and not cycle.error:
        write_output(render(cycle.doc, args.format), args, env)
