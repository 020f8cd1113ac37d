"""A warm worker: one process that keeps torch, Triton, Inductor and the CUDA context alive and
runs job after job (engine/protocol.py is the wire; engine/supervisor.py the other end).

After each row the worker resets what must not leak and probes its health
(engine/worker_state.py); it leaves (BYE) after a row that raised anything but a WorkbenchError
(a CUDA error, an OOM, a plugin's own bug: the context may be poisoned), after a failed probe or
changed process switches, when cancelled, after a job marked `last` (strict mode), or when told
to stop. A crash, a hang past the timeout or a kill ends it too; the parent replaces it. A failed
check is not an error. Between jobs it may be asked to re-import its changed plugin files in
place (protocol.Reload, engine/reload_worker.py: watch mode). It starts in engine/entry.py, which
set the environment first.
"""

from __future__ import annotations

import os
import pickle
from typing import Any

from workbench.engine.measure.capture import mark_row
from workbench.engine.protocol import STOP, Channel, ChildJob, Message, Mode, Query, Reload, SpecFacts, WorkerFacts
from workbench.engine.measure.vec_isa import record_if_checked
from workbench.trace import mark


def prepare(plugin_paths: tuple[str, ...], device: str) -> tuple[Any, str | None]:
    """Warm-up done before any job is known: import the row runner (torch), discover the
    registry, initialise CUDA on `device`. Returns (registry, None) or (None, the discovery
    error as one line); a CUDA start failure is left for the first row (DeviceSession meets it)."""
    cuda = _start_cuda(device) if device.startswith("cuda") else None
    import workbench.engine.worker.execute  # noqa: F401  imports torch: after the environment is set
    from workbench.registry import discover

    mark(f"worker {device}: row runner imported")
    try:
        registry = discover(plugin_paths)
    except Exception as exc:  # reported against every row of every job
        return None, f"{type(exc).__name__}: {exc}".splitlines()[0]
    finally:
        mark(f"worker {device}: registry discovered")
        if cuda is not None:
            cuda.join()
    if device.startswith("cuda"):
        try:
            import torch

            torch.cuda.set_device(torch.device(device))  # the runtime on the primary context made above
            torch.cuda.init()
        except Exception:  # the row's DeviceSession meets it again and fails that row
            pass
    return registry, None


def _start_cuda(device: str) -> Any:
    """The CUDA driver started and `device`'s primary context made in a thread, while this
    thread imports the row runner and the plugins (issue #39). Through the driver API by ctypes,
    which releases the GIL for each foreign call, so the start overlaps the imports whether or not
    torch's own start would release it; torch's start in this thread afterwards finds the driver
    started and the context made. Returns the thread (joined before torch's start); any failure there is left for
    torch's start, then for the row's DeviceSession, to meet again."""
    import threading

    def start() -> None:
        if driver_primary_context(device_index(device)):
            mark(f"worker {device}: CUDA driver context made")

    thread = threading.Thread(target=start, name="workbench-cuda-start", daemon=True)
    thread.start()
    return thread


def device_index(device: str) -> int:
    """The ordinal of a torch CUDA device string: "cuda" and "cuda:0" -> 0, "cuda:3" -> 3."""
    _, _, index = device.partition(":")
    return int(index) if index else 0


def driver_primary_context(index: int, library: str = "libcuda.so.1") -> bool:
    """cuInit, then retain device `index`'s primary context (the one the CUDA runtime, and so
    torch, uses; kept for the process's life); whether it worked. False where the driver library
    is missing or a call fails."""
    import ctypes

    try:
        lib = ctypes.CDLL(library)
        if lib.cuInit(0) != 0:
            return False
        dev, ctx = ctypes.c_int(), ctypes.c_void_p()
        return lib.cuDeviceGet(ctypes.byref(dev), index) == 0 and lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0
    except (OSError, AttributeError):
        return False


def settle_heap() -> None:
    """Collect once, then freeze what the warm-up made (torch, Triton, the kernels, the registry:
    all alive as long as the worker) out of the collector's reach: a full collection after a row
    (worker_state.Baseline.collect, while device memory is still held) then walks only what later
    rows made, not the whole of torch's import graph (~0.3 s a pass on the 2-core CPU). Objects
    made after this stay collectable as before."""
    import gc

    gc.collect()
    gc.freeze()


def worker_facts(device: str, error: str | None) -> WorkerFacts:
    import dataclasses

    import torch

    from workbench.engine.measure.environment import device_info

    has_cuda = torch.cuda.is_available()
    info = None
    if device.startswith("cuda") and has_cuda:
        try:
            info = dataclasses.asdict(device_info(device))
        except Exception:  # the rows on it fail with the reason
            info = None
    return WorkerFacts(pid=os.getpid(), has_cuda=has_cuda, device_info=info,
                       cuda_version=torch.version.cuda, error=error)


def serve(plugin_paths: tuple[str, ...], device: str, interpret: bool, conn: Any, job_conn: Any,
          stop: Any) -> None:
    """Warm up, say WARM, then answer jobs until STOP, a closed pipe, or a reason to leave."""
    from workbench.engine.worker.execute import RowRunner
    from workbench.engine.worker.reload import Reloader
    from workbench.engine.worker.state import Baseline

    channel = Channel(conn)
    reloader = Reloader(plugin_paths)  # the files' content before they are imported
    mark(f"worker {device}: start")
    registry, error = prepare(plugin_paths, device)
    mark(f"worker {device}: registry and CUDA ready")
    reloader.registry = registry
    baseline = Baseline.capture(device)
    runner = RowRunner(registry, interpret, baseline) if registry is not None else None
    settle_heap()
    mark(f"worker {device}: heap settled")
    try:
        channel.control(Message.warm, worker_facts(device, error))
        while True:
            data = job_conn.recv_bytes()
            if data == STOP:
                break
            job = pickle.loads(data)
            if isinstance(job, Query):
                channel.control(Message.answer, describe(registry, error, job, memory_bytes(device)))
                mark(f"worker {device}: answered a query of {len(job.specs)} spec(s)")
                continue
            if isinstance(job, Reload):  # changed plugin files re-imported in this process
                channel.control(Message.answer, reloader.reload(job))
                continue
            leave = run_job(job, runner, error, channel, stop)
            if leave is not None:
                channel.control(Message.bye, leave)
                return
            channel.control(Message.done)
        channel.control(Message.bye, None)
    except (EOFError, OSError, BrokenPipeError):  # the parent closed the pipes: no more jobs
        return


def run_job(job: ChildJob, runner: Any, error: str | None, channel: Channel, stop: Any) -> str | None:
    """Run the job's rows; returns why the worker must leave, or None to stay for the next job."""
    channel.control(Message.ready)
    mark(f"job {job.mode.value}: {len(job.rows)} row(s)")
    if runner is None:  # a plugin that fails to import fails every row, one line each
        _fail_all(job, channel, error or "the registry could not be loaded")
        return error
    runner.bind(job, channel, stop)
    if job.mode == Mode.build:
        return _build_ahead(job, runner, channel, stop)
    for index, row in enumerate(job.rows):
        if stop.is_set():
            return "cancelled"
        mark_row(index)
        leave = runner.run(row)
        record_if_checked(job.cache_dir)  # Inductor's CPU ISA check, once per host (engine/vec_isa.py)
        if leave is not None:
            return leave
    return "strict mode: one process per row" if job.last else None


def _build_ahead(job: ChildJob, runner: Any, channel: Channel, stop: Any) -> str | None:
    """Compile each row's kernel into the on-disk caches (engine/build_ahead.py); a failure is
    the timing worker's to report when it builds the row itself, so it is only logged here.
    CUDA builds (load_inline, nvcc: subprocesses) run side by side in BUILD_THREADS threads, a
    row's module and its PTX view's compile as two tasks, while Triton's warmups go on in this
    thread: softmax.cu's two compiles of ~40 and ~30 s ran one after the other on the H200 and
    the softmax rows waited for them. Every compile is asked for before the first warmup, the
    distinct ones first (build_ahead.thread_tasks)."""
    from concurrent.futures import ThreadPoolExecutor

    from workbench.engine.worker.build_ahead import BUILD_THREADS, builds_in_thread, prebuild, thread_tasks

    def build(row: Any, part: str = "all") -> str:
        mark(f"build {row.label} {row.impl} {part}: start")
        try:
            done = prebuild(runner.registry, row, job.interpret, job.build_dir, job.cache_dir, part=part)
            line = f"built ahead: {row.label}: {done}"
        except Exception as exc:  # noqa: BLE001 - not this worker's row to fail
            line = f"not built ahead: {row.label}: {type(exc).__name__}: {exc}".splitlines()[0]
        mark(f"build {row.label} {row.impl} {part}: {line.split(':')[0]}")
        return line

    with ThreadPoolExecutor(max_workers=BUILD_THREADS, thread_name_prefix="build-ahead") as threads:
        # every CUDA compile is asked for before the first Triton warmup holds this thread
        futures = [threads.submit(build, row, part) for row, part in thread_tasks(runner.registry, job.rows)]
        for index, row in enumerate(job.rows):
            if stop.is_set():
                threads.shutdown(wait=False, cancel_futures=True)
                return "cancelled"
            if not builds_in_thread(runner.registry, row):
                mark_row(index)
                print(build(row))
        for future in futures:
            print(future.result())
    return None


def memory_bytes(device: str) -> int | None:
    """The memory of the worker's device (the host's for "cpu"), None where it cannot be read."""
    try:
        if device.startswith("cuda"):
            import torch

            return int(torch.cuda.get_device_properties(torch.device(device)).total_memory)
        from workbench.engine.measure.environment import host_memory_bytes

        return host_memory_bytes()
    except Exception:  # unknown: every check workspace is computed exactly
        return None


def describe(registry: Any, error: str | None, query: Query, memory: int | None = None) -> list[SpecFacts]:
    """Cost, footprint, the op's own spec rules and addressability (workbench/spec.py) for each
    queried (op, impl, shape, dtype); the exact check workspace only where it can change the
    row's admission on a device of `memory` bytes (engine/estimate.exact_check_bytes_matter; else
    None, and the planner's conservative default stands)."""
    from workbench.engine.estimate import check_bytes_of, exact_check_bytes_matter
    from workbench.spec import addressable_problem

    answers = []
    for op_name, impl_name, shape, dtype in query.specs:
        if registry is None:
            answers.append(SpecFacts(error=error))
            continue
        try:
            op = registry.op(op_name)
            impl = op.get_impl(impl_name)
            spec = op.make_spec(dict(shape), dtype)
            cost, footprint = impl.cost(op, spec), op.footprint_bytes(spec)
            itemsize = spec.dtype.itemsize if hasattr(spec, "dtype") else 8
            exact = exact_check_bytes_matter(footprint, itemsize, memory)
            answers.append(SpecFacts(error=addressable_problem(spec, footprint), bytes_read=cost.bytes_read,
                                     bytes_written=cost.bytes_written, flops=cost.flops,
                                     bytes_moved_est=cost.bytes_moved_est, footprint_bytes=footprint,
                                     check_bytes=check_bytes_of(op, impl, spec) if exact else None))
        except Exception as exc:  # the op's own rule (SpecError) or a cost model that raised
            answers.append(SpecFacts(error=str(exc).splitlines()[0] if str(exc) else type(exc).__name__))
    return answers


def _fail_all(job: ChildJob, channel: Channel, message: str) -> None:
    from workbench.events import Error, Result

    for row in job.rows:
        record = row.record()
        record.update(status="failed", error=message.splitlines()[0])
        channel.event(Error(row.key, record["error"]))
        channel.event(Result(row.key, record))
