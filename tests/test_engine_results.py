"""The results document helpers, the size estimate and per-action availability (no children)."""

from __future__ import annotations

import json

import pytest

from workbench.cost import Cost
from workbench.engine.admit import admit
from workbench.engine.estimate import estimate_row, skip_reason
from workbench.engine.rows import expand, normalise_actions, resolve_device
from workbench.machine import Machine
from workbench.registry import discover
from workbench.results.document import (RECORD_KEYS, dumps, flatten, load, missing_keys, new_document, new_record,
                               write)
from workbench.session.model import ImplRef, RunSpec, Session, Settings, Sweep

NO_GPU_WITH_NVCC = Machine(has_cuda=False, device_name=None, nvcc="/usr/bin/nvcc", triton=True, ninja=True)
NO_GPU_NO_NVCC = Machine(has_cuda=False, device_name=None, nvcc=None, triton=True, ninja=True)


def test_new_record_has_every_key():
    record = new_record(op="gelu", status="ok")
    assert tuple(record) == RECORD_KEYS and record["flags"] == [] and record["timing"] is None
    with pytest.raises(KeyError):
        new_record(median_ms=1.0)


def test_missing_keys_finds_gaps_in_nested_records():
    doc = new_document({"session": "s"}, {"device": "cpu"})
    assert missing_keys(doc) == []
    doc["results"].append({**new_record(), "timing": {"median_ms": 1.0}})
    assert "results[0].timing.p20_ms" in missing_keys(doc)


def test_flatten_for_csv_and_round_trip(tmp_path):
    record = new_record(op="gelu", shape={"M": 2, "N": 3}, params={}, flags=["a", "b"],
                        launch={"grid": [4, 1, 1], "num_warps": 4, "block_threads": 128, "waves": 0.1},
                        timing={"median_ms": 1.5, "samples_ms": [1.0, 2.0]})
    flat = flatten(record)
    assert flat["shape.M"] == 2 and flat["timing.median_ms"] == 1.5 and flat["launch.grid"] == "4;1;1"
    assert flat["flags"] == "a;b" and "timing.samples_ms" not in flat and "ptx" not in flat
    doc = new_document({}, {})
    doc["results"].append({**record, "check": {"max_abs_err": float("inf")}})
    path = tmp_path / "out" / "r.json"
    write(doc, path)
    back = load(path)
    assert back["results"][0]["check"]["max_abs_err"] is None  # JSON has no inf
    assert json.loads(dumps(doc)) == back


def test_estimate_skips_only_far_beyond_the_timeout():
    big = Cost(bytes_read=2**30, bytes_written=2**30, flops=2**28)
    est = estimate_row(big, "interpreter", ("check", "bench"), itemsize=4, warmup_ms=25, rep_ms=100, min_samples=10)
    assert est.seconds > 1e4
    assert "far beyond timeout_s" in skip_reason(est, 120.0, memory_bytes=None)
    small = Cost(bytes_read=4096, bytes_written=4096, flops=1024)
    est = estimate_row(small, "cpu", ("check", "bench"), itemsize=4, warmup_ms=25, rep_ms=100, min_samples=10)
    assert est.seconds < 1.0 and skip_reason(est, 120.0, memory_bytes=2**30) is None
    huge = estimate_row(Cost(2**40, 2**40, 0), "cuda", ("check",), itemsize=4, warmup_ms=0, rep_ms=0, min_samples=1)
    past_all = skip_reason(huge, 1e9, memory_bytes=141 * 2**30)  # it cannot fit: no --force offered
    assert "more than all of the device's 141.0 GiB, so it cannot run here" in past_all and "--force" not in past_all
    near = skip_reason(huge, 1e9, memory_bytes=int(huge.memory_bytes / 0.95))  # over 90% of it: --force may do
    assert "more than the device's" in near and near.endswith("(run with --force to try)")


def test_rows_expand_runs_impls_and_sweeps():
    registry = discover()
    session = Session(name="s", settings=Settings(device="auto"), runs=(
        RunSpec(op="gelu", impls=(ImplRef("manual"), ImplRef("triton", {"BLOCK_SIZE": 256}, "t256")),
                shape={"M": 4, "N": 8}, sweep=Sweep(("N",), (8, 16)), actions=("bench",)),
        RunSpec(op="gelu", shape={"M": 2, "N": 2}, settings={"device": "cpu"})))
    rows = expand(session, registry, has_cuda=False)
    first = [(r.label, r.sweep_value, r.shape["N"]) for r in rows if r.run_index == 0]
    assert first == [("manual", 8, 8), ("manual", 16, 16), ("t256", 8, 8), ("t256", 16, 16)]
    assert rows[2].params == {"BLOCK_SIZE": 256} and rows[0].actions == ("check", "bench")
    assert len([r for r in rows if r.run_index == 1]) == len(registry.op("gelu").impls)  # all
    assert resolve_device("auto", True) == "cuda:0" and resolve_device("cuda", False) == "cuda:0"
    assert normalise_actions(("ptx", "profile")) == ("check", "profile", "ptx")


def _one_row(impl: str, actions: tuple[str, ...], device: str = "cpu", shape=None):
    registry = discover()
    session = Session(name="s", settings=Settings(device=device), runs=(
        RunSpec(op="gelu", impls=(ImplRef(impl),), shape=shape or {"M": 4, "N": 8}, actions=actions),))
    return expand(session, registry, has_cuda=False)[0], registry


def test_cuda_ptx_only_row_runs_without_a_gpu():
    row, registry = _one_row("cuda", ("ptx",))
    adm = admit(row, registry, NO_GPU_WITH_NVCC, force=False, interpret=True, memory_bytes=2**34)
    assert adm.final is None and adm.exec_row is None and adm.ptx_row.actions == ("ptx",)
    assert adm.override is None


def test_cuda_bench_and_ptx_row_measures_nothing_but_keeps_ptx():
    row, registry = _one_row("cuda", ("bench", "ptx"))
    adm = admit(row, registry, NO_GPU_WITH_NVCC, force=False, interpret=True, memory_bytes=2**34)
    assert adm.exec_row is None and adm.ptx_row is not None
    assert adm.override[0] == "unavailable" and "GPU" in adm.override[1]
    adm = admit(row, registry, NO_GPU_NO_NVCC, force=False, interpret=True, memory_bytes=2**34)
    assert adm.final["status"] == "unavailable" and "GPU" in adm.final["error"]


def test_triton_on_cpu_runs_interpreted_and_ptx_goes_to_a_separate_child():
    row, registry = _one_row("triton", ("check", "bench", "ptx"))
    adm = admit(row, registry, NO_GPU_WITH_NVCC, force=False, interpret=True, memory_bytes=2**34)
    assert adm.exec_row.actions == ("check", "bench") and adm.ptx_row.actions == ("ptx",)


def test_cuda_device_without_gpu_and_forced_sizes():
    row, registry = _one_row("pytorch", ("bench",), device="cuda")
    adm = admit(row, registry, NO_GPU_WITH_NVCC, force=False, interpret=False, memory_bytes=None)
    assert adm.final["status"] == "unavailable" and "no CUDA GPU" in adm.final["error"]
    row, registry = _one_row("triton", ("bench",), shape={"M": 65536, "N": 65536})
    adm = admit(row, registry, NO_GPU_WITH_NVCC, force=False, interpret=True, memory_bytes=2**34)
    assert adm.final["status"] == "skipped" and adm.final["error"].startswith("estimated")
    adm = admit(row, registry, NO_GPU_WITH_NVCC, force=True, interpret=True, memory_bytes=2**34)
    assert adm.final is None and adm.exec_row is not None
    row, registry = _one_row("triton", ("bench", "ptx"), shape={"M": 65536, "N": 65536})
    adm = admit(row, registry, NO_GPU_WITH_NVCC, force=False, interpret=True, memory_bytes=2**34)
    assert adm.exec_row is None and adm.ptx_row is not None  # PTX is size-independent: still shown
    assert adm.override[0] == "skipped" and adm.override[1].startswith("estimated")


def test_re_read_traffic_is_not_counted_as_memory():
    """H200: cuda_naive matmul at 4096^3 float32 was skipped as needing 513 GiB (its loads)."""
    from workbench.registry import discover

    op = discover().op("matmul")
    spec = op.make_spec({"M": 4096, "N": 4096, "K": 4096}, "float32")
    cost = op.get_impl("cuda_naive").cost(op, spec)
    assert cost.moved > 500 * 2**30
    est = estimate_row(cost, "cuda", ("check", "bench"), itemsize=4, warmup_ms=25, rep_ms=100, min_samples=10)
    assert est.memory_bytes < 4 * 2**30
    assert skip_reason(est, 300.0, memory_bytes=141 * 2**30) is None


def test_the_mlps_memory_estimate_is_its_footprint_not_its_traffic():
    """H200: the lecture's MLP profile (dim 2048, 64 layers, batch 1024) was skipped as 135 GiB."""
    from workbench.registry import discover

    op = discover().op("mlp")
    spec = op.make_spec({"batch": 1024, "dim": 2048, "layers": 64, "steps": 2}, "float32")
    cost = op.get_impl("pytorch").cost(op, spec)
    assert op.footprint_bytes(spec) < cost.bytes / 4        # weights re-read each step and layer
    est = estimate_row(cost, "cuda", ("check", "profile"), itemsize=4, warmup_ms=10, rep_ms=50, min_samples=5,
                       footprint_bytes=op.footprint_bytes(spec))
    assert est.memory_bytes < 40 * 2**30
    assert skip_reason(est, 300.0, memory_bytes=int(139.8 * 2**30)) is None
    gelu = discover().op("gelu")
    gelu_spec = gelu.make_spec({"M": 64, "N": 64}, "float32")
    assert gelu.footprint_bytes(gelu_spec) == gelu.cost(gelu_spec).bytes


def test_an_estimate_reads_at_a_glance():
    """A first user saw 'estimated 16000000000 s'."""
    from workbench.engine.estimate import Estimate, duration_text

    assert [duration_text(s) for s in (3, 600, 12600, 1.6e10)] == ["3 s", "10 min", "3.5 h", "1.85e+05 days"]
    assert Estimate(1.6e10, 2**31, 1.0).describe() == "estimated 1.85e+05 days and 2.0 GiB"


def test_the_2_31_element_add_is_estimated_as_what_a_chunked_check_needs():
    """Issue 14: a float16 add of 2^31 + 2^20 elements was estimated at 204 GiB and skipped; a
    chunked check of it peaked at 18.3 GiB on the H200 (12 GiB of it inputs and output)."""
    from workbench.engine.estimate import check_bytes_of, l2_flush_bytes

    op = discover().op("add")
    spec = op.make_spec({"M": 1, "N": 2**31 + 2**20}, "float16")
    impl = op.get_impl("triton")
    est = estimate_row(impl.cost(op, spec), "cuda", ("check", "bench"), itemsize=2, warmup_ms=25, rep_ms=100,
                       min_samples=10, footprint_bytes=op.footprint_bytes(spec),
                       check_bytes=check_bytes_of(op, impl, spec), flush_bytes=l2_flush_bytes(60 * 2**20))
    assert 12 * 2**30 < est.memory_bytes < 16 * 2**30, est
    assert est.footprint_bytes == 3 * spec.N * 2 and est.flush_bytes == 256 * 2**20
    assert skip_reason(est, 300.0, memory_bytes=int(139.8 * 2**30)) is None
    assert "footprint 12.0 + max(scratch 0.0, check 1.4) + flush 0.2 GiB" in est.describe()
    assert set(est.as_dict()) == {"seconds", "memory_bytes", "footprint_bytes", "scratch_bytes", "check_bytes",
                                  "flush_bytes"}


def test_the_front_end_estimates_a_2_31_row_from_the_workers_check_workspace():
    """The planner is torch-free: it admits rows with the declared (manifest) registry and the
    worker's answers (engine/planning.CostedRegistry). The check workspace needs the op's input
    factory, which only the worker has: without its answer the H200 replay of
    benchmarks/sessions/big-2e31.yaml skipped every row at 136-204 GiB (2026-12-01)."""
    from workbench.engine.cost_query import CostedRegistry, fact_key
    from workbench.engine.protocol import Query
    from workbench.engine.worker.serve import describe
    from workbench.plugins.manifest import declare

    shape, dtype = {"M": 1, "N": 2**31 + 2**20}, "float16"
    (answer,) = describe(discover(), None, Query((("gelu", "triton", tuple(shape.items()), dtype),)))
    assert answer.check_bytes is not None and answer.check_bytes < 2 * 2**30
    declared = declare()
    session = Session(name="s", settings=Settings(device="cpu"), runs=(
        RunSpec(op="gelu", impls=(ImplRef("triton"),), shape=shape, dtype=dtype, actions=("check", "bench")),))
    row = expand(session, declared, has_cuda=False)[0]
    costed = CostedRegistry(declared, {fact_key("gelu", "triton", row.shape, row.dtype): answer})
    adm = admit(row, costed, NO_GPU_WITH_NVCC, force=False, interpret=True, memory_bytes=2**40)
    estimate = adm.exec_row.estimate if adm.exec_row else adm.final["estimate"]  # skipped here: days on CPU
    assert estimate["check_bytes"] == answer.check_bytes and estimate["memory_bytes"] < 10 * 2**30


def test_every_admitted_row_carries_its_estimate():
    row, registry = _one_row("pytorch", ("bench",), shape={"M": 64, "N": 64})
    adm = admit(row, registry, NO_GPU_WITH_NVCC, force=False, interpret=True, memory_bytes=2**34)
    assert adm.exec_row.estimate["footprint_bytes"] == 2 * 64 * 64 * 4
    assert adm.exec_row.record()["estimate"] == adm.exec_row.estimate
    forced = admit(row, registry, NO_GPU_WITH_NVCC, force=True, interpret=True, memory_bytes=2**34)
    assert forced.exec_row.estimate == adm.exec_row.estimate
    big, registry = _one_row("triton", ("bench",), shape={"M": 65536, "N": 65536})
    skipped = admit(big, registry, NO_GPU_WITH_NVCC, force=False, interpret=True, memory_bytes=2**34)
    assert skipped.final["estimate"]["memory_bytes"] > 0 and skipped.final["error"].startswith("estimated")


def test_the_exact_check_workspace_is_computed_only_where_it_can_change_admission():
    from workbench.engine.estimate import exact_check_bytes_matter
    from workbench.engine.protocol import Query
    from workbench.engine.worker.serve import describe

    gib = 2**30
    assert not exact_check_bytes_matter(2 * gib, 4, 141 * gib)     # 16384^2 float32 GeLU on an H200
    assert exact_check_bytes_matter(16 * gib, 4, 141 * gib)        # 65536^2: the default (128 GiB) would refuse it
    assert exact_check_bytes_matter(2 * gib, 4, None)              # memory unknown: always exact
    spec = (("M", 1024), ("N", 1024))
    (roomy,) = describe(discover(), None, Query((("gelu", "manual", spec, "float32"),)), 2**40)
    (tight,) = describe(discover(), None, Query((("gelu", "manual", spec, "float32"),)), 2**26)
    assert roomy.check_bytes is None and roomy.footprint_bytes == tight.footprint_bytes
    assert tight.check_bytes is not None and tight.check_bytes > 0


@pytest.mark.slow  # a fresh Python, to see what the query imports
def test_a_planning_query_of_rows_that_fit_does_not_import_dynamo():
    """Running a reference on the meta device imports torch._dynamo (~5 s; `pow`'s Python
    decomposition is wrapped in torch._disable_dynamo): a fresh H200 worker's first plan waited
    5.6 s for it. Rows whose conservative check estimate fits need no meta run."""
    import subprocess
    import sys

    code = ("import sys; import workbench.engine.worker.execute; from workbench.registry import discover; "
            "from workbench.engine.protocol import Query; from workbench.engine.worker.serve import describe; "
            "q = Query(tuple((op, i, (('M', 16384), ('N', 16384)), 'float32') for op in ('gelu', 'softmax') "
            "for i in ('manual', 'pytorch', 'compiled', 'triton'))); "
            "a = describe(discover(), None, q, 141 * 2**30); "
            "assert all(x.error is None for x in a), a; print('torch._dynamo' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "False"
