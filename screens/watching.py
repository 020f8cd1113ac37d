"""Watch mode in the app (`workbench FILE --watch`): each save re-runs what it changed.

A thread polls the session file and its plugin files (workbench/watch/files.py). On a save, a
worker declares the plugins afresh (their manifests: workbench/plugins/manifest.py, from the app's idle
warm workers, which reload the edited files in place: engine/reload.py) and re-reads the
session (workbench/watch/cycle.py `load_watched`); a file that fails shows `path:line: message` in
the Log and a notification, and nothing else stops. The catalog is refreshed (a new
implementation appears in the list), the session is re-opened when its own file changed, and the
run on screen runs again through the runner. The runner's engine is wrapped (`_run_watched`):
rows whose fingerprint the last cycle ran keep their result (and their view: samples, PTX text),
the rest run, a row whose edit failed shows as failed (the table, the status bar's counts and the
results file say the new code's status) with its last good figures marked as the earlier code's
(`last_good`: the row's detail line and notes), and one Log line per re-run row says how it
moved (time, GB/s, PTX counts). Saves made during a run are re-run after it.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from textual import work

from workbench import events as ev

from .messages import FilesChanged, Loaded, RunCrashed, RunDone, SessionOpened, WatchFailed, WatchReloaded

POLL_TIMEOUT_S = 0.5  # the watcher thread looks for a new set of paths this often


class WatchMixin:
    """Mixed into WorkbenchApp (after RunnerMixin: its run-end handlers run after the runner's).
    Uses the app's `ws`, `_options`, `_engine`, `_running_index`, `running`, `action_run`,
    `_open`, `_kernels`, `_device`, `_catalog_loader`, `report`, `log_pane`."""

    def _init_watch(self, watch: bool = False) -> None:
        self._watch_on = watch                       # `workbench FILE --watch`
        self._watch_stop = threading.Event()
        self._watch_paths: tuple[Path, ...] = ()
        self._watch_queued: set[Path] = set()
        self._watch_states: dict[int, Any] = {}      # run index -> workbench.watch.cycle.WatchState
        self._watch_rows: dict[int, dict] = {}       # run index -> its model's rows at its last run's end
        self._watch_engine = None                    # the engine the wrapper calls
        self.watch_cycles = 0                        # re-runs started by a save (tests wait on it)

    @property
    def watching(self) -> bool:
        return self._watch_on

    def stop_watch(self) -> None:
        self._watch_stop.set()

    # -- starting: once the first session is on screen ------------------------------------
    def on_session_opened(self, message: SessionOpened) -> None:
        if not self.watching:
            return
        self._watch_paths = self._session_files()
        if self._watch_engine is None:
            self._watch_real = self._engine is None  # the real engine: the app's warm pool serves it
            self._watch_engine = self._engine or _run_plan
            self._engine = self._run_watched
            self._watch_loop()
            names = ", ".join(p.name for p in self._watch_paths) or "no files"
            self.log_pane.add(f"watching {names}: each save re-runs what it changed")
            if not self.running:
                self.action_run()

    def _session_files(self) -> tuple[Path, ...]:
        from workbench.plugins.sources import source_files, with_resolved_plugins

        path = self.ws.path
        base = path.parent if path else Path.cwd()
        plugins = with_resolved_plugins(self.ws.session, base).plugins
        own = (path.resolve(),) if path is not None and path.exists() else ()
        return (*own, *source_files([*self._kernels(), *plugins]))

    @work(thread=True, exit_on_error=False, group="watch")
    def _watch_loop(self) -> None:
        from workbench.watch.files import FileWatcher

        watcher = FileWatcher(self._watch_paths)
        while not self._watch_stop.is_set():
            watcher.set_paths(self._watch_paths)
            changed = watcher.wait(self._watch_stop, timeout_s=POLL_TIMEOUT_S)
            if changed:
                self.post_message(FilesChanged(tuple(changed)))

    # -- a save -------------------------------------------------------------------------------
    def on_files_changed(self, message: FilesChanged) -> None:
        self.log_pane.add(f"saved: {', '.join(p.name for p in message.paths)}")
        if self.ws.path is not None and self.ws.path.resolve() in message.paths:
            self._file_wins()
        if self.running:  # re-run once this run has ended
            self._watch_queued |= set(message.paths)
            return
        self._watch_reload(message.paths)

    def _file_wins(self) -> None:
        """The session file was saved elsewhere: in watch mode it is the truth, so the app's
        autosave (of the session as the app had it) must not be restored over it."""
        from . import sessions_io

        if getattr(self, "_autosave_timer", None) is not None:
            self._autosave_timer.stop()
            self._autosave_timer = None
        sessions_io.autosave_path(self.ws.path, self.data_dir).unlink(missing_ok=True)

    def on_run_done(self, message: RunDone) -> None:
        model = self.ws.models.get(message.run_index)
        if model is not None:  # what a row keeps when its code did not change: samples, PTX text
            self._watch_rows[message.run_index] = dict(model.rows)
        self._run_queued()

    def on_run_crashed(self, message: RunCrashed) -> None:
        self._run_queued()

    def _run_queued(self) -> None:
        if self._watch_queued and not self.running:
            queued, self._watch_queued = tuple(self._watch_queued), set()
            self._watch_reload(queued)

    @work(thread=True, exit_on_error=False, group="watch-reload")
    def _watch_reload(self, paths: tuple[Path, ...]) -> None:
        """Import the plugins afresh, re-read the session if it changed; then re-run."""
        from workbench.errors import WorkbenchError
        from workbench.watch.cycle import load_watched, watched_files

        path, index = self.ws.path, self.ws.index
        kernels = self._kernels()
        try:
            if path is not None and path.exists():
                # the app's warm workers reload the edited plugins in place (engine/reload.py)
                workers = None if getattr(self._options, "strict", False) else getattr(self, "_pool", None)
                session, _, files = load_watched(path, kernels, self._cache_dir(), workers=workers)
            else:
                session, files = self.ws.session, self._declare_unsaved(kernels)
            catalog = (self._catalog_loader or _load_catalog)([*kernels, *session.plugins], self._device())
            # the saved file is the truth: an autosave written since (a timer that fired between the
            # save and this re-read) is not restored over it (_file_wins removed the one before)
            opened = (self._open(path, catalog.gpu, restore=False)
                      if path is not None and path.resolve() in paths else None)
        except WorkbenchError as exc:
            files = watched_files(path, kernels) if path is not None and path.exists() else self._watch_paths
            self.post_message(WatchFailed(str(exc), tuple(files)))
            return
        self.post_message(Loaded(catalog))
        if opened is not None:
            self.post_message(SessionOpened(opened.session, opened.path, opened.results, opened.notes))
        self.post_message(WatchReloaded(tuple(files), index if opened is not None else None))

    def _declare_unsaved(self, kernels: list[str]) -> tuple[Path, ...]:
        """A session that is not on disk: only --kernels (and plugins it names) are declared."""
        from workbench.plugins.manifest import declare
        from workbench.plugins.sources import registry_files, with_resolved_plugins

        paths = [*kernels, *with_resolved_plugins(self.ws.session, Path.cwd()).plugins]
        return tuple(registry_files(paths, declare(paths, cache_dir=self._cache_dir())))

    def _cache_dir(self) -> Path | None:
        return getattr(self._options, "cache_dir", None)

    def on_watch_failed(self, message: WatchFailed) -> None:
        self._watch_paths = message.files or self._watch_paths
        self.report(f"{message.error} (nothing re-ran; the last results stay)")

    async def on_watch_reloaded(self, message: WatchReloaded) -> None:
        self._watch_paths = message.files
        if message.index is not None and message.index < len(self.ws.session.runs):
            await self.pick("run", message.index)  # the session was re-read: back to the run on screen
        if self.running:
            return
        self.watch_cycles += 1
        self.action_run()

    # -- the runner's engine, wrapped (called in the run worker's thread) ----------------------
    def _run_watched(self, session: Any, *, on_event, stop: threading.Event, options: Any = None) -> dict:
        from workbench.engine.options import RunOptions
        from workbench.plugins.manifest import declare
        from workbench.watch.cycle import WatchState

        options = options if options is not None else RunOptions()
        registry = declare([*options.kernels, *session.plugins], cache_dir=options.cache_dir)  # cached manifests
        index = self._running_index
        state = self._watch_states.setdefault(index, WatchState())
        real = getattr(self, "_watch_real", False)
        if real:  # run_plan with the app's pool: the warm workers reload edits in place (_watch_reload)
            state.workers = None if getattr(options, "strict", False) else self._engine_pool()
        cycle = state.run_session(session, registry, options=options, on_event=on_event, stop=stop,
                                  engine=None if real else self._watch_engine,
                                  on_done=lambda done: self.call_from_thread(self._keep_rows, index, list(done)),
                                  on_line=lambda key, text, level: on_event(ev.Log(key, text, level)))
        return cycle.doc

    def _keep_rows(self, index: int, keys: list) -> None:
        """The rows whose code did not change keep their last run's view (charts, PTX text)."""
        if not keys:
            return
        model, old = self.ws.models.get(index), self._watch_rows.get(index, {})
        for _, label, sweep in keys:
            key = (label, tuple(sweep) if isinstance(sweep, list) else sweep)
            if model is not None and key in old:
                model.rows[key] = old[key]
        if model is not None:
            model.version += 1
        self._dirty = True
        names = ", ".join(dict.fromkeys(label for _, label, _ in keys))
        self.log_pane.add(f"kept (their code did not change): {names}")


def _run_plan(session, **kwargs) -> dict:
    from workbench.engine.plan import run_plan

    return run_plan(session, **kwargs)


def _load_catalog(kernels: list[str], device: str):
    from .catalog import load_catalog

    return load_catalog(kernels, device)
