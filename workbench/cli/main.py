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
import gc
import os
import re
import sys
from pathlib import Path
from typing import Sequence

from rich.console import Console

import workbench
from workbench.cli.common import (EXIT_CODES_TEXT, EXIT_INTERRUPTED, EXIT_USAGE, UNUSABLE_PATH_ERRNOS, Env,
                                  check_output_path, check_path_names, check_trace_dir, unusable_path,
                                  missing_gpu, read_env, run_options)
from workbench.cli.daemon import idle_problem
from workbench.cli.flags import DEFAULT_THRESHOLD, OPTIONS, mode_problem
from workbench.device_list import parse_devices
from workbench.errors import WorkbenchError
from workbench.plugins.sources import plugin_files

DEVICE_RE = re.compile(r"^(auto|cpu|cuda|cuda:\d+)$")
EXTENSION_FORMATS = {".json": "json", ".csv": "csv", ".jsonl": "jsonl"}
TEXT_EXTENSIONS = (".txt", ".log", ".out", ".table")  # the text table, as without an extension


class _Parser(argparse.ArgumentParser):
    """argparse, with a usage error as one line (and where the options are listed), like every
    other error workbench prints: argparse's 8-line usage block came before some of them only."""

    def error(self, message: str):
        self.exit(EXIT_USAGE, f"error: {message} (workbench --help lists the options)\n")


def build_parser() -> argparse.ArgumentParser:
    """The parser, from the table of options (flags.OPTIONS)."""
    parser = _Parser(
        prog="workbench", description="A keyboard-driven terminal workbench for GPU kernel engineering.",
        epilog=f"exit codes: {EXIT_CODES_TEXT}")
    mode = parser.add_mutually_exclusive_group()
    for option in OPTIONS:
        option.add_to(mode if option.mode else parser, version=f"workbench {workbench.__version__}")
    return parser


def _missing_gpu(device: str) -> str | None:
    """Why `--device cuda[:N]` cannot run here, or None (missing_gpu)."""
    problem = missing_gpu(device)
    return f"--device {device}: {problem}" if problem else None




# the options whose value is a path or a session name (-o has its own check: fileio.output_problem)
PATH_OPTIONS = (("replay", "--replay"), ("check", "--check"), ("file", "FILE"), ("compare", "--compare"),
                ("plot", "--plot"), ("resume", "--resume"), ("trace_dir", "--trace-dir"))


def _empty_path(args: argparse.Namespace) -> str | None:
    """The first path option given as '' (or --kernels ''), by its flag; None when there is none."""
    for dest, flag in PATH_OPTIONS:
        if getattr(args, dest, None) == "":
            return flag
    return "--kernels" if any(path == "" for path in getattr(args, "kernels", None) or ()) else None


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """Parse and check combinations; raises SystemExit(2) with a usage message."""
    parser = build_parser()
    args = parser.parse_args(argv)
    empty = _empty_path(args)
    if empty:  # '' reads as "not given" below: --replay '' opened the TUI, FILE '' the default session
        what = "a session file or a shipped session's name, e.g. smoke-quick" if empty in ("--replay", "--check",
                                                                                      "FILE") else "a path"
        parser.error(f"{empty} '': an empty path; give {what}")
    for path in args.kernels or ():  # a command-line error, not "1 problem in the session" later
        try:
            check_path_names([("--kernels", path)])
            plugin_files(Path(path).expanduser())
        except WorkbenchError as exc:
            parser.error(str(exc))
    problem = mode_problem(args)  # an option given in a mode it does not go with (flags.OPTIONS' modes)
    if problem:
        parser.error(problem)
    if args.device is not None and not DEVICE_RE.match(args.device):
        parser.error(f"--device must be auto, cpu, cuda or cuda:N, got {args.device!r}")
    probes = not (args.check or args.list or args.doctor or args.plot or args.schema or args.daemon_list
                  or args.daemon_stop)  # only a run needs the GPU it names
    if args.device is not None and args.device.startswith("cuda") and probes:
        problem = _missing_gpu(args.device)
        if problem:
            parser.error(problem)
    if args.devices is not None:
        try:
            args.devices = parse_devices(args.devices)
        except WorkbenchError as exc:
            parser.error(str(exc))
    if args.trust_plugins and not args.check and not args.file:  # the TUI's own default session is shipped
        parser.error("--trust-plugins goes with --check FILE or FILE (the TUI); the default session is trusted "
                     "without it")
    if args.daemon and args.no_daemon:
        parser.error("--daemon and --no-daemon contradict each other: give one")
    if args.daemon_idle is not None and idle_problem(args.daemon_idle):
        parser.error(f"--daemon-idle {idle_problem(args.daemon_idle)}")
    if args.daemon_idle is not None and args.no_daemon:
        parser.error(f"--daemon-idle {args.daemon_idle:g} times out a daemon: not with --no-daemon")
    if args.threshold is not None and not args.compare:
        parser.error(f"--threshold {args.threshold:g} sets what --compare counts as slower or faster: it goes "
                     "with --replay FILE --compare BASELINE.json")
    if args.watch and (args.compare or args.resume):
        parser.error("--watch re-runs on every save: it cannot be combined with --compare or --resume")
    if args.resume is not None and Path(args.resume).suffix.lower() in (".yaml", ".yml"):
        what = "a folder" if Path(args.resume).expanduser().is_dir() else "a session file"
        parser.error(f"--resume {args.resume}: {what}; --resume takes the results path of a stopped run "
                     "(its -o PATH, e.g. --replay FILE --resume out.json)")
    args.output_option = "-o"  # how a problem with the output path names it
    if args.resume is not None and args.output is None:
        args.output, args.output_option = args.resume, "--resume"
    if args.plot:
        _plot_output(parser, args)
    else:
        _pick_format(parser, args)
    if args.threshold is None:
        args.threshold = DEFAULT_THRESHOLD
    return args


PLOT_EXTENSIONS = (".svg", ".png", ".pdf")


def _plot_output(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """--plot writes a figure: -o FIG.svg|png|pdf is required (the extension picks the format)."""
    suffix = Path(args.output).suffix.lower() if args.output else ""
    if suffix not in PLOT_EXTENSIONS:
        given = f"-o {args.output}" if args.output else "no -o"
        parser.error(f"--plot {args.plot} draws a figure into -o FIG with extension {', '.join(PLOT_EXTENSIONS)}; "
                     f"got {given}")


def _pick_format(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """--format, else the -o extension (.json, .csv, .jsonl), else table; refuse what the mode
    cannot write."""
    given = args.format is not None
    suffix = Path(args.output).suffix.lower() if args.output else ""
    if args.schema:  # a JSON Schema is JSON whatever was asked: csv or a .yaml path got JSON without a word
        if given and args.format not in ("json", "table"):
            parser.error(f"--schema writes a JSON Schema (JSON), not {args.format}; leave --format out or give json")
        if suffix and suffix not in (".json", *TEXT_EXTENSIONS):
            parser.error(f"-o {args.output}: --schema writes a JSON Schema (JSON); end the path in .json")
    if not given:
        if suffix and suffix not in (*EXTENSION_FORMATS, *TEXT_EXTENSIONS):
            # refused: -o results.xlsx would get the text table without a word, and -o other.yaml a
            # table in what reads as a session file
            what = "a session file's extension: results are not a session" if suffix in (".yaml", ".yml") else \
                f"no format is known for {suffix!r}"
            parser.error(f"-o {args.output}: {what}; give --format table|json|csv|jsonl, "
                         f"or end the path in {', '.join([*EXTENSION_FORMATS, *TEXT_EXTENSIONS])}")
        args.format = EXTENSION_FORMATS.get(suffix, "table")
    why = "" if given else f" (from the extension of -o {args.output})"
    if args.doctor and args.format == "csv":
        parser.error(f"--doctor writes table or json, not csv{why}")
    if args.check and args.format == "csv":  # refused, not answered with a text line as if csv were fine
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
    except OSError as exc:  # a path no check above foresaw that can name no file: one line, not a traceback
        if exc.errno not in UNUSABLE_PATH_ERRNOS or not exc.filename:
            raise
        err.print(f"error: {unusable_path('path', os.fsdecode(exc.filename), exc)}", markup=False)
        return EXIT_USAGE


def _dispatch(args: argparse.Namespace, argv: list[str], env: Env, err: Console) -> int:
    check_path_names([("--replay", args.replay), ("--check", args.check), ("FILE", args.file),
                      ("--compare", args.compare), ("--plot", args.plot), ("--resume", args.resume),
                      ("-o", args.output), ("--trace-dir", args.trace_dir),
                      *(("--kernels", path) for path in args.kernels)])
    if args.output is not None:
        inputs = (args.replay, args.check, args.file, args.compare, args.plot, *args.kernels)  # not --resume: -o completes it
        check_output_path(args.output, inputs, getattr(args, "output_option", "-o"),
                          example="figure.svg" if args.plot else "schema.json" if args.schema else "results.json")
    if args.trace_dir is not None:
        check_trace_dir(args.trace_dir)
    if args.schema:
        from workbench.schemas import dumps

        from workbench.cli.common import write_output

        write_output(dumps(args.schema), args, env)  # stdout, or -o PATH
        if args.output is not None:
            err.print(f"schema written to {args.output}", markup=False)  # as the other modes say
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
    without FILE the app itself picks `default` or `default-cpu` once it has probed the GPU.
    Python's cyclic collector is off from here: the imports and the app's start-up otherwise met
    ~140 young and 2 full collections before the first frame (~0.1-0.15 s of ~1 s on the 2-core
    CPU box); the app collects between frames (screens/heap.py) and turns it back on at its end."""
    gc.disable()
    try:
        return _run_tui(args, env, err)
    finally:
        gc.enable()


def _run_tui(args: argparse.Namespace, env: Env, err: Console) -> int:
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
    one on a CPU box runs 16384^2 rows for minutes)."""
    from workbench.machine import probe
    from workbench.session.paths import default_session_name

    return default_session_name(probe().has_cuda)


def terminal_problem() -> str | None:
    """Why the TUI cannot draw here, or None: its input and output must be a terminal. With its
    output piped (`workbench | tee log`) it would draw into the pipe, outlive the terminal it was
    started from at full CPU, and grow (6.4 GB in ten minutes, measured)."""
    for fd, name in ((0, "its input"), (1, "its output")):
        try:
            if not os.isatty(fd):
                return f"{name} is not one (piped or redirected)"
        except OSError:
            return f"{name} is closed"
    return None


def tui_session_path(arg: str, data_dir: Path | None = None) -> Path:
    """FILE for the TUI: an existing path, a shipped session's name (its saved copy first), or a
    new session's path never saved whose autosave the TUI restores; through the torch-free
    `workbench.session.paths`."""
    from workbench.session.paths import resolve_session_path

    return resolve_session_path(arg, data_dir, unsaved=True)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
