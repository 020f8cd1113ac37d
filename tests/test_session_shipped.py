"""The sessions shipped as package data, and where sessions and their results are saved."""

from __future__ import annotations

import importlib.resources

import pytest

from workbench.errors import WorkbenchError
from workbench.registry import discover
from workbench.session.api import (SessionError, default_session_name, dump_session, is_shipped,
                               load_session, parse_session, resolve_session_path, results_path,
                               save_session, save_target, shipped_names, shipped_path,
                               user_session_path)

LECTURE = ("lecture06-gelu", "lecture06-softmax", "lecture06-matmul", "lecture06-profile",
           "lecture06-mlp", "lecture06-fused")
NAMES = shipped_names()


def test_the_expected_sessions_ship():
    assert set(LECTURE) | {"default", "default-cpu", "smoke"} <= set(NAMES)


def test_shipped_sessions_are_package_data():
    folder = importlib.resources.files("workbench.sessions")
    assert (folder / "lecture06-gelu.yaml").is_file()
    assert shipped_path("lecture06-gelu").name == "lecture06-gelu.yaml"


@pytest.mark.parametrize("name", NAMES)
def test_shipped_session_structure_and_round_trip(name, tmp_path):
    session = load_session(shipped_path(name), check_ops=False)
    assert session.name == name, "a shipped session is named like its file"
    assert session.description, "every shipped session says what it is"
    copy = save_session(session, tmp_path / f"{name}.yaml")
    assert load_session(copy, check_ops=False) == session
    assert parse_session(dump_session(session), check_ops=False) == session


@pytest.mark.parametrize("name", NAMES)
def test_shipped_session_validates_against_the_registry(name):
    """Every op, implementation, shape field and dtype of every shipped session is registered."""
    load_session(shipped_path(name))


def shipped_ops() -> set[str]:
    """Ops of the shipped kernels (not those test plugins may have added to the registry)."""
    return {name for name, op in discover().ops.items() if op.spec.__module__.startswith("workbench.kernels")}


@pytest.mark.parametrize("name", ["smoke", "smoke-quick"])
def test_smoke_covers_every_shipped_op_and_is_cpu_sized(name):
    session = load_session(shipped_path(name), check_ops=False)
    assert shipped_ops() <= {run.op for run in session.runs}
    assert session.settings.device == "cpu"
    assert session.settings.rep_ms <= 10 and session.settings.min_samples <= 5
    for run in session.runs:
        sizes = [v for k, v in run.shape.items() if k != "sleep_ms"]
        assert all(size <= 300 for size in sizes), f"{run.op}: smoke shapes stay tiny"


def test_full_smoke_runs_every_implementation():
    session = load_session(shipped_path("smoke"), check_ops=False)
    assert {run.op for run in session.runs if run.impls is None} >= shipped_ops()


def test_lecture_gelu_is_the_lectures_experiment():
    (run,) = load_session(shipped_path("lecture06-gelu"), check_ops=False).runs
    assert [ref.name for ref in run.impls] == ["manual", "pytorch", "compiled", "cuda_naive", "cuda", "triton"]
    assert run.shape == {"M": 16384, "N": 16384} and run.dtype == "float32"
    assert run.actions == ("check", "bench", "profile", "ptx")


def test_lecture_softmax_and_matmul_sizes():
    (softmax,) = load_session(shipped_path("lecture06-softmax"), check_ops=False).runs
    assert softmax.shape == {"M": 16384, "N": 16384} and softmax.dtype == "float32"
    matmul = load_session(shipped_path("lecture06-matmul"), check_ops=False).runs
    assert {127, 128, 129, 4095, 4096, 4097} <= set(matmul[0].sweep.values)
    assert matmul[0].sweep.params == ("M", "N", "K")
    assert set(matmul[1].sweep.values) == {1024, 2048, 4096, 8192, 16384}  # the lecture's dims


def test_default_sessions():
    assert default_session_name(True) == "default"
    assert default_session_name(False) == "default-cpu"
    assert load_session(shipped_path("default-cpu"), check_ops=False).settings.device == "cpu"


# -- paths -----------------------------------------------------------------------------------
def test_shipped_sessions_are_read_only(tmp_path):
    path = shipped_path("lecture06-gelu")
    assert is_shipped(path) and not is_shipped(tmp_path / "lecture06-gelu.yaml")
    session = load_session(path, check_ops=False)
    with pytest.raises(WorkbenchError, match="shipped session"):
        save_session(session, path)
    target = save_target(path, tmp_path / "data")
    assert target == user_session_path("lecture06-gelu", tmp_path / "data")
    assert target == tmp_path / "data" / "sessions" / "lecture06-gelu.yaml"
    save_session(session, target)
    assert load_session(target, check_ops=False) == session
    assert save_target(target, tmp_path / "data") == target, "the copy is a user's session"


def test_results_paths(tmp_path):
    mine = tmp_path / "work" / "mine.yaml"
    assert results_path(mine, tmp_path / "data") == tmp_path / "work" / "mine.results.json"
    assert results_path(shipped_path("smoke"), tmp_path / "data") == tmp_path / "data" / "sessions" / "smoke.results.json"


def test_resolve_session_path(tmp_path, monkeypatch):
    mine = tmp_path / "mine.yaml"
    mine.write_text("x")
    assert resolve_session_path(str(mine)) == mine
    assert resolve_session_path("lecture06-gelu") == shipped_path("lecture06-gelu")
    monkeypatch.chdir(tmp_path)
    assert resolve_session_path("smoke.yaml") == shipped_path("smoke")
    (tmp_path / "smoke.yaml").write_text("local file wins")
    assert resolve_session_path("smoke.yaml").read_text() == "local file wins"
    with pytest.raises(WorkbenchError, match="no such session file; shipped sessions: .*lecture06-gelu"):
        resolve_session_path("nope")
    with pytest.raises(WorkbenchError, match="^' ': no such session file"):  # a blank name, quoted
        resolve_session_path(" ")
    with pytest.raises(WorkbenchError, match="no shipped session 'nope'"):
        shipped_path("nope")
    # a mistyped name gets the closest shipped one; an unrelated one gets none
    with pytest.raises(WorkbenchError, match="no such session file; did you mean smoke-quick\\? shipped sessions"):
        resolve_session_path("smok-quick")
    with pytest.raises(WorkbenchError, match="did you mean lecture06-gelu\\?"):
        shipped_path("lecture06-gelo")
    with pytest.raises(WorkbenchError) as info:
        resolve_session_path("zzz")
    assert "did you mean" not in str(info.value)


def test_session_error_lists_problems_with_the_file(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("schema_version: 1\nname: x\nruns: [{op: gelu, dtype: float8}]\n")
    with pytest.raises(SessionError) as info:
        load_session(path, check_ops=False)
    text = str(info.value)
    assert text.startswith(f"{path}: 1 problem in the session")
    assert 'runs[0].dtype: unknown dtype "float8"' in text and "(line 3)" in text
