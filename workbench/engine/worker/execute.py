"""Inside a worker: one row = build -> check -> bench -> profile -> ptx, streaming events.

build_ms is the builder's time plus the first synchronised call (JIT, autotune, torch.compile,
load_inline all land there: MEASUREMENT.md rule 2, P2). peak_mem_bytes is the device memory
the row itself allocated at its peak during build and bench (the float64 check is excluded);
None on CPU. The check (workbench.check.row.RowCheck) runs on the first call's output, on the op's
special-values set, and once more after timing on a second seeded set written into the same
input tensors; a failure there clears the timing (a wrong result gets no speed).

Builds are cached in the worker (engine/build_cache.py): a row whose implementation was built
before in this process (same op, implementation, params, spec, dtype and source) skips the
builder; build_ms is then its first synchronised call only, and a flag says so.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

from workbench.engine.worker.ab import ab_row
from workbench.engine.worker.build_cache import BuildCache, build_key
from workbench.engine.measure.calibrate import calibrate, references_for
from workbench.trace import mark
from workbench.engine.measure.counters_run import counters_row
from workbench.engine.measure.device import DeviceSession
from workbench.engine.measure.graph_mode import wrap_for_mode
from workbench.engine.worker.precision import effective_fp32_precision
from workbench.engine.protocol import Channel, ChildJob, Mode
from workbench.engine.rows import Row, RowContext
from workbench.engine.measure.timing import Cancelled
from workbench.engine.measure.timing_notes import note_timing
from workbench.error_location import describe_error
from workbench.events import Built, Checked, Error, Result, Started
from workbench.errors import UnavailableError, WorkbenchError
from workbench.registry import BuildContext, Registry
from workbench.results.record import Check, Flag, Launch, Record, RecordError
from workbench.tuning import tuned_record


CACHED_FLAG = Flag.BUILD_CACHED.template  # "build cached: built earlier in this worker ..."
STRICT_FLAG = Flag.STRICT.template  # "strict: {n} value comparisons judged in a clean process ..."


class RowRunner:
    """Runs rows in this worker, job after job: `bind(job, channel, stop)`, then `run(row)` per
    row, which returns why the worker must leave (None: it may take the next row)."""

    def __init__(self, registry: Registry, interpret: bool, baseline: Any):
        self.registry, self.interpret, self.baseline = registry, interpret, baseline
        self.devices: dict[str, DeviceSession] = {}
        self.builds = BuildCache()
        self.job: ChildJob | None = None
        self.judge: Any = None  # --strict: the row's workbench.check.strict.Judge

    def bind(self, job: ChildJob, channel: Channel, stop: Any) -> None:
        self.job, self.channel, self.stop = job, channel, stop
        for dev in self.devices.values():
            dev.bind(job, channel, stop)

    def device(self, row: Row) -> DeviceSession:
        if row.device not in self.devices:
            self.devices[row.device] = DeviceSession(row.device, self.job, self.channel, self.stop)
        return self.devices[row.device]

    def run(self, row: Row) -> str | None:
        record = row.new_record()
        entry: dict | None = None  # an A/B row's result is its `ab` entry (engine/ab_plan.AB_KEYS), not a record
        leave = None
        self.judge = self._judge()
        try:
            if self.job.mode == Mode.ptx:
                self._ptx_only(row, record)
            elif self.job.mode == Mode.ab:
                entry = ab_row(self, row)
            else:
                self._execute(row, record)
        except Cancelled:
            return "cancelled"
        except UnavailableError as exc:  # a builder that finds something missing here (docs/PLUGINS.md)
            record.status, record.error = "unavailable", str(exc)
        except Exception as exc:
            # `path:line: Type: message`: the line of the plugin (or op file) that raised
            error = describe_error(exc, self.job.plugin_paths)
            record.fail(error)
            self.channel.event(Error(row.key, error))
            # Our own refusals (a limit, no PTX) leave the process as it was; anything else (a
            # CUDA error, an OOM, a plugin's bug) may have poisoned it.
            leave = None if isinstance(exc, WorkbenchError) else f"the row raised {type(exc).__name__}"
        finally:
            self._close_judge(entry if entry is not None else record)
        mark(f"row {row.op} {row.label}: done, resetting")
        problem = self.baseline.after_row(sum(d.kept_bytes for d in self.devices.values()))
        if problem is not None:
            (entry["flags"] if entry is not None else record.flags).append(Flag.WORKER_REPLACED.format(problem=problem))
        # JSON across the process boundary: the typed record ends here
        self.channel.event(Result(row.key, entry if entry is not None else result_payload(row, record)))
        mark(f"row {row.op} {row.label}: result sent")
        return "; ".join(r for r in (leave, problem) if r) or None

    def _judge(self) -> Any:
        """--strict: the row's Judge (its value comparisons in a clean process), else None."""
        if not getattr(self.job, "strict", False):
            return None
        from workbench.check.strict import Judge
        from workbench.engine.private_tmp import private_tmp

        return Judge(root=private_tmp())  # a worker killed mid-row leaves its copies to the sweep

    def _close_judge(self, record: Record | dict) -> None:
        judge, self.judge = self.judge, None
        if judge is None:
            return
        judge.close()
        if judge.cases and isinstance(record.get("flags"), list):
            record["flags"].append(STRICT_FLAG.format(n=judge.cases))

    # -- stages -----------------------------------------------------------------------------
    def _resolve(self, row: Row) -> RowContext:
        op = self.registry.op(row.op)
        impl = op.get_impl(row.impl)
        spec = op.make_spec(row.shape, row.dtype)
        precision = effective_fp32_precision(op, row.settings.fp32_precision)
        ctx = BuildContext(device=row.device, fp32_precision=precision,
                           interpret=self.interpret,
                           build_dir=Path(self.job.build_dir) if self.job.build_dir else None)
        return RowContext(row, op, impl, spec, impl.resolve_params(row.params), ctx)

    def _execute(self, row: Row, record: Record) -> None:
        """The row inside an NVTX range named after it (engine/measure/nvtx.py), its phases nested;
        none with the row's setting `nvtx: false`."""
        from workbench.engine.measure.nvtx import row_range

        dev = self.device(row)
        dev.nvtx = row.settings.nvtx
        with dev.phase(row_range(row.key)):
            self._execute_row(self._resolve(row), record)

    def _execute_row(self, rc: RowContext, record: Record) -> None:
        row, op, impl, spec = rc.row, rc.op, rc.impl, rc.spec
        dev = self.device(row)
        mark(f"row {row.op} {row.label}: start")
        if "bench" in row.actions:  # the references its bars use, once per device, off the row's clock
            calibrate(dev, references_for(dev.info.name, op, impl, spec, row.settings.fp32_precision))
            mark(f"row {row.op} {row.label}: references ready")
        dev.apply_precision(rc.ctx.fp32_precision)
        self.channel.event(Started(row.key, row.op, row.impl, spec.label, row.device))
        watch = impl.backend.watch()
        from workbench.check.row import trust_flags

        record.flags.extend(trust_flags(op, impl, spec))  # what plugin code decided of the check
        with dev.phase("build"):
            fn, inputs, out, check = self._build(rc, record, dev, watch)
        mark(f"row {row.op} {row.label}: built")
        if not self._check(rc, record, check, lambda: check.first(out)):  # noqa: F821 (called before the del below)
            return
        del out
        if not self._check(rc, record, check, lambda: check.special(fn)):
            return
        mark(f"row {row.op} {row.label}: checked")
        rotation = None
        if "bench" in row.actions:
            from workbench.engine.measure.rotation import row_rotation

            rotation = row_rotation(fn, check)  # rule 13: timed inputs rotate, outputs kept
            dev.bench(rc, record, fn, inputs, rotation)
            note_timing(row, record)
            mark(f"row {row.op} {row.label}: benched")
        if "profile" in row.actions:
            dev.profile(row, record, fn, inputs)
            mark(f"row {row.op} {row.label}: profiled")
        if rotation is not None:
            from workbench.engine.measure.rotation import check_rotation

            if not self._check(rc, record, check, lambda: check_rotation(check, fn, rotation)):
                record.timing = record.traffic = None  # what was timed was wrong (rule 13)
                return
        if not self._check(rc, record, check, lambda: check.timed(fn)):
            record.timing = record.traffic = None  # a wrong result gets no speed (rule 6)
            return
        if "counters" in row.actions:
            with dev.phase("counters"):
                counters_row(dev, row, record, op, impl, spec)
        if watch is not None:
            watch.finish(row, record, self.channel)
        mark(f"row {row.op} {row.label}: timed output checked")
        if "ptx" in row.actions:
            dev.ptx(rc, record)
            mark(f"row {row.op} {row.label}: ptx")
        launch = launch_for(op, impl, spec, rc.params, dev.info, record.ptx, rc.ctx)
        record.launch = Launch.from_dict(launch, "launch") if launch is not None else None
        mark(f"row {row.op} {row.label}: launch record")
        if record.status is None:
            record.status = "ok"

    def _build(self, rc: RowContext, record: Record, dev: DeviceSession, watch: Any):
        from workbench.check.row import RowCheck

        row = rc.row
        dev.reset_peak()
        inputs = rc.op.make_inputs(rc.spec, row.device, row.settings.seed)
        check = RowCheck(rc.op, rc.impl, rc.spec, rc.ctx, inputs, row.settings.seed, sync=dev.sync,  # fingerprints first
                         judge=self.judge)
        dev.restart_peak()  # the fingerprints' scratch is the check's, not the row's
        if watch is not None:
            watch.start()
        key = build_key(row, rc.impl, rc.spec, rc.params, self.interpret)
        t0 = time.perf_counter()
        fn = wrap_for_mode(row, self._built(key, rc, dev, record, watch), inputs)  # graph_mode.py
        out = fn(*inputs)
        dev.sync()
        record.build_ms = (time.perf_counter() - t0) * 1e3
        record.tuned = tuned_record(fn)  # an autotuned kernel's choice (workbench/tuning.TunedCallable)
        record.peak_mem_bytes = dev.peak_bytes()
        if watch is not None:
            watch.after_build()
        self.channel.event(Built(row.key, record.build_ms))
        return fn, inputs, out, check

    def _built(self, key: Any, rc: RowContext, dev: DeviceSession, record: Record, watch: Any = None):
        """The cached build, or a fresh one (cached unless its backend watches each build, as
        torch.compile's does: it resets dynamo and counts the row's own compiles; or unless the
        builder kept device memory: a cached closure holding tensors would look like a leak,
        worker_state)."""
        cacheable = watch is None
        fn = self.builds.get(key) if cacheable else None
        if fn is not None:
            record.flags.append(CACHED_FLAG)
            return fn
        before = dev.allocated_bytes()
        fn = rc.impl.builder(rc.spec, rc.params, rc.ctx)
        if cacheable and dev.allocated_bytes() == before:
            self.builds.put(key, fn)
        return fn

    def _check(self, rc: RowContext, record: Record, check: Any, step: Callable[[], Any]) -> bool:
        """Run one check step (first call, special set, timed call); False when it failed."""
        from workbench.check.row import failure_text, uses_tf32

        if rc.op.matmul_like and str(rc.spec.dtype) == "float32":
            record.fp32_precision = "tf32" if uses_tf32(rc.op, rc.spec, rc.ctx) else "ieee"
        with self.device(rc.row).phase("check"):
            done = step()
        if done is None:  # no special set
            return True
        report = check.report.as_dict()
        record.check = Check.from_dict(report, "check")
        self.channel.event(Checked(rc.row.key, report))
        if check.passed:
            return True
        record.fail(failure_text(check.report))
        return False

    def _ptx_only(self, row: Row, record: Record) -> None:
        rc = self._resolve(row)
        self.channel.event(Started(row.key, row.op, row.impl, rc.spec.label, row.device))
        self.device(row).ptx(rc, record)
        if record.status is None:
            record.status = "ok"


def result_payload(row: Row, record: Record) -> dict:
    """The record as the Result event carries it (JSON), checked to read back: a value of the wrong
    type (a plugin's watcher or cost model wrote it) fails the row with the error naming key,
    value and what is allowed, instead of reaching a reader in the front end."""
    data = record.to_dict()
    try:
        Record.from_dict(data)
    except RecordError as exc:
        return {**row.record(), "status": "failed", "error": f"result record: {exc}", "flags": data["flags"]}
    return data


def launch_for(op: Any, impl: Any, spec: Any, params: dict, info: Any, ptx: dict | None = None,
               ctx: BuildContext | None = None) -> dict | None:
    """The `launch` record of a row: `workbench.ptx.extract.launch_record` (register allocation
    granularity, sm_90 limits; registers and shared memory from the row's ptx record), with the
    device's SM count and the run's BuildContext (so a launch that reads fp32_precision sees it)."""
    from workbench.ptx.extract import launch_record

    return launch_record(op, impl, spec, params, sm_count=info.sm_count, ptx=ptx, ctx=ctx)
