"""What every command of the CLI shares: exit codes, the environment it read (`Env`), where data
goes (`write_output`, `output_style`), and the engine's options from the command line.

Nothing here imports another module of `workbench.cli` (they import this one: a tree).
"""

from __future__ import annotations

import argparse
import errno
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from rich.console import Console

from workbench.errors import WorkbenchError

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
EXIT_CONTENDED = 3  # --compare: the only regressions are rows timed with the CPU contended (`*`)
# A replay a signal stopped exits 128 + its number: 130 SIGINT, 143 SIGTERM, 129 SIGHUP.
EXIT_SIGNAL_BASE = 128
EXIT_CODES_TEXT = ("0 every row ran (or was unavailable or skipped here); 1 a row or an A/B failed, or a regression; 2 bad session, bad usage, an -o path "
                   "that cannot be written, results from different GPUs, or a baseline matching no row; 3 --compare's only "
                   "slower rows were timed CPU-contended (*); 128 + N stopped by signal N, "
                   "the partial results written (130 SIGINT, 143 SIGTERM, 129 SIGHUP)")
APP_NAME = "workbench"


@dataclass(frozen=True)
class Env:
    """What the CLI read from the environment and the platform, handed down explicitly.

    no_color: NO_COLOR is set (no-color.org); stdout_tty / stderr_tty: terminals;
    config_dir, data_dir, cache_dir: platformdirs' user directories for this app;
    cuda_visible_devices: CUDA_VISIBLE_DEVICES as set (None: not set), for `--devices all`;
    columns: COLUMNS as set (a positive integer, else None): the width of a table that goes to a
    pipe or a file (200 without it).
    """

    no_color: bool
    stdout_tty: bool
    stderr_tty: bool
    config_dir: Path
    data_dir: Path
    cache_dir: Path
    cuda_visible_devices: str | None = None
    columns: int | None = None

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
        cuda_visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"),
        columns=_columns(os.environ.get("COLUMNS")),
    )


def _columns(text: str | None) -> int | None:
    """COLUMNS as a width (at least 20), or None when unset or not a positive number."""
    try:
        value = int(text or "")
    except ValueError:
        return None
    return max(value, 20) if value > 0 else None


# errno values of a path that can name no file: a name over NAME_MAX (255 on Linux) or the path
# over PATH_MAX, a loop of symbolic links
UNUSABLE_PATH_ERRNOS = (errno.ENAMETOOLONG, errno.ELOOP)


def check_path_names(named: Iterable[tuple[str, str | None]]) -> None:
    """Refuse a path argument that can name no file (too long, a symbolic-link loop), before any
    work: each is looked up once (os.stat; a path that does not exist yet is fine). `named`:
    (option, path) pairs, e.g. ("-o", "out.json"); raises WorkbenchError naming the option, the
    path (shortened) and why. Every later open of these paths would raise OSError, a traceback."""
    for option, path in named:
        if not path:
            continue
        try:
            os.stat(os.path.expanduser(path))
        except OSError as exc:
            if exc.errno in UNUSABLE_PATH_ERRNOS:
                raise WorkbenchError(unusable_path(option, path, exc)) from None
        except ValueError as exc:  # an embedded NUL byte
            raise WorkbenchError(f"{option} {shorten_path(path)}: {exc}") from None


def unusable_path(option: str, path: str, exc: OSError) -> str:
    """'-o aaaa…aaa.json (305 characters): File name too long (a name in it has 305 characters;
    at most 255)', or '-o x.json: Too many levels of symbolic links (its symbolic links lead back
    to themselves)'."""
    why = exc.strerror or str(exc)
    if exc.errno == errno.ENAMETOOLONG:
        longest = max((len(part) for part in path.split(os.sep)), default=0)
        why += (f" (a name in it has {longest} characters; at most {_name_max(path)})" if longest > _name_max(path)
                else f" (the path has {len(path)} characters)")
    elif exc.errno == errno.ELOOP:
        why += " (its symbolic links lead back to themselves)"
    return f"{option} {shorten_path(path)}: {why}"


def shorten_path(path: str, most: int = 80) -> str:
    """`path`, or its start and end around '…' with its length when longer than `most`."""
    if len(path) <= most:
        return path
    return f"{path[:most // 2 - 2]}…{path[-(most // 2 - 2):]} ({len(path)} characters)"


def _name_max(path: str) -> int:
    try:
        return os.pathconf(os.path.dirname(os.path.abspath(path)) or "/", "PC_NAME_MAX")
    except (OSError, ValueError):
        return 255


def check_output_path(path: str, inputs: tuple[str, ...] = (), option: str = "-o",
                      example: str = "results.json") -> None:
    """Refuse an -o PATH that cannot be written, or that is one of the run's `inputs` (the
    session file, a kernels file, the baseline), before any work; raises WorkbenchError naming
    `option` (`--resume` where its PATH is the output: no -o given); `example`: the file name
    suggested in a folder given as the path.
    (workbench.fileio.output_problem: empty, a folder, a journal's name, a folder that takes no
    new file; output_clash: an input.)"""
    from workbench.fileio import output_clash, output_problem

    problem = output_problem(path, example) or output_clash(path, inputs)
    if problem:
        raise WorkbenchError(f"{option} {path!r}: {problem}" if not path else f"{option} {path}: {problem}")


def check_trace_dir(path: str) -> None:
    """Refuse a --trace-dir that cannot hold the traces before any row runs (a file there, a
    folder that cannot be made or written): each profiled row would fail after its timing.
    Makes the folder; raises WorkbenchError naming it."""
    folder = Path(path).expanduser()
    if folder.exists() and not folder.is_dir():
        raise WorkbenchError(f"--trace-dir {path}: a file is there, not a folder (traces are written into a folder)")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise WorkbenchError(f"--trace-dir {path}: cannot make the folder ({exc.strerror or exc})") from exc
    if not os.access(folder, os.W_OK | os.X_OK):
        raise WorkbenchError(f"--trace-dir {path}: the folder cannot be written")


def check_output_plugins(path: str | None, plugins: Sequence[str]) -> None:
    """Refuse an -o PATH that is a file of the session's own `plugins` (resolved), as one that is
    a --kernels file is (check_output_path): the results would overwrite it.
    Raises WorkbenchError."""
    if path is None or not plugins:
        return
    from workbench.plugins.sources import source_files

    check_output_path(path, tuple(str(f) for f in source_files(plugins)))


def write_output(text: str, args: argparse.Namespace, env: Env) -> None:
    """Data to -o or stdout. A file is replaced atomically (a symlink's target is); a device
    node, FIFO or /dev/stdout is written through (workbench.fileio.write_output)."""
    if args.output is None:
        write_stdout(text)
        return
    from workbench import fileio

    try:
        fileio.write_output(args.output, text.encode("utf-8"))
    except OSError as exc:  # checked before the run, but the disk can still fill up: keep the data
        write_stdout(text)
        raise WorkbenchError(f"-o {args.output}: not written ({exc}); the data went to stdout instead") from None


def write_stdout(text: str) -> None:
    """Text to stdout, flushed. A reader that left (`| head`, EPIPE) or a terminal that hung up
    (a closed SSH session, EIO) is not an error: what follows goes to /dev/null."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except OSError as exc:
        if not isinstance(exc, BrokenPipeError) and exc.errno != errno.EIO:
            raise
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


def output_style(env: Env, args: argparse.Namespace) -> tuple[int, bool]:
    """(width, colour) for a table on stdout: the terminal's width and colour unless NO_COLOR,
    plain text for -o, pipes and files, COLUMNS wide when it is set (`--list | less` at 80
    columns printed lines of 200), else 200."""
    import shutil

    if env.stdout_tty and args.output is None:
        return shutil.get_terminal_size().columns, not env.no_color
    return env.columns or 200, False


def print_problems(exc: Exception, err: Console) -> None:
    err.print(str(exc), markup=False, highlight=False)


def run_options(args: argparse.Namespace, env: Env, *, argv: Sequence[str], session_sha256: str | None = None):
    """The engine's RunOptions from the command line (plain data, no torch)."""
    from workbench.device_list import visible_gpu_count
    from workbench.engine.options import RunOptions

    kernels = tuple(str(Path(k).expanduser().resolve()) for k in args.kernels)  # children may start elsewhere
    trace_dir = getattr(args, "trace_dir", None)
    return RunOptions(device=args.device, kernels=kernels, force=bool(getattr(args, "force", False)),
                      argv=tuple(argv), session_sha256=session_sha256, cache_dir=env.cache_dir,
                      build_dir=env.cache_dir / "build", strict=bool(getattr(args, "strict", False)),
                      devices=getattr(args, "devices", None) or None, cluster=getattr(args, "cluster", None),
                      visible_gpus=visible_gpu_count(env.cuda_visible_devices),
                      trace_dir=Path(trace_dir).expanduser().resolve() if trace_dir else None,
                      report_dir=report_dir(getattr(args, "output", None)))


def report_dir(output: str | None) -> Path | None:
    """Where `counters` keeps its .ncu-rep files: beside -o PATH, in `<stem>.ncu/` (None without -o:
    the engine keeps them in its cache folder). A device node or FIFO output has no folder for them."""
    if not output:
        return None
    path = Path(output).expanduser()
    if path.exists() and not path.is_file():
        return None
    return path.resolve().parent / f"{path.stem}.ncu"


def missing_gpu(device: str) -> str | None:
    """Why the device `cuda[:N]` cannot run here (NVML, no torch), or None: a run asked for a
    GPU this host does not have measured nothing and still exited 0."""
    from workbench.machine import nvml_gpus

    count = len(nvml_gpus())
    index = int(device.partition(":")[2] or 0)
    if index < count:
        return None
    have = f"cuda:0..cuda:{count - 1}" if count else "no GPU NVML can see"
    return f"this host has {have}; allowed: auto, cpu" + (", cuda, cuda:N below " + str(count) if count else "")
