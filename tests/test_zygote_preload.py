"""The first run's start-up off its critical path (issue #39): what the zygote preloads
(engine/worker/preload.py), the worker that must not fork from a zygote with compiled Triton
(engine/pool.py), Inductor's import-time settings read again in a worker and the CUDA start in a
thread (engine/worker/serve.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

from workbench.engine.protocol import WorkerKey
from workbench.engine.worker import preload as preload_module
from workbench.engine.worker.preload import (GPU_MODULES, ROW_RUNNER, ZYGOTE_GPU, ZYGOTE_PRELOAD, libcuda_mapped,
                                             modules, preload, refresh_inductor_config)

ROOT = Path(__file__).resolve().parents[1]


def test_the_row_runner_by_default_and_the_gpu_modules_only_when_asked_on_a_gpu_host():
    assert modules({}) == ROW_RUNNER
    assert modules({ZYGOTE_GPU: "1"}) == ROW_RUNNER  # measured: no gain on the first run (preload.py)
    assert modules({ZYGOTE_GPU: "1", ZYGOTE_PRELOAD: "all"}) == ROW_RUNNER + GPU_MODULES
    assert modules({ZYGOTE_GPU: "0", ZYGOTE_PRELOAD: "all"}) == ROW_RUNNER  # no GPU: workers interpret Triton
    assert "triton" in GPU_MODULES and not any(m.startswith("triton") for m in ROW_RUNNER)
    for off in ("0", "off", "No", "false"):
        assert modules({ZYGOTE_GPU: "1", ZYGOTE_PRELOAD: off}) == ()


def test_preload_imports_with_triton_interpret_unset_then_puts_it_back(monkeypatch):
    seen, frozen = [], []
    environ = {ZYGOTE_GPU: "1", ZYGOTE_PRELOAD: "all", "TRITON_INTERPRET": "1"}

    def fake_import(name):
        seen.append((name, environ.get("TRITON_INTERPRET")))
        assert environ.get("PYTORCH_NVML_BASED_CUDA_CHECK") == "1"  # is_available() through NVML meanwhile
        if name == "torch._dynamo":
            raise ImportError("not here")

    monkeypatch.setattr(preload_module.importlib, "import_module", fake_import)
    monkeypatch.setattr(preload_module.gc, "freeze", lambda: frozen.append(True))
    done = preload(environ)
    assert [name for name, _ in seen] == list(ROW_RUNNER + GPU_MODULES)
    assert all(value is None for _, value in seen)  # triton.jit reads it at import: compiled, as forked workers run
    assert environ["TRITON_INTERPRET"] == "1" and frozen == [True]
    assert "PYTORCH_NVML_BASED_CUDA_CHECK" not in environ  # put back as it was
    assert "torch._dynamo" not in done and "triton" in done  # a failing module is skipped, the rest go on


def test_preload_off_imports_nothing(monkeypatch):
    monkeypatch.setattr(preload_module.importlib, "import_module", lambda name: pytest.fail(f"imported {name}"))
    assert preload({ZYGOTE_PRELOAD: "0", ZYGOTE_GPU: "1"}) == []


def test_libcuda_is_found_in_a_maps_file(tmp_path):
    maps = tmp_path / "maps"
    maps.write_text("7f00-7f01 r-xp 0 08:01 1 /usr/lib/x86_64-linux-gnu/libc.so.6\n")
    assert not libcuda_mapped(str(maps))
    maps.write_text(maps.read_text() + "7f02-7f03 r-xp 0 08:01 2 /usr/lib/x86_64-linux-gnu/libcuda.so.570.1\n")
    assert libcuda_mapped(str(maps))
    assert not libcuda_mapped(str(tmp_path / "missing"))


def test_inductor_settings_read_at_import_are_read_again_in_the_worker(monkeypatch):
    config = types.SimpleNamespace(compile_threads=16, cpp=types.SimpleNamespace(vec_isa_ok=None))
    monkeypatch.setitem(sys.modules, "torch._inductor.config", config)
    assert refresh_inductor_config({"TORCHINDUCTOR_COMPILE_THREADS": "1", "TORCHINDUCTOR_VEC_ISA_OK": "1"})
    assert config.compile_threads == 1 and config.cpp.vec_isa_ok is True
    assert refresh_inductor_config({"TORCHINDUCTOR_VEC_ISA_OK": "0"})
    assert config.compile_threads == 1 and config.cpp.vec_isa_ok is False
    monkeypatch.delitem(sys.modules, "torch._inductor.config")
    assert refresh_inductor_config({}) is False  # not imported: its import reads them itself


class _Context:
    def __init__(self, method):
        self.method = method

    def get_start_method(self):
        return self.method


def test_an_interpreting_worker_is_spawned_where_the_zygote_holds_compiled_triton():
    from workbench.engine.pool import zygote_interprets_wrong

    interpreted, compiled = WorkerKey(True, (), "cpu"), WorkerKey(False, (), "cuda:0")
    gpu = {ZYGOTE_GPU: "1", ZYGOTE_PRELOAD: "all"}
    assert zygote_interprets_wrong(_Context("forkserver"), interpreted, gpu)
    assert not zygote_interprets_wrong(_Context("forkserver"), interpreted, {ZYGOTE_GPU: "1"})  # default: no Triton
    assert not zygote_interprets_wrong(_Context("forkserver"), compiled, gpu)
    assert not zygote_interprets_wrong(_Context("forkserver"), interpreted, {ZYGOTE_GPU: "0", ZYGOTE_PRELOAD: "all"})
    assert not zygote_interprets_wrong(_Context("forkserver"), interpreted, {**gpu, ZYGOTE_PRELOAD: "0"})
    assert not zygote_interprets_wrong(_Context("spawn"), interpreted, gpu)


def test_the_zygote_gpu_switch_a_pool_sets_does_not_change_the_daemon_fingerprint():
    from workbench.engine.daemon.paths import fingerprint

    base = {"PATH": "/usr/bin", "WORKBENCH_ZYGOTE_PRELOAD": "0"}
    assert fingerprint({**base, ZYGOTE_GPU: "1"})["env"] == fingerprint(base)["env"]
    assert fingerprint(base)["env"] != fingerprint({"PATH": "/usr/bin"})["env"]  # the preload switch does


def test_device_index_and_a_missing_driver():
    from workbench.engine.worker.serve import device_index, driver_primary_context

    assert [device_index(d) for d in ("cuda", "cuda:0", "cuda:3")] == [0, 0, 3]
    assert driver_primary_context(0, library="libno-such-cuda-driver.so.1") is False


SCRIPT = """
import json, sys, threading
from workbench.engine.plan import RunOptions, run_plan
from workbench.session.api import load_session
doc = run_plan(load_session(sys.argv[1]), on_event=lambda e: None, stop=threading.Event(),
               options=RunOptions(cache_dir=sys.argv[2]))
print(json.dumps([[r["label"], r["status"], r.get("error")] for r in doc["results"]]))
"""

SESSION = """\
schema_version: 1
name: preload
settings: {device: cpu, warmup_ms: 1, rep_ms: 5}
runs:
  - op: softmax
    impls: [triton, pytorch]
    shape: {M: 64, N: 64}
    dtype: float32
    actions: [check, bench]
"""


@pytest.mark.slow
def test_interpreted_triton_rows_run_where_the_zygote_preloaded_compiled_triton(tmp_path):
    """ZYGOTE_GPU=1 and ZYGOTE_PRELOAD=all on this CPU box: the zygote imports Triton (compiled), dynamo and Inductor;
    the CPU rows' worker interprets Triton, so it is spawned, and its Triton row runs right.
    Forked from that zygote instead, the row failed: Triton's own library functions (tl.max,
    tl.sum) were made compiled when Triton was imported, and an interpreted kernel cannot call
    them ("Cannot call @triton.jit'd outside of the scope of a kernel")."""
    session = tmp_path / "preload.yaml"
    session.write_text(SESSION)
    trace = tmp_path / "trace.txt"
    env = {**os.environ, ZYGOTE_GPU: "1", ZYGOTE_PRELOAD: "all", "WORKBENCH_TRACE": str(trace), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(session), str(tmp_path / "cache")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    assert [status for _label, status, _error in results] == ["ok", "ok"], results
    from workbench import trace as wb_trace

    phases = [phase for _t, _pid, phase in wb_trace.read(str(trace))]
    assert not any(p.startswith("zygote: triton") for p in phases)  # no worker needed the zygote: spawned
    assert any(p.startswith("worker cpu: start") for p in phases)


@pytest.mark.slow
@pytest.mark.parametrize("setting", ["", "0"])
def test_the_zygote_collects_again_after_its_imports_and_freezes_them(setting):
    """The zygote imports with the collector off (zygote.py); every worker forked from it must
    find it on again, and the imports frozen out of its collections, the preload on or off."""
    code = ("import gc, workbench.engine.worker.zygote; "
            "print(gc.isenabled(), gc.get_freeze_count() > 100000, 'workbench.engine.worker.execute' in __import__('sys').modules)")
    env = {**os.environ, ZYGOTE_PRELOAD: setting}
    env.pop("WORKBENCH_ZYGOTE_LOG", None)
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["True", "True", "False" if setting == "0" else "True"]
