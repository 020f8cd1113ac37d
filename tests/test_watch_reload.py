"""Watch mode's in-place reload (engine/reload.py, engine/reload_worker.py): an edited plugin is
re-imported in the warm worker that ran it, which then measures the new code; a broken edit
names its file and line and leaves the worker serving the next good edit; what a file no longer
registers is gone and what it newly registers is there; builds of unchanged files are kept.
Every test starts worker processes (slow)."""

from __future__ import annotations

import re
import threading
from pathlib import Path

import pytest

from workbench.engine import pool as workers
from workbench.engine.plan import RunOptions, run_plan
from workbench.engine.reload import reload_for_watch, reload_idle
from workbench.events import Log
from workbench.plugins.manifest import declare
from workbench.session.model import ImplRef, RunSpec, Session, Settings
from workbench.watch.cycle import WatchState

pytestmark = pytest.mark.slow  # worker processes

FAST = "settings: {device: cpu, warmup_ms: 1, rep_ms: 5, min_samples: 3, timeout_s: 60}"
MINE = '''\
import os
import torch
from workbench.registry import REGISTRY

GELU = REGISTRY.op("gelu")
SCALE = 1.0


@GELU.impl("manual_mine", math="tanh")
def build(spec, params, ctx):
    """mine"""
    print(f"built in pid {os.getpid()}")
    return lambda x: torch.nn.functional.gelu(x, approximate="tanh") * SCALE
'''
SESSION = f'''\
schema_version: 1
name: reloaded
plugins: [mine.py]
{FAST}
runs:
  - op: gelu
    impls: [manual_mine]
    shape: {{M: 4, N: 8}}
    actions: [check, bench]
'''
# A new op with two implementations (a.py) and an implementation added to gelu (b.py).
TWICE = '''\
from dataclasses import dataclass
import torch
from workbench.cost import Cost
from workbench.dtypes import DType
from workbench.registry import Op
from workbench.spec import Spec


@dataclass(frozen=True)
class TwiceSpec(Spec):
    N: int = 8
    dtype: DType = DType.float32


OP = Op("twice", TwiceSpec, dtypes=["float32"])


@OP.inputs
def make_inputs(spec, device, seed):
    return (torch.randn(spec.N, generator=torch.Generator(device=device).manual_seed(seed), device=device),)


@OP.reference()
def reference(x):
    return 2 * x


@OP.cost_model
def cost(spec):
    return Cost(bytes_read=4 * spec.N, bytes_written=4 * spec.N, flops=spec.N)


@OP.impl("manual")
def build(spec, params, ctx):
    return lambda x: x + x


@OP.impl("manual_extra")
def build_extra(spec, params, ctx):
    return lambda x: 2 * x
'''
ADDED = '''\
import torch
from workbench.registry import REGISTRY


@REGISTRY.op("gelu").impl("manual_b", math="tanh")
def build(spec, params, ctx):
    return lambda x: torch.nn.functional.gelu(x, approximate="tanh")
'''


def _pids(pool) -> set[int]:
    return {w.proc.pid for w in pool.workers()}


def _cycle(state: WatchState, tmp_path: Path, events: list):
    options = RunOptions(device="cpu", cache_dir=tmp_path / "cache", warm_spare=False)
    return state.run_cycle(options=options, on_event=events.append, stop=threading.Event())


def _record(cycle) -> dict:
    (record,) = cycle.doc["results"]
    return record


def test_an_edit_is_reloaded_in_the_same_worker_which_measures_the_new_code(tmp_path):
    plugin = tmp_path / "mine.py"
    plugin.write_text(MINE)
    (tmp_path / "reloaded.yaml").write_text(SESSION)
    events: list = []
    with workers.WorkerPool(spares=False) as pool:
        state = WatchState(tmp_path / "reloaded.yaml", workers=pool)
        first = _cycle(state, tmp_path, events)
        assert first.error is None and _record(first)["status"] == "ok"
        pids, cold = _pids(pool), workers.STARTS["cold"]
        built = [int(m[1]) for e in events if isinstance(e, Log) and (m := re.match(r"built in pid (\d+)", e.text))]
        assert built and set(built) <= pids

        plugin.write_text(MINE.replace("SCALE = 1.0", "SCALE = 2.0"))   # the new code is wrong: 2 x gelu
        reloaded = workers.STARTS["reloaded"]
        wrong = _cycle(state, tmp_path, events)
        assert [k[1] for k in wrong.reran] == ["manual_mine"]
        assert wrong.lines[0][2] == "error" and "check failed" in wrong.lines[0][1]
        assert _pids(pool) == pids and workers.STARTS["reloaded"] > reloaded

        plugin.write_text(MINE.replace("def build(", "def build(("))    # does not import
        broken = _cycle(state, tmp_path, events)
        assert re.search(rf"{re.escape(str(plugin.resolve()))}:10: SyntaxError", broken.error)
        assert broken.doc is state.doc and _pids(pool) == pids          # nothing ran, the worker stays

        plugin.write_text(MINE.replace(" * SCALE", " * SCALE + OFFSET") + "OFFSET = 0.0\n")  # right again
        fixed = _cycle(state, tmp_path, events)
        assert fixed.error is None and _record(fixed)["status"] == "ok" and _record(fixed)["check"]["passed"]
        assert _pids(pool) == pids and workers.STARTS["cold"] == cold   # no process was started for an edit
        last_build = [e.text for e in events if isinstance(e, Log) and e.text.startswith("built in pid")][-1]
        assert int(last_build.split()[-1]) in pids


def test_strict_watch_reloads_nothing_and_runs_each_row_in_a_fresh_process(tmp_path):
    plugin = tmp_path / "mine.py"
    plugin.write_text(MINE)
    (tmp_path / "reloaded.yaml").write_text(SESSION)
    events: list = []
    options = RunOptions(device="cpu", cache_dir=tmp_path / "cache", warm_spare=False, strict=True)
    with workers.WorkerPool(spares=False) as pool:
        state = WatchState(tmp_path / "reloaded.yaml", workers=pool)
        state.run_cycle(options=options, on_event=events.append, stop=threading.Event())
        plugin.write_text(MINE.replace("SCALE = 1.0", "SCALE = 2.0"))
        reloaded = workers.STARTS["reloaded"]
        cycle = state.run_cycle(options=options, on_event=events.append, stop=threading.Event())
        assert [k[1] for k in cycle.reran] == ["manual_mine"] and "check failed" in cycle.lines[0][1]
        assert workers.STARTS["reloaded"] == reloaded and pool.workers() == []  # nothing kept, nothing reloaded
    built = [e.text for e in events if isinstance(e, Log) and e.text.startswith("built in pid")]
    assert len(built) == 2 and built[0] != built[1]                           # two processes


def _session(*runs: RunSpec) -> Session:
    return Session(name="reload", runs=runs,
                   settings=Settings(device="cpu", warmup_ms=1.0, rep_ms=5.0, min_samples=3, timeout_s=60.0))


def _run(pool, kernels, tmp_path, *runs: RunSpec) -> dict:
    return run_plan(_session(*runs), on_event=lambda e: None, workers=pool,
                    options=RunOptions(kernels=kernels, cache_dir=tmp_path / "cache", warm_spare=False))


def test_a_reload_drops_what_a_file_no_longer_registers_and_keeps_builds_of_unchanged_files(tmp_path):
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text(TWICE)
    b.write_text(ADDED)
    kernels = (str(a), str(b))
    keys = [str(a.resolve()), str(b.resolve())]
    twice = RunSpec(op="twice", impls=(ImplRef("manual"), ImplRef("manual_extra")))
    gelu_b = RunSpec(op="gelu", impls=(ImplRef("manual_b"),), shape={"M": 4, "N": 8})
    with workers.WorkerPool(spares=False) as pool:
        doc = _run(pool, kernels, tmp_path, twice, gelu_b)
        assert [r["status"] for r in doc["results"]] == ["ok", "ok", "ok"]
        pids = _pids(pool)

        # manual_extra removed, the op renamed: what the worker describes, and what the front end declares
        a.write_text(TWICE.replace('Op("twice"', 'Op("double"').split('@OP.impl("manual_extra")')[0])
        manifests = reload_idle(pool, set(keys))
        (op,) = manifests[keys[0]]["ops"]
        assert op["name"] == "double" and [i["name"] for i in op["impls"]] == ["manual"]
        registry = declare(kernels, cache_dir=tmp_path / "cache", build=lambda _found, _wanted: manifests)
        assert "twice" not in registry and list(registry.op("double").impls) == ["manual"]
        assert "manual_b" in registry.op("gelu").impls
        doc = _run(pool, kernels, tmp_path, RunSpec(op="double", impls=(ImplRef("manual"),)), gelu_b)
        assert [r["status"] for r in doc["results"]] == ["ok", "ok"] and _pids(pool) == pids
        assert not any("build cached" in f for f in doc["results"][0]["flags"])  # new code: built again
        assert any("build cached" in f for f in doc["results"][1]["flags"])      # b.py did not change

        # a reload with nothing changed reloads nothing and still describes; a broken file names its line
        assert reload_for_watch(pool, keys) is not None and _pids(pool) == pids
        b.write_text(ADDED + "\nimport no_such_module_here\n")
        build = reload_for_watch(pool, keys)
        error = build([], {keys[1]})[keys[1]]["error"]
        assert re.search(rf"{re.escape(keys[1])}:9: ModuleNotFoundError", error) and _pids(pool) == pids
        b.write_text(ADDED.replace("approximate=\"tanh\")", "approximate=\"tanh\") + 0.0"))  # good again
        manifests = reload_idle(pool, set(keys))
        declare(kernels, cache_dir=tmp_path / "cache", build=lambda _found, _wanted: manifests)
        doc = _run(pool, kernels, tmp_path, gelu_b)
        assert doc["results"][0]["status"] == "ok" and _pids(pool) == pids
        assert not any("build cached" in f for f in doc["results"][0]["flags"])


def test_the_tuis_watch_mode_reloads_in_the_apps_warm_worker(tmp_path):
    """A fresh user found every save in `workbench FILE --watch` starting new workers: the watched
    engine ran run_plan without the app's pool. Now the pool's worker reloads the edit in place."""
    import asyncio
    import time as clock

    from workbench.screens.app import WorkbenchApp

    plugin, session = tmp_path / "mine.py", tmp_path / "reloaded.yaml"
    plugin.write_text(MINE)
    session.write_text(SESSION)

    async def drive():
        app = WorkbenchApp(session, RunOptions(cache_dir=tmp_path / "cache"), data_dir=tmp_path / "data", watch=True)
        async with app.run_test(size=(120, 40)) as pilot:
            async def until(condition, timeout_s=120):
                deadline = clock.monotonic() + timeout_s
                while not condition():
                    assert clock.monotonic() < deadline, "the TUI did not get there"
                    await pilot.pause(0.1)
            await until(lambda: app.ws.run is not None)
            await until(lambda: app.runs_finished >= 1)  # watch mode runs the session once it is open
            await pilot.pause(0.5)
            finished = app.runs_finished
            pids = {w.proc.pid for w in app._pool.workers()}
            cold = workers.STARTS["cold"]
            plugin.write_text(MINE.replace("SCALE = 1.0", "SCALE = 2.0"))  # a real edit: the check fails
            await until(lambda: app.runs_finished > finished)
            await pilot.pause(0.5)
            log = [text for _, text in app.log_pane.entries]
            assert not any("worker not started" in line for line in log), log  # prestart found mine.py
            return pids, {w.proc.pid for w in app._pool.workers()}, cold, log

    before, after, cold, log = asyncio.run(drive())
    assert before and after == before  # the same warm worker, reloaded in place
    assert workers.STARTS["cold"] == cold
    built = [line for line in log if "built in pid" in line]
    assert len(built) == 2 and len({line.split()[-1] for line in built}) == 1, built
    assert any("check FAIL" in line for line in log), log  # the new code (2x) ran and was caught
