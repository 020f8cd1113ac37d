"""The warm daemon from the command line (docs/engine.md, "Warm daemon"; CONTRACTS.md).

    workbench --replay FILE [--daemon-idle SECONDS]   (the default: a warm daemon)
    workbench --replay FILE --no-daemon               (or WORKBENCH_DAEMON=0: in this process)
    workbench --daemon-list [--format json]
    workbench --daemon-stop [--format json]

`run_engine` is the replay's one engine call: run_plan in this process, or the same run in a
compatible warm daemon (started when there is none). A busy daemon (one run at a time), one
that refuses (another fingerprint), one that cannot start, or a daemon folder that is not
safe: one line on stderr and the run happens here. `--strict` runs in this process unless
`--daemon` is given too. Environment: WORKBENCH_DAEMON=0 (as --no-daemon) or 1 (as --daemon),
WORKBENCH_DAEMON_DIR (the daemon folder), WORKBENCH_DAEMON_IDLE_S (as --daemon-idle).
"""

from __future__ import annotations

import argparse
import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from rich.console import Console

from workbench.cli.common import EXIT_OK, Env, write_output
from workbench.errors import WorkbenchError

DEFAULT_IDLE_S = 600.0


OFF_VALUES = ("0", "off", "no", "false")
ON_VALUES = ("1", "on", "yes", "true")


@dataclass(frozen=True)
class DaemonChoice:
    """Whether a replay uses the daemon, how long a started one lives, and why not (`why_not`:
    "--no-daemon", "WORKBENCH_DAEMON=0", "--strict"). environ: what the fingerprint is taken
    from and the daemon is started with (the CLI's environment). The folder is chosen only when
    the daemon is used (`folder()`), so an unsafe runtime folder never touches a --no-daemon run."""

    use: bool
    idle_timeout_s: float
    environ: Mapping[str, str]
    why_not: str = ""
    idle_asked: bool = False  # the timeout came from --daemon-idle or WORKBENCH_DAEMON_IDLE_S

    def folder(self) -> Path:
        """WORKBENCH_DAEMON_DIR or the user runtime folder (engine/daemon_paths.default_folder);
        raises DaemonError when it cannot be named."""
        from workbench.engine.daemon.paths import DaemonError, default_folder

        try:
            return default_folder(self.environ)
        except Exception as exc:  # platformdirs on a strange box: the run goes on in process
            raise DaemonError(f"no daemon folder ({type(exc).__name__}: {exc})") from None


def daemon_choice(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> DaemonChoice:
    """The daemon by default; --no-daemon or WORKBENCH_DAEMON=0 turn it off, --strict too unless
    --daemon (or WORKBENCH_DAEMON=1) asks for it; the idle timeout (--daemon-idle, else
    WORKBENCH_DAEMON_IDLE_S, else 600 s). Raises WorkbenchError for a WORKBENCH_DAEMON that is
    not one of the values above, or a timeout that is not a positive number of seconds."""
    environ = dict(os.environ if environ is None else environ)
    flag = environ.get("WORKBENCH_DAEMON", "").strip().lower()
    if flag and flag not in OFF_VALUES + ON_VALUES:
        raise WorkbenchError(f"WORKBENCH_DAEMON={environ['WORKBENCH_DAEMON']!r}: give 0 (no daemon) or 1 (the "
                             "warm daemon, the default)")
    asked = bool(getattr(args, "daemon", False)) or flag in ON_VALUES
    why_not = ("--no-daemon" if getattr(args, "no_daemon", False) else
               f"WORKBENCH_DAEMON={environ['WORKBENCH_DAEMON']}" if flag in OFF_VALUES and not asked else
               "--strict" if getattr(args, "strict", False) and not asked else "")
    idle = getattr(args, "daemon_idle", None)
    idle_asked = idle is not None or bool(environ.get("WORKBENCH_DAEMON_IDLE_S"))
    if idle is None:
        text = environ.get("WORKBENCH_DAEMON_IDLE_S") or str(DEFAULT_IDLE_S)
        try:
            idle = float(text)
        except ValueError:
            raise WorkbenchError(f"WORKBENCH_DAEMON_IDLE_S={text!r}: give seconds, e.g. 600") from None
    problem = idle_problem(idle)
    if problem:
        raise WorkbenchError(f"the daemon's idle timeout {problem}")
    return DaemonChoice(not why_not, idle, environ, why_not, idle_asked)


def idle_problem(seconds: float) -> str | None:
    """Why `seconds` is no idle timeout (nan, <= 0, or inf: a daemon that never leaves), or None."""
    return None if 0 < seconds < float("inf") else f"must be a finite number of seconds > 0, got {seconds:g}"


def start_early(choice: DaemonChoice | None) -> Any:
    """The daemon started now when it will be used and none runs (engine/daemon/client.start_early),
    for `run_engine(early=...)`; None otherwise, and when it cannot be started here (run_engine
    then tries as before and says why)."""
    if choice is None or not choice.use:
        return None
    from workbench.engine.daemon.client import start_early as start
    from workbench.engine.daemon.paths import DaemonError

    try:
        return start(choice.folder(), choice.environ, choice.idle_timeout_s)
    except (DaemonError, OSError):
        return None


def run_engine(session: Any, *, on_event: Callable[[Any], None], stop: threading.Event, options: Any,
               choice: DaemonChoice | None, err: Console, early: Any = None) -> dict:
    """The results document of `session` (engine/plan.run_plan's contract), from a warm daemon
    when `choice.use`, else (or when the daemon is busy, refuses, cannot start or its folder is
    not safe: one line) from here."""
    if choice is not None and choice.use:
        from workbench.engine.daemon.client import run_in_daemon
        from workbench.engine.daemon.paths import DaemonError

        def note(line: str) -> None:
            err.print(line, markup=False, highlight=False)

        try:
            doc = run_in_daemon(session, options, on_event=on_event, stop=stop, folder=choice.folder(),
                                environ=choice.environ, idle_timeout_s=choice.idle_timeout_s, note=note,
                                early=early)
        except DaemonError as exc:
            note(f"workbench daemon: {exc}: running in this process")
            doc = None
        if doc is not None:
            _note_kept_idle(doc, choice, note)
            return doc
    from workbench.engine.plan import run_plan

    return run_plan(session, on_event=on_event, stop=stop, options=options)


def _note_kept_idle(doc: dict, choice: DaemonChoice, note: Callable[[str], None]) -> None:
    """One line when the user asked for an idle timeout and the daemon that ran the session (one
    already running) keeps another: the timeout is a daemon's from its start."""
    daemon = (doc.get("provenance") or {}).get("daemon") or {}
    kept = daemon.get("idle_timeout_s")
    if choice.idle_asked and isinstance(kept, (int, float)) and float(kept) != choice.idle_timeout_s:
        note(f"workbench daemon {daemon.get('pid')} keeps its idle timeout of {kept:g} s (asked: "
             f"{choice.idle_timeout_s:g} s): the timeout is set when a daemon starts; --daemon-stop, then run "
             "again to start one with it")


def run_daemon_list(args: argparse.Namespace, env: Env) -> int:
    """The engine daemons, then the warm TUI processes (kind "tui"), of the daemon folder."""
    from workbench.engine.daemon.client import list_daemons
    from workbench.tui_client import list_servers

    folder = daemon_choice(args).folder()
    daemons = list_daemons(folder)  # checks the folder first (DaemonError: nothing read)
    return _report(daemons + (list_servers(folder) if folder.is_dir() else []), args, env, "running")


def run_daemon_stop(args: argparse.Namespace, env: Env) -> int:
    """Stop the engine daemons and the warm TUI processes of the daemon folder (a TUI already
    started from one runs on)."""
    from workbench.engine.daemon.client import stop_daemons
    from workbench.tui_client import stop_servers

    folder = daemon_choice(args).folder()
    daemons = stop_daemons(folder)
    return _report(daemons + (stop_servers(folder) if folder.is_dir() else []), args, env, "stopped")


def _report(daemons: list[dict], args: argparse.Namespace, env: Env, verb: str) -> int:
    if args.format == "json":
        write_output(json.dumps(daemons, indent=2) + "\n", args, env)
        return EXIT_OK
    if args.format not in ("table", None):
        raise WorkbenchError(f"--daemon-list and --daemon-stop write table or json, not {args.format}")
    lines = [f"{len(daemons)} workbench daemon(s) {verb}"]
    lines += [_line(d) for d in daemons]
    write_output("\n".join(lines) + "\n", args, env)
    return EXIT_OK


def _line(d: dict) -> str:
    """pid, state, started, idle seconds, runs served, warm workers (device/role), fingerprint;
    under it the folder of the workbench it runs and its Python (two checkouts' daemons). A warm
    TUI process (kind "tui"): pid, started, idle timeout, key, Python."""
    if d.get("kind") == "tui":
        return (f"  pid {d.get('pid')}  warm TUI process  started {d.get('started')}  idle timeout {d.get('idle_timeout_s')} s  "
                f"key {d.get('key')}\n    {d.get('python')}")
    workers = ", ".join(f"{w['device']}{'/interpreted' if w.get('interpret') else ''}"
                        f"{'' if w.get('role') == 'run' else '/' + str(w.get('role'))}{' spare' if w.get('spare') else ''}"
                        for w in d.get("workers") or []) or "none"
    idle = d.get("idle_s")
    return (f"  pid {d.get('pid')}  {d.get('state', 'stopped')}  started {d.get('started')}  "
            f"idle {'-' if idle is None else f'{idle:g} s'} of {d.get('idle_timeout_s')} s  runs {d.get('runs', '-')}  "
            f"workers: {workers}  fingerprint {d.get('fingerprint')}"
            + (f"\n    {d['package']} ({d.get('python')})" if d.get("package") else ""))

