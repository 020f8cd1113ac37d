"""Isolation (CONTRACTS.md "Isolation and events"): a worker that segfaults or hangs fails only its
row, the next row runs in a fresh worker; printing never reaches the terminal; cancel is quick.

Workers fork from a zygote that imported torch once; each test keeps the number of workers small.
"""

from __future__ import annotations

import multiprocessing
import threading
import time
from pathlib import Path
import pytest

import pytest

from workbench.engine import pool as workers
from workbench.engine.plan import RunOptions, run_plan
from workbench.engine.protocol import WorkerKey
from workbench.events import Error, Log, Result, Started
from workbench.results.document import missing_keys
from workbench.session.model import ImplRef, RunSpec, Session, Settings, Sweep

PLUGIN = str(Path(__file__).parent / "plugins" / "crashy.py")
FAST = Settings(device="cpu", warmup_ms=1.0, rep_ms=5.0, min_samples=3, timeout_s=60.0)


def _session(*runs: RunSpec) -> Session:
    return Session(name="isolation", runs=runs, settings=FAST)


def _run(session: Session, tmp_path: Path, stop: threading.Event | None = None, on_event=None,
         warm_spare: bool | None = None, strict: bool = False):
    events: list = []

    def collect(event):
        events.append(event)
        if on_event:
            on_event(event)
    doc = run_plan(session, on_event=collect, stop=stop,
                   options=RunOptions(kernels=(PLUGIN,), cache_dir=tmp_path, warm_spare=warm_spare,
                                      strict=strict))
    return doc, events


def _by_row(doc: dict) -> dict:
    return {(r["impl"], r["sweep_value"]): r for r in doc["results"]}


@pytest.mark.slow
def test_segfault_and_timeout_fail_only_their_row(tmp_path):
    session = _session(
        RunSpec(op="crashy", impls=(ImplRef("manual_segv"),), sweep=Sweep(("N",), (1, 2, 3))),
        RunSpec(op="crashy", impls=(ImplRef("manual_hang"),), sweep=Sweep(("N",), (2, 3)),
                settings={"timeout_s": 3.0}),
        RunSpec(op="crashy", impls=(ImplRef("manual_spin"),), sweep=Sweep(("N",), (2,)),
                settings={"timeout_s": 3.0}))
    doc, events = _run(session, tmp_path)
    rows = _by_row(doc)
    assert missing_keys(doc) == []
    assert rows[("manual_segv", 1)]["status"] == "ok"
    crashed = rows[("manual_segv", 2)]
    assert crashed["status"] == "failed"
    assert "SIGSEGV" in crashed["error"] and "\n" not in crashed["error"]
    assert crashed["timing"] is None
    assert rows[("manual_segv", 3)]["status"] == "ok"  # a fresh child after the crash
    hung = rows[("manual_hang", 2)]
    assert hung["status"] == "failed"
    # the hung worker's stack is asked for before the kill: the error names where it was stuck
    assert hung["error"].startswith("timed out after 3 s (timeout_s) during build or first call, at "), hung["error"]
    assert "crashy.py:" in hung["error"] and "in build_hang" in hung["error"]
    assert rows[("manual_hang", 3)]["status"] == "ok"
    spun = rows[("manual_spin", 2)]  # a worker busy in Python, holding the GIL, says where too
    assert spun["error"].startswith("timed out after 3 s (timeout_s) during build or first call, at "), spun["error"]
    assert "crashy.py:" in spun["error"]
    keys = [e.row for e in events if isinstance(e, Result)]
    assert len(keys) == len(set(keys)) == len(doc["results"])  # exactly one Result per row
    assert any(isinstance(e, Error) and "SIGSEGV" in e.message for e in events)
    crash_key = (0, "manual_segv", 2)  # faulthandler's dump arrives as Log lines of that row
    assert any(isinstance(e, Log) and e.row == crash_key and "Segmentation fault" in e.text for e in events)
    # the hung row's stacks arrive as warning lines, which a headless replay prints (not -v only)
    hung_key = (1, "manual_hang", 2)
    frames = [e for e in events if isinstance(e, Log) and e.row == hung_key and "in build_hang" in e.text]
    assert frames and all(e.level == "warning" for e in frames), frames


@pytest.mark.slow
def test_wrong_result_fails_and_output_is_captured(tmp_path, capfd):
    session = _session(RunSpec(op="crashy", impls=(ImplRef("manual_wrong"), ImplRef("manual_noisy"))))
    doc, events = _run(session, tmp_path)
    rows = _by_row(doc)
    wrong = rows[("manual_wrong", None)]
    assert wrong["status"] == "failed" and wrong["error"].startswith("check failed")
    assert wrong["check"]["passed"] is False and wrong["timing"] is None
    assert rows[("manual_noisy", None)]["status"] == "ok"
    logs = [e.text for e in events if isinstance(e, Log)]
    for text in ("noisy: python stdout", "noisy: python stderr", "noisy: raw fd 1"):
        assert text in logs
    out, err = capfd.readouterr()
    assert "noisy" not in out + err


@pytest.mark.slow
def test_cancel_returns_within_3_s(tmp_path):
    stop = threading.Event()
    stopped_at: list[float] = []

    def on_event(event):
        if isinstance(event, Started) and not stop.is_set():
            stopped_at.append(time.perf_counter())
            stop.set()
    session = _session(RunSpec(op="crashy", impls=(ImplRef("manual_hang"), ImplRef("manual")),
                               shape={"N": 2}))
    doc, _events = _run(session, tmp_path, stop=stop, on_event=on_event)
    elapsed_s = time.perf_counter() - stopped_at[0]
    assert elapsed_s < 3.0
    assert doc["cancelled"] is True
    assert [r["status"] for r in doc["results"]] == ["skipped", "skipped"]
    assert all(r["error"] == "cancelled" for r in doc["results"])
    assert missing_keys(doc) == []
    assert multiprocessing.active_children() == []  # the running child and the spare are gone


@pytest.mark.slow
def test_estimated_too_large_is_skipped_without_force(tmp_path):
    # 2^33 elements: far beyond a 60 s timeout on a CPU (and beyond its memory); no child starts.
    session = _session(RunSpec(op="crashy", impls=(ImplRef("manual"),), shape={"N": 2**33}))
    doc, events = _run(session, tmp_path)
    (row,) = doc["results"]
    assert row["status"] == "skipped" and row["error"].startswith("estimated")
    # past all of this machine's memory it cannot run, so --force is not offered; else it is
    assert ("--force" in row["error"]) != ("so it cannot run here" in row["error"]), row["error"]
    assert not any(isinstance(e, Started) for e in events)


@pytest.mark.slow
def test_one_warm_worker_serves_every_row_and_none_outlives_the_run(tmp_path):
    """Three implementations, one worker: it is reused for each job (no start per (run, impl));
    run_plan's private pool closes it at the end."""
    before = dict(workers.STARTS)
    session = _session(RunSpec(op="crashy", impls=(ImplRef("manual"), ImplRef("manual_noisy"),
                                                   ImplRef("manual_wrong"))))
    doc, events = _run(session, tmp_path)
    starts = {k: workers.STARTS[k] - before.get(k, 0) for k in workers.STARTS}
    assert [r["status"] for r in doc["results"]] == ["ok", "ok", "failed"]  # a failed check is no fault
    assert starts.get("cold") == 1 and starts.get("reused") == 3  # the planning query, then 3 jobs
    assert not starts.get("spare_started")  # CPU rows: no spare shares the cores being timed
    assert len([e for e in events if isinstance(e, Started)]) == 3
    assert multiprocessing.active_children() == []


@pytest.mark.slow
def test_a_spare_that_died_while_waiting_is_replaced():
    pool = workers.WorkerPool(spares=True)
    key = WorkerKey(interpret=False, plugin_paths=(), device="cpu")
    before = dict(workers.STARTS)
    try:
        pool.keep_warm(key)
        spare = pool.spare
        assert spare is not None and spare.prestarted
        spare.proc.kill()
        spare.proc.join(5.0)
        worker = pool.take(key)
        assert worker is not spare and not worker.prestarted and worker.alive()
        assert workers.STARTS["spare_discarded"] - before.get("spare_discarded", 0) == 1
        assert workers.STARTS["cold"] - before.get("cold", 0) == 1
        pool.give_back(worker)
        pool.keep_warm(key)
        assert pool.spare is None  # an idle warm worker for the key is there: no spare needed
    finally:
        pool.close()
    assert multiprocessing.active_children() == []


def test_the_profilers_usdt_lines_are_dropped_from_a_childs_log(tmp_path):
    from workbench.engine.measure.capture import LogTail

    log = tmp_path / "child.log"
    log.write_text("USDT:2026-11-29 18:17:48 16106:16106 SyncActivityProfilerHandler.cpp:52] profiler_start\n"
                   "a real warning\n"
                   "USDT:2026-11-29 18:17:48 16106:16106 SyncActivityProfilerHandler.cpp:59] profiler_stop\n")
    assert LogTail(log).read_lines(final=True) == ["a real warning"]
