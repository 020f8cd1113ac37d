"""Several places with real worker processes on this CPU host (issue #20): `devices: all` on a
host without a GPU is today's run, and two places running at once (two CPU workers, each with
its share of the rows: what two GPUs get, here on the one device this host has) give the same
rows, checks and order as one, with each row's Result once."""

from __future__ import annotations

import dataclasses
import threading

import pytest

from workbench.engine.options import RunOptions
from workbench.engine.plan import run_plan
from workbench.engine.multi.spread import Part, run_parts
from workbench.events import Result
from workbench.session.api import parse_session

from cli_fakes import user_dirs  # noqa: F401 (fixture)
from conftest import seed_manifests

pytestmark = pytest.mark.slow  # starts worker processes

TEXT = """schema_version: 1
name: tiny-spread
settings: {device: cpu, warmup_ms: 1, rep_ms: 5, min_samples: 3, timeout_s: 120}
runs:
  - {op: gelu, impls: [manual, pytorch], shape: {M: 4, N: 64}, dtype: float32, sweep: {params: [N], values: [64, 96]}}
  - {op: softmax, impls: [pytorch], shape: {M: 5, N: 100}, dtype: float32}
"""
SESSION = parse_session(TEXT)


def _summary(doc):
    return [(r["run_index"], r["label"], r["sweep_value"], r["status"], (r["check"] or {}).get("passed"))
            for r in doc["results"]]


@pytest.fixture(scope="module")
def options(tmp_path_factory):
    cache = tmp_path_factory.mktemp("cache")
    seed_manifests(cache)
    return RunOptions(cache_dir=cache, argv=("pytest",))


@pytest.fixture(scope="module")
def plain(options):
    return run_plan(SESSION, on_event=lambda e: None, options=options)


def test_devices_all_on_a_host_without_gpu_is_todays_run(plain, options):
    session = parse_session(TEXT.replace("timeout_s: 120", "timeout_s: 120, devices: all"))
    results = []
    doc = run_plan(session, on_event=lambda e: results.append(e.row) if isinstance(e, Result) else None,
                   options=options)
    assert _summary(doc) == _summary(plain)
    assert sorted(results, key=repr) == sorted((r["run_index"], r["label"], r["sweep_value"]) for r in
                                               doc["results"]) and len(results) == len(set(results))
    assert list(doc["environment"]["devices"]) == ["cpu"]
    assert {k: v for k, v in doc["environment"].items() if k != "devices"} == plain["environment"]


def test_two_places_at_once_give_one_document_in_session_order(plain, options):
    keys = [(r["run_index"], r["label"], r["sweep_value"]) for r in plain["results"]]
    first = {k for k in keys if k[2] in (None, 96)}  # gelu @96 and softmax here, gelu @64 on the other
    shares = [{k: "cpu" for k in keys if k in first}, {k: "cpu" for k in keys if k not in first}]

    def place(here, ab):
        sub = dataclasses.replace(options, rows_here=here, ab=ab)
        return lambda on_event, stop: run_plan(SESSION, on_event=on_event, stop=stop, options=sub)

    caller = threading.current_thread()
    threads, results = set(), []

    def on_event(event):
        threads.add(threading.current_thread())
        if isinstance(event, Result):
            results.append(event.row)

    doc = run_parts([Part("cpu", [], place(shares[0], True)), Part("cpu", [], place(shares[1], False))],
                    keys, on_event, threading.Event())
    assert _summary(doc) == _summary(plain)
    assert threads == {caller} and sorted(results, key=repr) == sorted(keys, key=repr)


def test_a_session_with_devices_is_checked_before_anything_runs():
    session = parse_session("schema_version: 1\nname: s\nsettings: {device: cpu, devices: 'cuda:3'}\n"
                            "runs: [{op: gelu, impls: [manual]}]\n")
    from workbench.errors import WorkbenchError

    with pytest.raises(WorkbenchError, match="settings.devices: cuda:3 is not on this host"):
        run_plan(session, on_event=lambda e: None)


def test_the_cli_says_which_device_the_host_lacks(capsys, user_dirs, tmp_path):
    from cli_fakes import run as cli_run

    path = tmp_path / "s.yaml"
    path.write_text(TEXT)
    code, out, err = cli_run(capsys, "--replay", str(path), "--devices", "cuda:3")
    assert code == 2 and out == ""
    assert "--devices: cuda:3 is not on this host (it has no GPU); allowed: all, cpu" in err
