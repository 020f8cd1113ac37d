"""Where the app's session and results live on disk, through `workbench.session.api` (atomic saves).

- `open_session`: a FILE, or the shipped default; a newer autosave of it is restored (so a crash
  or a kill loses nothing), and its NAME.results.json is read back for the panes.
- `autosave`: after each change, DATA_DIR/autosave/<stem>-<hash>.yaml.
- `save`: ctrl+s, to the file itself, or a copy in DATA_DIR/sessions for a shipped session.
- `write_results`: NAME.results.json, merged run by run.
These import the core (and so torch): call them from a worker, or once the catalog is loaded.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from workbench.results.journal import flag_kept, is_finished
from workbench.results.record import Flag
from workbench.session.model import Session, device_settings
from workbench.session.paths import autosave_path

BLANK = Session(name="scratch", runs=())


@dataclass(frozen=True)
class Opened:
    session: Session
    path: Path | None
    results: dict | None
    notes: tuple[str, ...]

    @property
    def plugins(self) -> tuple[str, ...]:
        """The session's `plugins` as absolute paths (relative ones are to the session's folder)."""
        from workbench.plugins.sources import with_resolved_plugins

        base = self.path.parent if self.path is not None else Path.cwd()
        return with_resolved_plugins(self.session, base).plugins


def data_dir() -> Path:
    import platformdirs

    return Path(platformdirs.user_data_dir("workbench", appauthor=False))


TUI_STATE = "tui.json"  # DATA/tui.json: what the TUI keeps between starts that is no session's
TUI_STATE_LIMIT = 64 << 10  # bytes: a larger file is not ours


def read_theme(data: Path) -> tuple[str | None, str | None]:
    """(the theme the user last picked, why it could not be read): DATA/tui.json's `theme`, a
    Textual theme name. (None, None) when none was picked; (None, problem) for a file that is
    no such document (the app says so in the Log and starts with the default theme)."""
    import json

    path = data / TUI_STATE
    try:
        with open(path, "rb") as handle:
            raw = handle.read(TUI_STATE_LIMIT + 1)
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, f"{path}: {exc.strerror or exc}"
    try:
        if len(raw) > TUI_STATE_LIMIT:
            raise ValueError(f"larger than {TUI_STATE_LIMIT} bytes")
        state = json.loads(raw.decode("utf-8"))
        if not isinstance(state, dict):
            raise ValueError(f"a JSON object is expected, not {type(state).__name__}")
        theme = state.get("theme")
        if theme is not None and not isinstance(theme, str):
            raise ValueError(f"theme must be a theme's name, got {theme!r}")
    except (ValueError, UnicodeDecodeError) as exc:
        return None, f"{path}: not the TUI's state ({exc}); the default theme is used"
    return theme, None


def write_theme(data: Path, theme: str) -> None:
    """Keep `theme` for the next start (DATA/tui.json, written atomically, other keys kept).
    Raises OSError."""
    import json

    from workbench.fileio import atomic_write_text

    path = data / TUI_STATE
    state: dict = {}
    try:
        loaded = json.loads(path.read_text(encoding="utf-8"))
        state = loaded if isinstance(loaded, dict) else {}
    except (OSError, ValueError):
        pass
    atomic_write_text(path, json.dumps({**state, "theme": theme}, indent=1) + "\n")


def open_session(path: Path | None, *, kernels: Iterable[str] = (), has_cuda: bool = False,
                 data: Path, create: bool = False, restore: bool = True) -> Opened:
    """Read `path` (None: the default session, the user's saved copy of it first); with
    `restore`, a newer autosave of it replaces what the file says (watch mode's re-read of a
    saved file passes False: the file is the truth, whatever the app autosaved meanwhile).

    A missing `path` is a new, empty session there only with `create` (the open dialog asked);
    otherwise WorkbenchError names it. Raises WorkbenchError for a bad session too."""
    from workbench.session import api as ws
    from workbench.errors import WorkbenchError

    notes: tuple[str, ...] = ()
    if path is None:
        name = ws.default_session_name(has_cuda)
        try:
            path = ws.saved_copy(name, data) or ws.shipped_path(name)
        except WorkbenchError:
            return Opened(BLANK, None, None, ("no shipped default session: starting empty",))
        if name != ws.DEFAULT_SESSION:
            notes = (f"no GPU here: opening the CPU-sized session {name!r}",)
    if not path.exists():
        unsaved = _unsaved_new_session(path, data, kernels)
        if unsaved is not None:  # a new session never written with ctrl+s: its autosave holds it
            session, note = unsaved
            results, recovered = _recover_rows(ws.results_path(path, data))
            return Opened(session, path, results, (note,) + recovered + saved_results_note(results))
        if not create:
            raise WorkbenchError(f"{path}: no such session file")
        return Opened(Session(name=path.stem, runs=()), path, None,
                      (f"{path}: a new session (pick an op, press r; ctrl+s writes the file)",))
    if ws.shipped_original(path, data) is not None:
        notes += (f"your saved copy of the shipped session {path.stem!r} "
                  f"(ctrl+p \"open shipped original\" goes back to it)",)
    session, restored = ws.load_session(path, kernels=kernels), ()
    if restore:
        session, restored = _restore_autosave(session, path, data, kernels)
    session, written_out = printable_session(session)
    notes += written_out
    results, recovered = _recover_rows(ws.results_path(path, data))
    return Opened(session, path, results, notes + restored + recovered + saved_results_note(results))


def printable_session(session: Session) -> tuple[Session, tuple[str, ...]]:
    """The session with control characters in its name and its implementations' labels written
    out (`\x1b`): an escape there reached the terminal raw and could clear the screen (a red
    team's try; the engine's events and results then carry the written-out label too). Returns
    the session and a note when anything was written out."""
    import dataclasses

    from workbench.fmt import printable

    def clean_ref(ref):
        return ref if ref.label is None or printable(ref.label) == ref.label else dataclasses.replace(
            ref, label=printable(ref.label))
    runs = tuple(dataclasses.replace(run, impls=tuple(clean_ref(r) for r in run.impls) if run.impls else run.impls)
                 for run in session.runs)
    cleaned = dataclasses.replace(session, name=printable(session.name), runs=runs)
    if cleaned == session:
        return session, ()
    return cleaned, ("control characters in the session's name or labels are shown written out (\\x1b)",)


def saved_results_note(results: dict | None) -> tuple[str, ...]:
    """What the results on screen at open are, so a fresh clone never shows another checkout's
    rows as if just measured. `results of 2026-12-01T13:41:02Z (NVIDIA H200,
    workbench 45ec676) are shown; r measures again`."""
    rows = (results or {}).get("results") or []
    if not rows:
        return ()
    prov, env = results.get("provenance") or {}, results.get("environment") or {}
    made = ", ".join(str(v) for v in (env.get("device"), prov.get("git_sha") and f"workbench {prov['git_sha']}") if v)
    return (f"results of {prov.get('started') or 'an earlier run'}{f' ({made})' if made else ''} are shown "
            f"({len(rows)} row(s)); r measures again",)


def _recover_rows(path: Path) -> tuple[dict | None, tuple[str, ...]]:
    """The results file, with the rows a run stopped by a kill left in its journal folded in
    (workbench/results/journal.py) and written back."""
    from workbench.results import journal

    results, count = journal.recover(path, _read_results(path))
    if not count:
        return results, ()
    try:
        write_results(results, path)
    except OSError:
        return results, (f"recovered {count} finished row(s) of a stopped run; {path} not written",)
    journal.journal_path(path).unlink(missing_ok=True)
    return results, (f"recovered {count} finished row(s) of a run that was stopped before it ended",)


def _restore_autosave(session: Session, path: Path, data: Path, kernels) -> tuple[Session, tuple[str, ...]]:
    from workbench.session import api as ws

    saved = autosave_path(path, data)
    if not saved.exists() or saved.stat().st_mtime < path.stat().st_mtime:
        return session, ()
    text = saved.read_text(encoding="utf-8")
    if text == ws.dump_session(session):
        return session, ()
    try:
        restored = ws.parse_session(text, source=str(saved), base_dir=path.parent, kernels=kernels)
    except ValueError as exc:
        return session, (f"autosave {saved} not restored: {exc}",)
    return restored, (f"restored unsaved changes from {saved} (ctrl+s keeps them)",)


def _unsaved_new_session(path: Path, data: Path, kernels) -> tuple[Session, str] | None:
    """The autosave of a new session at `path` that was never saved (no file there), with the
    note that says so; None when there is none. Opening that path again started an empty
    session, and its first change overwrote the autosave: the runs were gone (a new user's try).
    An autosave that no longer reads (a plugin gone) is moved aside to NAME.unread.yaml, never
    written over, and its error is the note of an empty session."""
    from workbench.session import api as ws

    saved = autosave_path(path, data)
    if not saved.is_file():
        return None
    try:
        session = ws.parse_session(saved.read_text(encoding="utf-8"), source=str(saved), base_dir=path.parent,
                                   kernels=kernels)
    except (OSError, ValueError) as exc:
        aside = saved.with_suffix(".unread.yaml")
        try:
            saved.replace(aside)
        except OSError:
            return None
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return Session(name=path.stem, runs=()), f"{path}: its autosave did not read ({first}); kept as {aside}"
    return session, (f"{path} was never saved: its runs are restored from {saved} (ctrl+s writes the file)")


def _read_results(path: Path) -> dict | None:
    from workbench.results import document as results

    try:
        return results.load(path) if path.exists() else None
    except (OSError, ValueError):
        return None


def autosave(session: Session, session_path: Path | None, data: Path) -> Path:
    from workbench.session import api as ws
    from workbench.fileio import atomic_write_text

    return atomic_write_text(autosave_path(session_path, data), ws.dump_session(session))


def save(session: Session, session_path: Path | None, data: Path) -> Path:
    """Save atomically; returns where it went (a copy in DATA_DIR/sessions for a shipped one; for a
    session without a file, a new one: session_paths.new_session_path)."""
    from workbench.session import api as ws

    target = ws.save_target(session_path, data) if session_path else ws.new_session_path(session.name, data)
    ws.save_session(session, target, header=ws.leading_comments(session_path, target))
    autosave_path(session_path, data).unlink(missing_ok=True)
    return target


def replaced_copy(session: Session, session_path: Path | None, data: Path) -> Path | None:
    """The user's saved copy that saving `session` (opened from the shipped `session_path`) would
    write over with other runs or settings; None when there is no copy, it is not a shipped
    session, or the copy already holds the same session. (The shipped original, opened back
    with "Open shipped original", once saved over the user's edited copy without a word.)"""
    from workbench.session import api as ws

    if session_path is None or not ws.is_shipped(Path(session_path)):
        return None
    target = ws.save_target(session_path, data)
    if not target.is_file():
        return None
    try:
        same = ws.session_to_data(ws.load_session(target, check_ops=False)) == ws.session_to_data(session)
    except Exception:  # noqa: BLE001 - an unreadable copy is still the user's: ask
        same = False
    return None if same else target


def results_file(session_path: Path | None, data: Path, name: str) -> Path:
    from workbench.session import api as ws

    if session_path is None:  # beside the file its first save will take (new_session_path)
        first = ws.new_session_path(name, data)
        return first.with_name(f"{first.stem}.results.json")
    return ws.results_path(session_path, data)


KEPT_FLAG = Flag.KEPT.template  # "kept from an earlier run: the run after it was cancelled before this row"


def merge_results(old: dict | None, new: dict, run_index: int) -> dict:
    """`new` (a one-run document, run_index 0) as run `run_index` of the saved document. In a
    cancelled run, a row the cancel left unmeasured (skipped, "cancelled") keeps the earlier
    record of the same row (same op, label, implementation, params, shape, dtype and sweep
    value), with KEPT_FLAG: r then escape wrote a file of skipped rows over the measured ones
    (MEASUREMENT.md rule 12, nothing measured lost)."""
    earlier = [r for r in (old or {}).get("results", ()) if r.get("run_index") == run_index]
    kept = [r for r in (old or {}).get("results", ()) if r.get("run_index") != run_index]
    fresh = [{**r, "run_index": run_index} for r in new.get("results", ())]
    if new.get("cancelled"):
        before = {row_identity(r): r for r in earlier if is_finished(r)}
        fresh = [flag_kept(before[row_identity(r)]) if not is_finished(r) and row_identity(r) in before else r
                 for r in fresh]
    merged = sorted(kept + fresh, key=lambda r: r.get("run_index", 0))
    return {**new, "results": merged}


def row_identity(record: dict) -> str:
    """What makes two records the same row of a run (not its results)."""
    import json

    fields = ("op", "label", "impl", "params", "shape", "dtype", "sweep_value")
    return json.dumps([record.get(f) for f in fields], sort_keys=True, default=str)




def write_results(doc: dict, path: Path) -> Path:
    from workbench.results import document as results

    results.write(doc, path)
    return path


def known_sessions(data: Path) -> list[tuple[str, Path]]:
    """The user's saved sessions, then the shipped ones, as (label, path)."""
    from workbench.session import paths

    saved = sorted((data / "sessions").glob("*.yaml")) if (data / "sessions").is_dir() else []
    mine = [(f"{p.stem} (saved copy, {p.parent})" if paths.shipped_original(p, data) else f"{p.stem} ({p.parent})", p)
            for p in saved]
    return mine + [(f"{name} (shipped)", paths.shipped_path(name)) for name in paths.shipped_names()]


def shipped_original(path: Path | None, data: Path) -> Path | None:
    """The shipped session that `path` is a saved copy of (None if it is not one)."""
    from workbench.session import paths

    return paths.shipped_original(path, data) if path is not None else None


def gpu_setting_without_gpu(session: Session, gpu: bool, device_override: str | None) -> str | None:
    """What to say when the session's own device setting (or a run's) asks for a GPU on a host
    without one: the replay refuses it (exit 2, cli/replay.py); the TUI says so at open, not as
    rows that come back unavailable only after r. None when there is a GPU, or
    when --device overrides the setting."""
    if gpu or device_override:
        return None
    for where, device in device_settings(session):
        if device.startswith("cuda"):
            return (f"{where}: {device}, but this host has no GPU: its rows will be unavailable here "
                    "(set the device to auto or cpu in the session file, or start with --device cpu)")
    return None
