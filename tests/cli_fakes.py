"""The CLI tests' fixtures: user folders under tmp_path, a session file, and a stand-in for
run_plan (no children), shared by test_cli.py and test_cli_output.py."""

from __future__ import annotations

import json
import types

import pytest
from conftest import seed_manifests
from results_docs import document, record

from workbench import cli, events

GOOD = "schema_version: 1\nname: cli-test\nruns:\n  - op: gelu\n    impls: [manual, triton]\n    shape: {M: 1024, N: 1024}\n"
BAD = "schema_version: 1\nname: cli-test\nruns:\n  - op: gelu\n    shape: {M: 2, N: two}\n    dtype: float64\n"


@pytest.fixture()
def user_dirs(tmp_path, monkeypatch):
    """platformdirs' folders under tmp_path; no colour unless a test sets NO_COLOR itself."""
    for var, sub in (("XDG_CONFIG_HOME", "config"), ("XDG_DATA_HOME", "data"), ("XDG_CACHE_HOME", "cache")):
        monkeypatch.setenv(var, str(tmp_path / sub))
    monkeypatch.delenv("NO_COLOR", raising=False)
    seed_manifests(tmp_path / "cache" / "workbench")  # the shipped kernels' declarations, built once


@pytest.fixture()
def session_file(tmp_path):
    path = tmp_path / "good.yaml"
    path.write_text(GOOD)
    return path


@pytest.fixture()
def fake_plan(monkeypatch):
    """Replace run_plan: `fake_plan.doc` is returned, events go out first; calls are recorded,
    and the keys of the rows it ran (`ran`: those not in options.done, as run_plan does)."""
    import workbench.engine.plan as plan

    state = types.SimpleNamespace(doc=document(record("manual"), record("triton")), calls=[], during=None,
                                  ran=[])

    def run_plan(session, *, on_event, stop=None, options=None):
        state.calls.append((session, options))
        done = getattr(options, "done", None) or {}
        for rec in state.doc["results"]:
            key = row_key(rec)
            if key in done:
                continue
            state.ran.append(key)
            on_event(events.Started(key, rec["op"], rec["impl"], "1024x1024 float32", "cuda:0"))
            on_event(events.Log(key, "a warning from the child", "warning"))
            on_event(events.Result(key, rec))
            if state.during:
                state.during(stop)
                state.during = None
        doc = json.loads(json.dumps(state.doc))
        doc["provenance"] = dict.fromkeys(doc["provenance"])  # the CLI fills what the engine left null
        doc["results"] = [done.get(row_key(r)) or r for r in doc["results"]]
        doc["cancelled"] = bool(stop is not None and stop.is_set())
        return doc
    monkeypatch.setattr(plan, "run_plan", run_plan)
    monkeypatch.setattr(plan, "planned_device_name",
                        lambda session, options=None: state.doc["environment"]["device"])
    return state


def run(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def row_key(rec):
    return (rec["run_index"], rec["label"], rec["sweep_value"])
