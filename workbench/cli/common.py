"""What every command of the CLI shares: exit codes, the environment it read (`Env`), where data
goes (`write_output`, `output_style`), and the engine's options from the command line.

Nothing here imports another module of `workbench.cli` (they import this one: a tree).
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from rich.console import Console

from workbench.errors import WorkbenchError

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
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


def run_options(args: argparse.Namespace, env: Env, *, argv: Sequence[str], session_sha256: str | None = None):
    """The engine's RunOptions from the command line (imported lazily: torch)."""
    from workbench.engine.plan import RunOptions

    kernels = tuple(str(Path(k).expanduser().resolve()) for k in args.kernels)  # children may start elsewhere
    return RunOptions(device=args.device, kernels=kernels, force=bool(getattr(args, "force", False)),
                      argv=tuple(argv), session_sha256=session_sha256, cache_dir=env.cache_dir,
                      build_dir=env.cache_dir / "build")
