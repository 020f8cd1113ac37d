"""The wire between the parent (engine/supervisor.py) and a worker (engine/worker.py).

Plain data only: this module imports neither torch nor the modules that run a row, so the
parent, the worker's entry point and the row runner (engine/execute.py) all import it and
none of them imports another (no circle).

Worker -> parent, over a multiprocessing Pipe, each message a `(Message, payload)` tuple:
  (WARM, WorkerFacts)   imports, plugin discovery and CUDA start done; waiting for a job
  (READY, None)         a job arrived and its runner is set up; its first row's clock starts
  (EVENT, Event)        a workbench.events event; a Result ends its row
  (DONE, None)          every row of the job answered; the worker stays for the next job
  (ANSWER, object)      the answer to a Query job (row descriptions, no row runs) or to a
                        Reload (plugin files re-imported in place: engine/reload_worker.py)
  (BYE, str | None)     the worker is leaving (after a fault, a failed health probe, a stale
                        plugin, strict mode, or when told to); payload: why, None for normal

Parent -> worker, on a second Pipe: a pickled `ChildJob`, `Query` or `Reload` as bytes, or `STOP`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Mapping

from workbench.events import Built, Checked, Event, Profile, Samples, Started


class Message(StrEnum):
    """The kinds of message a worker sends (the first element of each tuple)."""

    warm = "warm"
    ready = "ready"
    event = "event"
    calibrating = "calibrating"
    calibrated = "calibrated"
    done = "done"
    answer = "answer"
    bye = "bye"


class Mode(StrEnum):
    """What a job does: exec = check/bench/profile/counters (and ptx where Triton is compiled);
    ptx = PTX only, in a worker without TRITON_INTERPRET; build = build ahead; ab = A/B rows,
    both sides built and timed round-robin in this worker (engine/ab.py)."""

    exec = "exec"
    ptx = "ptx"
    build = "build"  # compile into the on-disk caches only, no Result (engine/build_ahead.py)
    ab = "ab"


STOP = b"stop"  # parent -> worker: leave now (the pool is closing or the worker is discarded)

# The stage a row is in after each event: what a crash or timeout message names. The build
# stage ends with the implementation's first call (execute._build times and warms it there), so a
# kernel that faults on that call is named "build or first call", not a build failure alone.
BUILD_STAGE = "build or first call"
STAGE_AFTER: Mapping[type[Event], str] = {Started: BUILD_STAGE, Built: "check", Checked: "bench",
                                          Samples: "bench", Profile: "ptx"}


@dataclass(frozen=True)
class WorkerKey:
    """What a worker is set up with before its jobs are known; a worker serves any job with the
    same key. interpret: TRITON_INTERPRET=1 (CPU execution); plugin_paths: --kernels and the
    session's plugins; device: "cpu" or "cuda:N"; sources: the content digest of the plugin
    files (workbench/plugins/manifest.py): a worker whose key has older sources runs no job, but an idle
    one may be reloaded in place (engine/reload.py: the changed plugin modules re-imported in the
    same process, then the worker is filed under the new digest; `--strict` never does);
    role: "" for the workers that time rows, "build" for the one that builds ahead."""

    interpret: bool
    plugin_paths: tuple[str, ...]
    device: str
    sources: str = ""
    role: str = ""


@dataclass(frozen=True)
class ChildJob:
    """Rows for one worker to run, in order. mode: Mode.exec or Mode.ptx; interpret: as the
    worker's key; log_path: the worker's log file (fds 1 and 2); cache_dir / build_dir: ceilings
    cache and load_inline build folder; trace_dir: chrome traces of profiled rows (None: none),
    named after trace_session (the session's name; engine/profile.trace_file); report_dir: where
    `counters` keeps each row's .ncu-rep (None: cache_dir/ncu; engine/counters_run.report_file);
    last: the worker leaves after this job (strict mode: one process per row); strict: every value
    comparison judged in a clean process (workbench/check/strict.py)."""

    mode: str
    rows: tuple[Any, ...]
    plugin_paths: tuple[str, ...]
    interpret: bool
    log_path: str
    cache_dir: str | None = None
    build_dir: str | None = None
    trace_dir: str | None = None
    last: bool = False
    trace_session: str = ""
    report_dir: str | None = None
    strict: bool = False


@dataclass(frozen=True)
class Query:
    """Ask a worker to describe specs without running anything: for each (op, impl, shape,
    dtype) the cost model, the footprint and the op's own spec rules (Spec.check), which only
    the plugin's code knows. The answer is a list of `SpecFacts`, in order."""

    specs: tuple[tuple[str, str, tuple[tuple[str, Any], ...], str | None], ...]


@dataclass(frozen=True)
class Reload:
    """Re-import, in place, the plugin files that changed since the worker imported them
    (engine/reload_worker.py); describe: the source keys to return manifests of."""

    describe: tuple[str, ...] = ()


@dataclass(frozen=True)
class Reloaded:
    """The answer to a Reload. ok: the worker now holds the files' current content, and
    `sources` is its new WorkerKey.sources; manifests: source key -> manifest (workbench/
    manifest.py's format; a failed import: its `error`); reason: why not ok; keep: not ok, but the
    worker is as it was (a new text that failed to import) and still serves its old key;
    reloaded: the source keys whose files had changed."""

    ok: bool
    sources: str = ""
    manifests: Mapping[str, Any] = field(default_factory=dict)
    reason: str | None = None
    keep: bool = False
    reloaded: tuple[str, ...] = ()


@dataclass(frozen=True)
class SpecFacts:
    """What a worker says about one queried spec: error (the op's own rule failed, or None);
    bytes_read / bytes_written / flops / bytes_moved_est: the implementation's Cost;
    footprint_bytes: Op.footprint_bytes; check_bytes: the check's device workspace
    (engine/estimate.check_bytes_of: it needs the op's input factory and reference, which only
    the worker has; None: not known, the estimate assumes the conservative default)."""

    error: str | None = None
    bytes_read: int = 0
    bytes_written: int = 0
    flops: int = 0
    bytes_moved_est: int | None = None
    footprint_bytes: int = 0
    check_bytes: int | None = None


@dataclass(frozen=True)
class WorkerFacts:
    """What a warm worker reports about itself: pid; has_cuda: torch sees a CUDA device;
    device_info: engine.environment.DeviceInfo of its device as a dict (None: CPU or not known);
    cuda_version: torch.version.cuda; error: plugin discovery failed (every job fails with it)."""

    pid: int
    has_cuda: bool = False
    device_info: Mapping[str, Any] | None = None
    cuda_version: str | None = None
    error: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)


class Channel:
    """The worker's end of the event pipe."""

    def __init__(self, conn: Any):
        self._conn = conn

    def event(self, event: Event) -> None:
        self._conn.send((Message.event, event))

    def control(self, kind: Message, payload: Any = None) -> None:
        self._conn.send((Message(kind), payload))
