"""Sessions in the app: loading at start (after the first frame), ctrl+o, ctrl+s, and the way
back from a saved copy to the shipped original. File work goes through `sessions_io`.
"""

from __future__ import annotations

import os
from pathlib import Path

from textual import work
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from . import heap, sessions_io
from .dialogs import ConfirmScreen, OpenScreen
from .messages import LoadFailed, Loaded, OpenFailed, SessionOpened
from .spec_editor import SpecEditor


EARLY_ZYGOTE_MIN_CPUS = 4  # the workers' zygote starts while the ops load only with this many cores


class SessionMixin:
    """Mixed into WorkbenchApp: its `ws`, `data_dir`, `report`, `show_run`, `run_bar`,
    `log_pane`, `running`, `save_parsed_css` and the runner's `run_if_pending` /
    `forget_pending_run`."""

    _notes_shown: frozenset[str] = frozenset()  # the catalog's notes said so far (on_loaded)
    load_error: str | None = None  # why the ops could not be loaded (nothing can run then)

    # -- loading ----------------------------------------------------------------------------
    @work(thread=True, exit_on_error=False, group="load")
    def _load(self) -> None:
        """Import the ops, probe the machine, read the session: all after the first frame. The
        workers' zygote starts first, importing torch while this reads the ops (on a fresh
        machine a subprocess that imports torch and the kernels too), so the first worker is
        forked from it sooner (engine/workers.WorkerPool.start_zygote). Only with cores to
        spare: on the 2-core CPU box the two imports side by side put the session on screen
        later (2.8-6.6 s against 2.6-3.3 s, alternating, manifest removed) for no gain in the
        first run's end (median 8.7 against 8.8 s)."""
        try:
            pool = self._engine_pool() if (os.cpu_count() or 1) >= EARLY_ZYGOTE_MIN_CPUS else None
            if pool is not None:
                pool.start_zygote()
        except Exception as exc:  # noqa: BLE001 - the first run starts its worker as before
            self.call_from_thread(self.log_pane.add, f"workers' zygote not started early: {exc}", "warning")
        try:
            catalog = (self._catalog_loader or _load_catalog)(self._kernels(), self._device())
        except Exception as exc:  # shown as a notification and a Log line, never a traceback
            from workbench.errors import WorkbenchError

            # our own errors say what is wrong in words; anything else is named by its type
            self.post_message(LoadFailed(str(exc) if isinstance(exc, WorkbenchError) else f"{type(exc).__name__}: {exc}"))
            return
        self.post_message(Loaded(catalog))
        try:
            opened = self._open(self._session_arg, catalog.gpu)
        except Exception as exc:
            # The file is left as it is (a save goes elsewhere); the ops are there to start afresh.
            text, where = str(exc), self._session_arg
            self.post_message(LoadFailed(f"{where}: {text}" if where and str(where) not in text else text))
            self.post_message(SessionOpened(sessions_io.BLANK, None, None,
                                            ("starting an empty session: pick an op (+ ...) to add a run",),
                                            failed=str(where) if where else "the session"))
            return
        self.post_message(SessionOpened(opened.session, opened.path, opened.results, opened.notes))
        import numpy  # noqa: F401  (the live chart's thinning, charts.thin: ~100 ms here, not in a key press)

    def _open(self, path: Path | None, gpu: bool, create: bool = False, restore: bool = True) -> sessions_io.Opened:
        if self._opener is not None:
            return self._opener(path, gpu)
        opened = sessions_io.open_session(path, kernels=self._kernels(), has_cuda=gpu,
                                          data=self.data_dir, create=create, restore=restore)
        if opened.plugins:  # the session's own ops join the catalog, as replay loads them
            loader = self._catalog_loader or _load_catalog
            self.post_message(Loaded(loader([*self._kernels(), *opened.plugins], self._device())))
        return opened

    def _kernels(self) -> list[str]:
        return [str(p) for p in getattr(self._options, "kernels", None) or ()]

    def _device(self) -> str:
        return getattr(self._options, "device", None) or "auto"

    def on_loaded(self, message: Loaded) -> None:
        self.ws.catalog = message.catalog
        if self.run_bar.status == "loading ops…":  # "ready" once the session is open too
            self.run_bar.status = "opening the session…"
        self.log_pane.add(f"machine: {message.catalog.machine}")
        for note in message.catalog.notes:  # a plugin that registers nothing (said once, not per reload)
            if note not in self._notes_shown:
                self._notes_shown = self._notes_shown | {note}
                self.report(note, "warning")
        self.call_after_refresh(heap.settle)  # the app's widgets frozen out of later collections
        # the CSS parsed by now (the first frame's and the hidden panes'), for the next start:
        # saved here too, not only at the app's end (a closed terminal ends it without one)
        self.call_after_refresh(self.save_parsed_css)

    def on_load_failed(self, message: LoadFailed) -> None:
        """The ops (a plugin that does not import) or the session could not be loaded. Without
        the ops nothing can run: the title and the Runs list say so until the app is restarted
        (not `loading ops…` for good with the error only in a toast)."""
        self.run_bar.status = "could not load"
        self.forget_pending_run()
        self.report(message.error)
        if self.ws.catalog is not None:  # the session failed; the ops are there to start afresh
            return
        self.load_error = message.error
        first = message.error.splitlines()[0] if message.error else "unknown error"
        self.query_one("#title-bar", Static).update(f"workbench · the ops could not be loaded: {first}")
        ops = self.query_one("#op-list", OptionList)
        ops.clear_options()
        ops.add_option(Option("no ops: they could not be loaded (the Log, 5, has why; fix it and restart)",
                              disabled=True))

    def on_open_failed(self, message: OpenFailed) -> None:
        self.report(message.error)

    async def on_session_opened(self, message: SessionOpened) -> None:
        self.ws.open(message.session, message.path, message.results)
        self.open_error = message.failed  # the title bar says so until a session is opened or saved
        if not self.running:
            self.run_bar.status = "ready"
        for note in message.notes:
            self.report(note, "warning" if "not restored" in note else "information")
        gpu = bool(self.ws.catalog and self.ws.catalog.gpu)
        wanted = sessions_io.gpu_setting_without_gpu(message.session, gpu, getattr(self._options, "device", None))
        if wanted:
            self.report(wanted, "warning")
        await self.show_run()
        if self.focused is None or self.focused.id == "sidebar":
            self.query_one("#op-list", OptionList).focus()
        self.run_if_pending()

    # -- ctrl+s, ctrl+o ---------------------------------------------------------------------
    async def action_save(self) -> None:
        if self.ws.catalog is None:
            return
        problem = self.query_one(SpecEditor).problem
        if not problem and self.ws.adopt_draft():  # the new run on screen is saved with the session
            await self.show_run()
        if not self.ws.session.runs:
            self.report("nothing to save yet: a session needs at least one run (pick an op under + in the Runs list)", "warning")
            return
        if problem:  # the session still holds the last valid value: saving it would hide the error
            self.report(f"not saved: {problem} (fix the field first)")
            return
        copy = sessions_io.replaced_copy(self.ws.session, self.ws.path, self.data_dir)
        if copy is not None:
            question = (f"Your saved copy {copy.name} holds other runs or settings than this shipped "
                        "session. Replace your copy with it?")
            self.push_screen(ConfirmScreen(question), self._replace_answer)
            return
        await self._save_now()

    async def _replace_answer(self, yes: bool | None) -> None:
        if yes:
            await self._save_now()
        else:
            self.report("not saved: your copy stays as it is", "information")

    async def _save_now(self) -> None:
        try:
            target = sessions_io.save(self.ws.session, self.ws.path, self.data_dir)
        except (OSError, ValueError, TypeError) as exc:
            self.report(f"not saved: {save_error_text(exc, self.ws.path)}")
            return
        self.ws.path = target
        self.open_error = None
        self.query_one("#title-bar", Static).update(self.title_text())
        self.report(f"saved {target}", "information")

    def action_open(self) -> None:
        if self.running:
            self.notify("a run is in progress: cancel it (escape) before opening another session",
                        severity="warning")
        elif self.ws.catalog is not None:
            known = sessions_io.known_sessions(self.data_dir)
            self.push_screen(OpenScreen(known), self._open_answer)

    def _open_answer(self, answer: tuple[Path, bool] | None) -> None:
        if answer is None:
            return
        from workbench.plugin_trust import untrusted_plugins

        path, create = answer
        plugins = [] if path in getattr(self, "_trusted_paths", set()) else untrusted_plugins(path, False)
        if not plugins:
            self.open_path(path, create)
            return

        def trusted(yes: bool | None) -> None:  # issue #36: a session's plugins run as you when it opens
            if yes:
                self._trusted_paths = {*getattr(self, "_trusted_paths", set()), path}
                self.open_path(path, create)
            else:
                self.notify(f"{path.name}: not opened (its plugins were not trusted)", severity="warning")

        self.push_screen(ConfirmScreen(f"{path} loads plugins: {', '.join(plugins)}: Python code that opening it "
                                       "runs as you. Trust this session and open it?"), trusted)

    def action_open_original(self) -> None:
        """From a saved copy of a shipped session back to the shipped original."""
        original = sessions_io.shipped_original(self.ws.path, self.data_dir)
        if original is None:
            self.notify("this session is not a saved copy of a shipped one", severity="warning")
        elif self.running:
            self.notify("a run is in progress: cancel it (escape) first", severity="warning")
        else:
            self.open_path(original)

    @work(thread=True, exit_on_error=False, group="open")
    def open_path(self, path: Path | None, create: bool = False) -> None:
        """Open `path`; a missing file is an error unless `create` (the dialog asked twice)."""
        if path is None or self.running:
            return
        try:
            opened = self._open(path, self.ws.catalog.gpu, create)
        except Exception as exc:
            text = str(exc)  # a SessionError already starts with its file
            self.post_message(OpenFailed(text if str(path) in text else f"{path}: {text}"))
            return
        self.post_message(SessionOpened(opened.session, opened.path, opened.results, opened.notes))


def _load_catalog(kernels: list[str], device: str):
    from .catalog import load_catalog

    return load_catalog(kernels, device)


def save_error_text(exc: BaseException, path) -> str:
    """Why a save failed, in words: a file standing where a folder of the path must be showed
    Python's '[Errno 17] File exists: '/tmp/x/dir'' (a new user's try)."""
    import errno
    from pathlib import Path

    if isinstance(exc, OSError) and exc.errno in (errno.EEXIST, errno.ENOTDIR) and path is not None:
        blocking = next((p for p in Path(path).parents if p.exists() and not p.is_dir()), None)
        if blocking is not None:
            return f"{blocking} is a file, so {Path(path).name} cannot be written in a folder of that name"
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.filename}: {exc.strerror}" if exc.filename else exc.strerror
    return str(exc)
