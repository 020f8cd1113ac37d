"""The `workbench` command (CONTRACTS.md, "Command line").

    workbench [FILE]              the TUI (default: the shipped default session)
    workbench --replay FILE       run a session headless; results to stdout or -o PATH
    workbench --check FILE        validate a session only: every problem, exit 0 or 2
    workbench --list              ops and implementations, with availability and the reason
    workbench --doctor            GPU, versions, ceilings cache, colour system, paths

Data goes to stdout (or -o, written atomically), diagnostics to stderr. Exit codes: 0 every row
ran; 1 a row failed or a regression was found; 2 bad session, bad usage or results compared
across GPUs; 130 interrupted. This module is the only place that reads environment variables
(NO_COLOR) and the platform's user directories; everything below gets them as arguments.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from rich.console import Console

import workbench
from workbench.errors import WorkbenchError

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
DEVICE_RE = re.compile(r"^(auto|cpu|cuda|cuda:\d+)$")
APP_NAME = "workbench"


@dataclass(frozen=True)
class Env:
    """What the CLI read from the environment and the platform, handed down explicitly.

    no_color: NO_COLOR is set (no-color.org); stdout_tty / stderr_tty: terminals;
    config_dir, data_dir, cache_dir: platformdirs' user directories for this app.
    """

    no_color: bool
    stdout_tty: bool
    stderr_tty: bool
    config_dir: Path
    data_dir: Path
    cache_dir: Path

    def console(self, *, stderr: bool = True) -> Console:
        """A rich console on stderr (diagnostics) or stdout (data), honouring NO_COLOR; 200
        columns when it is not a terminal (a log file or CI), so tables are not cut to 80."""
        tty = self.stderr_tty if stderr else self.stdout_tty
        return Console(stderr=stderr, no_color=self.no_color, highlight=False, soft_wrap=True,
                       color_system=None if self.no_color else "auto", width=None if tty else 200)


def read_env() -> Env:
    import platformdirs

    return Env(
        no_color=bool(os.environ.get("NO_COLOR")),
        stdout_tty=sys.stdout.isatty(),
        stderr_tty=sys.stderr.isatty(),
        config_dir=Path(platformdirs.user_config_dir(APP_NAME, appauthor=False)),
        data_dir=Path(platformdirs.user_data_dir(APP_NAME, appauthor=False)),
        cache_dir=Path(platformdirs.user_cache_dir(APP_NAME, appauthor=False)),
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="workbench", description="A keyboard-driven terminal workbench for GPU kernel engineering.",
        epilog="exit codes: 0 every row ran; 1 a row failed or a regression; 2 bad session, bad usage "
               "or results from different GPUs; 130 interrupted")
    parser.add_argument("file", nargs="?", metavar="FILE",
                        help="session to open in the TUI (a path or a shipped session name)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--replay", metavar="FILE", help="run a session headless")
    mode.add_argument("--check", metavar="FILE", help="validate a session only")
    mode.add_argument("--list", action="store_true", help="ops and implementations, with availability")
    mode.add_argument("--doctor", action="store_true", help="GPU, versions, ceilings cache, colours, paths")
    parser.add_argument("--format", choices=("table", "json", "csv"), default="table", help="output format")
    parser.add_argument("-o", "--output", metavar="PATH", help="write the data here (atomically) instead of stdout")
    parser.add_argument("--device", default=None, help="auto | cpu | cuda | cuda:N (overrides the session)")
    parser.add_argument("--kernels", action="append", default=[], metavar="PATH",
                        help="a file or folder of user ops (repeatable)")
    parser.add_argument("--compare", metavar="BASELINE.json", help="compare a replay with a baseline results file")
    parser.add_argument("--threshold", type=float, default=0.05,
                        help="relative median change that counts as slower/faster (default 0.05)")
    parser.add_argument("--force", action="store_true", help="run rows estimated too large")
    parser.add_argument("-v", "--verbose", action="store_true", help="also print the children's info log lines")
    parser.add_argument("--version", action="version", version=f"workbench {workbench.__version__}")
    return parser


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """Parse and check combinations; raises SystemExit(2) with a usage message."""
    parser = build_parser()
    args = parser.parse_args(argv)
    modes = [m for m in ("replay", "check") if getattr(args, m)] + [m for m in ("list", "doctor") if getattr(args, m)]
    if args.file and modes:
        parser.error(f"FILE {args.file!r} opens the TUI; it cannot be combined with --{modes[0]}")
    if args.device is not None and not DEVICE_RE.match(args.device):
        parser.error(f"--device must be auto, cpu, cuda or cuda:N, got {args.device!r}")
    if (args.compare or args.force) and not args.replay:
        parser.error("--compare and --force go with --replay FILE")
    if args.threshold < 0:
        parser.error(f"--threshold must be >= 0, got {args.threshold}")
    if args.doctor and args.format == "csv":
        parser.error("--doctor writes table or json")
    return args


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


def check_output_path(path: str) -> None:
    """Refuse an -o PATH that cannot be written, before any work; raises WorkbenchError.

    Missing folders are fine (they are created when the data is written), but the nearest
    existing one must be a writable folder."""
    target = Path(path).absolute()
    if target.is_dir():
        raise WorkbenchError(f"-o {path}: is a folder; give a file path (e.g. {Path(path) / 'results.json'})")
    existing = target.parent
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise WorkbenchError(f"-o {path}: {existing} is a file, not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise WorkbenchError(f"-o {path}: folder {existing} is not writable")


def _dispatch(args: argparse.Namespace, argv: list[str], env: Env, err: Console) -> int:
    if getattr(args, "output", None):
        check_output_path(args.output)
    if args.list or args.doctor:
        from workbench import doctor

        return doctor.run_list(args, env) if args.list else doctor.run_doctor(args, env)
    if args.check:
        return run_check(args, env, err)
    if args.replay:
        from workbench.replay import run_replay

        return run_replay(args, ["workbench", *argv], env, err)
    return run_tui(args, env, err)


def write_output(text: str, args: argparse.Namespace, env: Env) -> None:
    """Data to -o (atomically) or stdout."""
    if not args.output:
        _write_stdout(text)
        return
    from workbench.fileio import atomic_write_text

    try:
        atomic_write_text(args.output, text)
    except OSError as exc:  # checked before the run, but the disk can still fill up: keep the data
        _write_stdout(text)
        raise WorkbenchError(f"-o {args.output}: not written ({exc}); the data went to stdout instead") from None


def _write_stdout(text: str) -> None:
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:  # `workbench --list | head`: the reader left; not an error
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


def output_style(env: Env, args: argparse.Namespace) -> tuple[int, bool]:
    """(width, colour) for a table on stdout: the terminal's width and colour unless NO_COLOR,
    200 columns and plain text for -o, pipes and files."""
    import shutil

    if env.stdout_tty and not args.output:
        return shutil.get_terminal_size().columns, not env.no_color
    return 200, False


def print_problems(exc: Exception, err: Console) -> None:
    err.print(str(exc), markup=False, highlight=False)


# -- --check ---------------------------------------------------------------------------------
def run_check(args: argparse.Namespace, env: Env, err: Console) -> int:
    import json

    from workbench.session import SessionError, load_session, resolve_session_path

    path = resolve_session_path(args.check)
    try:
        session = load_session(path, kernels=args.kernels)
    except SessionError as exc:
        if args.format == "json":
            write_output(json.dumps({"ok": False, "session": str(path),
                                     "problems": [p.as_dict() for p in exc.problems]}, indent=2) + "\n", args, env)
        print_problems(exc, err)
        return EXIT_USAGE
    rows = count_rows(session)
    if args.format == "json":
        write_output(json.dumps({"ok": True, "session": str(path), "name": session.name,
                                 "runs": len(session.runs), "rows": rows, "problems": []}, indent=2) + "\n", args, env)
    else:
        write_output(f"ok: {path}: session {session.name!r}, {len(session.runs)} run(s), {rows} row(s)\n", args, env)
    return EXIT_OK


def count_rows(session) -> int:
    """Rows the session asks for: implementations x sweep points, over its runs."""
    from workbench.registry import REGISTRY

    total = 0
    for run in session.runs:
        impls = len(run.impls) if run.impls is not None else len(REGISTRY.op(run.op).impls)
        total += impls * (len(run.sweep.values) if run.sweep else 1)
    return total


# -- the TUI ---------------------------------------------------------------------------------
def run_tui(args: argparse.Namespace, env: Env, err: Console) -> int:
    """The TUI: nothing here imports torch (the first frame must come in well under a second);
    without FILE the app itself picks `default` or `default-cpu` once it has probed the GPU."""
    path = tui_session_path(args.file) if args.file else None
    try:
        from workbench.screens.app import run as run_app
        from workbench.screens.options import AppOptions
    except ImportError as exc:  # a build without the TUI, or textual missing
        where = path or "default-cpu"
        err.print(f"the TUI cannot start ({exc}); run the session headless instead: "
                  f"workbench --replay {where}", markup=False)
        return EXIT_USAGE
    kernels = tuple(str(Path(k).expanduser().resolve()) for k in args.kernels)
    options = AppOptions(device=args.device, kernels=kernels,
                         argv=("workbench", *([args.file] if args.file else [])),
                         cache_dir=env.cache_dir, build_dir=env.cache_dir / "build")
    result = run_app(path, options)
    return int(result or 0)


def tui_session_path(arg: str) -> Path:
    """FILE for the TUI: an existing path or a shipped session's name (like
    `workbench.session.resolve_session_path`, without importing the registry and torch)."""
    import importlib.resources

    path = Path(arg).expanduser()
    if path.exists():
        return path
    shipped = Path(str(importlib.resources.files("workbench.sessions")))
    names = sorted(p.stem for p in shipped.glob("*.yaml"))
    name = path.name[:-5] if path.name.endswith(".yaml") else path.name
    if str(arg) in (name, f"{name}.yaml") and name in names:
        return shipped / f"{name}.yaml"
    raise WorkbenchError(f"{arg}: no such session file; shipped sessions: {', '.join(names)}")


def run_options(args: argparse.Namespace, env: Env, *, argv: Sequence[str], session_sha256: str | None = None):
    """The engine's RunOptions from the command line (imported lazily: torch)."""
    from workbench.engine.plan import RunOptions

    kernels = tuple(str(Path(k).expanduser().resolve()) for k in args.kernels)  # children may start elsewhere
    return RunOptions(device=args.device, kernels=kernels, force=bool(getattr(args, "force", False)),
                      argv=tuple(argv), session_sha256=session_sha256, cache_dir=env.cache_dir,
                      build_dir=env.cache_dir / "build")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
