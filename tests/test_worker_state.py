"""What a warm worker puts back between rows (engine/worker_state.py), without starting one."""

from __future__ import annotations

import functools
import os
import sys
import types

from workbench.engine.worker.state import Baseline


def test_a_tool_path_inductor_sets_is_put_back_and_set_again_next_time(monkeypatch):
    """torch.compile points Triton at torch's ptxas (TRITON_PTXAS_PATH) through a cached setter; on
    the H200 that replaced the worker after every compiled row. Now the path is put back and the
    setter's cache cleared (so the next compiled row sets it again), and the worker stays."""
    monkeypatch.delenv("TRITON_PTXAS_PATH", raising=False)
    base = Baseline(device="cpu", env=dict(os.environ))
    calls = []

    @functools.cache
    def _set_triton_ptxas_path():
        calls.append(1)
        os.environ["TRITON_PTXAS_PATH"] = "/opt/torch/bin/ptxas"

    tasks = types.ModuleType("torch._inductor.runtime.compile_tasks")
    tasks._set_triton_ptxas_path = _set_triton_ptxas_path
    monkeypatch.setitem(sys.modules, "torch._inductor.runtime.compile_tasks", tasks)
    _set_triton_ptxas_path()  # a compiled row
    assert base.env_changes() == ["TRITON_PTXAS_PATH"]
    base.restore_tool_paths()
    assert base.env_changes() == [] and "TRITON_PTXAS_PATH" not in os.environ
    _set_triton_ptxas_path()  # the next compiled row sets it again, as in a fresh process
    assert len(calls) == 2


def test_a_real_switch_still_replaces_the_worker(monkeypatch):
    monkeypatch.delenv("CUDA_LAUNCH_BLOCKING", raising=False)
    base = Baseline(device="cpu", env=dict(os.environ))
    monkeypatch.setenv("CUDA_LAUNCH_BLOCKING", "1")
    base.restore_tool_paths()
    assert base.env_changes() == ["CUDA_LAUNCH_BLOCKING"]


def test_the_warm_worker_freezes_its_startup_heap_and_later_garbage_is_still_collected():
    import gc

    from workbench.engine.worker.serve import settle_heap

    before = gc.get_freeze_count()
    try:
        settle_heap()
        assert gc.get_freeze_count() >= before and gc.get_freeze_count() > 0

        class Cycle:
            pass
        a, b = Cycle(), Cycle()
        a.other, b.other = b, a  # garbage made after the freeze: a cycle only the collector frees
        import weakref
        probe = weakref.ref(a)
        del a, b
        gc.collect()
        assert probe() is None
    finally:
        gc.unfreeze()


def test_the_full_collection_runs_only_while_device_memory_is_still_held():
    from workbench.engine.worker.state import Baseline

    base = Baseline(device="cuda:0", env=dict(os.environ))
    base.allocated_bytes = 1000
    passes = []
    # nothing held beyond the baseline and the kept flush buffer: the young generations suffice
    assert base.collect(kept_bytes=500, collect=passes.append, allocated=lambda: 1500) == 1
    assert passes == [1]
    # still held after the young pass: garbage in the oldest generation may hold it
    passes.clear()
    assert base.collect(kept_bytes=500, collect=passes.append, allocated=lambda: 1500 + 2**20) == 2
    assert passes == [1, 2]
