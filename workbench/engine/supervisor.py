"""Parent side of isolation: give rows to warm workers, relay their events, enforce timeouts and
cancel, and replace a worker after any fault (engine/workers.py keeps the workers).

Rows go to the pool's worker for their key, job after job; a worker that ends a job with DONE
goes back to the pool. After a fault (the worker leaves with BYE after a row that raised, a
failed health probe, changed process switches), a crash or a timeout, the remaining rows go to a
spare or a fresh worker. A row's clock starts when the worker is ready for the job, or when the
previous row's Result arrived; past `timeout_s` the worker is killed and the row fails with
"timed out after N s (timeout_s)". The clock is paused between a worker's CALIBRATING and
CALIBRATED messages (engine/calibrate.py: a device's references, measured once per device;
CALIBRATION_S bounds it). A worker that dies (segfault, abort, OOM kill) fails only the
row it was on, with one line naming the signal and the stage it reached. Strict mode: one row per
job and the worker leaves after it (one fresh process per row, for untrusted plugin code).
Cancel: the stop flag is passed to the worker, which stops at its next sample and leaves; at
CANCEL_GRACE_S it is killed. Events are relayed from the thread that calls `run_rows`.
"""

from __future__ import annotations

import dataclasses
import os
import pickle
import re
import signal
import threading
import time
from typing import Any, Callable

from workbench.engine.measure.capture import level_of, row_mark
from workbench.engine.protocol import BUILD_STAGE, STAGE_AFTER, ChildJob, Message, Query, SpecFacts, WorkerKey
from workbench.engine.rows import Row
from workbench.engine.pool import WorkerPool, WorkerProcess
from workbench.errors import WorkbenchError
from workbench.events import Error, Event, Log, Result, RowKey

STARTUP_S = 120.0       # allowance for a worker's start (torch import, plugin discovery)
CANCEL_GRACE_S = 2.0    # a cancelled worker is killed after this
CALIBRATION_S = 600.0   # allowance for a device's calibration (engine/calibrate.py), off the row clock
EXIT_GRACE_S = 10.0     # a worker with every row answered must say DONE or BYE within this
POLL_S = 0.05
STACK_WAIT_S = 2.0      # a timed-out worker's stack dump (entry.STACK_SIGNAL) is waited for this long
SIGNALS = {"SIGSEGV": "segmentation fault", "SIGABRT": "aborted", "SIGBUS": "bus error",
           "SIGFPE": "arithmetic error", "SIGILL": "illegal instruction",
           "SIGKILL": "killed, e.g. out of host memory"}


def death_message(exitcode: int | None, stage: str) -> str:
    """One line naming how a worker died: 'child process died during build or first call: SIGSEGV
    (segmentation fault)'."""
    if exitcode is not None and exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        how = f"{name} ({SIGNALS[name]})" if name in SIGNALS else name
    else:
        how = f"exit code {exitcode}"
    return f"child process died during {stage}: {how}"


def innermost_frame(dump: str) -> str | None:
    """'path/file.py:12 in name' from a faulthandler dump: the first frame of the thread that
    handled the signal ("Current thread ..."), else of the last thread listed, the oldest, which
    is the main thread (a signal sent to a process may land on any of its threads, and a CUDA
    process has native ones that are not Python's). Paths under the working folder are relative."""
    blocks = re.split(r"^(?=Current thread |Thread 0x)", dump, flags=re.MULTILINE)
    blocks = [b for b in blocks if b.startswith(("Current thread", "Thread 0x"))]
    # a block may hold no Python frame ("<no Python frame>": a thread in C), so the order of
    # preference is tried until one has a frame: the signalled thread, then oldest to newest
    current = [b for b in blocks if b.startswith("Current thread")]
    frames = (re.search(r'File "([^"]+)", line (\d+) in (\S+)', b) for b in current + blocks[::-1])
    found = next((f for f in frames if f), None)
    if not found:
        return None
    path = found[1]
    try:
        path = os.path.relpath(path) if not os.path.relpath(path).startswith("..") else path
    except ValueError:
        pass
    return f"{path}:{found[2]} in {found[3]}"


def worker_key(rows: list[Row], plugin_paths: tuple[str, ...], interpret: bool, sources: str = "") -> WorkerKey:
    return WorkerKey(bool(interpret), tuple(plugin_paths), rows[0].device if rows else "cpu", sources)


def wait_answer(worker: WorkerProcess, deadline: float, clock: Callable[[], float] = time.perf_counter
                ) -> tuple[bool, Any]:
    """Read the worker's messages until its ANSWER: (True, the answer), or (False, None) when it
    died, closed its pipe or `deadline` (on `clock`) passed first."""
    try:
        while clock() < deadline and worker.alive():
            if not worker.conn.poll(POLL_S):
                continue
            kind, payload = worker.conn.recv()
            worker.note(kind, payload)
            if kind == Message.answer:
                return True, payload
    except (EOFError, OSError):
        pass
    return False, None


def query(pool: WorkerPool, key: WorkerKey, specs: list[tuple], clock: Callable[[], float] = time.perf_counter
          ) -> tuple[list[SpecFacts], Any]:
    """Ask the pool's worker for `key` about `specs` (protocol.Query); returns (answers, the
    worker's facts). The worker stays in the pool. Raises WorkbenchError if it dies first."""
    worker = pool.take(key)
    worker.give(pickle.dumps(Query(tuple(specs))))
    answered, payload = wait_answer(worker, clock() + STARTUP_S, clock)
    if answered:
        pool.give_back(worker)
        return payload, worker.facts
    lines = worker.tail.read_lines(final=True)
    worker.proc.join(timeout=1.0)
    code = worker.proc.exitcode
    pool.retire(worker)
    last = f": {lines[-1]}" if lines else ""
    raise WorkbenchError(f"{death_message(code, 'start-up')} while loading the plugins{last}")


class Background:
    """A job handed to a worker without waiting for it (the build-ahead job): `finish()` after
    the rows it ran beside gives the worker back if it said DONE, else stops it (nothing may
    keep compiling beside the next run's timing)."""

    def __init__(self, pool: WorkerPool, key: WorkerKey, job: ChildJob):
        self.pool, self.worker = pool, pool.take(key)
        self.worker.stop.clear()
        self.worker.give(pickle.dumps(dataclasses.replace(job, log_path=str(self.worker.log_path))))
        self.done = False

    def poll(self) -> bool:
        """Read what arrived, without waiting; whether the worker has said DONE."""
        try:
            while not self.done and self.worker.conn.poll(0):
                kind, payload = self.worker.conn.recv()
                self.worker.note(kind, payload)
                self.done = kind == Message.done
        except (EOFError, OSError):
            pass
        return self.done

    def finish(self) -> list[str]:
        """Read what arrived; returns the worker's log lines (row marks dropped)."""
        self.poll()
        lines = [line for line in self.worker.tail.read_lines() if row_mark(line) is None]
        if self.done and self.worker.alive():
            self.pool.give_back(self.worker)
        else:
            self.worker.stop.set()
            self.pool.retire(self.worker)
        return lines


class Supervisor:
    """Runs rows in the pool's workers. on_event gets every non-Result event; on_result(row,
    record) gets each finished row (including rows failed by a crash or timeout). prestarted:
    for each row key, whether the worker that ran it had been started as a spare."""

    def __init__(self, on_event: Callable[[Event], None], on_result: Callable[[Row, dict], None],
                 stop: threading.Event, pool: WorkerPool, clock: Callable[[], float] = time.perf_counter):
        self.on_event, self.on_result, self.stop, self.clock = on_event, on_result, stop, clock
        self.pool = pool
        self.cancelled = False
        self.prestarted: dict[RowKey, bool] = {}

    def run_rows(self, rows: list[Row], *, key: WorkerKey, mode: str, cache_dir: str | None,
                 build_dir: str | None, trace_dir: str | None = None, next_key: WorkerKey | None = None,
                 strict: bool = False, trace_session: str = "", report_dir: str | None = None) -> None:
        """Run `rows` (in order) in as many workers as it takes; returns when all have a result
        or the stop flag is set. next_key: the key of the job expected after this one (a spare
        for it starts while these rows run where the pool has none idle); strict: one fresh
        process per row, its value comparisons judged in a clean one (workbench/check/strict.py)."""
        done: set[RowKey] = set()
        pending = list(rows)
        while pending and not self.stop.is_set():
            batch = pending[:1] if strict else pending
            job = ChildJob(mode, tuple(batch), key.plugin_paths, key.interpret, "", cache_dir, build_dir,
                           trace_dir, last=strict, trace_session=trace_session, report_dir=report_dir,
                           strict=strict)
            worker = self.pool.take(key, fresh=strict)  # strict: never a worker that ran a job
            following = key if strict and len(pending) > 1 else next_key
            done |= _JobRun(self, job, worker, following).run()
            pending = [r for r in pending if r.key not in done]
        self.cancelled = self.cancelled or self.stop.is_set()


class _JobRun:
    """One job on one worker, from giving it to DONE (the worker goes back) or its end."""

    def __init__(self, sup: Supervisor, job: ChildJob, worker: WorkerProcess, spare_key: WorkerKey | None):
        self.sup, self.rows, self.worker, self.spare_key = sup, job.rows, worker, spare_key
        self.by_key = {r.key: r for r in job.rows}  # a scan per result was quadratic in a job of thousands of rows
        self.job = dataclasses.replace(job, log_path=str(worker.log_path))
        self.done: set[RowKey] = set()
        self.index = 0                 # the row the worker is on
        self.log_index = 0             # the row the worker's output belongs to (engine/capture.py)
        self.stage = "start-up"
        self.ready = self.finished = self.bye = self.eof = False
        self.bye_reason: str | None = None
        self.failure: str | None = None
        self.where: str | None = None  # a timed-out worker's innermost frame (_stack)
        self.calibrating_since: float | None = None  # the row clock is paused while set

    def run(self) -> set[RowKey]:
        self.conn, self.proc = self.worker.conn, self.worker.proc
        for row in self.rows:
            self.sup.prestarted[row.key] = self.worker.prestarted
        try:
            self.worker.stop.clear()
            self.worker.give(pickle.dumps(self.job))
            self.worker.jobs += 1
            self.mark = self.sup.clock()
            self.sup.pool.keep_warm(self.spare_key)  # the next worker warms up while this one works
            self._loop()
        finally:
            self._finish()
        return self.done

    # -- the loop ---------------------------------------------------------------------------
    def _loop(self) -> None:
        while True:
            self._drain(POLL_S)
            self._logs()
            if self.finished or self.bye or self.eof or not self.proc.is_alive():
                self._drain(0.0)
                return
            if self.sup.stop.is_set():
                self._cancel()
                return
            if self._timed_out():
                self.where = self._stack() if self.failure.startswith("timed out") else None
                self.proc.kill()
                return

    def _drain(self, wait_s: float) -> None:
        """Handle what the worker sent, for at most about POLL_S past the wait: a worker that
        answered rows faster than they were handled kept this loop from ever seeing the stop
        flag (Ctrl-C at 800 of 2500 rows ran 1650 more without this bound)."""
        try:
            if not self.conn.poll(wait_s):
                return
            until = self.sup.clock() + POLL_S
            while not self.finished:
                self._handle(*self.conn.recv())
                if not self.conn.poll(0) or self.sup.clock() > until:
                    return
        except (EOFError, OSError):  # the worker closed its end: it is exiting or dead
            self.eof = True

    def _handle(self, kind: Message, payload: Any) -> None:
        self.worker.note(kind, payload)
        if kind == Message.ready:
            self.ready, self.mark, self.stage = True, self.sup.clock(), BUILD_STAGE
        elif kind == Message.done:
            self.finished = True
        elif kind == Message.calibrating:
            self.calibrating_since = self.sup.clock()
        elif kind == Message.calibrated:  # the row clock resumes where it paused
            if self.calibrating_since is not None:
                self.mark += self.sup.clock() - self.calibrating_since
            self.calibrating_since = None
        elif kind == Message.bye:
            self.bye, self.bye_reason = True, payload
            where = self.rows[max(self.index - 1, 0)].key
            if payload and payload != "cancelled" and not self.job.last:  # strict: leaving is the plan
                self.sup.on_event(Log(where, f"worker replaced: {payload}", "warning"))
        elif kind == Message.event and isinstance(payload, Result):
            self._logs()  # its lines before its Result (marks attribute each line to its row)
            row = self._row(payload.row)
            self.done.add(payload.row)
            self.index += 1
            self.mark, self.stage = self.sup.clock(), BUILD_STAGE
            self.sup.on_result(row, payload.record)
        elif kind == Message.event:
            self.stage = STAGE_AFTER.get(type(payload), self.stage)
            self.sup.on_event(payload)

    def _row(self, key: RowKey) -> Row:
        return self.by_key[key]

    def _current(self) -> Row | None:
        return self.rows[self.index] if self.index < len(self.rows) else None

    def _logs(self, final: bool = False) -> None:
        for line in self.worker.tail.read_lines(final=final):
            index = row_mark(line)
            if index is not None:
                self.log_index = min(index, len(self.rows) - 1)
            else:
                self.sup.on_event(Log(self.rows[self.log_index].key, line, level_of(line)))

    def _timed_out(self) -> bool:
        row = self._current()
        if row is None:  # every row answered: a worker that says nothing more is stopped (no failure)
            return self.sup.clock() - self.mark > EXIT_GRACE_S
        if self.calibrating_since is not None:
            if self.sup.clock() - self.calibrating_since <= CALIBRATION_S:
                return False
            self.failure = f"timed out calibrating the device's references after {CALIBRATION_S:g} s"
            return True
        limit = row.settings.timeout_s + (0.0 if self.ready else STARTUP_S)
        if self.sup.clock() - self.mark <= limit:
            return False
        self.failure = f"timed out after {row.settings.timeout_s:g} s (timeout_s)"
        return True

    def _stack(self) -> str | None:
        """Ask a hung worker for its threads' stacks (written to its log, which the Log events
        then carry) and return the innermost frame of the thread that took the signal, the main
        thread: 'kernels/softmax.py:312 in _build', or None when it did not answer in time."""
        from workbench.engine.worker.entry import STACK_SIGNAL

        if not self.proc.is_alive() or self.proc.pid is None:
            return None
        before = self.worker.log_path.stat().st_size if self.worker.log_path.exists() else 0
        try:
            os.kill(self.proc.pid, STACK_SIGNAL)
        except OSError:
            return None
        deadline = time.monotonic() + STACK_WAIT_S
        while time.monotonic() < deadline:
            time.sleep(0.1)
            try:
                text = self.worker.log_path.read_bytes()[before:].decode("utf-8", "replace")
            except OSError:
                return None
            frame = innermost_frame(text)
            if frame:
                return frame
        return None

    def _cancel(self) -> None:
        self.worker.stop.set()
        deadline = self.sup.clock() + CANCEL_GRACE_S
        while self.proc.is_alive() and self.sup.clock() < deadline and not (self.finished or self.bye):
            self._drain(POLL_S)
        self.sup.cancelled = True

    # -- after the job -----------------------------------------------------------------------
    def _finish(self) -> None:
        if self.finished and not self.sup.stop.is_set() and self.proc.is_alive():
            self.sup.pool.give_back(self.worker)  # warm, reset, healthy: the next job's worker
            return
        if self.bye or self.eof:
            self.proc.join(timeout=0.2 if self.sup.stop.is_set() else 2.0)  # leaving: let it exit
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(timeout=1.0)
        self._logs(final=True)
        self.sup.pool.retire(self.worker)
        row = self._current()
        if row is None or self.sup.stop.is_set():
            return
        if self.failure is None and self.bye and self.done:
            return  # the worker left after a row that faulted; a fresh one continues
        message = self.failure or death_message(self.proc.exitcode, self.stage)
        if self.where:
            message += (f" during {self.stage}, at {self.where} (every thread's stack is in the log: "
                        "the TUI's Log pane, stderr under --replay -v)")
        if self.failure is None and self.bye:
            message = f"child process stopped without a result during {self.stage}"
        record = row.record()
        record.update(status="failed", error=message)
        self.sup.on_event(Error(row.key, message))
        self.done.add(row.key)
        self.sup.on_result(row, record)
