"""The `workbench` command (CONTRACTS.md, "Command line").

    workbench [FILE]              the TUI (default: the shipped default session)
    workbench --replay FILE       run a session headless; results to stdout or -o PATH
    workbench [--replay] FILE --watch   re-run what each save of the session or a plugin changed
    workbench --check FILE        validate a session only: every problem, exit 0 or 2
    workbench --list              ops and implementations, with availability and the reason
    workbench --doctor            GPU, versions, ceilings cache, colour system, paths
    workbench --replay FILE --no-daemon the same run in this process (the default: a warm daemon)
    workbench --daemon-list | --daemon-stop   this user's warm daemons

Data goes to stdout (or -o: a file written atomically, a device node or FIFO written through),
diagnostics to stderr. Exit codes: common.EXIT_CODES_TEXT (0, 1, 2, and 128 + N for a replay
stopped by signal N: 130 SIGINT, 143 SIGTERM, 129 SIGHUP). The CLI (`common.read_env`) is the
only place that reads environment variables (NO_COLOR) and the platform's user directories;
everything below gets them as arguments.

The package's modules form a tree: main -> check, replay, watch, doctor, daemon -> plugin_check, progress, ...
-> common (nothing imports back).
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
from pathlib import Path
from typing import Sequence

from rich.console import Console

import workbench
from workbench.cli.common import (EXIT_CODES_TEXT, EXIT_INTERRUPTED, EXIT_USAGE, Env, check_output_path, check_trace_dir,
                                  missing_gpu, read_env, run_options)
from workbench.device_list import parse_devices
from workbench.errors import WorkbenchError

DEVICE_RE = re.compile(r"^(auto|cpu|cuda|cuda:\d+)$")
DEFAULT_THRESHOLD = 0.05  # --compare: a median change this large (and outside the spreads) is a verdict
FORMATS = ("table", "json", "csv", "jsonl")
EXTENSION_FORMATS = {".json": "json", ".csv": "csv", ".jsonl": "jsonl"}
TEXT_EXTENSIONS = (".txt", ".log", ".out", ".table")  # the text table, as without an extension


class _Parser(argparse.ArgumentParser):
    """argparse, with a usage error as one line (and where the options are listed), like every
    other error workbench prints: argparse's 8-line usage block came before some of them only."""

    def error(self, message: str):
        self.exit(EXIT_USAGE, f"error: {message} (workbench --help lists the options)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="workbench", description="A keyboard-driven terminal workbench for GPU kernel engineering.",
        epilog=f"exit codes: {EXIT_CODES_TEXT}")
    parser.add_argument("file", nargs="?", metavar="FILE",
                        help="session to open in the TUI (a path or a shipped session name)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--replay", metavar="FILE", help="run a session headless")
    mode.add_argument("--check", metavar="FILE", help="validate a session only")
    mode.add_argument("--list", action="store_true", help="ops and implementations, with availability")
    mode.add_argument("--doctor", action="store_true", help="GPU, versions, ceilings cache, colours, paths")
    mode.add_argument("--schema", choices=("session", "results"), default=None,
                      help="print the JSON Schema of a session file or a results document (docs/schemas/)")
    mode.add_argument("--plot", metavar="RESULTS.json",
                      help="draw a results document's figures into -o FIG.svg|png (pip install 'kernel-workbench[plot]')")
    mode.add_argument("--daemon-list", action="store_true",
                      help="this user's warm daemons: pid, started, idle s, runs served, warm workers, fingerprint")
    mode.add_argument("--daemon-stop", action="store_true",
                      help="stop this user's warm daemons (their workers and zygotes with them)")
    parser.add_argument("--format", choices=FORMATS, default=None,
                        help="output format (default: from the -o extension .json/.csv/.jsonl, else table); "
                             "jsonl streams replay rows as they finish")
    parser.add_argument("-o", "--output", metavar="PATH",
                        help="write the data here instead of stdout (a file atomically, with a journal of "
                             "finished rows beside it during a replay; a device node or FIFO written through)")
    parser.add_argument("--resume", metavar="PATH",
                        help="with --replay: keep the finished rows of the stopped run written to PATH (or "
                             "its journal) and run only the missing ones; writes PATH unless -o is given")
    parser.add_argument("--device", default=None, help="auto | cpu | cuda | cuda:N (overrides the session)")
    parser.add_argument("--devices", default=None, metavar="all|cpu|cuda:N,...",
                        help="one warm worker per device, the sweep's points spread over them, one merged "
                             "document (overrides settings.devices)")
    parser.add_argument("--cluster", choices=("ray",), default=None,
                        help="run the rows as Ray actors (pip install 'kernel-workbench[ray]'): joins RAY_ADDRESS, "
                             "else starts a local cluster")
    parser.add_argument("--trace-dir", metavar="DIR", default=None,
                        help="keep each profiled row's Kineto trace in DIR as <session>-run<i>-<label>.pt.trace.json "
                             "(open in ui.perfetto.dev); its path is the record's profile.trace_path")
    parser.add_argument("--kernels", action="append", default=[], metavar="PATH",
                        help="a file or folder of user ops (repeatable)")
    parser.add_argument("--compare", metavar="BASELINE.json", help="compare a replay with a baseline results file")
    parser.add_argument("--threshold", type=_threshold, default=None,
                        help="with --compare: relative median change that counts as slower/faster (default "
                             f"{DEFAULT_THRESHOLD})")
    parser.add_argument("--force", action="store_true",
                        help="run rows estimated too large; compare with (or resume) results made with other "
                             "plugin files")
    parser.add_argument("--strict", action="store_true",
                        help="one fresh worker process per row (for untrusted plugin code; each row pays a start)")
    parser.add_argument("--daemon", action="store_true",
                        help="with --replay FILE: run in this user's warm background daemon (the default; "
                             "with --strict too when given); busy or unsafe: runs here instead")
    parser.add_argument("--trust-plugins", action="store_true",
                        help="with --check FILE or FILE (the TUI): import the session's plugins: (their code runs "
                             "as you) without asking; sessions of the shipped folder are trusted without it")
    parser.add_argument("--no-daemon", action="store_true",
                        help="with --replay FILE: run in this process, no warm daemon (also WORKBENCH_DAEMON=0)")
    parser.add_argument("--daemon-idle", type=float, default=None, metavar="SECONDS",
                        help="a daemon started now exits after this long without a run (default 600; "
                             "also WORKBENCH_DAEMON_IDLE_S)")
    parser.add_argument("--watch", action="store_true",
                        help="with FILE (the TUI) or --replay FILE: on each save of the session or a plugin file, "
                             "re-run the rows it changed and show them against their last result")
    parser.add_argument("-v", "--verbose", action="store_true", help="also print the children's info log lines")
    parser.add_argument("--version", action="version", version=f"workbench {workbench.__version__}")
    return parser


def _missing_gpu(device: str) -> str | None:
    """Why `--device cuda[:N]` cannot run here, or None (missing_gpu)."""
    problem = missing_gpu(device)
    return f"--device {device}: {problem}" if problem else None




def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """Parse and check combinations; raises SystemExit(2) with a usage message."""
    parser = build_parser()
    args = parser.parse_args(argv)
    modes = [m for m in ("replay", "check") if getattr(args, m)] + [m for m in ("list", "doctor") if getattr(args, m)]
    modes += [m.replace("_", "-") for m in ("daemon_list", "daemon_stop", "schema", "plot") if getattr(args, m)]
    if args.file and modes:
        parser.error(f"FILE {args.file!r} opens the TUI; it cannot be combined with --{modes[0]}")
    if args.device is not None and not DEVICE_RE.match(args.device):
        parser.error(f"--device must be auto, cpu, cuda or cuda:N, got {args.device!r}")
    if args.device is not None and args.device.startswith("cuda") and not (args.check or args.list or args.doctor):
        problem = _missing_gpu(args.device)
        if problem:
            parser.error(problem)
    if args.devices is not None:
        try:
            args.devices = parse_devices(args.devices)
        except WorkbenchError as exc:
            parser.error(str(exc))
    if (args.devices or args.cluster) and (args.check or args.list or args.doctor):
        parser.error("--devices and --cluster go with --replay FILE or the TUI")
    if (args.compare or args.force or args.resume) and not args.replay:
        parser.error("--compare, --force and --resume go with --replay FILE")
    if args.trust_plugins and not (args.check or (args.file and not modes)):
        parser.error("--trust-plugins goes with --check FILE or FILE (the TUI); --replay runs the session's plugins "
                     "anyway")
    if args.trace_dir is not None and modes and not args.replay:
        parser.error(f"--trace-dir {args.trace_dir} goes with --replay FILE or the TUI (it keeps the traces of "
                     "profiled rows)")
    if args.strict and (args.check or args.list or args.doctor):
        parser.error("--strict goes with --replay FILE or the TUI")
    if (args.daemon or args.no_daemon or args.daemon_idle is not None) and not args.replay:
        why = (f"not with --{modes[0].replace('_', '-')}" if modes else "the TUI keeps a warm worker for its life")
        parser.error(f"--daemon, --no-daemon and --daemon-idle go with --replay FILE ({why})")
    if args.daemon and args.no_daemon:
        parser.error("--daemon and --no-daemon contradict each other: give one")
    if args.daemon_idle is not None and not args.daemon_idle > 0:
        parser.error(f"--daemon-idle must be > 0 seconds, got {args.daemon_idle:g}")
    if args.daemon_idle is not None and args.no_daemon:
        parser.error(f"--daemon-idle {args.daemon_idle:g} times out a daemon: not with --no-daemon")
    if args.threshold is not None and not args.compare:
        parser.error(f"--threshold {args.threshold:g} sets what --compare counts as slower or faster: it goes "
                     "with --replay FILE --compare BASELINE.json")
    if args.watch and not (args.replay or not modes):
        parser.error(f"--watch goes with FILE (the TUI) or --replay FILE, not with --{modes[0]}")
    if args.watch and (args.compare or args.resume):
        parser.error("--watch re-runs on every save: it cannot be combined with --compare or --resume")
    if args.resume is not None and Path(args.resume).suffix.lower() in (".yaml", ".yml"):
        parser.error(f"--resume {args.resume}: a session file; --resume takes the results path of a stopped run "
                     "(its -o PATH, e.g. --replay FILE --resume out.json)")
    if args.resume is not None and args.output is None:
        args.output = args.resume
    if args.plot:
        _plot_output(parser, args)
    else:
        _pick_format(parser, args)
    if args.threshold is None:
        args.threshold = DEFAULT_THRESHOLD
    return args


def _threshold(text: str) -> float:
    """--threshold's value: a finite relative change >= 0 (nan compared "same" for every row);
    the error names the text as typed (1e999 was echoed as inf). -0 reads 0."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0 (a relative change, 0.05 = 5%), got {text}")
    return value + 0.0


PLOT_EXTENSIONS = (".svg", ".png", ".pdf")


def _plot_output(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """--plot writes a figure: -o FIG.svg|png|pdf is required (the extension picks the format)."""
    suffix = Path(args.output).suffix.lower() if args.output else ""
    if suffix not in PLOT_EXTENSIONS:
        given = f"-o {args.output}" if args.output else "no -o"
        parser.error(f"--plot {args.plot} draws a figure into -o FIG with extension {', '.join(PLOT_EXTENSIONS)}; "
                     f"got {given}")
    if args.format is not None:
        parser.error(f"--format {args.format} is for data; --plot takes the figure's format from -o {args.output}")


def _pick_format(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """--format, else the -o extension (.json, .csv, .jsonl), else table; refuse what the mode
    cannot write."""
    given = args.format is not None
    if not given:
        suffix = Path(args.output).suffix.lower() if args.output else ""
        if suffix and suffix not in (*EXTENSION_FORMATS, *TEXT_EXTENSIONS):
            # -o results.xlsx wrote the text table into it without a word, and -o other.yaml a table
            # into what reads as a session file (new users' tries)
            what = "a session file's extension: results are not a session" if suffix in (".yaml", ".yml") else \
                f"no format is known for {suffix!r}"
            parser.error(f"-o {args.output}: {what}; give --format table|json|csv|jsonl, "
                         f"or end the path in {', '.join([*EXTENSION_FORMATS, *TEXT_EXTENSIONS])}")
        args.format = EXTENSION_FORMATS.get(suffix, "table")
    why = "" if given else f" (from the extension of -o {args.output})"
    if args.doctor and args.format == "csv":
        parser.error(f"--doctor writes table or json, not csv{why}")
    if args.check and args.format == "csv":  # it printed the text line, as if csv were fine (a new user's try)
        parser.error(f"--check writes table or json, not csv{why}")
    if (args.daemon_list or args.daemon_stop) and args.format not in ("table", "json"):
        parser.error(f"--daemon-list and --daemon-stop write table or json, not {args.format}{why}")
    if args.format == "jsonl" and not args.replay:
        parser.error(f"--format jsonl{why} goes with --replay FILE; give --format json")
    if args.watch and args.replay and args.format != "table" and args.output is None:
        parser.error(f"--watch prints each cycle's changes as text; write --format {args.format} with -o PATH "
                     "(rewritten after every cycle)")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (never calls sys.exit itself)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = parse_args(argv)
    except SystemExit as exc:  # argparse: usage error (2) or --help/--version (0)
        return int(exc.code or 0) if not isinstance(exc.code, str) else EXIT_USAGE
    env = read_env()
    err = env.console()
    try:
        return _dispatch(args, argv, env, err)
    except KeyboardInterrupt:
        err.print("interrupted")
        return EXIT_INTERRUPTED
    except WorkbenchError as exc:
        err.print(f"error: {exc}", markup=False)
        return EXIT_USAGE


def _dispatch(args: argparse.Namespace, argv: list[str], env: Env, err: Console) -> int:
    if args.output is not None:
        inputs = (args.replay, args.check, args.file, args.compare, args.plot, *args.kernels)  # not --resume: -o completes it
        check_output_path(args.output, inputs)
    if args.trace_dir is not None:
        check_trace_dir(args.trace_dir)
    if args.schema:
        from workbench.schemas import dumps

        from workbench.cli.common import write_output

        write_output(dumps(args.schema), args, env)  # stdout, or -o PATH
        return 0
    if args.plot:
        from workbench.cli.plot import run_plot

        return run_plot(args, err)
    if args.daemon_list or args.daemon_stop:
        from workbench.cli import daemon

        return daemon.run_daemon_list(args, env) if args.daemon_list else daemon.run_daemon_stop(args, env)
    if args.list or args.doctor:
        from workbench.cli import doctor

        return doctor.run_list(args, env) if args.list else doctor.run_doctor(args, env)
    if args.check:
        from workbench.cli.check import run_check

        return run_check(args, env, err)
    if args.replay and args.watch:
        from workbench.cli.watch import run_watch

        return run_watch(args, ["workbench", *argv], env, err)
    if args.replay:
        from workbench.cli.replay import run_replay

        return run_replay(args, ["workbench", *argv], env, err)
    return run_tui(args, env, err)


# -- the TUI ---------------------------------------------------------------------------------
def run_tui(args: argparse.Namespace, env: Env, err: Console) -> int:
    """The TUI: nothing here imports torch (the first frame must come in well under a second);
    without FILE the app itself picks `default` or `default-cpu` once it has probed the GPU."""
    path = tui_session_path(args.file, env.data_dir) if args.file else None
    try:
        from workbench.screens.app import run as run_app
    except ImportError as exc:  # a build without the TUI, or textual missing
        err.print(f"the TUI cannot start ({exc}); run the session headless instead: "
                  f"workbench --replay {path or _default_session()}", markup=False)
        return EXIT_USAGE
    problem = terminal_problem()
    if problem:
        err.print(f"the TUI needs a terminal: {problem}; run the session headless instead: "
                  f"workbench --replay {path or _default_session()}", markup=False)
        return EXIT_USAGE
    if path is not None and not _plugins_trusted(path, args, err):
        return EXIT_USAGE
    options = run_options(args, env, argv=("workbench", *([args.file] if args.file else [])))
    result = run_app(path, options, watch=args.watch)
    return int(result or 0)


def _plugins_trusted(path: Path, args: argparse.Namespace, err: Console) -> bool:
    """Whether the TUI may import the session's plugins (workbench/plugin_trust.py): shipped,
    --trust-plugins, or the user's yes to one question on the terminal before the TUI starts."""
    from workbench.plugin_trust import untrusted_plugins

    plugins = untrusted_plugins(path, args.trust_plugins)
    if not plugins:
        return True
    question = (f"{path} loads plugins: {', '.join(plugins)}: Python code that opening it imports and runs as "
                "you. Trust this session? [y/N] ")
    try:
        answer = input(question) if sys.stdin.isatty() else ""
    except EOFError:
        answer = ""
    if answer.strip().lower() in ("y", "yes"):
        return True
    err.print(f"{path}: not opened (its plugins were not trusted; --trust-plugins opens it without asking)",
              markup=False)
    return False


def _default_session() -> str:
    """The session the TUI would open here: `default` with a GPU, `default-cpu` without (the GPU
    one on a CPU box ran 16384^2 rows for minutes: a new user's try)."""
    from workbench.machine import probe
    from workbench.session.paths import default_session_name

    return default_session_name(probe().has_cuda)


def terminal_problem() -> str | None:
    """Why the TUI cannot draw here, or None: its input and output must be a terminal. With its
    output piped (`workbench | tee log`) it drew into the pipe, outlived the terminal it was
    started from at full CPU, and grew to 6.4 GB in ten minutes (a new user's try)."""
    for fd, name in ((0, "its input"), (1, "its output")):
        try:
            if not os.isatty(fd):
                return f"{name} is not one (piped or redirected)"
        except OSError:
            return f"{name} is closed"
    return None


def tui_session_path(arg: str, data_dir: Path | None = None) -> Path:
    """FILE for the TUI: an existing path or a shipped session's name (its saved copy first),
    through the torch-free `workbench.session.paths`."""
    from workbench.session.paths import resolve_session_path

    return resolve_session_path(arg, data_dir)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
