"""Watch mode's core: after an edit, re-run only the rows it changed, against their last result.

    state = WatchState(session_path, kernels=("my_ops.py",))
    cycle = state.run_cycle(options=RunOptions(...), on_event=print, stop=stop)   # first: every row
    changed = FileWatcher(cycle.files).wait(stop)                                  # a save
    cycle = state.run_cycle(options=..., on_event=print, stop=stop, changed=changed)

One cycle: the session's plugins are declared afresh (workbench/plugins/manifest.py: an edited file's
manifest is rebuilt in a subprocess; the front end never imports torch), the session is read
and checked, and every row gets a fingerprint: what the row is (op, implementation, params,
shape, dtype, actions, settings, device), the digest of what its code computes (the manifest's
`code`, workbench/plugins/code_digest.py: its builder and launch and what they call, its op's spec,
inputs, reference and cost model) and the bytes of a declared `.cu`. A row whose fingerprint the
previous cycle ran is not run again (the engine's `RunOptions.done`); the rest go through the one
core call, `run_plan`, whose warm workers are keyed by the plugin files' content. With a pool
kept across cycles (`WatchState(workers=...)`), its idle workers re-import an edited file in
place before the cycle declares it (engine/reload.py: their manifests replace the manifest
subprocess, and the run takes the same warm process); without one, or with --strict, an edited
file gets a fresh worker. The build cache keys builds by source. A row whose edit failed is
failed in the document (its status, error and check are the new code's: nothing claims the old
figures for the new source); its last good record rides along under `last_good`, with the sha256
of the plugin files it was measured from (`watch.diff.with_last_good`), so the last good figures
stay on screen, marked as the earlier code's; the error, with the file and line, is in the
cycle's lines. A session or plugin that does not load is a cycle with `error` and the previous
document.

Used by `workbench --replay FILE --watch` (workbench/cli/watch.py) and the TUI's watch mode
(screens/watching.py).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from workbench.plugins.code_digest import impl_digest
from workbench.results.record import Flag, flag_kinds
from workbench.errors import WorkbenchError
from workbench.events import Event, Result, RowKey
from workbench.plugins.sources import declared_files, registry_files, with_resolved_plugins, sha256_file, source_files
from workbench.watch.diff import change_line, spec_change, with_last_good

Engine = Callable[..., dict]


@dataclass
class Cycle:
    """What one cycle did. number: 1 for the first; changed: the files whose save started it;
    doc: the results document as shown (a failed re-run row with its `last_good`; None before any run); reran:
    the rows run in this cycle; lines: (row key, text, level) per re-run row against its
    previous result; error: why nothing ran (the session or a plugin did not load:
    `path:line: message`); files: what to watch for the next one; prints: row key ->
    fingerprint of this cycle's rows."""

    number: int
    changed: tuple[str, ...] = ()
    doc: dict | None = None
    reran: tuple[RowKey, ...] = ()
    lines: list[tuple[RowKey, str, str]] = field(default_factory=list)
    error: str | None = None
    files: tuple[Path, ...] = ()
    prints: dict[RowKey, str] = field(default_factory=dict)


def where(key: RowKey) -> str:
    """`triton` or `triton @ 4096` (a row's label and sweep point)."""
    return key[1] if key[2] is None else f"{key[1]} @ {key[2]}"


class WatchState:
    """The rows of the last cycle by fingerprint and the last good record of each row.

    session_path: the session file (None for a session edited in memory: the TUI's, which
    calls `run_session`); kernels: --kernels paths; workers: a WorkerPool kept across cycles
    (its idle workers reload an edited plugin in place: engine/reload.py; None: each cycle's
    run_plan gets a private pool, so every cycle starts its workers)."""

    def __init__(self, session_path: str | Path | None = None, *, kernels: Iterable[str | Path] = (),
                 workers: Any = None) -> None:
        self.session_path = Path(session_path) if session_path is not None else None
        self.workers = workers
        self.kernels = tuple(str(Path(k).expanduser().resolve()) for k in kernels)
        self.number = 0
        self.doc: dict | None = None
        self.shown: dict[str, dict] = {}      # fingerprint -> record shown (last cycle's rows)
        self.good: dict[RowKey, dict] = {}    # row key -> its last ok record
        self.good_from: dict[RowKey, dict] = {}  # row key -> provenance of the run that measured it
        self.last: dict[RowKey, dict] = {}    # row key -> its last shown record
        self.files: tuple[Path, ...] = (self.session_path.resolve(),) if self.session_path else ()

    # -- one cycle --------------------------------------------------------------------------
    def run_cycle(self, *, options: Any, on_event: Callable[[Event], None], stop: threading.Event,
                  changed: Iterable[str | Path] = (), engine: Engine | None = None,
                  on_line: Callable[[RowKey, str, str], None] | None = None) -> Cycle:
        """Load the session file and its plugins afresh, then `run_session`. A session or plugin
        that does not load gives a cycle with `error` and the previous document."""
        try:
            workers = None if getattr(options, "strict", False) else self.workers  # --strict: no reload
            session, registry = self._load(getattr(options, "cache_dir", None), workers)
        except WorkbenchError as exc:
            self.number += 1
            return Cycle(self.number, tuple(str(c) for c in changed), self.doc, error=str(exc), files=self.files)
        cycle = self.run_session(session, registry, options=options, on_event=on_event, stop=stop, engine=engine,
                                 on_line=on_line)
        cycle.changed, cycle.files = tuple(str(c) for c in changed), self.files
        return cycle

    def run_session(self, session: Any, registry: Any, *, options: Any, on_event: Callable[[Event], None],
                    stop: threading.Event, engine: Engine | None = None,
                    on_done: Callable[[dict[RowKey, dict]], None] | None = None,
                    on_line: Callable[[RowKey, str, str], None] | None = None) -> Cycle:
        """Run the rows of `session` (plugins resolved, loaded into `registry`) whose fingerprint
        the previous cycle did not run; the others keep their record (`RunOptions.done`), given to
        `on_done({key: record})` first. As each re-run row finishes,
        its line against its previous result goes to `on_line(key, text, level)`. options: the
        engine's RunOptions (its `done` is replaced); engine: run_plan (tests pass a stand-in)."""
        self.number += 1
        cycle = Cycle(self.number, doc=self.doc)
        cycle.prints = fingerprints(session, registry, device=getattr(options, "device", None))
        done = {key: {**self.shown[fp], "run_index": key[0]} for key, fp in cycle.prints.items() if fp in self.shown}
        if on_done is not None:
            on_done(done)
        kept: dict[RowKey, dict] = {}  # re-run rows whose edit failed: their last good record

        def watched(event: Event) -> None:
            on_event(event)
            if isinstance(event, Result) and event.row not in done:
                line = self._rerun(cycle, event.row, event.record, kept)
                if line is not None and on_line is not None:
                    on_line(*line)
        run = engine or _run_plan
        keep = engine is None and self.workers is not None and not getattr(options, "strict", False)
        pool = {"workers": self.workers} if keep else {}  # --strict: every cycle's workers fresh
        doc = run(session, on_event=watched, stop=stop, options=dataclasses.replace(options, done=done), **pool)
        self._fold(cycle, doc, done, kept)
        return cycle

    def _load(self, cache_dir: Path | None = None, workers: Any = None):
        try:
            session, registry, self.files = load_watched(self.session_path, self.kernels, cache_dir, workers=workers)
        except WorkbenchError:
            self.files = watched_files(self.session_path, self.kernels)  # an edit may fix it
            raise
        return session, registry

    def _rerun(self, cycle: Cycle, key: RowKey, record: dict, kept: dict) -> tuple[RowKey, str, str] | None:
        """A re-run row's result arrived: its line, and its last good record noted if it failed."""
        cycle.reran += (key,)
        if _cancelled(record):
            return None
        previous, good = self.last.get(key), self.good.get(key)
        if good is not None and spec_change(good, record):  # another problem now: not its last good
            self.good.pop(key, None)
            good = None
        if record.get("status") == "failed" and good is not None:
            error = record.get("error") or "failed"
            kept[key] = good
            line = (key, *change_line(previous, good, error=error))
        else:
            if record.get("status") == "ok":
                self.good[key] = record
            if previous is not None and previous.get("last_good") and record.get("status") == "ok":
                previous = previous["last_good"]["record"]  # fixed: against the last good figures
            line = (key, *change_line(previous, record))
        cycle.lines.append(line)
        return line

    def _fold(self, cycle: Cycle, doc: dict, done: dict, kept: dict) -> None:
        """The document as shown: a failed re-run row with its last good record (`last_good`), a
        cancelled one's previous record flagged `kept from an earlier run`; remembered by
        fingerprint for the next cycle."""
        shown_records, shown_by_fp = [], {}
        now = doc.get("provenance") or {}
        for record in doc.get("results", ()):
            key = (record.get("run_index"), record.get("label"), record.get("sweep_value"))
            shown = record
            if key in kept:
                shown = with_last_good(record, kept[key], self.good_from.get(key), now)
            elif key in cycle.reran and record.get("status") == "ok":
                self.good_from[key] = {k: now.get(k) for k in ("plugins", "session_sha256", "started")}
            if _cancelled(record):  # the previous record, measured from earlier code: flagged so
                shown = _kept(self.last[key]) if key in self.last else record
            elif key in cycle.prints:
                shown_by_fp[cycle.prints[key]] = shown
            shown_records.append(shown)
            self.last[key] = shown
        self.shown = shown_by_fp
        self.doc = cycle.doc = {**doc, "results": shown_records}


def load_watched(session_path: Path, kernels: Iterable[str] = (), cache_dir: Path | None = None, *,
                 workers: Any = None) -> tuple[Any, Any, tuple[Path, ...]]:
    """Declare the session file's plugins afresh and read it: (the session with its plugins
    resolved, the declared registry, the files to watch). The declarations come from manifests
    keyed by the files' content (workbench/plugins/manifest.py), so an edited plugin is imported again:
    by the idle warm workers of `workers` in place (engine/reload.py), which then serve the new
    code, else in a subprocess; nothing here imports torch. Raises WorkbenchError (a SessionError
    lists every problem with its line; a plugin that fails to import names its file and line)."""
    from workbench.plugins.manifest import declare
    from workbench.session.api import load_session

    paths = [p for p in _plugin_paths(session_path, kernels) if Path(p).exists()]  # a missing one: below
    registry = declare(paths, cache_dir=cache_dir, build=_reloaded(workers, paths))
    session = load_session(session_path, kernels=kernels, registry=registry)
    files = (Path(session_path).resolve(), *registry_files(paths, registry))
    return with_resolved_plugins(session, Path(session_path).parent), registry, files


def _reloaded(workers: Any, paths: list[str]):
    """The pool's idle workers reloaded now; a manifest `build` serving what they loaded."""
    if workers is None:
        return None
    from workbench.engine.reload import reload_for_watch
    from workbench.plugins.sources import plugin_files

    return reload_for_watch(workers, [str(f) for p in paths for f in plugin_files(Path(p))])


def watched_files(session_path: Path, kernels: Iterable[str] = ()) -> tuple[Path, ...]:
    """The session file and the files of its plugins (as far as the file can be read); a plugin
    path that does not exist (moved away) is watched too, so its return is seen (dropped, it would
    not be watched again until the next save of the session)."""
    try:
        paths = _plugin_paths(session_path, kernels)
    except WorkbenchError:
        paths = list(kernels)
    missing = [Path(p).resolve() for p in paths if not Path(p).exists()]
    return tuple(dict.fromkeys((Path(session_path).resolve(), *source_files(paths), *missing)))


def _plugin_paths(session_path: Path, kernels: Iterable[str]) -> list[str]:
    """--kernels and the session's own plugins (resolved), read without checking its runs."""
    from workbench.session.api import parse_session, read_session_bytes

    try:
        bare = parse_session(read_session_bytes(session_path), source=str(session_path), check_ops=False)
    except OSError as exc:
        raise WorkbenchError(f"{session_path}: cannot read the file: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise WorkbenchError(f"{session_path}: {exc}") from None
    return [*kernels, *with_resolved_plugins(bare, Path(session_path).parent).plugins]


def _cancelled(record: dict) -> bool:
    return record.get("status") == "skipped" and record.get("error") == "cancelled"


def _kept(record: dict) -> dict:
    """`record` flagged `kept from an earlier run: the run after it was cancelled before this row`."""
    flags = list(record.get("flags") or [])
    return {**record, "flags": flags if Flag.KEPT in flag_kinds(flags) else [*flags, Flag.KEPT.template]}


def _run_plan(session, **kwargs) -> dict:
    from workbench.engine.plan import run_plan

    return run_plan(session, **kwargs)


# -- fingerprints ----------------------------------------------------------------------------
def fingerprints(session: Any, registry: Any, *, device: str | None = None) -> dict[RowKey, str]:
    """Row key -> fingerprint: sha256 of what the row is and of what its code computes (see the
    module docstring). Rows the engine cannot describe still get one (their error is in it)."""
    from workbench.engine.rows import expand
    from workbench.machine import probe

    rows = expand(session, registry, has_cuda=probe().has_cuda, device_override=device)
    out = {}
    for row in rows:
        op = registry.op(row.op)
        impl = op.get_impl(row.impl)
        code = getattr(op, "code_digests", {}).get(impl.name) or impl_digest(op, impl)  # declared: the manifest's
        what = {"row": dataclasses.asdict(row), "code": code,
                "declared": {str(f): sha256_file(f) for f in declared_files(impl)}}
        out[row.key] = hashlib.sha256(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()
    return out
