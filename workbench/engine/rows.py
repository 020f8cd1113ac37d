"""Expanding a session into result rows: run -> implementation (`all` = every registered one) ->
sweep point. One `Row` is one result record; rows of one (run, implementation) share a child.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

from workbench.events import RowKey
from workbench.errors import WorkbenchError
from workbench.results.record import Record
from workbench.session.model import ImplRef, RunSpec, Session, Settings
from workbench.variants import split_variant

if TYPE_CHECKING:  # the registry imports torch; the row counter below is for torch-free front ends too
    from workbench.registry import BuildContext, Registry

EXEC_ACTIONS = ("check", "bench", "profile", "counters")


@dataclass(frozen=True)
class Row:
    """One (run, implementation, sweep point): plain data, picklable for a spawned child.

    shape/params: the spec's size fields and the implementation's parameter overrides after
    the sweep value is applied; device: a torch device string ("cpu", "cuda:0"); actions:
    normalised (bench and profile imply check), in the order check, bench, profile, ptx;
    error: why the row cannot even be described (bad sweep parameter, bad shape), or None;
    estimate: the size estimate admission made (engine/estimate.Estimate.as_dict), or None.
    compare: the two sides (session_model.ABSide) of an A/B row (engine/ab.py), else None.
    A `<impl>+graph` name runs `impl` with settings.timing_mode "graph" (workbench/variants.py).
    """

    run_index: int
    op: str
    impl: str
    label: str
    params: Mapping[str, Any]
    shape: Mapping[str, Any]
    dtype: str | None
    sweep_value: Any
    actions: tuple[str, ...]
    settings: Settings
    device: str
    error: str | None = None
    estimate: Mapping[str, Any] | None = None
    compare: tuple[Any, ...] | None = None

    @property
    def key(self) -> RowKey:
        return (self.run_index, self.label, self.sweep_value)

    @property
    def exec_actions(self) -> tuple[str, ...]:
        return tuple(a for a in self.actions if a in EXEC_ACTIONS)

    def record(self) -> dict:
        """The result record skeleton of this row (status and measurements None), as JSON."""
        return self.new_record().to_dict()

    def new_record(self) -> Record:
        """The typed result record of this row (workbench/results/record.py), measurements None."""
        return Record(run_index=self.run_index, op=self.op, impl=self.impl, label=self.label,
                      params=dict(self.params), shape=dict(self.shape), dtype=self.dtype,
                      sweep_value=self.sweep_value, device=self.device,
                      estimate=dict(self.estimate) if self.estimate is not None else None)


@dataclass(frozen=True)
class RowContext:
    """A Row resolved in the worker that runs it: what every stage of the row (build, check,
    bench, counters, ptx, launch) needs beside the record, travelling as one object.

    op / impl: the registry's Op and Impl; spec: the op's spec for the row's shape and dtype;
    params: the implementation's parameters resolved (defaults filled in); ctx: the
    registry.BuildContext (device, fp32 precision in effect, interpreter, build folder)."""

    row: Row
    op: Any
    impl: Any
    spec: Any
    params: dict[str, Any]
    ctx: BuildContext


def resolve_device(setting: str, has_cuda: bool) -> str:
    """auto -> cuda:0 when a GPU is visible, else cpu; cuda -> cuda:0; cpu and cuda:N unchanged."""
    if setting == "auto":
        return "cuda:0" if has_cuda else "cpu"
    return "cuda:0" if setting == "cuda" else setting


def normalise_actions(actions: tuple[str, ...]) -> tuple[str, ...]:
    """bench, profile and counters imply check (a wrong result gets no speed: rule 6); fixed order."""
    wanted = set(actions)
    if wanted & {"bench", "profile", "counters"}:
        wanted.add("check")
    return tuple(a for a in ("check", "bench", "profile", "counters", "ptx") if a in wanted)


def run_settings(session: Session, run: RunSpec, device_override: str | None) -> Settings:
    """Session settings updated with the run's overrides and the command line's --device."""
    settings = dataclasses.replace(session.settings, **dict(run.settings))
    return dataclasses.replace(settings, device=device_override) if device_override else settings


def expand(session: Session, registry: Registry, *, has_cuda: bool,
           device_override: str | None = None) -> list[Row]:
    """Every row of the session in document order. Raises UnknownNameError for an unknown op or
    implementation (the session loader reports those first); a bad sweep parameter or shape
    becomes the row's `error`. Two rows with one key (a label repeated in a run; the session
    loader refuses those) raise WorkbenchError."""
    rows = []
    for run_index, run in enumerate(session.runs):
        op = registry.op(run.op)
        settings = run_settings(session, run, device_override)
        device = resolve_device(settings.device, has_cuda)
        for ref in run_refs(run, op.impls):
            name, mode = split_variant(ref.name)
            impl = op.get_impl(name)
            ref_settings = dataclasses.replace(settings, timing_mode=mode) if mode else settings
            for sweep_value, assigned in points(run):
                rows.append(make_row(run_index, run, op, impl, ref, ref_settings, device, sweep_value, assigned))
    keys = [r.key for r in rows]
    if len(set(keys)) != len(keys):
        dup = next(k for k in keys if keys.count(k) > 1)
        raise WorkbenchError(f"runs[{dup[0]}]: label {dup[1]!r} appears twice; give one a distinct label")
    return rows


def run_refs(run: RunSpec, registered: Iterable[str]) -> tuple[ImplRef, ...]:
    """The run's implementations; `impls: all` (None) is every registered name, in order."""
    return run.impls if run.impls is not None else tuple(ImplRef(name) for name in registered)


def run_row_keys(run_index: int, run: RunSpec, registered: Iterable[str]) -> list[RowKey]:
    """The keys of one run's rows in document order, as `expand` makes them (the one row
    counter: `len` of this). registered: the op's implementation names (for `impls: all`)."""
    return [(run_index, ref.display, value) for ref in run_refs(run, registered) for value, _ in points(run)]


def row_keys(session: Session, registered: Callable[[str], Iterable[str]]) -> list[RowKey]:
    """Every row key of `session` in document order, without importing the registry:
    registered(op) gives an op's implementation names (a registry, or a torch-free manifest)."""
    return [key for index, run in enumerate(session.runs) for key in run_row_keys(index, run, registered(run.op))]


def points(run: RunSpec) -> list[tuple[Any, dict]]:
    if run.sweep is None:
        return [(None, {})]
    return [(value, {name: value for name in run.sweep.params}) for value in run.sweep.values]


def make_row(run_index, run, op, impl, ref, settings, device, sweep_value, assigned) -> Row:
    shape, params, error = dict(run.shape), dict(ref.params), None
    for name, value in assigned.items():
        if name in op.spec.shape_fields():
            shape[name] = value
        elif name in impl.params:
            params[name] = value
        else:
            error = f"sweep parameter {name!r} is neither a shape field of {op.name} nor a parameter of {impl.name}"
    try:
        spec = op.make_spec(shape, run.dtype)
        shape, dtype = spec.shape, str(spec.dtype)
    except ValueError as exc:
        error = error or str(exc)
        dtype = run.dtype
    return Row(run_index=run_index, op=op.name, impl=impl.name, label=ref.display, params=params,
               shape=shape, dtype=dtype, sweep_value=sweep_value, actions=normalise_actions(tuple(run.actions)),
               settings=settings, device=device, error=error)
