"""Before a row runs: is it describable, available here (per action), small enough?

Availability is per action (CONTRACTS.md "Results"; reasons from `workbench.machine`):
- no action available -> status `unavailable`, error = the reason;
- exec actions (check/bench/profile) unavailable but ptx available (a CUDA impl on a machine
  with nvcc and no GPU) -> ptx runs; a ptx-only row is `ok`, a row that also asked to measure
  is `unavailable` with the reason and its ptx filled;
- ptx unavailable but exec available -> exec runs, status from it, a flag names the reason.
Size: a row estimated far beyond timeout_s or the device's memory is `skipped` (error = the
estimate) unless forced; its ptx (size-independent, ahead of time) still runs when asked. Every
row that could execute carries its estimate (the record's `estimate`), forced or not.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from workbench.dtypes import DType
from workbench.engine.estimate import check_bytes_of, estimate_row, l2_flush_bytes, skip_reason
from workbench.engine.measure.graph_mode import graph_reason
from workbench.engine.rows import Row
from workbench.machine import Machine, unavailable_reason
from workbench.registry import Registry
from workbench.results.record import Flag


@dataclass
class Admission:
    """exec_row: what the execution child runs (None: nothing); ptx_row: what a separate PTX
    child runs (None: nothing, or ptx runs inside the exec child); final: the finished record
    when nothing runs; override: (status, error) replacing an `ok` status (actions that could
    not run: unavailable, skipped); flags: notes added to the record."""

    row: Row
    exec_row: Row | None = None
    ptx_row: Row | None = None
    final: dict | None = None
    override: tuple[str, str] | None = None
    flags: list[str] = field(default_factory=list)


def _finished(row: Row, status: str, error: str) -> Admission:
    record = row.record()
    record.update(status=status, error=error)
    return Admission(row, final=record)


def admit(row: Row, registry: Registry, machine: Machine, *, force: bool, interpret: bool,
          memory_bytes: int | None) -> Admission:
    """Decide how `row` runs. interpret: Triton runs under the interpreter on this row's device."""
    if row.error:
        return _finished(row, "failed", row.error)
    op = registry.op(row.op)
    impl = op.get_impl(row.impl)
    if row.device.startswith("cuda") and not machine.has_cuda:
        return _finished(row, "unavailable", f"device {row.device} requested but torch sees no CUDA GPU")
    dtype = DType.parse(row.dtype)
    exec_reason = graph_reason(row.device) if row.settings.timing_mode == "graph" else None
    exec_reason = exec_reason or next((r for a in row.exec_actions
                                       if (r := unavailable_reason(impl, a, machine, dtype, row.device))), None)
    ptx_reason = unavailable_reason(impl, "ptx", machine, dtype, row.device) if "ptx" in row.actions else None
    runs_exec = bool(row.exec_actions) and exec_reason is None
    runs_ptx = "ptx" in row.actions and ptx_reason is None
    if not runs_exec and not runs_ptx:
        return _finished(row, "unavailable", exec_reason or ptx_reason or "nothing to do")
    override = ("unavailable", exec_reason) if exec_reason else None
    if runs_exec:
        est = _estimate(row, op, impl, dtype, interpret)
        row = dataclasses.replace(row, estimate=est.as_dict())
        reason = None if force else skip_reason(est, row.settings.timeout_s, memory_bytes)
        if reason and not runs_ptx:
            return _finished(row, "skipped", reason)
        if reason:
            runs_exec, override = False, ("skipped", reason)
    separate_ptx = runs_ptx and (interpret or not runs_exec)
    admission = Admission(row, override=override)
    if runs_exec:
        actions = row.exec_actions + (("ptx",) if runs_ptx and not separate_ptx else ())
        admission.exec_row = dataclasses.replace(row, actions=actions)
    if separate_ptx:
        admission.ptx_row = dataclasses.replace(row, actions=("ptx",))
    if ptx_reason and runs_exec:
        admission.flags.append(Flag.PTX_UNAVAILABLE.format(detail=ptx_reason))
    return admission


def _estimate(row: Row, op, impl, dtype: DType, interpret: bool):
    if row.device.startswith("cuda"):
        way = "cuda"
    else:
        way = "interpreter" if interpret and impl.backend.interpreted(row.device) else "cpu"
    spec = op.make_spec(row.shape, row.dtype)
    s = row.settings
    return estimate_row(impl.cost(op, spec), way, row.exec_actions, itemsize=dtype.itemsize,
                        warmup_ms=s.warmup_ms, rep_ms=s.rep_ms, min_samples=s.min_samples,
                        footprint_bytes=op.footprint_bytes(spec), check_bytes=check_bytes_of(op, impl, spec),
                        flush_bytes=l2_flush_bytes(None) if way == "cuda" and s.flush_l2 else 0)
