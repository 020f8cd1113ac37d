"""Where session files are: shipped ones (read-only package data), the user's saved copies of
them, and where saving and results go. Imports nothing heavy (no torch, no registry), so the
TUI's front end and the CLI can resolve a FILE argument before anything else loads.

A saved copy of a shipped session (DATA_DIR/sessions/NAME.yaml, written by ctrl+s on the
shipped one) is what the name NAME finds from then on, in the TUI and in `--replay NAME`;
`shipped:NAME` always finds the shipped original.
"""

from __future__ import annotations

import difflib
import importlib.resources
from pathlib import Path

from workbench.errors import WorkbenchError

SHIPPED_PACKAGE = "workbench.sessions"
SHIPPED_PREFIX = "shipped:"
DEFAULT_SESSION = "default"
DEFAULT_CPU_SESSION = "default-cpu"


def _shipped_dir() -> Path:
    return Path(str(importlib.resources.files(SHIPPED_PACKAGE)))


def shipped_names() -> list[str]:
    """Names of the sessions shipped as package data (file stems), sorted."""
    return sorted(p.name[:-5] for p in importlib.resources.files(SHIPPED_PACKAGE).iterdir()
                  if p.name.endswith(".yaml"))


def shipped_path(name: str) -> Path:
    """Path of a shipped session by name; raises WorkbenchError naming the shipped ones."""
    path = _shipped_dir() / f"{name}.yaml"
    if not path.is_file():
        raise WorkbenchError(f"no shipped session {name!r};{did_you_mean(name)} shipped: {', '.join(shipped_names())}")
    return path


def is_shipped(path: str | Path) -> bool:
    """Whether `path` is one of the shipped (read-only) session files."""
    try:
        return Path(path).resolve().parent == _shipped_dir().resolve()
    except OSError:
        return False


def user_session_path(name: str, data_dir: str | Path) -> Path:
    """Where a user's copy of a shipped session is saved: DATA_DIR/sessions/NAME.yaml."""
    return Path(data_dir) / "sessions" / f"{name}.yaml"


def new_session_path(name: str, data_dir: str | Path) -> Path:
    """Where a session that has no file yet (a scratch session) is saved the first time:
    DATA_DIR/sessions/NAME.yaml, or NAME-2.yaml, NAME-3.yaml, ... when that exists, so a first
    save never writes over a file saved before (a scratch session's save must not replace an
    earlier one's runs)."""
    first = user_session_path(name, data_dir)
    path, n = first, 2
    while path.exists():
        path, n = first.with_name(f"{name}-{n}.yaml"), n + 1
    return path


def saved_copy(name: str, data_dir: str | Path | None) -> Path | None:
    """The user's saved copy of shipped session `name`, if there is one (None without data_dir)."""
    if data_dir is None:
        return None
    path = user_session_path(name, data_dir)
    return path if path.is_file() else None


def shipped_original(path: str | Path, data_dir: str | Path | None) -> Path | None:
    """For a saved copy of a shipped session, the shipped original; else None."""
    path = Path(path)
    if data_dir is None or path.parent.resolve() != (Path(data_dir) / "sessions").resolve():
        return None
    return _shipped_dir() / path.name if path.stem in shipped_names() else None


def resolve_session_path(arg: str | Path, data_dir: str | Path | None = None, *, unsaved: bool = False) -> Path:
    """A FILE argument: an existing path; else a shipped session's name, which finds the user's
    saved copy in `data_dir` when there is one, the shipped file otherwise; `shipped:NAME`
    always finds the shipped file. unsaved (the TUI): also a path never saved whose autosave is in
    `data_dir` (a new session the TUI made there and restores).

    Raises WorkbenchError naming the shipped sessions when none of these exists.
    """
    text = str(arg)
    if text.startswith(SHIPPED_PREFIX):
        return shipped_path(text[len(SHIPPED_PREFIX):].removesuffix(".yaml"))
    path = Path(text).expanduser()
    if path.exists() or (unsaved and data_dir is not None and autosave_path(path, Path(data_dir)).is_file()):
        return path
    name = path.name.removesuffix(".yaml")
    if text in (name, f"{name}.yaml") and name in shipped_names():
        return saved_copy(name, data_dir) or shipped_path(name)
    shown = text if text.strip() == text and text else repr(text)  # ' ' or a trailing space: quoted
    raise WorkbenchError(f"{shown}: no such session file;{did_you_mean(name)} shipped sessions: "
                         f"{', '.join(shipped_names())} (or {SHIPPED_PREFIX}NAME for a shipped original)")


def autosave_path(session_path: Path | None, data: Path) -> Path:
    """Where the TUI autosaves the session of `session_path` (None: a session without a file):
    DATA/autosave/<stem>-<sha256 of the resolved path, 8 hex>.yaml."""
    import hashlib

    key = str(session_path.resolve()) if session_path else "scratch"
    stem = session_path.stem if session_path else "scratch"
    return data / "autosave" / f"{stem}-{hashlib.sha256(key.encode()).hexdigest()[:8]}.yaml"


def did_you_mean(name: str) -> str:
    """' did you mean NAME?' for the shipped session closest to a mistyped name (difflib's ratio
    >= 0.75), else ''."""
    close = difflib.get_close_matches(name, shipped_names(), n=1, cutoff=0.75)
    return f" did you mean {close[0]}?" if close else ""


def default_session_name(has_cuda: bool) -> str:
    """The session `workbench` opens without FILE: `default`, or `default-cpu` without a GPU."""
    return DEFAULT_SESSION if has_cuda else DEFAULT_CPU_SESSION


def save_target(session_path: str | Path, data_dir: str | Path) -> Path:
    """Where saving the session opened from `session_path` writes (a copy for a shipped one)."""
    path = Path(session_path)
    return user_session_path(path.stem, data_dir) if is_shipped(path) else path


def results_path(session_path: str | Path, data_dir: str | Path) -> Path:
    """NAME.results.json beside a user's session; in DATA_DIR/sessions for a shipped one."""
    path = Path(session_path)
    folder = Path(data_dir) / "sessions" if is_shipped(path) else path.parent
    return folder / f"{path.stem}.results.json"
