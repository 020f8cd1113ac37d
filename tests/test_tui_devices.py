"""The TUI's view of a run spread over devices (screens/devices_view.py): the device column only
when rows ran on more than one device, and a per-device progress line."""

from __future__ import annotations

from textual.widgets.data_table import ColumnKey

from workbench.events import Result, Started
from workbench.screens.devices_view import DeviceProgress, row_devices, show_device_column
from workbench.screens.model import RunModel


def _started(label, sweep, device):
    return Started((0, label, sweep), "gelu", label, "4x64", device)


def _result(label, sweep, device):
    return Result((0, label, sweep), {"run_index": 0, "impl": label, "label": label, "sweep_value": sweep,
                                      "status": "ok", "device": device})


def test_progress_line_per_device_only_with_two_devices():
    progress = DeviceProgress()
    progress.apply(_started("manual", 64, "cuda:0"))
    assert progress.line() == ""  # one device: the run bar says what it always said
    progress.apply(_started("manual", 96, "cuda:1"))
    progress.apply(_result("manual", 64, "cuda:0"))
    assert progress.line() == "cuda:0 1 done, idle · cuda:1 0 done, gelu manual @ 96"


def test_model_rows_know_their_device_and_the_column_follows():
    model = RunModel()
    for event in (_started("manual", 64, "cuda:0"), _started("manual", 96, "cuda:1"), _result("manual", 96, "cuda:1")):
        model.apply(event)
    assert row_devices(model.rows.values()) == ["cuda:0", "cuda:1"]
    table = _Table(["impl", "status"])
    show_device_column(table, True)
    show_device_column(table, True)
    assert table.names() == ["impl", "status", "device"]
    show_device_column(table, False)
    assert table.names() == ["impl", "status"]


class _Table:
    """DataTable's column calls (a real one needs a running app), keyed as Textual keys them."""

    def __init__(self, names):
        self.columns = {ColumnKey(n): n for n in names}

    def add_column(self, label, key):
        self.columns[ColumnKey(key)] = label

    def remove_column(self, key):
        del self.columns[ColumnKey(key)]

    def names(self):
        return [str(k.value) for k in self.columns]
