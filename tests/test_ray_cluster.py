"""`--cluster ray` on a local Ray cluster of this CPU host (issue #20): smoke-quick gives the same
rows and checks as without Ray, each row's Result once; an actor killed while it runs a row
fails only that row, and the rest of its share runs on a fresh actor; a plugin file reaches the
actor and a segfault in its worker fails only its row; a cancelled run keeps what finished."""

from __future__ import annotations

from pathlib import Path

import pytest

from workbench.engine.options import RunOptions
from workbench.engine.plan import run_plan
from workbench.engine.multi.ray_actor import ACTOR_PREFIX
from workbench.events import Result, Started
from workbench.session.api import load_session, parse_session

from conftest import seed_manifests

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.slow  # a Ray cluster and worker processes

SMOKE = Path(__file__).resolve().parents[1] / "sessions" / "smoke-quick.yaml"


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def options(tmp_path_factory):
    cache = tmp_path_factory.mktemp("cache")
    seed_manifests(cache)
    return RunOptions(cache_dir=cache, argv=("pytest",))


def _summary(doc):
    return [(r["run_index"], r["label"], r["sweep_value"], r["status"], (r["check"] or {}).get("passed"),
             (r["check"] or {}).get("gate")) for r in doc["results"]]


def test_smoke_quick_through_ray_matches_the_plain_run(cluster, options):
    import dataclasses

    session = load_session(SMOKE)
    plain = run_plan(session, on_event=lambda e: None, options=options)
    results = []
    doc = run_plan(session, on_event=lambda e: results.append(e.row) if isinstance(e, Result) else None,
                   options=dataclasses.replace(options, cluster="ray"))
    assert _summary(doc) == _summary(plain)
    assert len(results) == len(set(results)) == len(plain["results"])
    (place,) = doc["environment"]["devices"]
    assert place.endswith("/cpu") and {r["device"] for r in doc["results"]} == {place}
    assert doc["environment"]["device"] == "cpu" and doc["cancelled"] is False


KILL = """schema_version: 1
name: ray-kill
settings: {device: cpu, warmup_ms: 1, rep_ms: 5, min_samples: 3, timeout_s: 120}
runs:
  - {op: gelu, impls: [manual], shape: {M: 4, N: 64}, dtype: float32}
  - {op: sleep, impls: [manual], shape: {sleep_ms: 4000}, actions: [check]}
  - {op: softmax, impls: [pytorch], shape: {M: 5, N: 100}, dtype: float32}
"""


def test_an_actor_killed_mid_row_fails_only_that_row(cluster, options):
    import dataclasses

    killed = []

    def on_event(event):
        if isinstance(event, Started) and event.row[0] == 1 and not killed:
            for name in ray.util.list_named_actors():
                if name.startswith(ACTOR_PREFIX):
                    ray.kill(ray.get_actor(name), no_restart=True)
                    killed.append(name)

    doc = run_plan(parse_session(KILL), on_event=on_event, options=dataclasses.replace(options, cluster="ray"))
    assert killed
    statuses = [(r["op"], r["status"]) for r in doc["results"]]
    assert statuses == [("gelu", "ok"), ("sleep", "failed"), ("softmax", "ok")]
    assert doc["results"][1]["error"].startswith("Ray actor lost while running this row")
    assert doc["results"][2]["check"]["passed"] is True  # re-queued on a fresh actor


def test_a_plugin_travels_by_content_and_a_segfault_fails_only_its_row(cluster, options, tmp_path):
    """The crashy plugin (tests/plugins/crashy.py) copied to a folder of this test: the actor runs
    it from its own copy of the file; manual_segv kills its worker at N == 2 inside the actor,
    which replaces the worker as a local run does; the document names the sender's path."""
    import dataclasses
    import shutil

    plugin = tmp_path / "crashy.py"
    shutil.copy(Path(__file__).parent / "plugins" / "crashy.py", plugin)
    text = ("schema_version: 1\nname: ray-crashy\nsettings: {device: cpu, warmup_ms: 1, rep_ms: 5, min_samples: 3}\n"
            f"plugins: [{plugin}]\nruns:\n  - {{op: crashy, impls: [manual, manual_segv], "
            "sweep: {params: [N], values: [1, 2, 3]}}\n")
    doc = run_plan(parse_session(text), on_event=lambda e: None, options=dataclasses.replace(options, cluster="ray"))
    statuses = [(r["impl"], r["sweep_value"], r["status"]) for r in doc["results"]]
    assert statuses == [("manual", 1, "ok"), ("manual", 2, "ok"), ("manual", 3, "ok"), ("manual_segv", 1, "ok"),
                        ("manual_segv", 2, "failed"), ("manual_segv", 3, "ok")]
    assert "SIGSEGV" in doc["results"][4]["error"]
    assert [p["path"] for p in doc["provenance"]["plugins"]] == [str(plugin)]


def test_a_cancelled_ray_run_stops_and_keeps_what_finished(cluster, options):
    import dataclasses
    import threading

    stop = threading.Event()

    def on_event(event):
        if isinstance(event, Started) and event.row[0] == 1:
            stop.set()  # while the 4 s sleep row runs: it must stop, not finish

    doc = run_plan(parse_session(KILL), on_event=on_event, stop=stop,
                   options=dataclasses.replace(options, cluster="ray"))
    assert doc["cancelled"] is True
    assert [(r["op"], r["status"]) for r in doc["results"]] == [("gelu", "ok"), ("sleep", "skipped"),
                                                                  ("softmax", "skipped")]
    assert doc["results"][1]["error"] == "cancelled"
