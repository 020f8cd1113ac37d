"""Rows spread over several devices (`--devices`, `--cluster ray`: engine/spread.py) in the TUI:
a `device` column in the results table that appears only when a run's rows ran on more than one
device, and a per-device progress line for the run bar. Plain functions over the model's rows
and the engine's events; nothing here appears in a one-device run."""

from __future__ import annotations

from typing import Iterable

from workbench import events as ev
from workbench.results.record import read_record

DEVICE_COLUMN = "device"


def row_devices(rows: Iterable) -> list[str]:
    """The distinct devices the rows ran (or run) on, in first-seen order."""
    return list(dict.fromkeys(r.device for r in rows if getattr(r, "device", None)))


def show_device_column(table, wanted: bool) -> None:
    """Add the `device` column at the end when wanted, remove it when not (a DataTable)."""
    present = DEVICE_COLUMN in {str(key.value) for key in table.columns}
    if wanted and not present:
        table.add_column(DEVICE_COLUMN, key=DEVICE_COLUMN)
    elif present and not wanted:
        table.remove_column(DEVICE_COLUMN)


class DeviceProgress:
    """Per device: rows finished and the row running now, from the engine's events.
    `line()` is "cuda:0 3 done, gelu triton @ 4096 · cuda:1 2 done, idle", or "" while one
    device (or none) has been seen."""

    def __init__(self) -> None:
        self.done: dict[str, int] = {}
        self.running: dict[str, str] = {}
        self.device_of: dict = {}

    def apply(self, event: ev.Event) -> None:
        if isinstance(event, ev.Started):
            where = event.row[1] if event.row[2] is None else f"{event.row[1]} @ {event.row[2]}"
            self.device_of[event.row] = event.device
            self.done.setdefault(event.device, 0)
            self.running[event.device] = f"{event.op} {where}"
        elif isinstance(event, ev.Result):
            device = (read_record(event.record).device if event.record else None) or self.device_of.get(event.row)
            if device is None:
                return
            self.done[device] = self.done.get(device, 0) + 1
            if self.device_of.get(event.row) == device:
                self.running.pop(device, None)

    def line(self) -> str:
        if len(self.done) < 2:
            return ""
        return " · ".join(f"{device} {count} done, {self.running.get(device, 'idle')}"
                          for device, count in self.done.items())
