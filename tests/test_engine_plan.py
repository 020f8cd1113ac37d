"""run_plan end to end on a tiny CPU GeLU session: manual, pytorch and triton (interpreted), with
check, bench, profile and ptx; the document has every contract key, one Result per row."""

from __future__ import annotations

import json

import pytest

from workbench.engine.plan import RunOptions, run_plan
from workbench.events import Built, Checked, Profile, Ptx, Result, Samples, Started
from workbench.results.document import TIMING_KEYS, TRAFFIC_KEYS, dumps, missing_keys
from workbench.session.model import ImplRef, RunSpec, Session, Settings

pytestmark = pytest.mark.slow  # every test here starts child processes (tests/conftest.py)

SETTINGS = Settings(device="cpu", warmup_ms=1.0, rep_ms=5.0, min_samples=3, timeout_s=120.0)


@pytest.fixture(scope="module")
def gelu_run(tmp_path_factory):
    session = Session(name="tiny-gelu", settings=SETTINGS, runs=(
        RunSpec(op="gelu", impls=(ImplRef("manual"), ImplRef("pytorch"), ImplRef("triton"), ImplRef("cuda")),
                shape={"M": 8, "N": 300}, dtype="float32", actions=("check", "bench", "profile", "ptx")),))
    events: list = []
    traces = tmp_path_factory.mktemp("traces")
    doc = run_plan(session, on_event=events.append,
                   options=RunOptions(cache_dir=tmp_path_factory.mktemp("cache"), argv=("pytest",),
                                      session_sha256="0" * 64, trace_dir=traces))
    return doc, events, sorted(p.name for p in traces.iterdir())


def _row(doc, impl):
    return next(r for r in doc["results"] if r["impl"] == impl)


def test_document_has_every_key_and_is_json(gelu_run):
    doc, _, traces = gelu_run
    assert missing_keys(doc) == []
    assert traces == ["run0-manual.json", "run0-pytorch.json", "run0-triton.json"]  # chrome traces
    assert [r["impl"] for r in doc["results"]] == ["manual", "pytorch", "triton", "cuda"]
    assert json.loads(dumps(doc))["schema_version"] == 1
    assert doc["provenance"]["session"] == "tiny-gelu" and doc["provenance"]["argv"] == ["pytest"]
    assert doc["environment"]["device"] == "cpu" and doc["environment"]["sm_count"] is None
    assert doc["cancelled"] is False


@pytest.mark.parametrize("impl", ["manual", "pytorch"])
def test_eager_rows_are_timed_on_the_host(gelu_run, impl):
    row = _row(gelu_run[0], impl)
    assert row["status"] == "ok", row["error"]
    assert row["check"]["passed"] is True
    timing = row["timing"]
    assert set(TIMING_KEYS) <= set(timing)
    assert timing["timer"] == "perf_counter" and timing["n"] >= 3 and timing["flush_l2"] is False
    assert timing["p20_ms"] <= timing["median_ms"] <= timing["p80_ms"]
    assert row["build_ms"] > 0 and row["peak_mem_bytes"] is None
    assert set(TRAFFIC_KEYS) <= set(row["traffic"])
    assert row["traffic"]["bytes"] == 2 * 8 * 300 * 4 and row["traffic"]["gbps"] > 0
    assert row["profile"]["device_events"] is False and row["profile"]["kernel_count"] is None
    assert row["profile"]["reason"]


def test_manual_traffic_counts_its_nine_kernels(gelu_run):
    traffic = _row(gelu_run[0], "manual")["traffic"]
    assert traffic["bytes_moved_est"] == 11 * traffic["bytes"]


def test_interpreted_triton_is_not_presented_as_speed(gelu_run):
    row = _row(gelu_run[0], "triton")
    assert row["status"] == "ok", row["error"]
    assert row["timing"]["timer"] == "interpreter"
    assert row["traffic"]["gbps"] is None and row["traffic"]["tflops"] is None
    assert any("interpreter" in flag for flag in row["flags"])
    assert row["launch"]["grid"] == [3, 1, 1] and row["launch"]["block_threads"] == 128
    assert row["ptx"] is not None and row["ptx"]["kernels"]  # from the separate non-interpreted child


def test_cuda_without_gpu_is_unavailable_but_ptx_runs_where_nvcc_exists(gelu_run):
    from workbench.machine import probe

    row = _row(gelu_run[0], "cuda")
    assert row["status"] == "unavailable" and "GPU" in row["error"]
    assert row["timing"] is None
    if probe().nvcc:
        assert row["ptx"] is not None and row["ptx"]["source"] == "nvcc"


def test_events_stream_per_row(gelu_run):
    doc, events, _ = gelu_run
    results = [e for e in events if isinstance(e, Result)]
    assert len(results) == len({e.row for e in results}) == len(doc["results"])
    for record in doc["results"]:
        event = next(e for e in results if e.row == (0, record["label"], None))
        assert event.record is record or event.record == record
    key = (0, "pytorch", None)
    kinds = [type(e) for e in events if e.row == key and not isinstance(e, Samples)]
    assert kinds.index(Started) < kinds.index(Built) < kinds.index(Checked) < kinds.index(Profile) < kinds.index(Result)
    assert any(isinstance(e, Samples) and e.row == key and e.timer == "perf_counter" for e in events)
    assert any(isinstance(e, Ptx) and e.row == (0, "triton", None) for e in events)
    assert sum(isinstance(e, Started) and e.row == (0, "triton", None) for e in events) == 1
