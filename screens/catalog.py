"""What the app can offer: ops, their implementations and what this machine can run, as plain data.

`load_catalog` reads the ops' declarations (workbench/plugins/manifest.py: cached, no torch; the first
start after a kernel file changes builds the manifest in a subprocess) and probes the machine
through NVML, in a thread after the first frame; everything else here is plain data.
Availability is per action and dtype (CONTRACTS.md): `ImplInfo.reasons[(action, dtype)]`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

ACTIONS = ("check", "bench", "profile", "ptx")


@dataclass(frozen=True)
class ImplInfo:
    """One implementation: name, one-line description, default params, availability.

    reasons: (action, dtype) -> why it cannot do that here, or None when it can;
    note: a marker for what really runs (e.g. 'Triton interpreter only (not GPU speed)').
    """

    name: str
    description: str = ""
    params: Mapping[str, Any] = field(default_factory=dict)
    reasons: Mapping[tuple[str, str], str | None] = field(default_factory=dict)
    note: str = ""

    def reason(self, actions: Iterable[str], dtype: str) -> str | None:
        """The first reason it cannot do one of `actions` (None: it can do them all)."""
        return next((r for a in actions if (r := self.reasons.get((a, dtype)))), None)

    def blocked(self, actions: Iterable[str], dtype: str) -> bool:
        """It can do none of `actions` here, so there is nothing to select it for."""
        actions = tuple(actions)
        return bool(actions) and all(self.reasons.get((a, dtype)) for a in actions)


@dataclass(frozen=True)
class OpInfo:
    """An op: shape fields with defaults, dtypes (first = default) and implementations."""

    name: str
    description: str
    defaults: Mapping[str, int]
    dtypes: tuple[str, ...]
    default_dtype: str
    impls: tuple[ImplInfo, ...]
    validate: Callable[[Mapping[str, Any], str], str | None] = lambda shape, dtype: None

    @property
    def shape_fields(self) -> tuple[str, ...]:
        return tuple(self.defaults)

    def impl(self, name: str) -> ImplInfo | None:
        return next((i for i in self.impls if i.name == name), None)


@dataclass(frozen=True)
class Catalog:
    """Every op by name, and a one-line summary of the machine ('CPU only · Triton interpreted')."""

    ops: Mapping[str, OpInfo]
    machine: str
    gpu: bool = False
    notes: tuple[str, ...] = ()

    def op(self, name: str) -> OpInfo | None:
        return self.ops.get(name)


def load_catalog(kernel_paths: Iterable[str] = (), device: str = "auto") -> Catalog:
    """The ops' declarations (the registry's one door, through the manifest) and the machine."""
    from workbench.machine import probe
    from workbench.plugins.manifest import declare, empty_source_note, empty_sources

    registry = declare(list(kernel_paths))
    machine = probe()
    ops = {name: _op_info(op, machine, device) for name, op in sorted(registry.ops.items())}
    notes = tuple(empty_source_note(key) for key in empty_sources(registry))
    return Catalog(ops=ops, machine=_machine_line(machine), gpu=machine.has_cuda, notes=notes)


CPU_SHAPE_CAP = 512  # without a GPU a new run starts at most this large per shape field


def _op_info(op, machine, device: str) -> OpInfo:
    default = op.spec()
    dtypes = tuple(d.value for d in op.dtypes)
    return OpInfo(
        name=op.name, description=op.description, defaults=_default_shape(op, default, machine, device),
        dtypes=dtypes,
        default_dtype=getattr(default, "dtype", op.dtypes[0]).value,
        impls=tuple(_impl_info(impl, op, machine, device) for impl in op.impls.values()),
        validate=_validator(op))


def _default_shape(op, default, machine, device: str) -> dict:
    """The op's (lecture-sized) default shape, capped at CPU_SHAPE_CAP per field where runs go
    to the CPU, so a new run there does not start as a row too large to run."""
    shape = dict(default.shape)
    if machine.has_cuda and device != "cpu":
        return shape
    capped = {k: min(v, CPU_SHAPE_CAP) if isinstance(v, int) else v for k, v in shape.items()}
    try:
        op.make_spec(capped, getattr(default, "dtype", None))
    except ValueError:
        return shape
    return capped


def _impl_info(impl, op, machine, device: str) -> ImplInfo:
    from workbench.machine import note, unavailable_reason

    reasons = {(a, d.value): unavailable_reason(impl, a, machine, d, device)
               for a in ACTIONS for d in op.dtypes}
    return ImplInfo(name=impl.name, description=impl.description, params=dict(impl.params),
                    reasons=reasons, note=note(impl, machine, device))


def _validator(op) -> Callable[[Mapping[str, Any], str], str | None]:
    """The op's own rules (its spec), then the bound every op shares: its tensors must be
    addressable (at most 2^63-1 bytes), or a forced run fails inside torch with an overflow.
    An op declared from the manifest (no cost model in this process) has that bound checked
    by the worker when the run is planned (workbench/engine/worker.describe)."""
    from workbench.spec import addressable_problem

    def validate(shape: Mapping[str, Any], dtype: str) -> str | None:
        try:
            spec = op.make_spec(shape, dtype)
            footprint = None if getattr(op, "declared", False) else op.footprint_bytes(spec)
        except (ValueError, OverflowError) as exc:
            return str(exc)
        return None if footprint is None else addressable_problem(spec, footprint)
    return validate


def _machine_line(machine) -> str:
    device = machine.device_name or "CPU only (no GPU)"
    parts = [device]
    if machine.triton_interpreted:
        parts.append("Triton interpreted")
    parts.append(f"nvcc {'yes' if machine.nvcc else 'none'}")
    return " · ".join(parts)
