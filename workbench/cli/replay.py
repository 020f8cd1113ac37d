"""`workbench --replay FILE`: run a session headless through the one core call, `run_plan`.

Events become progress on stderr (cli/progress.py) and finished rows go to the journal beside
`-o PATH` or, for `--format jsonl`, to stdout as they finish (cli/sink.py); the document goes to
stdout or -o in the chosen format at the end. SIGINT, SIGTERM and SIGHUP stop the run alike
(cli/stopping.py): the partial document is written with `cancelled` and `cancel_signal`, and the
command exits 128 + the signal number. `--daemon` runs the engine part in a warm daemon
(cli/daemon.py); everything here stays the same. `--resume PATH` keeps the finished rows of a stopped run
(the same session file, the same device) and runs only the missing ones.
"""

from __future__ import annotations

import argparse
import dataclasses
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from workbench.cli.check import session_row_keys
from workbench.cli.common import (EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_SIGNAL_BASE, EXIT_USAGE, Env,
                                  check_output_plugins, print_problems, run_options)
from workbench.cli.plugin_check import current_records, declare_plugins, refuse_changed, warn_changed, warn_empty
from workbench.cli.progress import progress
from workbench.cli.sink import Sink
from workbench.cli.stopping import Aborted, stop_on_signals
from workbench.results.provenance import fill_provenance, provenance, utc_now_iso
from workbench.results.document import ENVIRONMENT_KEYS, blank, document_type_error
from workbench.trace import mark


def run_replay(args: argparse.Namespace, argv: list[str], env: Env, err: Console) -> int:
    stop = threading.Event()
    with stop_on_signals(stop) as stopped:  # from the start: a signal while torch loads stops cleanly too
        try:
            return _replay(args, argv, env, err, stop, stopped)
        except Aborted as exc:  # a second signal before the document was written
            err.print(f"stopped by a second {exc}", markup=False)
            return EXIT_SIGNAL_BASE + exc.signum


def _end_early(early) -> None:
    """The daemon this replay started early, ended: its session was refused before any run."""
    if early is not None:
        early.proc.terminate()  # SIGTERM: the daemon leaves with its zygote


def _replay(args, argv, env: Env, err: Console, stop: threading.Event, stopped) -> int:
    from workbench.cli.daemon import daemon_choice, run_engine, start_early

    choice = daemon_choice(args)  # the warm daemon unless --no-daemon, WORKBENCH_DAEMON=0 or --strict
    # started (when none runs) before the session is read and checked: its start and its zygote's
    # torch import overlap that work (issue #39); a session refused here ends it again (our child)
    early = start_early(choice)
    mark("client: reading the session")
    try:
        ready = _prepare(args, argv, env, err)
    except BaseException:  # a refused path, session or option (WorkbenchError), a signal: no daemon left
        _end_early(early)
        raise
    mark("client: session ready")
    if ready is None:
        _end_early(early)
        return EXIT_USAGE
    ours = ready.provenance
    sink = Sink(args, env, {"provenance": ours, "environment": ready.environment}, ready.done)
    try:
        keys = session_row_keys(ready.session, ready.options.kernels)
        with progress(keys, env, err, args.verbose, done=ready.options.done) as show:
            def on_event(event) -> None:
                sink.on_event(event)  # journal and stream first: a row is on disk before it is shown
                show(event)
            doc = run_engine(ready.session, on_event=on_event, stop=stop, options=ready.options, choice=choice,
                             err=err, early=early)
    except Aborted as exc:
        doc = sink.partial(exc.args[0])
        err.print(f"stopped by a second {exc}: writing the {len(doc['results'])} finished row(s)", markup=False)
        sink.finish(_provenance(doc, ours), err)
        return EXIT_SIGNAL_BASE + exc.signum
    _provenance(doc, ours)
    doc["cancel_signal"] = stopped.name
    code = stopped.exit_code or (EXIT_INTERRUPTED if stop.is_set() else _exit_code(doc))
    if ready.baseline is not None:
        code = _compare(doc, ready.baseline, args, err, code)
    stopped_elsewhere = bool(doc.get("cancelled")) and not stop.is_set()  # the daemon's own stop
    if stopped_elsewhere:
        code = EXIT_USAGE  # as for a daemon lost mid-run: the run did not end, not for a row's sake
    sink.finish(doc, err)
    mark("client: results written")
    if stop.is_set():
        err.print(f"{stopped.name or 'interrupted'}: the results written are partial (unfinished rows are "
                  "skipped, error \"cancelled\")", markup=False)
    elif stopped_elsewhere:
        err.print("the workbench daemon was stopped during the run (--daemon-stop, or a signal to it): the "
                  "results written are partial (unfinished rows are skipped, error \"cancelled\"); with -o PATH, "
                  "--resume PATH runs the rest", markup=False)
    return code


@dataclass(frozen=True)
class _Prepared:
    """What a replay starts from: the session (plugins resolved), the engine's options (with the
    resumed rows as `done`), our provenance, the --compare baseline, and the environment as known
    before the run (the device)."""

    session: Any
    options: Any
    provenance: dict
    baseline: dict | None
    done: list[dict]
    environment: dict


def _prepare(args, argv, env: Env, err: Console) -> _Prepared | None:
    """Everything checked before a row runs: the session, --compare's baseline and GPU, --resume's
    rows; None after saying what is wrong (exit 2)."""
    from workbench.session.api import (SessionError, file_sha256, load_session, resolve_session_path, results_path,
                                   shipped_original, with_resolved_plugins)

    path = resolve_session_path(args.replay, env.data_dir)
    if shipped_original(path, env.data_dir) and not Path(args.replay).expanduser().exists():
        err.print(f"{args.replay}: your saved copy {path} (shipped:{args.replay} runs the shipped original)",
                  markup=False)
    try:
        session = load_session(path, kernels=args.kernels)
    except SessionError as exc:
        print_problems(exc, err)
        return None
    if args.device is None and (problem := _missing_session_gpu(session)):
        err.print(f"{path}: {problem}", markup=False)
        return None
    baseline = _read_baseline(args.compare, err) if args.compare else None
    if args.compare and baseline is None:
        return None
    theirs = (baseline or {}).get("provenance", {}).get("session")
    if baseline is not None and theirs and theirs != session.name:  # rows match by key only: say so
        err.print(f"warning: --compare {args.compare}: the baseline is session {theirs!r}, this is "
                  f"{session.name!r}; only rows with the same op, implementation, shape and dtype compare",
                  markup=False)
    sha = file_sha256(path)
    ours = provenance(session.name, session_sha256=sha, argv=argv, started=utc_now_iso())
    try:
        from workbench.engine.plan import planned_device_name
    except ImportError as exc:
        err.print(f"error: the engine (workbench.engine.plan) is not available: {exc}", markup=False)
        return None
    options = run_options(args, env, argv=argv, session_sha256=sha)
    session = with_resolved_plugins(session, path.parent)
    check_output_plugins(args.output, session.plugins)  # WorkbenchError: one line, exit 2
    declared = declare_plugins(session, options.kernels, env.cache_dir)
    warn_empty(declared, err)
    plugins = ours["plugins"] = current_records(session, options.kernels, registry=declared)  # the journal header too
    if baseline is not None and refuse_changed(f"--compare {args.compare}: the baseline", baseline, plugins,
                                               args.force, err):
        return None
    if not args.compare and not args.resume:
        warn_changed([results_path(path, env.data_dir), args.output], plugins, err)
    # The device is known before anything runs (for --compare, --resume and the journal's header);
    # the rest of the environment arrives with the document (the engine learns it as it runs).
    environment = blank(ENVIRONMENT_KEYS, device=planned_device_name(session, options))
    if baseline is not None and not _same_gpu(args.compare, baseline, environment, err):
        return None
    if baseline is not None and not _shares_a_row(args.compare, baseline, session, declared, args.device, err):
        return None
    done: list[dict] | None = []
    if args.resume:
        done, ours["resumed_from"] = _resumed_rows(args.resume, sha, environment, err, (plugins, args.force))
    if done is None:
        return None
    options = dataclasses.replace(options, done={_key(r): r for r in done})
    return _Prepared(session, options, ours, baseline, done, environment)


def _shares_a_row(compare: str, baseline: dict, session, registry, device: str | None, err: Console) -> bool:
    """False (after one error line) when no row this session will run is in the baseline: rows
    match by op, implementation label, shape, dtype and sweep value (compare.row_key), all known
    before the run, so a wrong baseline is found before the replay, not after it.
    A session whose rows cannot be listed here (an unknown name) is left to the run to report."""
    from workbench.results.baseline import row_key
    from workbench.engine.rows import expand
    from workbench.errors import WorkbenchError

    try:
        planned = {row_key(row.record()) for row in expand(session, registry, has_cuda=False, device_override=device)}
    except (WorkbenchError, KeyError, ValueError):
        return True
    theirs = {row_key(r) for r in baseline["results"] if isinstance(r, dict)}
    if not planned or planned & theirs:
        return True
    err.print(f"error: --compare {compare}: no row of this session is in the baseline ({len(planned)} row(s) "
              f"planned, {len(theirs)} in the baseline; rows match by op, implementation, shape, dtype and "
              "sweep value): nothing would be compared, so nothing was run", markup=False)
    return False


def _missing_session_gpu(session) -> str | None:
    """The session's own `device: cuda[:N]` (settings, or a run's) on a host without that GPU:
    one error, as `--device cuda` gets, not a document of unavailable rows and exit 0 under a
    header that says `device cpu`. --device overrides it (the caller skips
    this then)."""
    from workbench.cli.common import missing_gpu
    from workbench.session.model import device_settings

    for where, device in device_settings(session):
        if device.startswith("cuda") and (problem := missing_gpu(device)):
            return f"{where}: {device}: {problem} (--device cpu runs the session on the CPU)"
    return None


def _key(record: dict[str, Any]) -> tuple:
    return (record.get("run_index"), record.get("label"), record.get("sweep_value"))


def _provenance(doc: dict, ours: dict) -> dict:
    fill_provenance(doc, ours)
    if ours.get("resumed_from"):
        doc["provenance"]["resumed_from"] = ours["resumed_from"]
    return doc


def _resumed_rows(resume: str, sha: str, environment: dict, err: Console,
                  plugins: tuple[list[dict], bool]) -> tuple[list[dict] | None, dict | None]:
    """The finished rows of the stopped run at `resume` and where they came from (provenance's
    `resumed_from`), if it ran this very session file, with these plugin files (plugins: the
    files now and --force), on this device; (None, None) after saying why otherwise."""
    rows = _finished_rows(resume, sha, environment, err, plugins)
    if rows is None:
        return None, None
    done, started = rows
    err.print(f"resuming {resume}: {len(done)} finished row(s) kept", markup=False)
    return done, {"path": str(resume), "started": started, "rows_kept": len(done)}


def _finished_rows(resume: str, sha: str, environment: dict, err: Console,
                   plugins: tuple[list[dict], bool]) -> tuple[list[dict], Any] | None:
    from workbench.results.journal import read_partial, unique_rows

    try:
        partial = read_partial(resume)
    except (OSError, ValueError) as exc:
        err.print(f"error: --resume {resume}: {exc}", markup=False)
        return None
    provenance = partial.get("provenance") or {}
    theirs = provenance.get("session_sha256")
    if theirs != sha:
        argv = provenance.get("argv") or []
        ran = f" ({' '.join(map(str, argv))})" if argv else ""
        err.print(f"error: --resume {resume}: it ran session {provenance.get('session')!r}{ran} from a file with "
                  f"sha256 {str(theirs)[:12]}…, this one is {sha[:12]}… (any change counts, a comment too); resume "
                  f"with that file as it was, or run this one afresh without --resume (--force does not apply: the "
                  f"kept rows would belong to another session)", markup=False)
        return None
    if refuse_changed(f"--resume {resume}: the stopped run", partial, plugins[0], plugins[1], err):
        return None
    there, here = (partial.get("environment") or {}).get("device"), environment.get("device")
    if there != here:
        err.print(f"error: --resume {resume}: it ran on {there!r}, this replay would run on {here!r}; "
                  "rows from different devices are not mixed", markup=False)
        return None
    done, dropped = unique_rows(partial.get("results") or ())
    if dropped:  # repeats are left out and said, never counted as kept rows
        err.print(f"note: --resume {resume}: {dropped} journal line(s) left out (a repeat of a row already kept, "
                  "the last one wins, or not a result row)", markup=False)
    return done, (partial.get("provenance") or {}).get("started")


def _same_gpu(compare: str, baseline: dict, environment: dict, err: Console) -> bool:
    """Different GPUs are never compared: say so before the run, not after."""
    here, there = environment.get("device"), (baseline.get("environment") or {}).get("device")
    if there and here != there:
        err.print(f"error: --compare {compare}: the baseline ran on {there!r}, this replay would run on "
                  f"{here!r}; results from different GPUs are not compared", markup=False)
        return False
    return True


def _exit_code(doc: dict[str, Any]) -> int:
    """1 when a row or an A/B entry failed (an A/B whose side could not be built or checked
    included), else 0."""
    failed = [r for r in [*(doc.get("results") or []), *(doc.get("ab") or [])] if r.get("status") == "failed"]
    return EXIT_FAILED if failed else EXIT_OK


def _read_baseline(path: str, err: Console) -> dict[str, Any] | None:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, ValueError) as exc:
        err.print(f"error: --compare {path}: cannot read it: {exc}", markup=False)
        return None
    from workbench.results.journal import document_from_text

    try:
        doc = document_from_text(text, path)
    except ValueError as exc:  # a session file, a CSV or a table: "Expecting value: line 1 column 1" alone
        suffix = Path(path).suffix.lower()
        what = (f"a {suffix} file is not JSON" if suffix not in ("", ".json", ".jsonl")
                else "its text is not valid JSON or JSON Lines")
        err.print(f"error: --compare {path}: not a JSON results document (the baseline is what --replay -o "
                  f"PATH.json or PATH.jsonl wrote; {what}: {exc})", markup=False)
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), list):
        err.print(f"error: --compare {path}: not a results document (no `results` list)", markup=False)
        return None
    problem = document_type_error(doc)
    if problem is not None:
        err.print(f"error: --compare {path}: {problem}", markup=False)
        return None
    return doc


def _compare(doc: dict[str, Any], baseline: dict[str, Any], args, err: Console, code: int) -> int:
    from workbench.results.baseline import compare_documents, comparison_table

    comparison = compare_documents(doc, baseline, args.threshold)
    doc["comparison"] = comparison.as_dict(args.compare)
    if comparison.different_gpu:
        err.print(f"warning: the baseline ran on {comparison.baseline_device!r}, this run on "
                  f"{comparison.device!r}; results from different GPUs are not compared", markup=False)
        return code if code > EXIT_SIGNAL_BASE else EXIT_USAGE  # a signal's 128 + N stays
    if comparison.rows and not any(r.verdict not in ("new", "missing") for r in comparison.rows):
        # nothing was compared: exit 2, as for a baseline from another GPU (a CI job comparing
        # against the wrong file must not pass with exit 0)
        err.print(f"error: {comparison.summary()}: no row of this run is in the baseline {args.compare} "
                  "(rows match by op, implementation, shape, dtype and sweep value): nothing was compared",
                  markup=False)
        return code if code > EXIT_SIGNAL_BASE else EXIT_USAGE
    err.print(comparison_table(comparison))
    if comparison.regressions and code == EXIT_OK:
        from workbench.cli.common import EXIT_CONTENDED

        # slower only where the CPU was contended (`*`): its own code, so CI can retry, not fail
        return EXIT_CONTENDED if comparison.regressions == comparison.contended_regressions else EXIT_FAILED
    return code
