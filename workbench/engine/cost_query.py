"""Planning in the parent without torch: declared ops (workbench/plugins/manifest.py), the machine
(NVML), and the facts only plugin code knows, asked of a warm worker in one query.

The size estimate (engine/admit.py) needs each row's cost model and footprint, and a spec may
have the op's own rules (Spec.check); both are plugin code, so the worker that will run the rows
answers for all of them at once (protocol.Query) while the parent waits for it anyway. The
answers are put behind the declared ops by `CostedRegistry`, which admit reads like the real
registry.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterable

from workbench.cost import Cost
from workbench.engine.protocol import SpecFacts
from workbench.engine.rows import Row
from workbench.errors import WorkbenchError
from workbench.machine import Machine, unavailable_reason
from workbench.dtypes import DType

FactKey = tuple[str, str, tuple, str | None]


def fact_key(op: str, impl: str, shape: Any, dtype: Any) -> FactKey:
    return (op, impl, tuple(sorted(dict(shape).items())), None if dtype is None else str(dtype))


def needs_facts(row: Row, registry: Any, machine: Machine) -> bool:
    """Whether planning `row` needs the worker: it may run (an estimate is needed) or its op has
    spec rules of its own (only the plugin can check them)."""
    if row.error:
        return False
    op = registry.op(row.op)
    if getattr(op, "own_spec_check", False):
        return True
    if not row.exec_actions or (row.device.startswith("cuda") and not machine.has_cuda):
        return False
    dtype = DType.parse(row.dtype) if row.dtype else None
    impl = op.get_impl(row.impl)
    return all(unavailable_reason(impl, a, machine, dtype, row.device) is None for a in row.exec_actions)


def queried_specs(rows: Iterable[Row], registry: Any, machine: Machine) -> list[FactKey]:
    """The distinct (op, impl, shape, dtype) the worker is asked about, in row order."""
    keys = [fact_key(r.op, r.impl, r.shape, r.dtype) for r in rows if needs_facts(r, registry, machine)]
    return list(dict.fromkeys(keys))


def with_spec_errors(rows: list[Row], facts: dict[FactKey, SpecFacts]) -> list[Row]:
    """Rows whose spec the op's own rules refuse get that error (they fail without running)."""
    out = []
    for row in rows:
        found = facts.get(fact_key(row.op, row.impl, row.shape, row.dtype))
        out.append(dataclasses.replace(row, error=found.error) if found and found.error and not row.error else row)
    return out


class CostedRegistry:
    """The declared registry with the worker's cost and footprint answers behind `op.cost`,
    `impl.cost` and `op.footprint_bytes` (everything else is the declared op)."""

    def __init__(self, registry: Any, facts: dict[FactKey, SpecFacts]):
        self.registry, self.facts = registry, facts

    def op(self, name: str) -> "_CostedOp":
        return _CostedOp(self.registry.op(name), self.facts)

    def __contains__(self, name: object) -> bool:
        return name in self.registry

    @property
    def ops(self):
        return self.registry.ops


class _CostedOp:
    def __init__(self, op: Any, facts: dict[FactKey, SpecFacts]):
        self._op, self._facts = op, facts

    def __getattr__(self, name: str) -> Any:
        return getattr(self._op, name)

    def get_impl(self, name: str) -> "_CostedImpl":
        return _CostedImpl(self._op.get_impl(name), self)

    def fact(self, impl: str, spec: Any) -> SpecFacts:
        found = self._facts.get(fact_key(self._op.name, impl, spec.shape, getattr(spec, "dtype", None)))
        if found is None:
            raise WorkbenchError(f"{self._op.name}/{impl}: no cost known for {spec.label} (not asked of the worker)")
        return found

    def footprint_bytes(self, spec: Any) -> int:
        matches = [f for k, f in self._facts.items() if k[0] == self._op.name
                   and k[2:] == fact_key("", "", spec.shape, getattr(spec, "dtype", None))[2:]]
        if not matches:
            raise WorkbenchError(f"{self._op.name}: no footprint known for {spec.label}")
        return matches[0].footprint_bytes


class _CostedImpl:
    def __init__(self, impl: Any, op: _CostedOp):
        self._impl, self._op = impl, op

    def __getattr__(self, name: str) -> Any:
        return getattr(self._impl, name)

    def cost(self, op: Any, spec: Any) -> Cost:
        found = self._op.fact(self._impl.name, spec)
        return Cost(found.bytes_read, found.bytes_written, found.flops, found.bytes_moved_est)

    def check_bytes(self, spec: Any) -> int | None:
        """The worker's check workspace for this row (SpecFacts.check_bytes)."""
        return self._op.fact(self._impl.name, spec).check_bytes
