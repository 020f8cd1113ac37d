"""The execution child: a spawned process that runs the rows of one (run, implementation).

Protocol (child -> parent, over a multiprocessing Pipe, each message a tuple):
  ("warm", None)         imports, plugin discovery and CUDA start done; waiting for the job
  ("ready", None)        the job arrived and the runner is set up; the first row's clock starts now
  ("event", Event)       a workbench.events event; a Result ends its row
  ("calibrating", name)  the device's references are being measured (engine/calibrate.py): the
                         parent pauses the row clock until ("calibrated", None)
  ("bye", None)          the child is leaving normally (after its last row, or after an error)

The child stops after the first row that raised (a fresh child after any error: a poisoned
CUDA context must not leak into the next row). A failed check is not an error.
The process starts in engine/entry.py (output redirected, TRITON_INTERPRET set) before this
module, torch or any kernel is imported.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from workbench.engine.capture import mark_row
from workbench.engine.rows import Row

MODES = ("exec", "ptx")


@dataclass(frozen=True)
class ChildJob:
    """What one child does. mode: "exec" (check/bench/profile, and ptx where Triton is not
    interpreted) or "ptx" (PTX only, in a process without TRITON_INTERPRET); interpret: set
    TRITON_INTERPRET=1 before importing kernels; log_path: where fds 1 and 2 go;
    cache_dir/build_dir: ceilings cache and load_inline build folder (str paths or None);
    trace_dir: where profiled rows write chrome traces (None: no traces)."""

    mode: str
    rows: tuple[Row, ...]
    plugin_paths: tuple[str, ...]
    interpret: bool
    log_path: str
    cache_dir: str | None = None
    build_dir: str | None = None
    trace_dir: str | None = None


class Channel:
    """The child's end of the pipe."""

    def __init__(self, conn: Any):
        self._conn = conn

    def event(self, event: Any) -> None:
        self._conn.send(("event", event))

    def control(self, kind: str, payload: Any = None) -> None:
        self._conn.send((kind, payload))


def prepare(plugin_paths: tuple[str, ...], device: str) -> tuple[Any, BaseException | None]:
    """The warm-up done before the job is known: import torch (through the engine), discover the
    registry, initialise CUDA on `device` when it is cuda. Returns (registry, None) or (None, the
    discovery error); a CUDA start failure is left for the row (its DeviceSession raises it)."""
    import workbench.engine.execute  # noqa: F401  imports torch: after the env is set
    from workbench.registry import discover

    try:
        registry = discover(plugin_paths)
    except Exception as exc:  # reported against every row of the job once it arrives
        return None, exc
    if device.startswith("cuda"):
        try:
            import torch

            torch.cuda.set_device(torch.device(device))
            torch.cuda.init()
        except Exception:  # the row's DeviceSession meets it again and fails that row
            pass
    return registry, None


def child_main(job: ChildJob, conn: Any, stop: Any, prepared: tuple[Any, BaseException | None] | None = None) -> None:
    """Run the job's rows (called by engine/entry.py once output and environment are set up);
    prepared: what `prepare` returned (None: discover here)."""
    channel = Channel(conn)
    try:
        _run(job, channel, stop, prepared)
    finally:
        channel.control("bye")
        conn.close()


def _run(job: ChildJob, channel: Channel, stop: Any, prepared: tuple[Any, BaseException | None] | None) -> None:
    from workbench.engine.execute import RowRunner  # imports torch: after the env is set
    from workbench.registry import discover

    try:
        if prepared is None:
            registry = discover(job.plugin_paths)
        else:
            registry, error = prepared
            if error is not None:
                raise error
        runner = RowRunner(job, registry, channel, stop)
    except Exception as exc:  # a plugin that fails to import fails every row, one line each
        channel.control("ready")
        _fail_all(job, channel, f"{type(exc).__name__}: {exc}")
        return
    channel.control("ready")
    for index, row in enumerate(job.rows):
        if stop.is_set():
            return
        mark_row(index)
        if not runner.run(row):
            return


def _fail_all(job: ChildJob, channel: Channel, message: str) -> None:
    from workbench.events import Error, Result

    for row in job.rows:
        record = row.record()
        record.update(status="failed", error=message.splitlines()[0])
        channel.event(Error(row.key, record["error"]))
        channel.event(Result(row.key, record))
