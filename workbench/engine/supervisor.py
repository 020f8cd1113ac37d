"""Parent side of isolation: start children, relay their events, enforce timeouts and cancel.

One child per (run, implementation) and mode, reused across that run's sweep points; after any
error (the child stops itself), a crash, or a timeout, a fresh child takes the remaining rows.
A row's clock starts when the child is ready (imports and plugin discovery done) or when the
previous row's Result arrived; past `timeout_s` the child is killed and the row fails with
"timed out after N s (timeout_s)". The clock is paused between a child's ("calibrating", name)
and ("calibrated", None) messages (engine/calibrate.py: a device's references, measured once;
CALIBRATION_S bounds it). A child that dies (segfault, abort, OOM kill) fails only the
row it was on, with one line naming the signal and the stage it reached.
Cancel: the stop flag is passed to the child, which stops at its next sample; at
CANCEL_GRACE_S it is killed. Events are relayed from the thread that calls `run_rows`.

Warm spare (SparePool): a child's start (python, import torch, CUDA context, plugin discovery)
costs seconds, so while a child runs, ONE spare child with the settings of the next expected job
(ChildKey: TRITON_INTERPRET choice, plugin paths, device) is started and warms up, then waits for
its job. The next child is that spare when its key matches and it is alive; otherwise (a spare
that died while waiting, another key) it is discarded and a cold child starts. A spare serves
exactly one job, like any child: isolation is unchanged. The pool's owner (run_plan) closes it,
which kills a spare nobody took (finish, cancel, error).
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import pickle
import signal
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable

from workbench.engine.capture import LogTail, level_of, row_mark
from workbench.engine.child import ChildJob
from workbench.engine.entry import child_entry
from workbench.engine.rows import Row
from workbench.events import Error, Event, Log, Result, RowKey

STARTUP_S = 120.0       # allowance for the child's start (torch import, plugin discovery)
CANCEL_GRACE_S = 2.0    # a cancelled child is killed after this
CALIBRATION_S = 600.0   # allowance for a device's calibration (engine/calibrate.py), off the row clock
EXIT_GRACE_S = 10.0     # a child with every row answered must leave within this
POLL_S = 0.05
SIGNALS = {"SIGSEGV": "segmentation fault", "SIGABRT": "aborted", "SIGBUS": "bus error",
           "SIGFPE": "arithmetic error", "SIGILL": "illegal instruction",
           "SIGKILL": "killed, e.g. out of host memory"}
STAGES = {"Started": "build", "Built": "check", "Checked": "bench", "Samples": "bench",
          "Profile": "ptx"}


def death_message(exitcode: int | None, stage: str) -> str:
    """One line naming how a child died: 'child process died during build: SIGSEGV (segmentation fault)'."""
    if exitcode is not None and exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        how = f"{name} ({SIGNALS[name]})" if name in SIGNALS else name
    else:
        how = f"exit code {exitcode}"
    return f"child process died during {stage}: {how}"


# How children were started in this process ("cold", "spare_started", "spare_taken",
# "spare_discarded"): what tests and benchmarks read to see that spares are used.
STARTS: Counter = Counter()


@dataclasses.dataclass(frozen=True)
class ChildKey:
    """What a child is set up with before its job is known; a spare fits a job with the same key."""

    interpret: bool
    plugin_paths: tuple[str, ...]
    device: str


def child_key(rows: list[Row], plugin_paths: tuple[str, ...], interpret: bool) -> ChildKey:
    return ChildKey(bool(interpret), tuple(plugin_paths), rows[0].device if rows else "cpu")


class ChildProcess:
    """A started child (engine/entry.py): warming up, waiting for its job, or running it."""

    def __init__(self, context: Any, key: ChildKey, prestarted: bool = False):
        self.key, self.prestarted = key, prestarted
        fd, log_path = tempfile.mkstemp(prefix="workbench-child-", suffix=".log")
        os.close(fd)
        self.log_path = Path(log_path)
        self.conn, child_conn = context.Pipe(duplex=False)      # child -> parent: events
        job_recv, self.job_conn = context.Pipe(duplex=False)    # parent -> child: the job
        self.stop = context.Event()
        args = (log_path, key.interpret, key.plugin_paths, key.device, child_conn, job_recv, self.stop)
        self.proc = context.Process(target=child_entry, args=args, name="workbench-child", daemon=False)
        try:
            self.proc.start()  # raises in an unguarded __main__ under spawn, before anything runs
        except BaseException:
            self.close()
            raise
        finally:
            child_conn.close()
            job_recv.close()

    def give(self, job_bytes: bytes) -> None:
        """Send the job without blocking this thread (a child still importing reads it later)."""
        def send() -> None:
            try:
                self.job_conn.send_bytes(job_bytes)
            except (OSError, ValueError):  # the child died or was discarded: its run reports that
                pass
        threading.Thread(target=send, name="workbench-job-send", daemon=True).start()

    def alive(self) -> bool:
        return self.proc.is_alive()

    def close(self) -> None:
        """Kill the child if it is still there and release its pipes and log file."""
        if self.proc.pid is not None:
            if self.proc.is_alive():
                self.proc.kill()
            self.proc.join(timeout=1.0)
        for conn in (self.conn, self.job_conn):
            conn.close()
        self.log_path.unlink(missing_ok=True)


class SparePool:
    """At most one spare child, started ahead of need (see the module docstring)."""

    def __init__(self, context: Any = None, enabled: bool = True):
        self.context = context or multiprocessing.get_context("spawn")
        self.enabled = enabled
        self.spare: ChildProcess | None = None

    def take(self, key: ChildKey) -> ChildProcess:
        """The spare when it fits `key` and is alive, else a fresh (cold) child."""
        spare, self.spare = self.spare, None
        if spare is not None and spare.key == key and spare.alive():
            STARTS["spare_taken"] += 1
            return spare
        if spare is not None:  # died while waiting, or set up for another job: replaced
            STARTS["spare_discarded"] += 1
            spare.close()
        STARTS["cold"] += 1
        return ChildProcess(self.context, key)

    def keep_warm(self, key: ChildKey | None) -> None:
        """Have a spare for `key` starting (None: none needed)."""
        if not self.enabled or key is None:
            return
        if self.spare is not None and self.spare.key == key and self.spare.alive():
            return
        if self.spare is not None:
            STARTS["spare_discarded"] += 1
            self.spare.close()
        self.spare = None
        self.spare = ChildProcess(self.context, key, prestarted=True)
        STARTS["spare_started"] += 1

    def close(self) -> None:
        """Kill the spare (finish, cancel): no child outlives the run."""
        spare, self.spare = self.spare, None
        if spare is not None:
            spare.close()


class Supervisor:
    """Runs rows in children. on_event gets every non-Result event; on_result(row, record) gets
    each finished row (including rows failed by a crash or timeout). spares: the pool children
    come from (shared across supervisors of one run_plan; None: a private pool without spares).
    prestarted: for each row key, whether the child that ran it had been started as a spare."""

    def __init__(self, on_event: Callable[[Event], None], on_result: Callable[[Row, dict], None],
                 stop: threading.Event, clock: Callable[[], float] = time.perf_counter,
                 spares: SparePool | None = None):
        self.on_event, self.on_result, self.stop, self.clock = on_event, on_result, stop, clock
        self.own_pool = spares is None
        self.spares = spares or SparePool(enabled=False)
        self.context = self.spares.context
        self.cancelled = False
        self.prestarted: dict[RowKey, bool] = {}

    def run_rows(self, rows: list[Row], *, mode: str, plugin_paths: tuple[str, ...], interpret: bool,
                 cache_dir: str | None, build_dir: str | None, trace_dir: str | None = None,
                 next_key: ChildKey | None = None) -> None:
        """Run `rows` (in order) in as many children as it takes; returns when all have a result
        or the stop flag is set. next_key: the key of the job expected after this one (its spare
        starts while these rows run; a fresh child after an error takes it too when it fits);
        None: no spare (nothing known to follow)."""
        done: set[RowKey] = set()
        pending = list(rows)
        key = child_key(pending, plugin_paths, interpret)
        try:
            while pending and not self.stop.is_set():
                job = ChildJob(mode, tuple(pending), plugin_paths, interpret, "", cache_dir, build_dir, trace_dir)
                child = self.spares.take(key)
                done |= _ChildRun(self, job, child, next_key).run()
                pending = [r for r in pending if r.key not in done]
        finally:
            if self.own_pool:
                self.spares.close()
        self.cancelled = self.cancelled or self.stop.is_set()


class _ChildRun:
    """One child from its job to its exit."""

    def __init__(self, sup: Supervisor, job: ChildJob, child: ChildProcess, spare_key: ChildKey | None):
        self.sup, self.rows, self.child, self.spare_key = sup, job.rows, child, spare_key
        self.log_path = child.log_path
        self.job = dataclasses.replace(job, log_path=str(child.log_path))
        self.tail = LogTail(self.log_path)
        self.done: set[RowKey] = set()
        self.index = 0                 # the row the child is on
        self.log_index = 0             # the row the child's output belongs to (engine/capture.py)
        self.stage = "start-up"
        self.ready = self.bye = self.eof = False
        self.failure: str | None = None
        self.calibrating_since: float | None = None  # the row clock is paused while set

    def run(self) -> set[RowKey]:
        self.conn, self.proc, self.child_stop = self.child.conn, self.child.proc, self.child.stop
        for row in self.rows:
            self.sup.prestarted[row.key] = self.child.prestarted
        try:
            self.child.give(pickle.dumps(self.job))
            self.mark = self.sup.clock()
            self.sup.spares.keep_warm(self.spare_key)  # the next child warms up while this one works
            self._loop()
        finally:
            self._finish()
        return self.done

    # -- the loop ---------------------------------------------------------------------------
    def _loop(self) -> None:
        while True:
            self._drain(POLL_S)
            self._logs()
            if self.bye or self.eof or not self.proc.is_alive():
                self._drain(0.0)
                return
            if self.sup.stop.is_set():
                self._cancel()
                return
            if self._timed_out():
                self.proc.kill()
                return

    def _drain(self, wait_s: float) -> None:
        try:
            if not self.conn.poll(wait_s):
                return
            while True:
                self._handle(*self.conn.recv())
                if not self.conn.poll(0):
                    return
        except (EOFError, OSError):  # the child closed its end: it is exiting or dead
            self.eof = True

    def _handle(self, kind: str, payload: Any) -> None:
        if kind == "warm":
            pass  # warmed up; "ready" follows once it has the job
        elif kind == "ready":
            self.ready, self.mark, self.stage = True, self.sup.clock(), "build"
        elif kind == "bye":
            self.bye = True
        elif kind == "calibrating":
            self.calibrating_since = self.sup.clock()
        elif kind == "calibrated":  # the row clock resumes where it paused
            if self.calibrating_since is not None:
                self.mark += self.sup.clock() - self.calibrating_since
            self.calibrating_since = None
        elif isinstance(payload, Result):
            self._logs()  # its lines before its Result (marks attribute each line to its row)
            row = self._row(payload.row)
            self.done.add(payload.row)
            self.index += 1
            self.mark, self.stage = self.sup.clock(), "build"
            self.sup.on_result(row, payload.record)
        else:
            self.stage = STAGES.get(type(payload).__name__, self.stage)
            self.sup.on_event(payload)

    def _row(self, key: RowKey) -> Row:
        return next(r for r in self.rows if r.key == key)

    def _current(self) -> Row | None:
        return self.rows[self.index] if self.index < len(self.rows) else None

    def _logs(self, final: bool = False) -> None:
        for line in self.tail.read_lines(final=final):
            index = row_mark(line)
            if index is not None:
                self.log_index = min(index, len(self.rows) - 1)
            else:
                self.sup.on_event(Log(self.rows[self.log_index].key, line, level_of(line)))

    def _timed_out(self) -> bool:
        row = self._current()
        if row is None:  # every row answered: a child that does not leave is stopped (no failure)
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

    def _cancel(self) -> None:
        self.child_stop.set()
        deadline = self.sup.clock() + CANCEL_GRACE_S
        while self.proc.is_alive() and self.sup.clock() < deadline:
            self._drain(POLL_S)
        self.sup.cancelled = True

    # -- after the child ---------------------------------------------------------------------
    def _finish(self) -> None:
        if self.bye or self.eof:
            self.proc.join(timeout=0.2 if self.sup.stop.is_set() else 2.0)  # leaving: let it exit
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(timeout=1.0)
        self._logs(final=True)
        self.child.close()
        row = self._current()
        if row is None or self.sup.stop.is_set():
            return
        if self.failure is None and self.bye and self.done:
            return  # the child stopped itself after an error row; a fresh child continues
        message = self.failure or death_message(self.proc.exitcode, self.stage)
        if self.failure is None and self.bye:
            message = f"child process stopped without a result during {self.stage}"
        record = row.record()
        record.update(status="failed", error=message)
        self.sup.on_event(Error(row.key, message))
        self.done.add(row.key)
        self.sup.on_result(row, record)
