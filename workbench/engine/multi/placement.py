"""Where each row runs when a sweep uses several devices (`--devices`, `--cluster ray`): plain
data, no torch, no processes (tests/test_placement.py runs it without either).

Rules (issue #20):
- the unit of placement is one *point*: every implementation of one run at one sweep value
  (same run_index and sweep_value). A point's rows stay together on one device, so they are
  timed on the same silicon and their ratios (traffic.speedup_vs_pytorch) mean something;
- CUDA points spread over the places, each to the place with the fewest rows so far (ties: the
  lower index), in session order, so a sweep's points and a session's runs spread out and the
  split is the same every time for the same session and device list;
- rows that run on the CPU (a run with `device: cpu`) stay on place 0 and never count towards
  its load (the CPU is one device however many GPUs there are);
- A/B rows (`compare:`) run on place 0 (engine/ab_plan.py keeps them in one worker job).

workbench/device_list.py turns the request ("all", "cuda:0,cuda:2", "cpu") into torch device strings.
"""

from __future__ import annotations

from typing import Iterable, Sequence

from workbench.device_list import DEVICES_ALLOWED, parse_devices, resolve_devices
from workbench.engine.rows import Row
from workbench.events import RowKey

__all__ = ["DEVICES_ALLOWED", "parse_devices", "resolve_devices", "point_of", "place_rows", "rows_by_place"]

def point_of(row: Row) -> tuple:
    """The placement unit of a row: (run_index, sweep_value) as text (sweep values may be lists)."""
    return (row.run_index, repr(row.sweep_value))


def place_rows(rows: Iterable[Row], places: int) -> dict[RowKey, int]:
    """The place index (0..places-1) of every row, by the module's rules. Raises ValueError for
    places < 1."""
    if places < 1:
        raise ValueError(f"places must be >= 1, got {places}")
    load = [0] * places
    chosen: dict[tuple, int] = {}
    out: dict[RowKey, int] = {}
    for row in rows:
        if not row.device.startswith("cuda"):
            out[row.key] = 0
            continue
        point = point_of(row)
        if point not in chosen:
            chosen[point] = min(range(places), key=lambda i: (load[i], i))
        out[row.key] = chosen[point]
        load[chosen[point]] += 1
    return out


def rows_by_place(rows: Sequence[Row], placement: dict[RowKey, int], places: int) -> list[list[Row]]:
    """The rows of each place, in session order."""
    out: list[list[Row]] = [[] for _ in range(places)]
    for row in rows:
        out[placement[row.key]].append(row)
    return out
