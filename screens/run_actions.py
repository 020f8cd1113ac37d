"""Managing the session's runs from the keyboard and the palette: delete (u undoes it),
duplicate, move up and down; and the run's dtype and actions from the palette.

The Workspace does the bookkeeping (runs, their results on screen and in NAME.results.json move
together); this mixin refuses while a run is in flight (its index would move under it), then
redraws, autosaves and rewrites the results file.
"""

from __future__ import annotations

import dataclasses

from textual.binding import Binding

from . import editing, sessions_io

UNDO_KEY = Binding("u", "undo_delete", "Undo delete", show=False)


class RunsMixin:
    """Mixed into WorkbenchApp: uses its `ws`, `running`, `report`, `show_run`,
    `schedule_autosave`, `data_dir` and `log_pane`."""

    def _runs_editable(self) -> bool:
        if self.running:
            self.notify("a run is in progress: runs are deleted or moved once it is over (escape cancels)",
                        severity="warning")
            return False
        if self.ws.index is None:
            what = "a new run (not in the session until it is run)" if self.ws.run else "no run"
            self.notify(f"this is {what}: pick a run in the list", severity="warning")
            return False
        return True

    async def action_delete_run(self) -> None:
        if self._runs_editable():
            removed = self.ws.delete_run(self.ws.index)
            await self._runs_changed(f"deleted run {removed.index} ({removed.run.op}): u brings it back")

    async def action_undo_delete(self) -> None:
        if self.running:
            self.notify("a run is in progress: undo once it is over", severity="warning")
        elif not self.ws.removed:
            self.notify("nothing to undo", severity="information")
        else:
            restored = self.ws.undo_delete()
            await self._runs_changed(f"run {restored.index} ({restored.run.op}) is back")

    async def action_duplicate_run(self) -> None:
        if self._runs_editable():
            index = self.ws.duplicate_run(self.ws.index)
            await self._runs_changed(f"run {index} is a copy of run {index - 1}")

    async def action_move_run(self, delta: int) -> None:
        if self._runs_editable():
            before = self.ws.index
            after = self.ws.move_run(before, delta)
            if after != before:
                await self._runs_changed(f"run {before} is now run {after}")

    async def action_set_dtype(self, dtype: str) -> None:
        ws = self.ws
        if ws.run is not None and ws.op is not None and dtype in ws.op.dtypes:
            self._edit(dataclasses.replace(ws.run, dtype=dtype))
            await self.show_run()

    async def action_toggle_action(self, action: str) -> None:
        ws = self.ws
        if ws.run is not None:
            actions = set(ws.run.actions) ^ {action}
            self._edit(editing.with_actions(ws.run, actions))
            await self.show_run()

    async def _runs_changed(self, note: str) -> None:
        await self.show_run()
        self.schedule_autosave()
        self.notify(note, timeout=3)
        self.log_pane.add(note)
        if self.ws.saved_results is not None:
            path = sessions_io.results_file(self.ws.path, self.data_dir, self.ws.session.name)
            try:
                sessions_io.write_results(self.ws.saved_results, path)
            except (OSError, ValueError) as exc:
                self.report(f"results not rewritten: {exc}", "warning")
