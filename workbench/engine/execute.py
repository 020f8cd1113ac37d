"""Inside the child: one row = build -> check -> bench -> profile -> ptx, streaming events.

build_ms is the builder's time plus the first synchronised call (JIT, autotune, torch.compile,
load_inline all land there: MEASUREMENT.md rule 2, P2). peak_mem_bytes is the device memory
the row itself allocated at its peak during build and bench (the float64 check is excluded);
None on CPU. The check (workbench.verify.RowCheck) runs on the first call's output, on the op's
special-values set, and once more after timing on a second seeded set written into the same
input tensors; a failure there clears the timing (a wrong result gets no speed).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from workbench.engine.calibrate import calibrate
from workbench.engine.child import ChildJob, Channel
from workbench.engine.device import DeviceSession
from workbench.engine.precision import effective_fp32_precision
from workbench.engine.rows import Row
from workbench.engine.timing import Cancelled
from workbench.events import Built, Checked, Error, Result, Started
from workbench.registry import BuildContext, Registry


def one_line(exc: BaseException) -> str:
    """`Type: first line of the message` (CUDA errors, OOM, LimitError stay readable)."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


class RowRunner:
    """Runs rows in this child; `run(row)` returns False when the child must stop (error)."""

    def __init__(self, job: ChildJob, registry: Registry, channel: Channel, stop: Any):
        self.job, self.registry, self.channel, self.stop = job, registry, channel, stop
        self.devices: dict[str, DeviceSession] = {}

    def device(self, row: Row) -> DeviceSession:
        if row.device not in self.devices:
            self.devices[row.device] = DeviceSession(row.device, self.job, self.channel, self.stop)
        return self.devices[row.device]

    def run(self, row: Row) -> bool:
        record = row.record()
        try:
            if self.job.mode == "ptx":
                self._ptx_only(row, record)
            else:
                self._execute(row, record)
        except Cancelled:
            return False
        except Exception as exc:
            record.update(status="failed", error=one_line(exc))
            self.channel.event(Error(row.key, record["error"]))
            self.channel.event(Result(row.key, record))
            return False
        self.channel.event(Result(row.key, record))
        return True

    # -- stages -----------------------------------------------------------------------------
    def _resolve(self, row: Row):
        op = self.registry.op(row.op)
        impl = op.get_impl(row.impl)
        spec = op.make_spec(row.shape, row.dtype)
        precision = effective_fp32_precision(op, row.settings.fp32_precision)
        ctx = BuildContext(device=row.device, fp32_precision=precision,
                           interpret=self.job.interpret,
                           build_dir=Path(self.job.build_dir) if self.job.build_dir else None)
        return op, impl, spec, impl.resolve_params(row.params), ctx

    def _execute(self, row: Row, record: dict) -> None:
        op, impl, spec, params, ctx = self._resolve(row)
        dev = self.device(row)
        if "bench" in row.actions:  # references once per device, off the row's clock (calibrate.py)
            calibrate(dev)
        dev.apply_precision(ctx.fp32_precision)
        self.channel.event(Started(row.key, row.op, row.impl, spec.label, row.device))
        watch = impl.backend.watch()
        fn, inputs, out, check = self._build(row, record, op, impl, spec, params, ctx, dev, watch)
        if not self._check(row, record, op, spec, ctx, check, lambda: check.first(out)):
            return
        del out
        if not self._check(row, record, op, spec, ctx, check, lambda: check.special(fn)):
            return
        if "bench" in row.actions:
            dev.bench(row, record, op, impl, spec, params, fn, inputs)
        if "profile" in row.actions:
            dev.profile(row, record, fn, inputs)
        if not self._check(row, record, op, spec, ctx, check, lambda: check.timed(fn)):
            record["timing"] = record["traffic"] = None  # a wrong result gets no speed (rule 6)
            return
        if watch is not None:
            watch.finish(row, record, self.channel)
        if "ptx" in row.actions:
            dev.ptx(row, record, op, impl, spec, params, ctx)
        record["launch"] = launch_for(op, impl, spec, params, dev.info, record["ptx"], ctx)
        if record["status"] is None:
            record["status"] = "ok"

    def _build(self, row, record, op, impl, spec, params, ctx, dev, watch):
        from workbench.verify import RowCheck

        dev.reset_peak()
        inputs = op.make_inputs(spec, row.device, row.settings.seed)
        check = RowCheck(op, impl, spec, ctx, inputs, row.settings.seed, sync=dev.sync)  # fingerprints first
        dev.restart_peak()  # the fingerprints' scratch is the check's, not the row's
        if watch is not None:
            watch.start()
        t0 = time.perf_counter()
        fn = impl.builder(spec, params, ctx)
        out = fn(*inputs)
        dev.sync()
        record["build_ms"] = (time.perf_counter() - t0) * 1e3
        record["tuned"] = getattr(fn, "tuned", None)  # an autotuned kernel's choice (kernels/_autotune.py)
        record["peak_mem_bytes"] = dev.peak_bytes()
        if watch is not None:
            watch.after_build()
        self.channel.event(Built(row.key, record["build_ms"]))
        return fn, inputs, out, check

    def _check(self, row, record, op, spec, ctx, check, step) -> bool:
        """Run one check step (first call, special set, timed call); False when it failed."""
        from workbench.verify import failure_text, uses_tf32

        if op.matmul_like and str(spec.dtype) == "float32":
            record["fp32_precision"] = "tf32" if uses_tf32(op, spec, ctx) else "ieee"
        if step() is None:  # no special set
            return True
        record["check"] = check.report.as_dict()
        self.channel.event(Checked(row.key, record["check"]))
        if check.passed:
            return True
        record["status"] = "failed"
        record["error"] = failure_text(check.report)
        return False

    def _ptx_only(self, row: Row, record: dict) -> None:
        op, impl, spec, params, ctx = self._resolve(row)
        self.channel.event(Started(row.key, row.op, row.impl, spec.label, row.device))
        self.device(row).ptx(row, record, op, impl, spec, params, ctx)
        if record["status"] is None:
            record["status"] = "ok"


def launch_for(op: Any, impl: Any, spec: Any, params: dict, info: Any, ptx: dict | None = None,
               ctx: BuildContext | None = None) -> dict | None:
    """The `launch` record of a row: `workbench.ptx.extract.launch_record` (register allocation
    granularity, sm_90 limits; registers and shared memory from the row's ptx record), with the
    device's SM count and the run's BuildContext (so a launch that reads fp32_precision sees it)."""
    from workbench.ptx.extract import launch_record

    return launch_record(op, impl, spec, params, sm_count=info.sm_count, ptx=ptx, ctx=ctx)
