"""The `workbench` command line: usage, --check, --list, --doctor, the TUI door, and --replay's
formats, exit codes, provenance and --compare against a stand-in for run_plan (no children)."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import os
import re
import signal
import subprocess
import sys
import time
import types

import pytest
from cli_fakes import BAD, GOOD, fake_plan, run, session_file, user_dirs  # noqa: F401 (fixtures)
from results_docs import CONTRACT_RECORD_KEYS, document, record

from workbench.cli import common
from workbench.session.api import shipped_path

@pytest.fixture(autouse=True)
def _user_dirs(user_dirs):
    """Every test here: platformdirs' folders under tmp_path, no colour."""


# -- usage -----------------------------------------------------------------------------------
@pytest.mark.parametrize("argv", [
    ["--format", "xml", "--list"],
    ["--replay"],
    ["file.yaml", "--replay", "other.yaml"],
    ["--list", "--doctor"],
    ["--list", "--compare", "base.json"],
    ["--list", "--device", "gpu"],
    ["--replay", "x.yaml", "--compare", "b.json", "--threshold", "-1"],
    ["--replay", "x.yaml", "--compare", "b.json", "--threshold", "nan"],
    ["--replay", "x.yaml", "--compare", "b.json", "--threshold", "inf"],
    ["--doctor", "--format", "csv"],
    ["--no-such-flag"],
])
def test_bad_usage_exits_2(capsys, argv):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert "usage:" in err or "error:" in err


@pytest.mark.parametrize("argv, says", [
    (["--list", "--threshold", "0.2"], "--threshold 0.2 sets what --compare counts"),
    (["--replay", "x.yaml", "--threshold", "0.2"], "it goes with --replay FILE --compare BASELINE.json"),
    (["--replay", "x.yaml", "--no-daemon", "--daemon-idle", "30"], "--daemon-idle 30 times out a daemon: not with "
                                                                    "--no-daemon"),
    (["--replay", "x.yaml", "--daemon", "--no-daemon"], "--daemon and --no-daemon contradict each other"),
    (["--replay", "x.yaml", "--trust-plugins"], "--trust-plugins goes with --check FILE or FILE (the TUI)"),
    # the value as typed (1e999 was echoed as inf)
    (["--replay", "x.yaml", "--compare", "b.json", "--threshold", "1e999"], "finite number >= 0 (a relative "
                                                                             "change, 0.05 = 5%), got 1e999"),
    (["--replay", "x.yaml", "--compare", "b.json", "--threshold", "five"], "got five"),
    # the reason names what was given (it talked of --watch to a user who gave --check)
    (["--daemon", "--check", "x.yaml"], "--daemon goes with --replay FILE (not with --check)"),
    (["--daemon", "--watch", "x.yaml"], "(the TUI keeps a warm worker for its life)"),
    (["--daemon", "x.yaml"], "(the TUI keeps a warm worker for its life)"),
    (["--check", "x.yaml", "--trace-dir", "tr"], "--trace-dir tr goes with --replay FILE or the TUI"),
])
def test_an_option_that_would_be_ignored_is_refused(capsys, monkeypatch, argv, says):
    """A new user's `--threshold 0.2` without --compare, and `--daemon-idle 30` without --daemon,
    were silently ignored (where --compare, --force and --resume without --replay are refused)."""
    monkeypatch.delenv("WORKBENCH_DAEMON", raising=False)
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == "" and says in " ".join(err.split())


def test_the_replay_watch_takes_the_daemon_options():
    """Issue #39: --replay FILE --watch runs its first cycle in the warm daemon; the opt-outs and
    the idle timeout go with it (they were refused: the watch kept its own worker only)."""
    from workbench.cli.main import parse_args

    for flags in (["--no-daemon"], ["--daemon"], ["--daemon-idle", "30"]):
        args = parse_args(["--replay", "x.yaml", "--watch", *flags])
        assert args.watch and args.replay == "x.yaml"


def test_daemon_idle_goes_with_the_daemon_environment_variable(monkeypatch):
    from workbench.cli.main import parse_args

    monkeypatch.setenv("WORKBENCH_DAEMON", "1")
    assert parse_args(["--replay", "x.yaml", "--daemon-idle", "30"]).daemon_idle == 30
    assert parse_args(["--replay", "x.yaml"]).threshold == 0.05
    zero = parse_args(["--replay", "x.yaml", "--compare", "b.json", "--threshold", "-0"]).threshold
    assert zero == 0 and math.copysign(1.0, zero) == 1.0  # -0 reads 0 (it was echoed "-0" in the table)


def test_trace_dir_reaches_the_run_options(tmp_path):
    """--trace-dir DIR sets RunOptions.trace_dir (absolute: the workers may start elsewhere)."""
    from workbench.cli.common import read_env, run_options
    from workbench.cli.main import parse_args

    args = parse_args(["--replay", "x.yaml", "--trace-dir", str(tmp_path / "tr")])
    assert run_options(args, read_env(), argv=("workbench",)).trace_dir == (tmp_path / "tr").resolve()
    assert run_options(parse_args(["--replay", "x.yaml"]), read_env(), argv=("w",)).trace_dir is None


def test_a_trace_dir_that_cannot_hold_traces_is_refused_before_any_row(capsys, tmp_path, session_file):
    """A file where the folder should be (a new user's try: every row timed, then failed)."""
    (tmp_path / "taken").write_text("x")
    code, out, err = run(capsys, "--replay", str(session_file), "--trace-dir", str(tmp_path / "taken"))
    assert code == 2 and "--trace-dir" in err and "a file is there" in err and out == ""
    code, _, err = run(capsys, "--replay", str(session_file), "--trace-dir", str(tmp_path / "taken" / "sub"))
    assert code == 2 and "cannot make the folder" in err


def test_help_and_version_exit_0(capsys):
    code, out, _ = run(capsys, "--help")
    text = " ".join(out.split())
    assert code == 0 and "--replay FILE" in out and "--kernels PATH" in out and "--resume PATH" in out
    assert "130 SIGINT, 143 SIGTERM, 129 SIGHUP" in text and "2 bad session" in text
    code, out, _ = run(capsys, "--version")
    assert code == 0 and out.startswith("workbench ")


# -- --check ---------------------------------------------------------------------------------
def test_check_good_session(capsys, session_file):
    code, out, err = run(capsys, "--check", str(session_file))
    assert code == 0 and out.startswith("ok: ") and "1 run(s), 2 row(s)" in out and err == ""


def test_check_warns_of_a_row_whose_dtype_its_implementation_never_supports(capsys, tmp_path):
    """A new user's `matmul cuda_naive` in bfloat16 passed --check and came back `unavailable`."""
    path = tmp_path / "nd.yaml"
    path.write_text("schema_version: 1\nname: nd\nruns:\n  - op: matmul\n    impls: [pytorch, cuda_naive]\n"
                    "    shape: {M: 64, N: 64, K: 64}\n    dtype: bfloat16\n")
    code, out, err = run(capsys, "--check", str(path))
    assert code == 0 and out.startswith("ok: ")
    assert "warning: runs[0]: matmul cuda_naive supports float32 only, not bfloat16" in " ".join(err.split())
    assert "pytorch" not in err


def test_check_with_o_says_where_its_verdict_went(capsys, tmp_path, session_file):
    """`--check f.yaml -o out.json` wrote the file and printed nothing at all."""
    target = tmp_path / "res" / "chk.txt"
    code, out, err = run(capsys, "--check", str(session_file), "-o", str(target))
    assert code == 0 and out == "" and target.read_text().startswith("ok: ")
    assert f"check written to {target} (ok, 2 row(s))" in err
    bad = tmp_path / "bad.yaml"
    bad.write_text(BAD)
    code, out, err = run(capsys, "--check", str(bad), "-o", str(target), "--format", "json")
    assert code == 2 and json.loads(target.read_text())["ok"] is False
    assert f"check written to {target} (2 problem(s))" in err
    target.unlink()
    code, out, err = run(capsys, "--check", str(bad), "-o", str(target))  # as text: the same lines as stderr's
    assert code == 2 and out == "" and "2 problems" in target.read_text()
    assert 'runs[0].shape.N: must be a positive integer, got "two" (line 5)' in target.read_text()
    assert f"check written to {target} (2 problem(s))" in err


def test_check_shipped_session_by_name(capsys):
    code, out, _ = run(capsys, "--check", "lecture06-gelu")
    assert code == 0 and "6 row(s)" in out


def test_check_bad_session_lists_every_problem_on_stderr(capsys, tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(BAD)
    code, out, err = run(capsys, "--check", str(path))
    assert code == 2 and out == ""
    assert "2 problems" in err
    assert 'runs[0].shape.N: must be a positive integer, got "two" (line 5)' in err
    assert 'runs[0].dtype: dtype "float64" is not supported' in err and "(line 6)" in err


def test_check_refuses_a_shape_no_torch_size_can_hold(capsys, tmp_path):
    """M = 10^29 passed --check before (and collapsed the TUI's columns); a torch size is int64."""
    path = tmp_path / "huge.yaml"
    path.write_text("schema_version: 1\nname: huge\nruns:\n  - op: gelu\n    impls: [pytorch]\n"
                    "    shape: {M: 100000000000000000000000000000, N: 4}\n")
    code, out, err = run(capsys, "--check", str(path))
    assert code == 2 and out == ""
    assert "runs[0].shape.M: must be at most 2^63-1" in err and "got 100000000000000000000000000000" in err


def test_check_json(capsys, tmp_path, session_file):
    code, out, _ = run(capsys, "--check", str(session_file), "--format", "json")
    assert code == 0 and json.loads(out)["ok"] is True
    path = tmp_path / "bad.yaml"
    path.write_text(BAD)
    code, out, _ = run(capsys, "--check", str(path), "--format", "json")
    data = json.loads(out)
    assert code == 2 and data["ok"] is False
    assert {"path": "runs[0].shape.N", "line": 5, "message": 'must be a positive integer, got "two"'} in data["problems"]


def test_check_refuses_python_tags_without_running_them(capsys, tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.yaml"
    path.write_text(f"schema_version: 1\nname: e\nruns:\n  - op: !!python/object/apply:os.system ['touch {marker}']\n")
    code, _, err = run(capsys, "--check", str(path))
    assert code == 2 and "not allowed" in err and not marker.exists()


def test_check_missing_file(capsys, tmp_path):
    code, _, err = run(capsys, "--check", str(tmp_path / "absent.yaml"))
    assert code == 2 and "no such session file; shipped sessions:" in err


# -- --list and --doctor ---------------------------------------------------------------------
def test_list_json(capsys):
    from workbench.machine import probe

    code, out, _ = run(capsys, "--list", "--format", "json")
    data = json.loads(out)
    assert code == 0
    gelu = next(op for op in data["ops"] if op["name"] == "gelu")
    impls = {impl["name"]: impl for impl in gelu["impls"]}
    assert {"manual", "pytorch", "compiled", "cuda_naive", "cuda", "triton"} <= set(impls)
    triton = impls["triton"]
    assert triton["kind"] == "triton" and triton["math"] == "tanh" and triton["params"]["BLOCK_SIZE"] == 1024
    assert set(triton["unavailable"]) == {"check", "bench", "profile", "ptx"}
    assert impls["cuda"]["dtypes"] and gelu["shape"] == {"M": 16384, "N": 16384}
    if not probe().has_cuda:
        assert impls["cuda"]["unavailable"]["bench"] == "needs a CUDA GPU (none here)"
        assert "interpreter" in triton["note"]
        assert data["machine"]["triton_interpreted"] == data["machine"]["triton"]


def test_list_table_and_csv(capsys):
    code, out, _ = run(capsys, "--list")
    assert code == 0 and "gelu" in out and "cuda_naive" in out and "\x1b[" not in out
    code, out, _ = run(capsys, "--list", "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert code == 0 and {"op", "impl", "kind", "bench.unavailable"} <= set(rows[0])
    assert any(r["op"] == "gelu" and r["impl"] == "cuda_naive" for r in rows)


def test_doctor_json(capsys, tmp_path):
    code, out, _ = run(capsys, "--doctor", "--format", "json")
    data = json.loads(out)
    assert code == 0
    assert {"workbench", "python", "versions", "gpu", "tools", "ceilings", "colour", "paths"} <= set(data)
    assert {"torch", "triton", "textual"} <= set(data["versions"])
    assert data["paths"]["cache"] == str(tmp_path / "cache" / "workbench")
    assert data["ceilings"]["path"].startswith(str(tmp_path / "cache"))
    assert "lecture06-gelu" in data["paths"]["shipped_session_names"]
    assert "color_system" in data["colour"]


def test_doctor_table_written_to_a_file(capsys, tmp_path):
    target = tmp_path / "out" / "doctor.txt"
    code, out, err = run(capsys, "--doctor", "-o", str(target))
    assert code == 0 and out == ""
    text = target.read_text()
    assert "versions" in text and "torch" in text and "\x1b[" not in text
    # the terminal says where the report went, as --check, --schema and --replay do (it said nothing)
    assert f"doctor report written to {target} (table)" in " ".join(err.split())


def test_list_written_to_a_file_says_where(capsys, tmp_path):
    target = tmp_path / "list.json"
    code, out, err = run(capsys, "--list", "-o", str(target))
    assert code == 0 and out == "" and json.loads(target.read_text())["ops"]
    assert f"list written to {target} (json)" in " ".join(err.split())


def test_no_color_is_read_by_the_cli(monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    env = common.read_env()
    assert env.no_color and env.console().color_system is None
    monkeypatch.setenv("NO_COLOR", "")
    assert not common.read_env().no_color


# -- the TUI door ----------------------------------------------------------------------------
@pytest.fixture()
def fake_app(monkeypatch):
    opened = []
    module = types.ModuleType("workbench.screens.app")
    module.run = lambda path, options, watch=False: opened.append((path, options)) or 0
    monkeypatch.setitem(sys.modules, "workbench.screens.app", module)
    return opened


def test_tui_opens_a_file_with_options(capsys, fake_app, session_file, tmp_path):
    plugin = tmp_path / "somewhere.py"  # --kernels names a plugin that exists (a missing one is refused)
    plugin.write_text("")
    code, _, _ = run(capsys, str(session_file), "--device", "cpu", "--kernels", str(plugin))
    (path, options), = fake_app
    assert code == 0 and path == session_file
    assert options.device == "cpu" and options.kernels == (str(plugin.resolve()),)


def test_tui_opens_the_default_session(capsys, fake_app):
    """No FILE: the app picks default or default-cpu after its first frame (no probe here)."""
    code, _, err = run(capsys)
    (path, options), = fake_app
    assert code == 0 and path is None and options.argv == ("workbench",)


def test_tui_resolves_a_shipped_name_without_the_registry(capsys, fake_app):
    code, _, _ = run(capsys, "default-cpu")
    (path, _), = fake_app
    assert code == 0 and path == shipped_path("default-cpu")
    code, _, err = run(capsys, "no-such-session")
    assert code == 2 and "shipped sessions" in err


def test_check_of_a_saved_copy_says_so_as_replay_does(capsys, tmp_path):
    """README: `--replay NAME` / `--check NAME` run the user's saved copy, saying so on stderr (a
    new user's try: --check said nothing)."""
    from workbench.session.paths import user_session_path

    copy = user_session_path("smoke-quick", tmp_path / "data" / "workbench")
    copy.parent.mkdir(parents=True, exist_ok=True)
    copy.write_text(shipped_path("smoke-quick").read_text())
    code, out, err = run(capsys, "--check", "smoke-quick")
    assert code == 0 and f"smoke-quick: your saved copy {copy}" in " ".join(err.split()), err
    code, out, err = run(capsys, "--check", "shipped:smoke-quick")
    assert code == 0 and "saved copy" not in err


@pytest.mark.slow
def test_tui_path_imports_no_torch():
    code = ("import sys, types; m = types.ModuleType('workbench.screens.app'); "
            "m.run = lambda path, options, watch=False: 0; sys.modules['workbench.screens.app'] = m; "
            "from workbench.cli import main; "
            "sys.modules['workbench.cli.main'].terminal_problem = lambda: None; assert main([]) == 0; "
            "bad = [n for n in ('torch', 'workbench.registry', 'workbench.engine.plan') if n in sys.modules]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)


def test_tui_missing_says_so(capsys, monkeypatch, session_file):
    monkeypatch.setitem(sys.modules, "workbench.screens.app", None)  # import raises ImportError
    code, _, err = run(capsys, str(session_file))
    assert code == 2 and "TUI cannot start" in err and "--replay" in err


@pytest.fixture(autouse=True)
def _as_if_in_a_terminal(monkeypatch):
    """The TUI tests here run under pytest's captured output; the app itself is a stand-in."""
    module = sys.modules["workbench.cli.main"]
    monkeypatch.setattr(module, "terminal_problem", lambda: None)
    return module


REAL_TERMINAL_PROBLEM = sys.modules["workbench.cli.main"].terminal_problem


def test_tui_without_a_terminal_says_so_and_starts_nothing(capsys, monkeypatch, session_file,
                                                           _as_if_in_a_terminal):
    """Piped (`workbench | tee log`), the TUI drew into the pipe and outlived its terminal."""
    monkeypatch.setattr(_as_if_in_a_terminal, "terminal_problem", REAL_TERMINAL_PROBLEM)
    started = []
    app = types.ModuleType("workbench.screens.app")
    app.run = lambda path, options, watch=False: started.append(path) or 0
    monkeypatch.setitem(sys.modules, "workbench.screens.app", app)
    monkeypatch.setattr(os, "isatty", lambda fd: fd != 1)  # output piped
    code, _, err = run(capsys, str(session_file))
    assert code == 2 and started == []
    assert "the TUI needs a terminal: its output is not one (piped or redirected)" in err and "--replay" in err
    monkeypatch.setattr(os, "isatty", lambda fd: True)
    code, _, _ = run(capsys, str(session_file))
    assert code == 0 and len(started) == 1



@pytest.mark.parametrize("gpu, name", [(False, "default-cpu"), (True, "default")])
def test_without_a_terminal_the_suggested_replay_is_the_session_the_tui_would_open(
        capsys, monkeypatch, _as_if_in_a_terminal, gpu, name):
    """On a CPU box it said `--replay default` (16384^2 rows: minutes) while the TUI opens
    `default-cpu` (a new user's try)."""
    from workbench import machine

    monkeypatch.setattr(_as_if_in_a_terminal, "terminal_problem", REAL_TERMINAL_PROBLEM)
    monkeypatch.setattr(machine, "probe", lambda: types.SimpleNamespace(has_cuda=gpu))
    monkeypatch.setattr(os, "isatty", lambda fd: fd != 1)
    code, _, err = run(capsys)
    assert code == 2 and err.rstrip().endswith(f"workbench --replay {name}")

# -- --replay against a stand-in engine ------------------------------------------------------
def test_replay_json_is_the_results_document_with_provenance(capsys, session_file, fake_plan):
    code, out, err = run(capsys, "--replay", str(session_file), "--format", "json", "--device", "cpu", "--force")
    doc = json.loads(out)
    assert code == 0
    assert [r["label"] for r in doc["results"]] == ["manual", "triton"]
    assert all(set(CONTRACT_RECORD_KEYS) <= set(r) for r in doc["results"])
    prov = doc["provenance"]
    assert prov["session"] == "cli-test"
    assert prov["session_sha256"] == hashlib.sha256(session_file.read_bytes()).hexdigest()
    assert prov["argv"] == ["workbench", "--replay", str(session_file), "--format", "json", "--device", "cpu", "--force"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", prov["started"])
    assert prov["workbench"] and "git_sha" in prov
    session, options = fake_plan.calls[0]
    assert session.name == "cli-test" and options.device == "cpu" and options.force
    assert options.session_sha256 == prov["session_sha256"] and options.cache_dir is not None
    assert "[2/2] gelu triton" in err and "warning: a warning from the child" in err


def test_replay_csv(capsys, session_file, fake_plan):
    code, out, _ = run(capsys, "--replay", str(session_file), "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert code == 0 and len(rows) == 2
    assert {"run_index", "label", "status", "timing.median_ms", "timing.p20_ms", "check.passed", "shape.M"} <= set(rows[0])
    assert rows[0]["label"] == "manual" and float(rows[0]["timing.median_ms"]) == 1.0
    assert not any(key.startswith("timing.samples_ms") for key in rows[0])


def test_replay_table_to_a_file(capsys, session_file, fake_plan, tmp_path):
    fake_plan.doc = document(record("manual", 0.5), record("cuda", status="unavailable"), record("triton", status="skipped"))
    target = tmp_path / "r.txt"
    code, out, _ = run(capsys, "--replay", str(session_file), "-o", str(target))
    text = target.read_text()
    assert code == 0 and out == ""
    for word in ("manual", "cuda", "unavailable", "skipped", "median ms", "p20–p80 ms", "GB/s", "TFLOP/s",
                 "% ceiling", "build ms", "check", "timer", "NVIDIA H200"):
        assert word in text
    assert "\x1b[" not in text


def test_replay_failed_row_exits_1(capsys, session_file, fake_plan):
    fake_plan.doc = document(record("manual"), record("triton", status="failed"))
    code, out, err = run(capsys, "--replay", str(session_file), "--format", "json")
    assert code == 1 and json.loads(out)["results"][1]["status"] == "failed"
    assert "failed (boom)" in err


def test_replay_bad_session_exits_2_and_runs_nothing(capsys, tmp_path, fake_plan):
    path = tmp_path / "bad.yaml"
    path.write_text(BAD)
    code, out, err = run(capsys, "--replay", str(path))
    assert code == 2 and out == "" and "positive integer" in err and fake_plan.calls == []


def test_replay_interrupted_exits_130(capsys, session_file, fake_plan):
    fake_plan.during = lambda stop: stop.set()
    code, out, err = run(capsys, "--replay", str(session_file), "--format", "json")
    assert code == 130 and "interrupted" in err and json.loads(out)["results"]


def test_ctrl_c_sets_the_stop_flag(capsys, session_file, fake_plan):
    def press_ctrl_c(stop):
        os.kill(os.getpid(), signal.SIGINT)
        deadline = time.monotonic() + 5
        while not stop.is_set() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert stop.is_set()
    fake_plan.during = press_ctrl_c
    previous = signal.getsignal(signal.SIGINT)
    code, _, _ = run(capsys, "--replay", str(session_file), "--format", "json")
    assert code == 130
    assert signal.getsignal(signal.SIGINT) is previous, "the handler is restored"


# -- --compare -------------------------------------------------------------------------------
def write_baseline(tmp_path, *records, device="NVIDIA H200"):
    path = tmp_path / "baseline.json"
    path.write_text(json.dumps(document(*records, device=device)))
    return path


def test_compare_regression_exits_1(capsys, tmp_path, session_file, fake_plan):
    base = write_baseline(tmp_path, record("manual", 1.0), record("triton", 0.5))
    fake_plan.doc = document(record("manual", 1.0), record("triton", 0.8))
    code, out, err = run(capsys, "--replay", str(session_file), "--compare", str(base), "--format", "json")
    doc = json.loads(out)
    assert code == 1
    assert [r["verdict"] for r in doc["comparison"]["rows"]] == ["same", "slower"]
    assert "1 slower" in err


def test_compare_faster_and_threshold(capsys, tmp_path, session_file, fake_plan):
    base = write_baseline(tmp_path, record("manual", 1.0), record("triton", 1.0))
    fake_plan.doc = document(record("manual", 0.5), record("triton", 1.06))
    code, out, _ = run(capsys, "--replay", str(session_file), "--compare", str(base), "--format", "json",
                       "--threshold", "0.1")
    assert code == 0
    assert [r["verdict"] for r in json.loads(out)["comparison"]["rows"]] == ["faster", "same"]


def test_compare_with_another_sessions_baseline_warns(capsys, tmp_path, session_file, fake_plan):
    """A baseline of another session compared silently ('1 new, 11 missing', exit 0)."""
    base = write_baseline(tmp_path, record("manual", 1.0), record("triton", 1.0))  # session "t"
    fake_plan.doc = document(record("manual", 1.0), record("triton", 1.0))
    _, _, err = run(capsys, "--replay", str(session_file), "--compare", str(base))
    assert "the baseline is session 't', this is 'cli-test'" in err
    doc = json.loads(base.read_text())
    doc["provenance"]["session"] = "cli-test"
    base.write_text(json.dumps(doc))
    _, _, err = run(capsys, "--replay", str(session_file), "--compare", str(base))
    assert "the baseline is session" not in err


def test_compare_with_no_row_in_common_exits_2_before_running(capsys, tmp_path, session_file, fake_plan):
    """Every row `new` and every baseline row `missing` was a table of nothing compared, exit 0;
    then an error after the whole replay (a new user's try): now found before anything runs."""
    base = write_baseline(tmp_path, *[record(f"other{i}", 1.0) for i in range(12)])
    code, out, err = run(capsys, "--replay", str(session_file), "--compare", str(base), "--format", "json")
    assert code == 2 and out == "" and fake_plan.calls == []  # a CI job against the wrong baseline must not pass
    assert f"--compare {base}: no row of this session is in the baseline (2 row(s) planned, 12 in the baseline" in err
    assert "nothing was run" in err
    # the same shapes at another dtype match nothing either
    base = write_baseline(tmp_path, record("manual", 1.0, dtype="bfloat16"), record("triton", 1.0, dtype="bfloat16"))
    code, out, err = run(capsys, "--replay", str(session_file), "--compare", str(base))
    assert code == 2 and "nothing was run" in err and fake_plan.calls == []


def test_compare_that_matched_no_finished_row_says_so_and_exits_2(capsys, tmp_path, session_file, fake_plan):
    """The planned rows are in the baseline, but the rows the run returned are not (the backstop)."""
    base = write_baseline(tmp_path, record("manual", 1.0), *[record(f"other{i}", 1.0) for i in range(11)])
    fake_plan.doc = document(record("manual", 1.0, dtype="float16"), record("triton", 1.0, dtype="float16"))
    code, out, err = run(capsys, "--replay", str(session_file), "--compare", str(base), "--format", "json")
    assert code == 2 and len(fake_plan.calls) == 1
    assert f"2 new, 12 missing: no row of this run is in the baseline {base}" in err
    assert "nothing was compared" in err
    assert "other10" not in err and len(json.loads(out)["comparison"]["rows"]) == 14  # the document has all


def test_compare_across_gpus_exits_2_before_running(capsys, tmp_path, session_file, fake_plan):
    base = write_baseline(tmp_path, record("manual"), record("triton"), device="NVIDIA A100-SXM4-80GB")
    code, out, err = run(capsys, "--replay", str(session_file), "--compare", str(base), "--format", "json")
    assert code == 2 and "different GPUs" in err and "'NVIDIA A100-SXM4-80GB'" in err
    assert out == "" and fake_plan.calls == []          # a first user waited for the whole run first


def test_planned_device_name_is_what_the_run_records():
    from workbench.engine.measure.environment import device_info
    from workbench.engine.plan import planned_device_name
    from workbench.session.api import load_session, shipped_path

    session = load_session(shipped_path("smoke-quick"))
    assert planned_device_name(session) == device_info("cpu").name == "cpu"   # the session says device: cpu



def test_compare_with_an_unreadable_baseline_exits_2(capsys, tmp_path, session_file, fake_plan):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    code, _, err = run(capsys, "--replay", str(session_file), "--compare", str(bad))
    assert code == 2 and "bad.json: not a JSON results document (the baseline is what --replay -o" in err
    assert "its text is not valid JSON or JSON Lines: " in " ".join(err.split()) and fake_plan.calls == []
    session_as_baseline = tmp_path / "s.yaml"
    session_as_baseline.write_text("schema_version: 1\n")
    code, _, err = run(capsys, "--replay", str(session_file), "--compare", str(session_as_baseline))
    assert code == 2 and "a .yaml file is not JSON: " in " ".join(err.split())
    code, _, err = run(capsys, "--replay", str(session_file), "--compare", str(tmp_path / "missing.json"))
    assert code == 2 and "missing.json: cannot read it: " in err and fake_plan.calls == []
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({"schema_version": 1, "results": [{"op": "gelu", "timing": {"median_ms": "fast"}}]}))
    code, _, err = run(capsys, "--replay", str(session_file), "--compare", str(wrong))
    assert code == 2 and fake_plan.calls == []
    assert "wrong.json: results[0].timing.median_ms: 'fast' is a string; allowed: a number or null" in " ".join(err.split())


def test_compare_takes_a_json_lines_baseline(capsys, tmp_path, session_file, fake_plan):
    """A baseline written with --format jsonl was refused ('.jsonl is not JSON'): it is read as the
    document it is (header, rows, end line)."""
    from workbench.results.journal import to_jsonl

    base = tmp_path / "base.jsonl"
    base.write_text(to_jsonl(document(record("manual", 1.0), record("triton", 0.5))))
    fake_plan.doc = document(record("manual", 1.0), record("triton", 0.8))
    code, out, err = run(capsys, "--replay", str(session_file), "--compare", str(base), "--format", "json")
    assert code == 1 and [r["verdict"] for r in json.loads(out)["comparison"]["rows"]] == ["same", "slower"]


def test_a_usage_error_is_one_line_without_the_usage_block(capsys):
    code, _, err = run(capsys, "--replay", "x.yaml", "--device", "tpu")
    assert code == 2 and "usage:" not in err
    assert err.strip() == ("error: --device must be auto, cpu, cuda or cuda:N, got 'tpu' "
                           "(workbench --help lists the options)")


@pytest.mark.parametrize("where", ["a folder", "file as folder", "file as grandparent", "read-only folder"])
def test_an_unwritable_output_path_is_refused_before_any_work(capsys, session_file, fake_plan, tmp_path, where):
    (tmp_path / "plain").write_text("x")
    (tmp_path / "ro").mkdir(mode=0o500)
    target = {"a folder": tmp_path, "file as folder": tmp_path / "plain" / "r.json",
              "file as grandparent": tmp_path / "plain" / "sub" / "r.json", "read-only folder": tmp_path / "ro" / "r.json"}[where]
    if where == "read-only folder" and os.access(tmp_path / "ro", os.W_OK):
        pytest.skip("running as a user who can write anywhere (root)")
    code, out, err = run(capsys, "--replay", str(session_file), "--format", "json", "-o", str(target))
    assert code == 2 and out == ""
    assert f"-o {target}" in err and "Traceback" not in err
    assert fake_plan.calls == []                       # nothing ran


def test_a_write_that_fails_after_the_run_keeps_the_data_on_stdout(capsys, session_file, fake_plan, tmp_path,
                                                                    monkeypatch):
    import workbench.fileio as fileio

    def full_disk(path, data, **kw):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(fileio, "write_output", full_disk)
    code, out, err = run(capsys, "--replay", str(session_file), "--format", "json", "-o", str(tmp_path / "r.json"))
    assert code == 2 and "No space left" in err
    assert json.loads(out)["results"][0]["label"] == "manual"


def test_a_gpu_this_host_does_not_have_is_a_usage_error(capsys, monkeypatch, tmp_path):
    """`--device cuda` on a host without a GPU measured nothing and exited 0; now exit 2 naming
    what the host has. cuda:N past the last GPU too; --check still only checks the file."""
    import workbench.machine as machine

    path = tmp_path / "good.yaml"
    path.write_text(GOOD)
    monkeypatch.setattr(machine, "nvml_gpus", lambda: [])
    code, _out, err = run(capsys, "--replay", str(path), "--device", "cuda")
    assert code == 2 and "--device cuda: this host has no GPU NVML can see; allowed: auto, cpu" in err
    monkeypatch.setattr(machine, "nvml_gpus", lambda: [object(), object()])
    code, _out, err = run(capsys, "--replay", str(path), "--device", "cuda:2")
    assert code == 2 and "this host has cuda:0..cuda:1" in err
    code, _out, _err = run(capsys, "--check", str(path), "--device", "cuda")
    assert code == 0


def test_a_sessions_own_gpu_device_this_host_does_not_have_is_a_usage_error(capsys, monkeypatch, tmp_path):
    """`settings: {device: cuda}` (or a run's) replayed on a host without a GPU wrote a document
    of unavailable rows under `device cpu` and exited 0, where `--device cuda` is exit 2."""
    import workbench.machine as machine

    monkeypatch.setattr(machine, "nvml_gpus", lambda: [])
    path = tmp_path / "gpu.yaml"
    path.write_text("schema_version: 1\nname: gpu\nsettings: {device: cuda}\n"
                    "runs: [{op: gelu, impls: [pytorch], shape: {M: 8, N: 8}}]\n")
    code, out, err = run(capsys, "--replay", str(path))
    assert code == 2 and out == ""
    assert f"{path}: settings.device: cuda: this host has no GPU NVML can see; allowed: auto, cpu" in err
    path.write_text("schema_version: 1\nname: gpu\nruns: [{op: gelu, impls: [pytorch], shape: {M: 8, N: 8}},\n"
                    "  {op: gelu, impls: [pytorch], shape: {M: 8, N: 8}, settings: {device: 'cuda:1'}}]\n")
    code, _out, err = run(capsys, "--replay", str(path))
    assert code == 2 and "runs[1].settings.device: cuda:1: this host has no GPU NVML can see" in err
    code, _out, _err = run(capsys, "--check", str(path))
    assert code == 0  # --check only checks the file, as for --device


def test_a_failed_ab_entry_makes_the_exit_code_1():
    from workbench.cli.replay import _exit_code

    ok = {"results": [{"status": "ok"}], "ab": [{"status": "ok"}]}
    assert _exit_code(ok) == 0
    assert _exit_code({**ok, "ab": [{"status": "failed", "error": "compare: git archive: not a valid object name"}]}) == 1
    assert _exit_code({**ok, "ab": [{"status": "unavailable"}]}) == 0
