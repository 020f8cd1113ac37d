"""The one core call: `run_plan(session, on_event=..., stop=..., options=...) -> results document`.

For each run -> each implementation (`all` = every registered one) -> each sweep point, one
result record (CONTRACTS.md "Results"; every key present, None where not measured), in that
order. Rows of one (run, implementation) share an execution child (engine/supervisor.py);
where Triton is interpreted (CPU), or where only PTX is available, the run's ptx actions run
first, in one separate child without TRITON_INTERPRET. Events reach `on_event` from the calling thread, never from a child; each
row gets exactly one Result event, carrying the same record as the document.

Cancel: when `stop` is set, the running child is stopped (killed at 2 s) and run_plan returns
within 3 s. Rows that had not finished are in the document with status `skipped` and error
"cancelled", and the document's `cancelled` is true.
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

from workbench.engine.admit import Admission, admit
from workbench.engine.ceilings import CeilingCache, datasheet_for
from workbench.engine.environment import DeviceInfo, device_info, environment_record
from workbench.engine.relative import relate_to_pytorch
from workbench.engine.rows import Row, expand
from workbench.engine.supervisor import ChildKey, SparePool, Supervisor, child_key
from workbench.events import Event, Result, RowKey, Started
from workbench.machine import probe
from workbench.provenance import provenance, utc_now_iso
from workbench.registry import discover
from workbench.results import new_document
from workbench.session_model import Session


@dataclass(frozen=True)
class RunOptions:
    """How to run a session. device: overrides every run's device (auto|cpu|cuda|cuda:N);
    kernels: extra plugin paths (--kernels); force: run rows estimated too large; argv and
    session_sha256: provenance; cache_dir: ceilings cache (None: the platformdirs user cache
    folder "workbench"); build_dir: load_inline builds (None: cache_dir/build); trace_dir:
    write a chrome trace per profiled row there (None: none); warm_spare: keep one spare child
    started ahead of need (engine/supervisor.py; False: every child starts cold; None, the
    default: only when every row runs on a CUDA device, since CPU rows are timed on the host's
    cores that a starting spare would share); done: records of rows already finished (by row
    key, from a stopped run's journal: `--resume`), put in the document as they are, not run."""

    device: str | None = None
    kernels: tuple[str, ...] = ()
    force: bool = False
    argv: tuple[str, ...] = ()
    session_sha256: str | None = None
    cache_dir: Path | None = None
    build_dir: Path | None = None
    trace_dir: Path | None = None
    warm_spare: bool | None = None
    done: Mapping[RowKey, dict] = field(default_factory=dict)


def default_cache_dir() -> Path:
    import platformdirs

    return Path(platformdirs.user_cache_dir("workbench"))


def run_plan(session: Session, *, on_event: Callable[[Event], None],
             stop: threading.Event | None = None, options: RunOptions = RunOptions()) -> dict:
    """Run every row of `session`; return the results document. Raises WorkbenchError for an
    unknown op/implementation or a plugin that fails to load (before anything runs)."""
    stop = stop or threading.Event()
    started = utc_now_iso()
    plugin_paths, registry, machine, all_rows = _plan_rows(session, options)
    rows = [r for r in all_rows if r.key not in options.done]  # --resume: only what is missing
    cache_dir = Path(options.cache_dir) if options.cache_dir else default_cache_dir()
    build_dir = Path(options.build_dir) if options.build_dir else cache_dir / "build"
    trace_dir = str(options.trace_dir) if options.trace_dir else None
    # A spare starting (importing torch) while a CPU row is timed would share the host's cores
    # with that row's timing: seen on a 2-core machine as medians in 4 ms scheduler steps.
    on_cuda = all(r.device.startswith("cuda") for r in rows)
    spares = SparePool(enabled=on_cuda if options.warm_spare is None else options.warm_spare)
    run = _PlanRun(rows, on_event, stop, plugin_paths, str(cache_dir), str(build_dir), trace_dir, spares)
    info = _main_device(all_rows, machine.has_cuda)
    doc = new_document(_provenance(session, options, started), environment_record(info))  # now: cancel is quick
    groups = [list(g) for _run_index, g in itertools.groupby(rows, key=lambda r: r.run_index)]
    try:
        for index, group in enumerate(groups):
            if stop.is_set():
                break
            interpret = _interpret(group[0], machine)
            following = groups[index + 1] if index + 1 < len(groups) else None
            then = (child_key(following, plugin_paths, _interpret(following[0], machine))
                    if following else None)  # the next run's first child, most likely
            run.run([admit(r, registry, machine, force=options.force, interpret=interpret,
                           memory_bytes=_memory_bytes(r, info)) for r in group], interpret=interpret,
                    then=then)
    finally:
        spares.close()  # a spare nobody took (finish, cancel, error) leaves with the run
    run.cancel_rest()
    doc["environment"].update(_ceilings(info, cache_dir))
    doc["results"] = [options.done.get(r.key) or run.records[r.key] for r in all_rows]
    relate_to_pytorch(doc["results"])  # traffic.speedup_vs_pytorch (engine/relative.py)
    doc["cancelled"] = stop.is_set()
    return doc


def _interpret(row: Row, machine) -> bool:
    return not row.device.startswith("cuda") and machine.triton


def planned_device_name(session: Session, options: RunOptions = RunOptions()) -> str:
    """The `environment.device` that run_plan(session, options) will record ("NVIDIA H200",
    "cpu"), found without running anything (for --compare's different-GPU check up front)."""
    _, _, machine, rows = _plan_rows(session, options)
    return _main_device(rows, machine.has_cuda).name


def _plan_rows(session: Session, options: RunOptions):
    """The plugin paths, the registry, the machine probe and the expanded rows of a session."""
    plugin_paths = tuple(str(p) for p in (*options.kernels, *session.plugins))
    registry, machine = discover(plugin_paths), probe()
    rows = expand(session, registry, has_cuda=machine.has_cuda, device_override=options.device)
    return plugin_paths, registry, machine, rows


def _main_device(rows: list[Row], has_cuda: bool) -> DeviceInfo:
    cuda = next((r.device for r in rows if r.device.startswith("cuda")), None)
    return device_info(cuda) if cuda and has_cuda else device_info("cpu")


def _memory_bytes(row: Row, info: DeviceInfo) -> int | None:
    return info.memory_bytes if row.device.startswith("cuda") == (info.name != "cpu") else None


class _PlanRun:
    """Records by row key, merging of ptx and availability, exactly one Result per row."""

    def __init__(self, rows, on_event, stop, plugin_paths, cache_dir, build_dir, trace_dir, spares=None):
        self.rows, self.on_event, self.stop, self.spares = rows, on_event, stop, spares
        self.plugin_paths = plugin_paths
        self.child_args = dict(plugin_paths=plugin_paths, cache_dir=cache_dir, build_dir=build_dir,
                               trace_dir=trace_dir)
        self.records: dict = {}
        self.admissions: dict = {}
        self.ptx_records: dict = {}

    def run(self, admissions: list[Admission], interpret: bool, then: ChildKey | None = None) -> None:
        """One run: rows decided up front, then one PTX child for the run's separate-PTX rows,
        then one execution child per implementation. then: the key of the child expected after
        this run (its spare warms up during this run's last child)."""
        for adm in admissions:
            self.admissions[adm.row.key] = adm
            if adm.final is not None:
                self._emit_final(adm.row, adm.final)
        ptx_rows = [a.ptx_row for a in admissions if a.ptx_row is not None]
        exec_rows = [a.exec_row for a in admissions if a.exec_row is not None]
        jobs = [("exec", list(rows), interpret) for _impl, rows in
                itertools.groupby(exec_rows, key=lambda r: (r.label, r.impl))]
        if ptx_rows:
            jobs.insert(0, ("ptx", ptx_rows, False))
        keys = [child_key(rows, self.plugin_paths, interp) for _mode, rows, interp in jobs] + [then]
        for index, (mode, rows, interp) in enumerate(jobs):
            if self.stop.is_set():
                return
            on_event, on_result = ((self._ptx_event, self._ptx_result) if mode == "ptx"
                                   else (self.on_event, self._exec_result))
            sup = Supervisor(on_event, on_result, self.stop, spares=self.spares)
            sup.run_rows(rows, mode=mode, interpret=interp, next_key=keys[index + 1], **self.child_args)

    def _ptx_event(self, event: Event) -> None:
        if not isinstance(event, Started) or self.admissions[event.row].exec_row is None:
            self.on_event(event)

    def _ptx_result(self, row: Row, record: dict) -> None:
        adm = self.admissions[row.key]
        if adm.exec_row is None:
            self._finalise(adm, record)
        else:
            self.ptx_records[row.key] = record

    def _exec_result(self, row: Row, record: dict) -> None:
        adm = self.admissions[row.key]
        ptx = self.ptx_records.get(row.key)
        if ptx is not None:
            record["ptx"] = ptx["ptx"]
            record["flags"] += [f"ptx: {ptx['error']}"] if ptx.get("error") else []
        self._finalise(adm, record)

    def _finalise(self, adm: Admission, record: dict) -> None:
        record["flags"] = list(record.get("flags") or []) + adm.flags
        if adm.override and record["status"] == "ok":
            record.update(status=adm.override[0], error=adm.override[1])
        self._emit_final(adm.row, record)

    def _emit_final(self, row: Row, record: dict) -> None:
        self.records[row.key] = record
        self.on_event(Result(row.key, record))

    def cancel_rest(self) -> None:
        """Rows without a record (the run was cancelled) become skipped / "cancelled"."""
        for row in self.rows:
            if row.key not in self.records:
                record = row.record()
                record.update(status="skipped", error="cancelled")
                self._emit_final(row, record)


def _provenance(session: Session, options: RunOptions, started: str) -> dict:
    return provenance(session.name, session_sha256=options.session_sha256, argv=options.argv, started=started)


def _ceilings(info: DeviceInfo, cache_dir: Path) -> dict:
    """Ceilings the children measured (or found cached) for this device, and its datasheet."""
    if info.name == "cpu":
        return {"ceilings": None, "datasheet": None}
    return {"ceilings": CeilingCache(cache_dir).load().get(info.cache_key), "datasheet": datasheet_for(info.name)}
