"""The one core call: `run_plan(session, on_event=..., stop=..., options=..., workers=...) -> results document`.

For each run -> each implementation (`all` = every registered one) -> each sweep point, one
result record (CONTRACTS.md "Results"; every key present, None where not measured), in that
order. The parent never imports torch: ops are declared from the manifest (workbench/plugins/manifest.py),
the machine is probed through NVML, and what only plugin code knows (cost models, an op's own
spec rules, the device's properties) comes from the warm worker that runs the rows
(engine/planning.py). Rows run in warm workers reused across rows and runs (engine/workers.py,
engine/supervisor.py); where Triton is interpreted (CPU), or where only PTX is available, the
run's ptx actions run first, in a worker without TRITON_INTERPRET. Events reach `on_event` from
the calling thread, never from a worker; each row gets exactly one Result event, carrying the
same record as the document.

workers: a WorkerPool that outlives this call (the TUI keeps one for its whole life, so a
re-run costs the kernel, not a start); None: a private pool, closed before returning.

Several devices (`RunOptions.devices`, the session's settings.devices, `RunOptions.cluster`):
one run_plan per device or Ray actor, each on its own rows (`RunOptions.rows_here`), merged into
one document (engine/spread.py, placement.py, merge.py, ray_cluster.py).

Cancel: when `stop` is set, the running worker is stopped (killed at 2 s) and run_plan returns
within 3 s. Rows that had not finished are in the document with status `skipped` and error
"cancelled", and the document's `cancelled` is true.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import threading
from pathlib import Path
from typing import Any, Callable, Mapping

from workbench.diagnosis import diagnose_document, diagnose_record
from workbench.engine.ab_plan import ABJobs, ab_rows
from workbench.engine.admit import Admission, admit
from workbench.engine.worker.build_ahead import worth_building_ahead
from workbench.engine.measure.ceilings import CeilingCache, datasheet_for
from workbench.engine.measure.environment import DeviceInfo, environment_record, host_memory_bytes
from workbench.engine.options import USER_CACHE_VARS, RunOptions
from workbench.engine.cost_query import CostedRegistry, fact_key, queried_specs, with_spec_errors
from workbench.engine.protocol import ChildJob, Mode, WorkerKey
from workbench.engine.measure.relative import relate_to_pytorch
from workbench.engine.rows import Row, expand
from workbench.engine.multi.spread import local_parts, requested_devices, resolve_local, run_parts
from workbench.engine.supervisor import Background, Supervisor, query, worker_key
from workbench.trace import mark
from workbench.engine.measure.vec_isa import worker_env as vec_isa_env
from workbench.engine.pool import WorkerPool
from workbench.events import Event, Log, Result, Started
from workbench.machine import nvml_gpus, probe
from workbench.plugins.manifest import declare, sources_digest
from workbench.plugins.sources import compare_plugin_files, plugin_records
from workbench.results.provenance import provenance, utc_now_iso
from workbench.results.document import new_document
from workbench.results.record import Flag, Record, read_record
from workbench.session.model import Session

__all__ = ["RunOptions", "run_plan", "planned_device_name", "first_key", "build_session_ahead", "default_cache_dir", "worker_env",
           "new_pool"]


def default_cache_dir() -> Path:
    import platformdirs

    return Path(platformdirs.user_cache_dir("workbench"))


def worker_env(cache_dir: Path, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """What the core sets in every worker: Inductor's and Triton's caches under workbench's
    cache folder, so a second process start finds its kernels compiled (the core reads no
    environment itself; these are written, for the worker's libraries to read), except a cache
    folder the user set (`environ`, default os.environ: their TRITON_CACHE_DIR,
    TORCHINDUCTOR_CACHE_DIR, TORCH_EXTENSIONS_DIR or CUPY_CACHE_DIR is theirs, shared with their
    other tools). Inductor compiles in the worker itself (one compile thread): its pool of compile
    subprocesses costs a Python and torch start per worker, the cost warm workers exist to remove,
    and with the FX graph cache warm nothing is compiled (docs/engine.md, "Warm workers").
    load_inline builds go to the run's build folder; one without (a plugin's own load_inline call)
    goes to TORCH_EXTENSIONS_DIR, and CuPy's NVRTC binaries to CUPY_CACHE_DIR, both here too: every
    compiler cache a cold start fills lies under the cache folder unless the user chose another
    (docs/engine.md, "Cold start")."""
    environ = os.environ if environ is None else environ
    caches = {"TORCHINDUCTOR_CACHE_DIR": str(Path(cache_dir) / "inductor"),
              "TRITON_CACHE_DIR": str(Path(cache_dir) / "triton"),
              "TORCH_EXTENSIONS_DIR": str(Path(cache_dir) / "torch_extensions"),
              "CUPY_CACHE_DIR": str(Path(cache_dir) / "cupy")}
    return {**{k: v for k, v in caches.items() if not (k in USER_CACHE_VARS and environ.get(k))},
            "TORCHINDUCTOR_COMPILE_THREADS": "1",
            **vec_isa_env(cache_dir)}  # Inductor's CPU ISA check once per host (engine/vec_isa.py)


def new_pool(options: RunOptions = RunOptions(), *, on_cuda: bool | None = None) -> WorkerPool:
    """A worker pool for these options (spares: options.warm_spare, else only on CUDA)."""
    cache_dir = Path(options.cache_dir) if options.cache_dir else default_cache_dir()
    on_cuda = probe().has_cuda if on_cuda is None else on_cuda
    spares = on_cuda if options.warm_spare is None else options.warm_spare
    return WorkerPool(spares=spares, start_method=options.start_method, env=worker_env(cache_dir))


@dataclasses.dataclass
class _Plan:
    plugin_paths: tuple[str, ...]
    sources: str
    registry: object
    machine: object
    rows: list[Row]


def run_plan(session: Session, *, on_event: Callable[[Event], None],
             stop: threading.Event | None = None, options: RunOptions = RunOptions(),
             workers: WorkerPool | None = None) -> dict:
    """Run every row of `session`; return the results document. Raises WorkbenchError for an
    unknown op/implementation or a plugin that fails to load (before anything runs)."""
    stop = stop or threading.Event()
    started = utc_now_iso()
    cache_dir = Path(options.cache_dir) if options.cache_dir else default_cache_dir()
    plan = _plan(session, options, cache_dir)
    if options.rows_here is None and (options.cluster or requested_devices(session, options)):
        return _spread(session, plan, on_event, stop, options, workers)  # engine/spread.py
    # A spare starting (importing torch) while a CPU row is timed would share the host's cores
    # with that row's timing: seen on a 2-core machine as medians in 4 ms scheduler steps.
    pool = workers or new_pool(options, on_cuda=all(r.device.startswith("cuda") for r in plan.rows
                                                     if r.key not in options.done))
    try:
        return _run(session, options, plan, pool, on_event, stop, started, cache_dir)
    finally:
        if workers is None:
            pool.close()  # a private pool: no worker outlives the call (finish, cancel, error)


def _spread(session, plan, on_event, stop, options, workers) -> dict:
    """Several places (--devices, settings.devices, --cluster ray): each runs run_plan on its rows."""
    if options.cluster == "ray":
        from workbench.engine.multi.ray_cluster import ray_parts  # ray is an optional extra

        parts = ray_parts(session, plan.rows, options, plan.plugin_paths, run_plan)
    else:
        gpus = len(nvml_gpus())  # CUDA_VISIBLE_DEVICES may leave fewer (read by the CLI)
        visible = gpus if options.visible_gpus is None else min(gpus, options.visible_gpus)
        devices = resolve_local(session, options, visible)
        parts = local_parts(session, plan.rows, devices, options, run_plan, workers)
    return run_parts(parts, [r.key for r in plan.rows], on_event, stop)


def _run(session, options, plan, pool, on_event, stop, started, cache_dir) -> dict:
    build_dir = Path(options.build_dir) if options.build_dir else cache_dir / "build"
    main = _main_key(plan)
    todo = [r for r in plan.rows if r.key not in options.done]  # --resume: only what is missing
    mark("plan: rows expanded; asking the worker for their facts")
    facts, worker = _facts(plan, todo, pool, main)
    mark("plan: facts answered")
    machine = plan.machine if worker is None else dataclasses.replace(plan.machine, has_cuda=worker.has_cuda)
    rows = with_spec_errors(todo, facts)
    registry = CostedRegistry(plan.registry, facts)
    info = _main_info(main, worker)
    run = _PlanRun(rows, on_event, stop, pool, dict(cache_dir=str(cache_dir), build_dir=str(build_dir),
                                                    trace_dir=str(options.trace_dir) if options.trace_dir else None,
                                                    trace_session=session.name,
                                                    report_dir=str(options.report_dir) if options.report_dir else None),
                   plan, strict=options.strict, registry=registry,
                   build_ahead=options.build_ahead is not False and not options.strict)
    used = (*plan.plugin_paths, *compare_plugin_files(session))  # the A/B sides' plugin files too
    doc = new_document(_provenance(session, options, started, plugin_records(used, plan.registry)),
                       environment_record(info, worker.cuda_version if worker else None))  # now: cancel is quick
    run.environment = doc["environment"]
    groups = [list(g) for _run_index, g in itertools.groupby(rows, key=lambda r: r.run_index)]
    ab = ABJobs(ab_rows(session, registry, has_cuda=machine.has_cuda, device_override=options.device)
                if options.ab else {}, on_event, run.run_ab)  # A/B rows: engine/ab_plan.py
    run.start_session_build_ahead(groups, machine)
    try:
        for index, group in enumerate(groups):
            if stop.is_set():
                break
            interpret = _interpret(group[0], machine)
            following = groups[index + 1] if index + 1 < len(groups) else None
            then = _key(plan, following, _interpret(following[0], machine)) if following else None
            run.run([admit(r, registry, machine, force=options.force, interpret=interpret,
                           memory_bytes=_memory_bytes(r, info)) for r in group], interpret=interpret, then=then)
            ab.run(group[0].run_index, registry, machine, interpret)
    finally:
        run.finish_session_build_ahead()
    for run_index in ab.not_run():  # runs whose rows were all done already (--resume)
        if not stop.is_set():
            ab.run(run_index, registry, machine, _interpret(ab.by_run[run_index][0], machine))
    run.cancel_rest()
    ab.cancel_rest()
    doc["environment"].update(_ceilings(info, cache_dir))
    doc["results"] = [options.done.get(r.key) or run.records[r.key] for r in plan.rows]
    doc["ab"] = ab.entries
    relate_to_pytorch(doc["results"])  # traffic.speedup_vs_pytorch (engine/relative.py)
    diagnose_document(doc)  # every record's `diagnosis` (workbench/diagnosis/)
    doc["cancelled"] = stop.is_set()
    mark(f"plan: done, {len(doc['results'])} row(s)")
    return doc


def _plan(session: Session, options: RunOptions, cache_dir: Path) -> _Plan:
    """Plugin paths, their digest, the declared registry, the machine and the expanded rows."""
    plugin_paths = tuple(str(p) for p in (*options.kernels, *session.plugins))
    registry, machine = declare(plugin_paths, cache_dir=cache_dir), probe()
    rows = expand(session, registry, has_cuda=machine.has_cuda, device_override=options.device)
    if options.rows_here is not None:  # one place of a spread run (engine/spread.py): its rows, its device
        rows = [dataclasses.replace(r, device=options.rows_here[r.key]) for r in rows if r.key in options.rows_here]
    return _Plan(plugin_paths, sources_digest(plugin_paths), registry, machine, rows)


def _key(plan: _Plan, rows: list[Row], interpret: bool) -> WorkerKey:
    return worker_key(rows, plan.plugin_paths, interpret, plan.sources)


def _main_key(plan: _Plan) -> WorkerKey:
    """The worker of the main device (the first CUDA row's, else the CPU's exec worker)."""
    cuda = [r for r in plan.rows if r.device.startswith("cuda")]
    rows = cuda[:1] or plan.rows[:1]
    return _key(plan, rows, bool(rows) and _interpret(rows[0], plan.machine))


def _facts(plan: _Plan, rows: list[Row], pool: WorkerPool, key: WorkerKey):
    """The worker's answers for every row of `rows` that needs them, and its facts (None: no
    worker was needed: nothing runs and the main device is the CPU)."""
    specs = queried_specs(rows, plan.registry, plan.machine)
    if not specs and not key.device.startswith("cuda"):
        return {}, None
    answers, worker = query(pool, key, specs)
    return {fact_key(*spec): answer for spec, answer in zip(specs, answers)}, worker


def _main_info(key: WorkerKey, worker) -> DeviceInfo:
    if key.device.startswith("cuda") and worker is not None and worker.device_info:
        return DeviceInfo(**worker.device_info)
    return DeviceInfo(name="cpu", memory_bytes=host_memory_bytes(), driver=None)


def _interpret(row: Row, machine) -> bool:
    return not row.device.startswith("cuda") and machine.triton


def planned_device_name(session: Session, options: RunOptions = RunOptions()) -> str:
    """The `environment.device` that run_plan(session, options) will record ("NVIDIA H200",
    "cpu"), found without running anything (NVML's name; for --compare's check up front)."""
    cache_dir = Path(options.cache_dir) if options.cache_dir else default_cache_dir()
    plan = _plan(session, options, cache_dir)
    on_cuda = plan.machine.has_cuda and any(r.device.startswith("cuda") for r in plan.rows)
    return plan.machine.device_name if on_cuda else "cpu"


def first_key(session: Session, options: RunOptions = RunOptions()) -> WorkerKey | None:
    """The key of the worker run_plan(session, options) will ask first (None: no rows), so a
    front end can have it warming up before the run is asked for (screens/options.prestart)."""
    cache_dir = Path(options.cache_dir) if options.cache_dir else default_cache_dir()
    plan = _plan(session, options, cache_dir)
    return _main_key(plan) if plan.rows else None


def build_session_ahead(session: Session, options: RunOptions, pool: WorkerPool) -> Background | None:
    """Compile the Triton and CUDA kernels of every run of `session` into the shared caches, in a
    build worker of `pool`, before any run is asked for; returns the job (its finish() stops it)
    or None where the rules of engine/build_ahead.py say no (rows not all on CUDA, a launch-bound
    row, strict mode, build_ahead=False, nothing to compile). The TUI calls it when a session
    opens: it runs one run per `r`, so each run's own build-ahead would start only with that run
    (measured on H200: the default session's softmax CUDA row then waited ~40 s for softmax.cu).
    Raises what planning raises (a plugin that fails to load)."""
    if options.build_ahead is False or options.strict:
        return None
    cache_dir = Path(options.cache_dir) if options.cache_dir else default_cache_dir()
    plan = _plan(session, options, cache_dir)
    rows = [r for r in plan.rows if r.exec_actions and r.device.startswith("cuda")]
    if not rows or len(rows) != len([r for r in plan.rows if r.exec_actions]):
        return None
    interpret = _interpret(rows[0], plan.machine)
    if interpret or len({_key(plan, [r], interpret) for r in rows}) != 1:
        return None
    # the costs come from the build worker itself: the prestarted worker stays free for a run
    key = dataclasses.replace(_key(plan, rows, interpret), role="build")
    facts, _worker = _facts(plan, rows, pool, key)
    rows = [r for r in with_spec_errors(rows, facts) if not r.error]
    if not worth_building_ahead(rows, CostedRegistry(plan.registry, facts)):
        return None
    build_dir = Path(options.build_dir) if options.build_dir else cache_dir / "build"
    return Background(pool, key, ChildJob(Mode.build, tuple(rows), key.plugin_paths, interpret, "",
                                          str(cache_dir), str(build_dir)))


def _memory_bytes(row: Row, info: DeviceInfo) -> int | None:
    return info.memory_bytes if row.device.startswith("cuda") == (info.name != "cpu") else None


class _PlanRun:
    """Records by row key, merging of ptx and availability, exactly one Result per row."""

    def __init__(self, rows, on_event, stop, pool: WorkerPool, child_args: dict, plan: _Plan, strict: bool = False,
                 registry=None, build_ahead: bool = False):
        self.rows, self.on_event, self.stop, self.pool = rows, on_event, stop, pool
        self.plan, self.strict, self.registry, self.build_ahead = plan, strict, registry, build_ahead
        self.child_args = child_args
        self.records: dict = {}      # row key -> the record dict that goes into the document
        self.typed: dict[Any, Record] = {}  # row key -> the same record read once (the findings' peers)
        self.environment: dict = {}  # the document's, for the findings sent with each Result
        self.admissions: dict = {}
        self.ptx_records: dict[Any, Record] = {}
        self.session_ahead: Background | None = None  # start_session_build_ahead

    def run(self, admissions: list[Admission], interpret: bool, then: WorkerKey | None = None) -> None:
        """One run: rows decided up front, then one PTX job for the run's separate-PTX rows,
        then one execution job per implementation, each on the pool's warm worker for its key.
        then: the key of the worker expected after this run (a spare for it warms up meanwhile
        where the pool has none idle)."""
        for adm in admissions:
            self.admissions[adm.row.key] = adm
            if adm.final is not None:
                self._emit_final(adm.row, read_record(adm.final))
        ptx_rows = [a.ptx_row for a in admissions if a.ptx_row is not None]
        exec_rows = [a.exec_row for a in admissions if a.exec_row is not None]
        jobs = [(Mode.exec, list(rows), interpret) for _impl, rows in
                itertools.groupby(exec_rows, key=lambda r: (r.label, r.impl))]
        if ptx_rows:
            jobs.insert(0, (Mode.ptx, ptx_rows, False))
        keys = [_key(self.plan, rows, interp) for _mode, rows, interp in jobs] + [then]
        ahead = None if self.session_ahead else self._start_building_ahead(exec_rows, interpret)
        try:
            self._run_jobs(jobs, keys)
        finally:
            for line in ahead.finish() if ahead else ():
                self.on_event(Log(exec_rows[0].key, line))

    def start_session_build_ahead(self, groups: list[list[Row]], machine: Any) -> None:
        """One build-ahead worker for every run of the session, started before the first run:
        the default session's softmax.cu (~40 s of nvcc on the H200) then compiles while the
        GeLU run is timed, not while the softmax rows wait for it. Only where every run shares
        one worker key and no row of the session is launch-bound (build_ahead.py's rules); else
        each run builds its own rows ahead."""
        rows = [r for group in groups for r in group if r.exec_actions and not r.error]
        if not rows or len({_interpret(g[0], machine) for g in groups}) != 1:
            return
        interpret = _interpret(groups[0][0], machine)
        if len({_key(self.plan, [r], interpret) for r in rows}) == 1:
            self.session_ahead = self._start_building_ahead(rows, interpret)

    def finish_session_build_ahead(self) -> None:
        if self.session_ahead is not None:
            for line in self.session_ahead.finish():
                self.on_event(Log(self.rows[0].key, line))
            self.session_ahead = None

    def _start_building_ahead(self, rows: list[Row], interpret: bool) -> Background | None:
        """The run's Triton and CUDA kernels compiled into the shared caches by a worker of their
        own while the rows are timed (engine/build_ahead.py says when that is allowed)."""
        if not self.build_ahead or interpret or not worth_building_ahead(rows, self.registry):
            return None
        key = dataclasses.replace(_key(self.plan, rows, interpret), role="build")
        job = ChildJob(Mode.build, tuple(rows), key.plugin_paths, interpret, "", **self.child_args)
        return Background(self.pool, key, job)

    def _run_jobs(self, jobs, keys) -> None:
        for index, (mode, rows, _interp) in enumerate(jobs):
            if self.stop.is_set():
                return
            on_event, on_result = ((self._ptx_event, self._ptx_result) if mode == Mode.ptx
                                   else (self.on_event, self._exec_result))
            following = next((k for k in keys[index + 1:] if k != keys[index]), None)
            sup = Supervisor(on_event, on_result, self.stop, self.pool)
            sup.run_rows(rows, key=keys[index], mode=mode, next_key=following, strict=self.strict,
                         **self.child_args)

    def run_ab(self, rows: list[Row], on_result: Callable[[Row, dict], None], interpret: bool) -> None:
        """A/B rows (engine/ab_plan.py) in one worker job of mode "ab" (both sides in it)."""
        if not self.stop.is_set():
            sup = Supervisor(self.on_event, on_result, self.stop, self.pool)
            sup.run_rows(rows, key=_key(self.plan, rows, interpret), mode=Mode.ab, next_key=None,
                         strict=self.strict, **self.child_args)

    def _ptx_event(self, event: Event) -> None:
        if not isinstance(event, Started) or self.admissions[event.row].exec_row is None:
            self.on_event(event)

    def _ptx_result(self, row: Row, data: dict) -> None:
        adm = self.admissions[row.key]
        if adm.exec_row is None:
            self._finalise(adm, read_record(data))
        else:
            self.ptx_records[row.key] = read_record(data)

    def _exec_result(self, row: Row, data: dict) -> None:
        adm = self.admissions[row.key]
        record, ptx = read_record(data), self.ptx_records.get(row.key)
        if ptx is not None:
            record.ptx = ptx.ptx
            if ptx.error:
                record.add_flag(Flag.PTX_ERROR, detail=ptx.error)
        self._finalise(adm, record)

    def _finalise(self, adm: Admission, record: Record) -> None:
        record.flags = [*record.flags, *adm.flags]
        if adm.override and record.status == "ok":
            record.status, record.error = adm.override
        self._emit_final(adm.row, record)

    def _emit_final(self, row: Row, record: Record) -> None:
        self.typed[row.key] = record
        # the findings so far go out with the Result (a jsonl stream, the TUI); run_plan
        # re-diagnoses every record once all peers are there (a `+graph` row that came later)
        findings = diagnose_record(record, self.environment, list(self.typed.values()))
        data = self.records[row.key] = {**record.to_dict(), "diagnosis": findings}  # the document's dict
        self.on_event(Result(row.key, data))

    def cancel_rest(self) -> None:
        """Rows without a record (the run was cancelled) become skipped / "cancelled"."""
        for row in self.rows:
            if row.key not in self.records:
                record = row.new_record()
                record.status, record.error = "skipped", "cancelled"
                self._emit_final(row, record)


def _provenance(session: Session, options: RunOptions, started: str, plugins: list[dict]) -> dict:
    return provenance(session.name, session_sha256=options.session_sha256, argv=options.argv, started=started,
                      plugins=plugins)


def _ceilings(info: DeviceInfo, cache_dir: Path) -> dict:
    """Ceilings the children measured (or found cached) for this device, and its datasheet."""
    if info.name == "cpu":
        return {"ceilings": None, "datasheet": None}
    return {"ceilings": CeilingCache(cache_dir).load().get(info.cache_key), "datasheet": datasheet_for(info.name)}
