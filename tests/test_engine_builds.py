"""The warm worker's build cache key and building ahead's rules (no processes started here)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from workbench.cost import Cost
from workbench.engine.worker.build_ahead import _warmup, likely_launch_bound, worth_building_ahead
from workbench.engine.worker.build_cache import BuildCache, build_key, source_digest
from workbench.kernel_source import TritonLaunch
from workbench.machine import find_nvcc
from workbench.registry import discover
from workbench.session.model import Settings

GELU = discover().op("gelu")


def _row(impl: str = "triton", device: str = "cuda:0", shape=None, params=None, precision: str = "ieee"):
    return SimpleNamespace(op="gelu", impl=impl, label=impl, device=device, shape=shape or {"M": 64, "N": 64},
                           dtype="float32", params=params or {}, settings=Settings(fp32_precision=precision))


def _key(**changes):
    row = _row(**{k: v for k, v in changes.items() if k != "interpret"})
    impl = GELU.get_impl(row.impl)
    spec = GELU.make_spec(row.shape, row.dtype)
    return build_key(row, impl, spec, impl.resolve_params(row.params), changes.get("interpret", False))


def test_the_build_key_changes_with_everything_a_build_depends_on():
    base = _key()
    assert _key() == base
    for change in ({"shape": {"M": 64, "N": 65}}, {"params": {"BLOCK_SIZE": 512}}, {"impl": "manual"},
                   {"device": "cuda:1"}, {"interpret": True}, {"precision": "tf32"}):
        assert _key(**change) != base, change
    assert source_digest(GELU.get_impl("cuda")) != source_digest(GELU.get_impl("triton"))  # the .cu too


def test_the_source_digest_follows_the_file(tmp_path):
    source = tmp_path / "ops.py"
    source.write_text("def build(spec, params, ctx):\n    return None\n")
    namespace: dict = {}
    exec(compile(source.read_text(), str(source), "exec"), namespace)
    impl = SimpleNamespace(builder=namespace["build"], cuda_source=None)
    before = source_digest(impl)
    source.write_text("def build(spec, params, ctx):\n    return 1  # edited\n")
    assert before and source_digest(impl) != before


def test_the_build_cache_is_a_small_lru():
    cache = BuildCache(max_builds=2)
    cache.put("a", len)
    cache.put("b", abs)
    assert cache.get("a") is len  # a is now the most recent
    cache.put("c", min)
    assert cache.get("b") is None and cache.get("a") is len and cache.get("c") is min
    assert (cache.hits, cache.misses) == (3, 1)


class _Registry:
    def op(self, name):
        return GELU


def test_build_ahead_only_for_cuda_rows_that_are_not_launch_bound():
    big = {"M": 16384, "N": 16384}
    assert worth_building_ahead([_row("triton", shape=big), _row("cuda", shape=big)], _Registry())
    assert not worth_building_ahead([_row("triton", shape=big, device="cpu")], _Registry())
    assert not worth_building_ahead([_row("triton", shape=big), _row("pytorch", shape={"M": 64, "N": 64})],
                                    _Registry())  # one small row: nothing compiles beside it
    assert not worth_building_ahead([_row("manual", shape=big), _row("pytorch", shape=big)], _Registry())
    assert likely_launch_bound(Cost(4096, 4096, 0)) and not likely_launch_bound(Cost(2**30, 2**30, 0))


def test_triton_warmup_compiles_the_launch_without_tensors():
    """Build-ahead compiles the row's exact launch (the PTX view's warmup call) and touches no
    device memory: on this CPU it compiles for sm_90 through the stand-in driver."""
    from workbench.kernels.gelu import GELU

    impl = GELU.get_impl("triton")
    spec = GELU.make_spec({"M": 64, "N": 96}, "bfloat16")
    launch = impl.source.launch_for(spec, impl.resolve_params({}))
    compiled = _warmup(launch, has_cuda=False)
    assert "ld.global" in compiled.asm["ptx"] and ".target sm_90" in compiled.asm["ptx"]


def test_building_ahead_an_autotuned_triton_row_compiles_every_candidate_once(monkeypatch, tmp_path):
    """The 16384-wide Triton softmax tunes over several configs in the timing worker: building
    ahead compiles each of them (the tuning then loads them from Triton's cache) and, for the PTX
    view, caches each one's tool outputs, so the winner's view is ready whichever it is; the
    launch the run would take without tuning is compiled first, and only once."""
    from workbench.engine.worker import build_ahead
    from workbench.kernels import softmax as softmax_kernels

    compiled, tools = [], []
    monkeypatch.setattr(build_ahead, "_warmup", lambda launch, has_cuda=True: compiled.append(launch) or launch)
    monkeypatch.setattr(build_ahead, "_triton_tool_outputs", lambda done, cache: tools.append(done) or True)
    row = SimpleNamespace(op="softmax", impl="triton", label="triton", device="cuda:0",
                          shape={"M": 16384, "N": 16384}, dtype="float32", params={}, actions=("check", "ptx"),
                          settings=Settings())
    done = build_ahead.prebuild(discover(), row, False, str(tmp_path / "build"), str(tmp_path / "cache"))
    spec = discover().op("softmax").make_spec(row.shape, row.dtype)
    configs = softmax_kernels._triton_candidates(spec)[1]
    assert len(configs) > 1
    keys = [build_ahead._launch_key(launch) for launch in compiled]
    assert len(keys) == len(set(keys)) == len(configs), "each candidate compiled, none twice"
    assert compiled[0] == softmax_kernels._triton_launch(spec, {}), "the untuned launch first"
    assert tools == compiled
    assert done == f"triton warmup + ptx + {len(configs) - 1} of {len(configs) - 1} other tuning candidate(s)"
    # a candidate that fails to compile is the tuner's to skip: the others are still built
    compiled.clear()

    def failing(launch, has_cuda=True):
        if len(compiled) == 1:
            compiled.append(None)
            raise RuntimeError("out of resources")
        compiled.append(launch)
        return launch
    monkeypatch.setattr(build_ahead, "_warmup", failing)
    done = build_ahead.prebuild(discover(), row, False, str(tmp_path / "build"), str(tmp_path / "cache"))
    assert done.endswith(f"+ {len(configs) - 2} of {len(configs) - 1} other tuning candidate(s)")


def test_a_triton_row_without_candidates_compiles_its_one_launch(monkeypatch, tmp_path):
    from workbench.engine.worker import build_ahead

    compiled = []
    monkeypatch.setattr(build_ahead, "_warmup", lambda launch, has_cuda=True: compiled.append(launch) or launch)
    row = SimpleNamespace(
        op="gelu", impl="triton", label="triton", device="cuda:0", shape={"M": 64, "N": 64}, dtype="float32",
        params={}, actions=("check",), settings=Settings())
    assert build_ahead.prebuild(discover(), row, False, None, None) == "triton warmup"
    assert len(compiled) == 1


@pytest.mark.skipif(find_nvcc() is None, reason="nvcc not found")
def test_building_ahead_a_cuda_rows_ptx_leaves_the_record_nothing_to_compute(tmp_path, monkeypatch):
    """The PTX record of a CudaSource row is built ahead into the cache the row's PTX stage
    reads: the row then runs no tool and maps no kernel (the record itself is cached), and gets
    the same record, its first note saying the compile was cached."""
    from workbench.engine.worker.build_ahead import cuda_ptx_ahead
    from workbench.ptx import extractors, tools
    from workbench.ptx.extract import ptx_record

    impl = GELU.get_impl("cuda")
    spec = GELU.make_spec({"M": 64, "N": 1024}, "float32")
    cuda_ptx_ahead(GELU, impl, spec, impl.resolve_params({}), None, tmp_path)
    ahead, ahead_texts = ptx_record(GELU, impl, spec, cache_dir=tmp_path)
    ran: list = []
    real = tools.run_tool
    monkeypatch.setattr(tools, "run_tool", lambda cmd, *a, **k: ran.append(cmd[0]) or real(cmd, *a, **k))
    monkeypatch.setattr(extractors, "_cuda_record", lambda *a: pytest.fail("the cached record was made again"))
    record, texts = ptx_record(GELU, impl, spec, cache_dir=tmp_path)
    assert record["kernels"] and "(cached)" in record["notes"][0]
    assert (record, texts) == (ahead, ahead_texts)
    assert not {Path(c).name for c in ran} & {"nvcc", "ptxas", "nvdisasm", "cuobjdump"}, ran


@pytest.mark.skipif(find_nvcc() is None, reason="nvcc not found")
def test_a_cuda_record_is_cached_per_dtype_and_made_again_when_its_file_is_unreadable(tmp_path):
    """Another dtype of the same .cu is another record (its own kernels); a cached record that
    does not parse is made again, not trusted or raised."""
    from workbench.ptx.extract import ptx_record

    impl = GELU.get_impl("cuda")
    f32 = GELU.make_spec({"M": 64, "N": 1024}, "float32")
    bf16 = GELU.make_spec({"M": 64, "N": 1024}, "bfloat16")
    first, _ = ptx_record(GELU, impl, f32, cache_dir=tmp_path)
    other, _ = ptx_record(GELU, impl, bf16, cache_dir=tmp_path)
    assert {k["name"] for k in first["kernels"]}.isdisjoint({k["name"] for k in other["kernels"]})
    files = sorted(tmp_path.rglob("record-*.json"))
    assert len(files) == 2
    for f in files:
        f.write_text("{not json")
    again, _ = ptx_record(GELU, impl, f32, cache_dir=tmp_path)
    assert again["kernels"] == first["kernels"]


def test_the_planning_query_answers_costs_and_refuses_unaddressable_specs():
    from workbench.engine.protocol import Query
    from workbench.engine.worker.serve import describe

    small, huge = (("M", 4), ("N", 8)), (("M", 2**40), ("N", 2**40))
    ok, refused = describe(discover(), None, Query((("gelu", "manual", small, "float32"),
                                                    ("gelu", "triton", huge, "float32"))))
    assert ok.error is None and (ok.bytes_read, ok.bytes_written) == (128, 128)
    assert ok.bytes_moved_est == 22 * 32 * 4  # the manual form's nine kernels (kernels/gelu.py)
    assert "at most 2^63-1 bytes" in refused.error
    (broken,) = describe(None, "plugin x failed to load", Query((("gelu", "manual", small, None),)))
    assert broken.error == "plugin x failed to load"


def test_one_build_ahead_worker_for_every_run_of_a_session(monkeypatch):
    """The default session's two runs get one build-ahead job over both, started before the
    first run (softmax.cu compiles while GeLU is timed); a run then starts none of its own."""
    import threading

    from workbench.engine import plan as engine_plan
    from workbench.engine.rows import expand
    from workbench.session.api import load_session

    session = load_session(Path(__file__).parents[1] / "sessions" / "default.yaml")
    registry = discover()
    rows = expand(session, registry, has_cuda=True)
    plan = engine_plan._Plan((), "", registry, SimpleNamespace(triton=True, has_cuda=True), rows)
    started: list = []
    monkeypatch.setattr(engine_plan._PlanRun, "_start_building_ahead",
                        lambda self, rows, interpret: started.append(rows) or "worker")
    run = engine_plan._PlanRun(rows, lambda e: None, threading.Event(), None, {}, plan, registry=registry,
                               build_ahead=True)
    groups = [list(g) for _i, g in __import__("itertools").groupby(rows, key=lambda r: r.run_index)]
    run.start_session_build_ahead(groups, plan.machine)
    assert len(groups) == 2 and len(started) == 1
    assert {r.op for r in started[0]} == {"gelu", "softmax"} and len(started[0]) == len(rows)
    assert run.session_ahead == "worker"

    started.clear()
    mixed = [[dataclasses.replace(r, device="cpu") if i else r for r in g] for i, g in enumerate(groups)]
    run.session_ahead = None
    run.start_session_build_ahead(mixed, plan.machine)  # two worker keys: each run on its own
    assert started == [] and run.session_ahead is None


def test_cuda_builds_ahead_run_side_by_side_and_each_row_says_what_was_built(monkeypatch, capfd):
    """Two CUDA rows' builds must be in flight at once (a barrier of two passes only then);
    a Triton row's warmup stays on the worker's own thread."""
    import threading

    from workbench.engine.worker import build_ahead, serve as worker

    barrier = threading.Barrier(2, timeout=10)
    threads: dict = {}

    def fake_prebuild(registry, row, interpret, build_dir, cache_dir=None, part="all"):
        threads[row.label] = threading.current_thread().name
        if row.impl.startswith("cuda"):
            barrier.wait()  # raises BrokenBarrierError if the other CUDA build is not running too
            return {"all": "cuda build", "build": "cuda build", "ptx": "ptx"}[part]
        return "triton warmup"

    monkeypatch.setattr(build_ahead, "prebuild", fake_prebuild)
    monkeypatch.setattr(build_ahead, "builds_in_thread", lambda registry, row: row.impl.startswith("cuda"))
    rows = [SimpleNamespace(**{**vars(_row(impl)), "actions": ("bench",)}) for impl in ("cuda_naive", "triton", "cuda")]
    job = SimpleNamespace(rows=rows, interpret=False, build_dir=None, cache_dir=None)
    assert worker._build_ahead(job, SimpleNamespace(registry=None), None, threading.Event()) is None
    out = capfd.readouterr().out
    for label, what in (("cuda_naive", "cuda build"), ("cuda", "cuda build"), ("triton", "triton warmup")):
        assert f"built ahead: {label}: {what}" in out
    assert threads["triton"] == threading.current_thread().name
    assert threads["cuda"].startswith("build-ahead") and threads["cuda_naive"].startswith("build-ahead")

    # with the ptx action a CUDA row's module and its PTX view's compile are two tasks side by side
    barrier = threading.Barrier(2, timeout=10)
    job.rows = [SimpleNamespace(**{**vars(_row("cuda")), "actions": ("bench", "ptx")})]
    assert worker._build_ahead(job, SimpleNamespace(registry=None), None, threading.Event()) is None
    out = capfd.readouterr().out
    assert "built ahead: cuda: cuda build" in out and "built ahead: cuda: ptx" in out


def test_a_session_opened_in_the_tui_builds_every_runs_kernels_ahead(monkeypatch, tmp_path):
    """engine/plan.build_session_ahead: one build job over both runs of the default session on a
    CUDA machine (the TUI runs one run per r, so each run's own build-ahead began only with it);
    none in strict mode, with build_ahead=False, or for rows on the CPU."""
    from workbench.engine import plan as engine_plan
    from workbench.engine.options import RunOptions
    from workbench.machine import probe
    from workbench.session.api import load_session

    session = load_session(Path(__file__).parents[1] / "sessions" / "default.yaml")
    started: list = []
    monkeypatch.setattr(engine_plan, "probe", lambda: dataclasses.replace(probe(), has_cuda=True))
    monkeypatch.setattr(engine_plan, "declare", lambda paths, cache_dir=None: discover())  # no manifest child
    asked: list = []
    monkeypatch.setattr(engine_plan, "_facts", lambda plan, rows, pool, key: asked.append(key) or ({}, None))
    monkeypatch.setattr(engine_plan, "worth_building_ahead", lambda rows, registry: True)
    monkeypatch.setattr(engine_plan, "Background", lambda pool, key, job: started.append((key, job)) or "job")
    options = RunOptions(cache_dir=tmp_path)
    assert engine_plan.build_session_ahead(session, options, pool=None) == "job"
    (key, job), = started
    assert key.role == "build" and job.mode == "build" and job.cache_dir == str(tmp_path)
    assert asked == [key]  # the costs are the build worker's answers: the prestarted one stays free
    assert {r.op for r in job.rows} == {"gelu", "softmax"} and len(job.rows) == 12
    assert all(r.device.startswith("cuda") for r in job.rows)
    started.clear()
    assert engine_plan.build_session_ahead(session, dataclasses.replace(options, strict=True), None) is None
    assert engine_plan.build_session_ahead(session, dataclasses.replace(options, build_ahead=False), None) is None
    assert engine_plan.build_session_ahead(session, dataclasses.replace(options, device="cpu"), None) is None
    assert started == []


def test_the_default_sessions_distinct_cuda_compiles_go_first_and_repeats_last():
    """build_ahead.thread_tasks on the default session: gelu's `cuda_naive` and `cuda` are one
    module and one PTX compile of gelu.cu, so with four build threads softmax.cu's two compiles
    are among the first four tasks and gelu's repeats come after them."""
    from workbench.engine.worker.build_ahead import BUILD_THREADS, compile_key, thread_tasks
    from workbench.engine.rows import expand
    from workbench.session.api import load_session

    registry = discover()
    rows = expand(load_session(Path(__file__).parents[1] / "sessions" / "default.yaml"), registry, has_cuda=True)
    tasks = thread_tasks(registry, rows)
    assert [(r.op, r.impl, part) for r, part in tasks] == [
        ("gelu", "cuda_naive", "build"), ("gelu", "cuda_naive", "ptx"), ("softmax", "cuda", "build"),
        ("softmax", "cuda", "ptx"), ("gelu", "cuda", "build"), ("gelu", "cuda", "ptx")]
    keys = [compile_key(registry, r, part) for r, part in tasks]
    assert len(set(keys[:BUILD_THREADS])) == BUILD_THREADS and set(keys[BUILD_THREADS:]) <= set(keys[:BUILD_THREADS])
    assert compile_key(registry, SimpleNamespace(op="nope", impl="x"), "ptx") == ("ptx", "nope", "x")


def test_every_cuda_compile_is_asked_for_before_the_first_triton_warmup(monkeypatch, capfd):
    """worker._build_ahead: a CUDA row after a Triton row in session order (softmax's `cuda`
    after gelu's `triton`) starts compiling while the warmup holds the worker's thread; the
    warmup here waits for it and fails the test if it never starts."""
    import threading

    from workbench.engine.worker import build_ahead, serve as worker

    cuda_started = threading.Event()

    def fake_prebuild(registry, row, interpret, build_dir, cache_dir=None, part="all"):
        if row.impl == "cuda":
            cuda_started.set()
            return "cuda build"
        assert cuda_started.wait(10), "the CUDA build waited for the Triton warmup"
        return "triton warmup"

    monkeypatch.setattr(build_ahead, "prebuild", fake_prebuild)
    monkeypatch.setattr(build_ahead, "builds_in_thread", lambda registry, row: row.impl == "cuda")
    rows = [SimpleNamespace(**{**vars(_row(impl)), "actions": ("bench",)}) for impl in ("triton", "cuda")]
    job = SimpleNamespace(rows=rows, interpret=False, build_dir=None, cache_dir=None)
    assert worker._build_ahead(job, SimpleNamespace(registry=None), None, threading.Event()) is None
    out = capfd.readouterr().out
    assert "built ahead: triton: triton warmup" in out and "built ahead: cuda: cuda build" in out
