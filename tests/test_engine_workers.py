"""Warm workers (engine/workers.py, worker.py, worker_state.py): one worker reused across rows and
runs, replaced after each kind of fault, state reset between rows, strict mode, the build cache
key, and no worker left behind when the workbench exits or is killed."""

from __future__ import annotations

import multiprocessing
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from workbench.engine import pool as workers
from workbench.engine.plan import RunOptions, run_plan
from workbench.engine.protocol import WorkerKey
from workbench.events import Log
from workbench.session.model import ImplRef, RunSpec, Session, Settings, Sweep
import pytest

pytestmark = pytest.mark.slow  # every test here starts worker processes

PLUGIN = str(Path(__file__).parent / "plugins" / "crashy.py")
FAST = Settings(device="cpu", warmup_ms=1.0, rep_ms=5.0, min_samples=3, timeout_s=60.0)
PID = re.compile(r"^pid (\d+) dtype (\S+) grad (\S+) deterministic (\S+)$")


def _run(tmp_path: Path, *runs: RunSpec, pool=None, strict: bool = False):
    events: list = []
    doc = run_plan(Session(name="workers", runs=runs, settings=FAST), on_event=events.append, workers=pool,
                   options=RunOptions(kernels=(PLUGIN,), cache_dir=tmp_path, strict=strict))
    return doc, events


def _pids(events) -> list[tuple[int, str, str, str]]:
    """(pid, default dtype, grad, deterministic) printed by each manual_pid row, in order."""
    found = [PID.match(e.text) for e in events if isinstance(e, Log)]
    return [(int(m[1]), m[2], m[3], m[4]) for m in found if m]


def _pid_run(*before: str, N: int = 4) -> RunSpec:
    """The implementations `before` (a repeated manual_pid gets its own label), then manual_pid."""
    refs = [ImplRef(n, label=f"{n}_{i}" if n == "manual_pid" else None) for i, n in enumerate(before)]
    return RunSpec(op="crashy", impls=(*refs, ImplRef("manual_pid")), shape={"N": N})


def test_one_worker_across_runs_of_a_pool_and_state_reset_between_rows(tmp_path):
    with workers.WorkerPool(spares=False) as pool:
        doc1, events1 = _run(tmp_path, RunSpec(op="crashy", impls=(ImplRef("manual_pid"), ImplRef("manual_state"))),
                             pool=pool)
        doc2, events2 = _run(tmp_path, _pid_run(N=5), pool=pool)  # a second run_plan: same worker
        doc3, events3 = _run(tmp_path, _pid_run(N=5), pool=pool)  # the same row again: build cached
        assert [w.proc.pid for w in pool.workers()] == [_pids(events2)[0][0]]
    assert all(r["status"] == "ok" for r in doc1["results"] + doc2["results"] + doc3["results"])
    assert _pids(events3) == []  # the builder (which prints) did not run again
    assert any("build cached" in f for f in doc3["results"][0]["flags"])
    pids = _pids(events1) + _pids(events2)
    assert len(pids) == 2 and len({p[0] for p in pids}) == 1  # one process for every row
    # manual_state set float64 / no grad / deterministic; the next row sees the baseline again
    assert pids[1][1:] == pids[0][1:] == ("torch.float32", "True", "False")
    assert multiprocessing.active_children() == []


def test_a_row_that_raises_gets_a_fresh_worker_and_our_refusals_do_not(tmp_path):
    run = RunSpec(op="crashy", impls=(ImplRef("manual_raise"), ImplRef("manual_pid")), sweep=Sweep(("N",), (1, 2, 3)))
    doc, events = _run(tmp_path, run)
    statuses = [(r["impl"], r["sweep_value"], r["status"]) for r in doc["results"]]
    assert ("manual_raise", 2, "failed") in statuses
    assert all(s == "ok" for impl, v, s in statuses if (impl, v) != ("manual_raise", 2))
    pids = {p[0] for p in _pids(events)}
    assert len(pids) == 1  # manual_pid ran after the replacement, in the one fresh worker
    error = next(r["error"] for r in doc["results"] if r["sweep_value"] == 2 and r["impl"] == "manual_raise")
    assert "crashy.py:" in error and "RuntimeError: CUDA error" in error  # file:line, then the error


def test_changed_process_switches_and_a_failed_probe_replace_the_worker(tmp_path):
    before = dict(workers.STARTS)
    doc, events = _run(tmp_path, _pid_run("manual_pid", "manual_env"), _pid_run("manual_poison"))
    replaced = workers.STARTS["replaced"] - before.get("replaced", 0)
    rows = {(r["run_index"], r["impl"]): r for r in doc["results"]}
    env_row = rows[(0, "manual_env")]
    assert env_row["status"] == "ok"
    assert any("CUDA_LAUNCH_BLOCKING" in f and "replaced" in f for f in env_row["flags"])
    poisoned = rows[(1, "manual_poison")]  # its own check may trip over the broken arange too
    assert any("health probe failed" in f and "replaced" in f for f in poisoned["flags"])
    assert rows[(1, "manual_pid")]["status"] == "ok"  # the next row: a fresh, healthy worker
    pids = [p[0] for p in _pids(events)]
    assert len(pids) == 3 and len(set(pids)) == 3  # a new worker after each poisoned one
    assert replaced == 2
    assert any(isinstance(e, Log) and "health probe failed" in e.text for e in events)


def test_strict_mode_runs_each_row_in_a_fresh_process(tmp_path):
    run = RunSpec(op="crashy", impls=(ImplRef("manual_pid"),), sweep=Sweep(("N",), (1, 2, 3)))
    doc, events = _run(tmp_path, run, strict=True)
    assert [r["status"] for r in doc["results"]] == ["ok", "ok", "ok"]
    assert len({p[0] for p in _pids(events)}) == 3
    assert not any("worker replaced" in e.text for e in events if isinstance(e, Log))  # expected: no warning
    assert multiprocessing.active_children() == []


def test_strict_mode_after_a_warm_run_takes_no_worker_that_ran_a_job(tmp_path):
    """A fresh user's finding: through a warm pool (the daemon's) the first strict row ran in the
    idle worker of an earlier run, and the pool's warm worker was used up."""
    with workers.WorkerPool(spares=False) as pool:
        _, warm = _run(tmp_path, _pid_run(N=5), pool=pool)
        idle = [w.proc.pid for w in pool.workers()]
        _, strict = _run(tmp_path, RunSpec(op="crashy", impls=(ImplRef("manual_pid"),), sweep=Sweep(("N",), (1, 2))),
                         pool=pool, strict=True)
        assert idle == [_pids(warm)[0][0]]
        assert not {p[0] for p in _pids(strict)} & set(idle)       # every strict row in a new process
        assert [w.proc.pid for w in pool.workers()] == idle          # the warm worker is still there


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state != "Z"


def test_a_killed_workbench_leaves_no_worker_behind(tmp_path):
    """SIGKILL the parent while its worker hangs in a row: the zygote and the worker go too."""
    script = tmp_path / "run.py"
    script.write_text(textwrap.dedent(f"""
        from pathlib import Path
        from workbench.engine.plan import RunOptions, run_plan
        from workbench.session.model import ImplRef, RunSpec, Session, Settings
        if __name__ == "__main__":
            session = Session(name="kill", settings=Settings(device="cpu", timeout_s=600.0),
                              runs=(RunSpec(op="crashy", impls=(ImplRef("manual_pid"), ImplRef("manual_hang")),
                                            shape={{"N": 2}}),))
            run_plan(session, on_event=lambda e: print(getattr(e, "text", ""), flush=True),
                     options=RunOptions(kernels=({PLUGIN!r},), cache_dir=Path({str(tmp_path)!r})))
    """))
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    worker_pid = None
    deadline = time.monotonic() + 120
    while worker_pid is None and time.monotonic() < deadline:
        line = proc.stdout.readline()
        match = PID.match(line.strip())
        worker_pid = int(match[1]) if match else None
    assert worker_pid is not None and _alive(worker_pid)
    zygote_pid = int(Path(f"/proc/{worker_pid}/stat").read_text().split(")")[-1].split()[1])
    time.sleep(0.5)  # the hang has started
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    deadline = time.monotonic() + 10
    while (_alive(worker_pid) or _alive(zygote_pid)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(worker_pid) and not _alive(zygote_pid)


def test_a_closed_pool_leaves_no_process(tmp_path):
    pool = workers.WorkerPool(spares=True)
    key = WorkerKey(interpret=False, plugin_paths=(), device="cpu")
    pool.prestart(key)
    pool.keep_warm(WorkerKey(interpret=True, plugin_paths=(), device="cpu"))
    pids = [w.proc.pid for w in pool.workers()]
    assert len(pids) == 2 and all(_alive(p) for p in pids)
    pool.close()
    assert not any(_alive(p) for p in pids)
    assert multiprocessing.active_children() == []


def test_the_zygote_writes_to_its_log_file_not_to_the_front_ends_terminal(tmp_path):
    """A forked child that fails before its own redirect printed over the TUI (H200, tmux):
    the zygote's stdout and stderr are the file engine/workers.zygote_log_path names."""
    from multiprocessing import forkserver

    pool = workers.WorkerPool(spares=False)
    try:
        pool.prestart(WorkerKey(interpret=False, plugin_paths=(), device="cpu"))
        zygote = forkserver._forkserver._forkserver_pid
        assert zygote is not None
        for fd in (1, 2):
            assert os.readlink(f"/proc/{zygote}/fd/{fd}") == os.environ["WORKBENCH_ZYGOTE_LOG"]
    finally:
        pool.close()


def test_a_pool_keeps_at_most_two_idle_workers_per_device(tmp_path):
    """A fresh user's daemon held ten idle workers, one per plugin version it had served."""
    pool = workers.WorkerPool(spares=False)
    try:
        keys = [WorkerKey(interpret=False, plugin_paths=(), device="cpu", sources=f"v{i}") for i in range(3)]
        started = [pool._start(key) for key in keys]
        for worker in started:
            pool.give_back(worker)
        assert [w.key.sources for w in pool.workers()] == ["v1", "v2"]  # the oldest was stopped
        assert not _alive(started[0].proc.pid)
    finally:
        pool.close()


def test_a_pool_starts_its_zygote_ahead_and_the_first_worker_forks_from_it(tmp_path):
    """WorkerPool.start_zygote (the TUI calls it before reading the ops): the forkserver comes
    up in the background, and a worker started after it is its child; none under spawn or on
    a closed pool."""
    from multiprocessing import forkserver

    pool = workers.WorkerPool(spares=False)
    try:
        assert pool.start_zygote() is True
        deadline = time.monotonic() + 60
        while forkserver._forkserver._forkserver_pid is None and time.monotonic() < deadline:
            time.sleep(0.05)
        zygote = forkserver._forkserver._forkserver_pid
        assert zygote is not None and _alive(zygote)
        worker = pool._start(WorkerKey(interpret=False, plugin_paths=(), device="cpu"))
        ppid = int(Path(f"/proc/{worker.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        assert ppid == zygote
    finally:
        pool.close()
    assert pool.start_zygote() is False  # closed
    spawned = workers.WorkerPool(spares=False, start_method="spawn")
    try:
        assert spawned.start_zygote() is False
    finally:
        spawned.close()
