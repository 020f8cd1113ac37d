"""The parent's side of A/B (engine/ab.py): a run's `compare: [A, B]` becomes one A/B row per
sweep point, run in ONE worker (mode "ab") after the run's own rows; each finished row is an
entry of the document's `ab` list and a `Compared` event.

A side named by a label of the run's `impls` takes that entry's implementation, params and
label. Rows that cannot run here (no CUDA device for a cuda row, a side unavailable for bench,
graph mode on CPU) become entries with status "unavailable" and the reason, without a worker.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Callable

from workbench.dtypes import DType
from workbench.engine.measure.graph_mode import graph_reason
from workbench.engine.rows import Row, points, resolve_device, run_settings
from workbench.events import Compared, Event
from workbench.machine import Machine, unavailable_reason
from workbench.session.model import ABSide, RunSpec, Session
from workbench.variants import split_variant

if TYPE_CHECKING:
    from workbench.registry import Registry

AB_KEYS = ("run_index", "op", "shape", "dtype", "sweep_value", "a", "b", "a_impl", "b_impl", "a_source",
           "b_source", "ratio", "ci_low", "ci_high", "confidence", "verdict", "n", "a_median_ms",
           "b_median_ms", "timer", "flush_l2", "batches", "status", "error", "flags")


def new_entry(row: Row, **values) -> dict:
    """An entry of a document's `ab` list (docs/CONTRACTS.md) for an A/B row (`row.compare`
    holds its two sides), every key of AB_KEYS present, None where not measured."""
    a, b = row.compare
    entry = dict.fromkeys(AB_KEYS)
    entry.update(run_index=row.run_index, op=row.op, shape=dict(row.shape), dtype=row.dtype,
                 sweep_value=row.sweep_value, a=a.display, b=b.display, flags=[], **values)
    return entry


def ab_rows(session: Session, registry: Registry, *, has_cuda: bool,
            device_override: str | None = None) -> dict[int, list[Row]]:
    """The A/B rows of every run with `compare`, by run index (sweep points in order)."""
    out: dict[int, list[Row]] = {}
    for run_index, run in enumerate(session.runs):
        if run.compare is None:
            continue
        op = registry.op(run.op)
        settings = run_settings(session, run, device_override)
        device = resolve_device(settings.device, has_cuda)
        sides = tuple(_side(run, side) for side in run.compare)
        out[run_index] = [_row(run_index, run, op, sides, settings, device, value, assigned)
                          for value, assigned in points(run)]
    return out


def _side(run: RunSpec, side: ABSide) -> ABSide:
    """A bare name that is a label of the run's impls takes that entry (name, params, label)."""
    if side.plugin or side.rev or side.params or run.impls is None:
        return side
    ref = next((r for r in run.impls if r.display == side.name), None)
    if ref is None:
        return side
    return ABSide(name=ref.name, params=dict(ref.params), label=ref.display)


def _row(run_index, run, op, sides, settings, device, sweep_value, assigned) -> Row:
    shape, error = dict(run.shape), None
    fields = op.spec.shape_fields()
    extra = {k: v for k, v in assigned.items() if k not in fields}
    shape.update({k: v for k, v in assigned.items() if k in fields})
    if extra:  # an impl parameter swept: both sides take it (resolve_params refuses it if unknown)
        sides = tuple(dataclasses.replace(s, params={**s.params, **extra}) for s in sides)
    try:
        spec = op.make_spec(shape, run.dtype)
        shape, dtype = spec.shape, str(spec.dtype)
    except ValueError as exc:
        error, dtype = str(exc), run.dtype
    a, b = sides
    return Row(run_index=run_index, op=op.name, impl=split_variant(a.name)[0], label=f"{a.display} vs {b.display}",
               params={}, shape=shape, dtype=dtype, sweep_value=sweep_value, actions=("check", "bench"),
               settings=settings, device=device, error=error, compare=sides)


def unavailable(row: Row, registry: Registry, machine: Machine) -> str | None:
    """Why an A/B row cannot run here (None: it can). Plugin and revision sides are resolved
    in the worker, so only their device is checked here."""
    if row.error:
        return row.error
    if row.device.startswith("cuda") and not machine.has_cuda:
        return f"device {row.device} requested but torch sees no CUDA GPU"
    op = registry.op(row.op)
    for side in row.compare:
        name, mode = split_variant(side.name)
        if mode == "graph" and graph_reason(row.device):
            return f"{side.display}: {graph_reason(row.device)}"
        if side.plugin or side.rev:
            continue
        reason = unavailable_reason(op.get_impl(name), "bench", machine, DType.parse(row.dtype), row.device)
        if reason:
            return f"{side.display}: {reason}"
    return None


class ABJobs:
    """Runs the A/B rows of each run (`run(run_index, ...)`) through `run_rows(rows, on_result,
    interpret)` (one worker) and collects their entries in order; `cancel_rest` gives every row
    that did not run an entry "skipped" / "cancelled"."""

    def __init__(self, by_run: dict[int, list[Row]], on_event: Callable[[Event], None],
                 run_rows: Callable[..., None]):
        self.by_run, self.on_event, self.run_rows = by_run, on_event, run_rows
        self.entries: list[dict] = []
        self._pending = [row for rows in by_run.values() for row in rows]
        self._started: set[int] = set()

    def not_run(self) -> list[int]:
        """Run indices with A/B rows that `run` has not been called for."""
        return [index for index in self.by_run if index not in self._started]

    def run(self, run_index: int, registry: Registry, machine: Machine, interpret: bool) -> None:
        self._started.add(run_index)
        runnable = []
        for row in self.by_run.get(run_index, []):
            reason = unavailable(row, registry, machine)
            if reason:
                self._emit(row, new_entry(row, status="unavailable", error=reason))
            else:
                runnable.append(row)
        if runnable:
            self.run_rows(runnable, self._result, interpret)

    def _result(self, row: Row, record: dict) -> None:
        if "ratio" not in record:  # the worker failed the row (an exception, a crash, a timeout)
            record = new_entry(row, status=record.get("status") or "failed", error=record.get("error"))
        self._emit(row, record)

    def _emit(self, row: Row, entry: dict) -> None:
        self.entries.append(entry)
        self._pending = [r for r in self._pending if r.key != row.key]
        self.on_event(Compared(row.key, entry))

    def cancel_rest(self) -> None:
        for row in list(self._pending):
            self._emit(row, new_entry(row, status="skipped", error="cancelled"))
