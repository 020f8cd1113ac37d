"""What a new user and a red team broke (issue 42), headless: a full disk under the journal, a
re-run over a killed run's journal, a crash while --resume starts, duplicate journal lines, the
same plugin file twice, terminal escapes in names and labels. Against the stand-in for run_plan
(cli_fakes.py); only the tests marked slow start a child (a plugin's manifest is built in one)."""

from __future__ import annotations

import errno
import json
import os

import pytest
from cli_fakes import fake_plan, run, session_file, user_dirs  # noqa: F401 (fixtures)
from results_docs import record

from workbench import fileio
from workbench.results import journal


@pytest.fixture(autouse=True)
def _user_dirs(user_dirs):
    """Every test here: platformdirs' folders under tmp_path, no colour."""


def _sha(path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def _head(session_file) -> dict:
    return {"provenance": {"session": "cli-test", "session_sha256": _sha(session_file)},
            "environment": {"device": "NVIDIA H200"}}


# -- 1: a full disk --------------------------------------------------------------------------
def test_a_full_disk_is_one_line_the_document_on_stdout_exit_2_and_the_journal_resumes(
        capsys, session_file, fake_plan, tmp_path, monkeypatch):
    """The journal's second row and the document meet ENOSPC: a traceback and exit 1 before."""
    target = tmp_path / "r.json"
    real, writes = journal._write_all, []

    def full_after_the_header_and_a_row(file, data):
        writes.append(data)
        if len(writes) > 2:
            real(file, data[:7])                                 # a torn line, then the disk is full
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(file, data)

    def no_space(path, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    with monkeypatch.context() as full:
        full.setattr(journal, "_write_all", full_after_the_header_and_a_row)
        full.setattr(fileio, "write_output", no_space)
        code, out, err = run(capsys, "--replay", str(session_file), "-o", str(target))
    assert code == 2 and json.loads(out)["results"][1]["label"] == "triton", "the whole document on stdout"
    assert "Traceback" not in err and len([line for line in err.splitlines() if "error" in line]) == 1
    assert "No space left on device" in err and "1 finished row(s) are kept in" in err and "--resume" in err
    assert not target.exists()
    kept = journal.from_jsonl(journal.journal_path(target).read_text())
    assert [r["label"] for r in kept["results"]] == ["manual"], "whole lines only: the torn row was cut off"
    fake_plan.ran.clear()
    code, _, err = run(capsys, "--replay", str(session_file), "--resume", str(target))
    assert code == 0 and fake_plan.ran == [(0, "triton", None)] and "1 finished row(s) kept" in err
    assert len(json.loads(target.read_text())["results"]) == 2 and not journal.journal_path(target).exists()


# -- 12, 13: a killed run's journal ----------------------------------------------------------
def test_a_rerun_without_resume_refuses_over_a_killed_runs_rows(capsys, session_file, fake_plan, tmp_path):
    target = tmp_path / "r.json"
    kept = journal.Journal(journal.journal_path(target), _head(session_file), [record("manual"), record("triton")])
    kept.close()                                                  # as SIGKILL leaves it
    code, _, err = run(capsys, "--replay", str(session_file), "-o", str(target))
    assert code == 2 and fake_plan.calls == [] and "2 finished row(s)" in err and f"--resume {target}" in err
    assert len(journal.from_jsonl(kept.path.read_text())["results"]) == 2, "the rows are still there"


def test_a_journal_with_only_its_header_is_taken_without_a_word(capsys, session_file, fake_plan, tmp_path):
    target = tmp_path / "r.json"
    journal.Journal(journal.journal_path(target), _head(session_file)).close()
    code, _, _ = run(capsys, "--replay", str(session_file), "-o", str(target))
    assert code == 0 and len(json.loads(target.read_text())["results"]) == 2


def test_resume_keeps_the_old_journal_whole_until_the_new_one_is_written(session_file, tmp_path, monkeypatch):
    """A crash right after --resume truncated the journal lost every kept row."""
    path = journal.journal_path(tmp_path / "r.json")
    journal.Journal(path, _head(session_file), [record("manual")]).close()
    before = path.read_text()

    def crash(file, data):
        raise OSError(errno.EIO, "crash")                        # the new journal's first write
    monkeypatch.setattr(journal, "_write_all", crash)
    with pytest.raises(OSError):
        journal.Journal(path, _head(session_file), [record("manual")])
    assert path.read_text() == before and not [p.name for p in tmp_path.iterdir() if p.name.endswith(".new")]


def test_a_journal_rewritten_by_resume_is_still_held_against_a_second_run(session_file, tmp_path):
    path = journal.journal_path(tmp_path / "r.json")
    held = journal.Journal(path, _head(session_file), [record("manual")])
    with pytest.raises(journal.JournalBusy):
        journal.Journal(path, _head(session_file))
    held.discard()


# -- 17: duplicate and foreign journal lines -------------------------------------------------
def test_resume_counts_unique_rows_and_says_what_it_left_out(capsys, session_file, fake_plan, tmp_path):
    target = tmp_path / "r.json"
    kept = journal.Journal(journal.journal_path(target), _head(session_file))
    for rec in (record("manual", 5.0), record("manual", 6.0)):
        kept.add(rec)
    kept.close()
    with open(kept.path, "a") as extra:
        extra.write("".join(json.dumps(line) + "\n" for line in ({"result": {"what": "not a row"}}, {"other": 1},
                                                               [1, 2], "text", None, {"result": 7})))
    code, _, err = run(capsys, "--replay", str(session_file), "--resume", str(target))
    doc = json.loads(target.read_text())
    # every line that is not a row counts (the lines that were no {"result": ...} went without a word)
    assert code == 0 and "1 finished row(s) kept" in err and "7 journal line(s) left out" in err
    assert fake_plan.ran == [(0, "triton", None)] and len(doc["results"]) == 2
    assert doc["results"][0]["timing"]["median_ms"] == 6.0, "the last line of a row wins"


# -- 6: --compare and CPU-contended verdicts -------------------------------------------------
BUSY = ["CPU contended: while timing, the worker's threads waited 0.90 s for a core per second"]


@pytest.mark.parametrize("flagged, code", [(("manual", "triton"), 3), (("triton",), 1)])
def test_regressions_only_where_the_cpu_was_contended_exit_3(capsys, session_file, fake_plan, tmp_path,
                                                             flagged, code):
    """A regression the tool itself marks `*` exited 1 like a real one (a new user's try)."""
    from results_docs import document

    base = tmp_path / "base.json"
    base.write_text(json.dumps(document(record("manual", 1.0), record("triton", 0.5))))
    rows = [record("manual", 2.0), record("triton", 0.8)]
    for row in rows:
        if row["label"] in flagged:
            row["flags"] = BUSY
    fake_plan.doc = document(*rows)
    got, _, err = run(capsys, "--replay", str(session_file), "--compare", str(base), "--format", "json")
    assert got == code and "2 slower" in err
    assert ("exit 3, not 1" in err) == (code == 3)


# -- 3: tables at 80 columns; 16: terminal escapes --------------------------------------------
def _wide_doc():
    from results_docs import document

    rows = [record("manual", 0.0382114), record("triton", 12345.678)]
    for row in rows:
        row["traffic"] = {"gbps": 1234.56, "tflops": 12.345, "pct_of_ceiling": 71.3, "ceiling": "copy_gbps"}
        row["timing"]["timer"] = "cuda_event"
    rows[1]["flags"] = ["a long note that has to wrap inside its own column, word by word, and only it"]
    return document(*rows)


@pytest.mark.parametrize("columns", [80, 200])
def test_the_replay_table_fits_columns_without_breaking_a_number(capsys, session_file, fake_plan, monkeypatch,
                                                                 columns):
    """At 80 columns the 13-column table was 3-5 characters a column, `0.0`/`382` on two lines."""
    monkeypatch.setenv("COLUMNS", str(columns))
    fake_plan.doc = _wide_doc()
    code, out, _ = run(capsys, "--replay", str(session_file))
    lines = out.splitlines()
    assert code == 0 and max(map(len, lines)) <= columns
    assert "0.03821" in out and "12346" in out.replace(",", ""), "each median whole on one line"
    header = next(line for line in lines if "impl" in line)
    assert ("left out: timer" in out) == (columns == 80) and ("TFLOP/s" in header) == (columns == 200)


def test_list_honours_columns_when_piped(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = run(capsys, "--list")
    assert code == 0 and max(map(len, out.splitlines())) <= 80


ESC = "\x1b[2J\x1b[8m"  # clear the screen, then hide what follows


def test_escapes_in_a_session_name_or_a_label_never_reach_the_terminal(capsys, session_file, fake_plan):
    from results_docs import document

    from workbench.cli.progress import row_line

    bad = record("triton")
    bad["label"] = f"tri{ESC}ton[/]"
    fake_plan.doc = document(record("manual"), bad)
    fake_plan.doc["provenance"]["session"] = f"name{ESC}"
    code, out, err = run(capsys, "--replay", str(session_file))
    assert code == 0 and "\x1b" not in out + err and "\\x1b[2J" in out and "ton[/]" in out
    assert "\x1b" not in row_line(bad, 2, 2) and "tri\\x1b[2J" in row_line(bad, 2, 2)


# -- 5: the same plugin file reached twice ---------------------------------------------------
GOOD_PLUGIN = '''\
import torch
from workbench.registry import REGISTRY

GELU = REGISTRY.op("gelu")


@GELU.impl("manual_twice", math="tanh")
def build(spec, params, ctx):
    """A GeLU reached by two paths."""
    return lambda x: torch.nn.functional.gelu(x, approximate="tanh")
'''


@pytest.mark.slow  # the plugin's manifest is built in a subprocess
@pytest.mark.parametrize("how", ["session and --kernels", "--kernels twice"])
def test_the_same_plugin_file_reached_twice_is_loaded_once(capsys, tmp_path, monkeypatch, how):
    """Was "op 'gelu': implementation 'manual_twice' is registered twice", exit 2."""
    (tmp_path / "plug.py").write_text(GOOD_PLUGIN)
    plugins = "plugins: [plug.py]\n" if how == "session and --kernels" else ""
    session = tmp_path / "s.yaml"
    session.write_text(f"schema_version: 1\nname: s\n{plugins}runs:\n  - op: gelu\n    impls: [manual_twice]\n"
                       "    shape: {M: 2, N: 8}\n")
    monkeypatch.chdir(tmp_path)
    twice = ["--kernels", "./plug.py"] + (["--kernels", str(tmp_path / "plug.py")] if not plugins else [])
    code, out, err = run(capsys, "--check", str(session), *twice, "--trust-plugins")
    assert code == 0 and "registered twice" not in err and "1 row(s)" in out, err
    code, out, err = run(capsys, "--list", *twice, "--format", "json")
    assert code == 0 and "registered twice" not in err


# -- 15: -o onto a plugin file; -o to a FIFO with no reader -----------------------------------
@pytest.mark.slow  # the plugin's manifest is built in a subprocess
def test_o_onto_a_file_the_sessions_plugins_list_is_refused(capsys, tmp_path, fake_plan):
    plugin = tmp_path / "plug.py"
    plugin.write_text(GOOD_PLUGIN)
    session = tmp_path / "s.yaml"
    session.write_text("schema_version: 1\nname: s\nplugins: [plug.py]\nruns:\n  - op: gelu\n"
                       "    impls: [manual_twice]\n    shape: {M: 2, N: 8}\n")
    code, _, err = run(capsys, "--replay", str(session), "-o", str(plugin), "--format", "json")
    assert code == 2 and "an input of this run" in err and fake_plan.calls == []
    assert plugin.read_text() == GOOD_PLUGIN


def test_a_fifo_with_no_reader_gives_up_with_one_line_and_the_data_on_stdout(capsys, session_file, fake_plan,
                                                                            tmp_path, monkeypatch):
    """open() blocked for ever: SIGTERM did nothing, and the rows were lost."""
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    monkeypatch.setattr(fileio, "FIFO_WAIT_S", 0.2)
    code, out, err = run(capsys, "--replay", str(session_file), "-o", str(fifo), "--format", "json")
    assert code == 2 and "no reader opened the FIFO within 0.2 s" in err and len(json.loads(out)["results"]) == 2


def test_a_long_table_is_plain_aligned_text_with_every_row(capsys, session_file, fake_plan, monkeypatch):
    """rich took 16 s for a 4000-row table: a replay stopped at ~3.7k rows took over 10 s to exit."""
    from results_docs import document

    from workbench.results.report import PLAIN_ROWS

    monkeypatch.setenv("COLUMNS", "80")
    rows = [record("manual", 0.5 + i, sweep_value=i) for i in range(PLAIN_ROWS + 5)]
    rows[7]["flags"] = ["a note long enough to run past the last column of an eighty-column terminal, twice over"]
    fake_plan.doc = document(*rows)
    code, out, _ = run(capsys, "--replay", str(session_file))
    lines = out.splitlines()
    assert code == 0 and max(map(len, lines)) <= 80 and "┃" not in out
    header = lines.index(next(line for line in lines if line.startswith("impl")))
    assert [line.split()[2] for line in lines[header + 2:header + 2 + 3]] == ["0", "1", "2"]
    assert sum(1 for line in lines if line.startswith("manual")) == PLAIN_ROWS + 5


def test_rows_a_stop_left_unrun_are_one_progress_line_not_one_each():
    import io
    from pathlib import Path

    from rich.console import Console

    from workbench import events
    from workbench.cli.common import Env
    from workbench.cli.progress import progress

    keys = [(0, "manual", i) for i in range(500)]
    env = Env(no_color=True, stdout_tty=False, stderr_tty=False, config_dir=Path("."), data_dir=Path("."),
              cache_dir=Path("."))
    err = Console(file=io.StringIO(), width=200)
    with progress(keys, env, err, verbose=False) as show:
        for index, key in enumerate(keys):
            rec = record("manual", sweep_value=key[2], status="ok" if index < 2 else "skipped")
            if index >= 2:
                rec["error"] = "cancelled"
            show(events.Result(key, rec))
    lines = err.file.getvalue().splitlines()
    assert len(lines) == 3 and lines[-1].startswith("498 row(s) not run: cancelled"), lines[:5]


def test_the_diagnosis_context_finds_the_same_peers_as_a_scan_over_every_record():
    """The diagnosis scanned every record for each record's peers: 185 s for 4000 rows, spent
    after Ctrl-C too. Indexed now; the peers must be the scan's, in document order."""
    from workbench.diagnosis.core import Context, _point
    from workbench.results.record import Record

    rows = [Record.from_dict(record(label, 1.0, run_index=run, sweep_value=point, shape={"M": 1, "N": point},
                                    status="ok" if (run + point) % 5 else "failed"))
            for run in (0, 1) for point in range(1, 12) for label in ("manual", "triton")]
    ctx = Context({}, tuple(rows))
    for rec in rows:
        label = [p for p in rows if p is not rec and p["status"] == "ok" and p["run_index"] == rec["run_index"]
                 and p["label"] == rec["label"]]
        point = [p for p in rows if p is not rec and p["status"] == "ok" and _point(p) == _point(rec)]
        assert ctx.same_label(rec) == label and ctx.same_point(rec) == point
        want = {"M": 1, "N": rec["sweep_value"] % 11 + 1}
        assert ctx.same_label_at(rec, want) == next((p for p in label if p["shape"] == want), None)


def test_a_worker_that_answers_faster_than_it_is_heard_still_lets_the_stop_flag_be_seen():
    """_drain handled messages for as long as more were waiting: Ctrl-C at 800 of 2500 fast rows
    ran 1650 more (313 s). It returns within about POLL_S, so the loop sees the stop flag."""
    import time
    import types

    from workbench.engine import supervisor

    calls = []

    def recv():
        calls.append(1)
        if len(calls) > 1_000_000:
            raise AssertionError("never returned to its loop")
        return ("event", None)
    run = supervisor._JobRun.__new__(supervisor._JobRun)
    run.finished, run.sup = False, types.SimpleNamespace(clock=time.perf_counter)
    run.conn = types.SimpleNamespace(poll=lambda wait=0: True, recv=recv)
    run._handle = lambda kind, payload: None
    run._drain(0.0)
    assert 0 < len(calls) < 1_000_000


# -- a results document whose provenance or environment is not an object --------------------
@pytest.mark.parametrize("value, message", [
    ("x", "provenance: 'x' is not an object"), (None, "provenance: null is not an object"),
    ({"plugins": "zzz"}, "provenance.plugins: 'zzz' is str; allowed: list or null"),
    ({"session": 5}, "provenance.session: 5 is int; allowed: str or null")])
def test_a_document_with_a_provenance_of_the_wrong_type_is_one_error_for_compare_resume_and_plot(
        capsys, session_file, fake_plan, tmp_path, value, message):
    """--compare, --resume and --plot each crashed with AttributeError (exit 1) on provenance "x"
    or null (a new user's try): now one line naming the key, exit 2, nothing run."""
    from results_docs import document

    doc = document(record("manual", 1.0), record("triton", 1.0))
    doc["provenance"] = value
    path = tmp_path / "doc.json"
    path.write_text(json.dumps(doc))
    for argv in (["--replay", str(session_file), "--compare", str(path)],
                 ["--replay", str(session_file), "--resume", str(path)],
                 ["--plot", str(path), "-o", str(tmp_path / "f.svg")]):
        code, out, err = run(capsys, *argv)
        assert code == 2 and message in err and "Traceback" not in err, (argv, err)
        assert len([line for line in err.splitlines() if line.startswith("error")]) == 1, err
    assert fake_plan.calls == []


def test_a_journal_whose_header_sections_are_not_objects_is_refused_and_the_tui_recovers_nothing(tmp_path):
    from workbench.results import document

    head = json.dumps({"header": {"schema_version": document.SCHEMA_VERSION, "provenance": {}, "environment": [1]}})
    with pytest.raises(ValueError, match=r"environment: \[1\] is not an object"):
        journal.from_jsonl(head + "\n")
    results_file = tmp_path / "s.results.json"
    kept = journal.Journal(journal.journal_path(results_file), {"provenance": {}, "environment": {}})
    kept.add({"run_index": 0, "label": "a", "sweep_value": None, "status": "ok"})
    kept.close()
    with open(kept.path, "a") as extra:  # the TUI read these back with AttributeError on 7
        extra.write(json.dumps({"result": 7}) + "\n" + json.dumps(["x"]) + "\n")
    doc, count = journal.recover(results_file, None)
    assert count == 1 and [r["label"] for r in doc["results"]] == ["a"]


# -- paths that can name no file; an integer past Python's 4300 digits -----------------------
LONG = "a" * 300


@pytest.mark.parametrize("argv", [
    ["--check", "{long}.yaml"], ["--replay", "{long}.yaml"], ["{long}.yaml"],
    ["--replay", "{session}", "-o", "{long}.json"], ["--check", "{session}", "-o", "{long}.json"],
    ["--doctor", "-o", "{long}.json"], ["--schema", "session", "-o", "{long}.json"],
    ["--plot", "{long}.json", "-o", "f.svg"], ["--replay", "{session}", "--resume", "{long}.json"],
    ["--replay", "{session}", "--compare", "{long}.json"], ["--list", "--kernels", "{long}.py"],
    ["--replay", "{session}", "--trace-dir", "{long}"], ["--replay", "{session}", "-o", "{loop}"],
    ["--check", "{loop}"], ["--list", "--kernels", "{loop}"]])
def test_a_path_too_long_or_a_symlink_loop_is_one_error_naming_the_option(capsys, session_file, fake_plan, tmp_path,
                                                                         monkeypatch, argv):
    """Each of these crashed with OSError (File name too long, Too many levels of symbolic links),
    exit 1 (a new user's try): one line naming the option and why, exit 2, nothing run."""
    monkeypatch.chdir(tmp_path)
    os.symlink("loop-b.json", tmp_path / "loop-a.json")
    os.symlink("loop-a.json", tmp_path / "loop-b.json")
    argv = [a.format(long=LONG, session=session_file, loop="loop-a.json") for a in argv]
    code, out, err = run(capsys, *argv)
    assert code == 2 and "Traceback" not in err and fake_plan.calls == [], err
    assert len([line for line in err.splitlines() if line.startswith("error")]) == 1, err
    assert ("File name too long (a name in it has" in err and "characters; at most 255)" in err) \
        or "Too many levels of symbolic links" in err, err
    assert LONG not in err, "the path is shortened"


def test_a_session_plugin_path_too_long_is_one_error(capsys, fake_plan, tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(f"schema_version: 1\nname: s\nplugins: [{LONG}.py]\nruns:\n  - op: gelu\n    impls: [pytorch]\n"
                    "    shape: {M: 8, N: 8}\n")
    for argv in (["--check", str(path), "--trust-plugins"], ["--replay", str(path)]):
        code, _, err = run(capsys, *argv)
        assert code == 2 and "Traceback" not in err and "File name too long" in err, err


def test_check_without_trust_reads_an_integer_of_4301_digits_as_a_problem(capsys, tmp_path):
    """The plugins scan (yaml.safe_load) raised ValueError past Python's 4300 digits: --check
    crashed, exit 1, where --replay said the session's own problem."""
    path = tmp_path / "big.yaml"
    path.write_text("schema_version: 1\nname: big\nruns:\n  - op: gelu\n    impls: [pytorch]\n"
                    f"    shape: {{M: {'9' * 4301}, N: 1}}\n")
    code, _, err = run(capsys, "--check", str(path))
    assert code == 2 and "Traceback" not in err
    assert "runs[0].shape.M: an integer of 4301 characters: at most 100 digits are read" in err


def test_resume_over_the_compare_baseline_names_resume_not_o(capsys, session_file, fake_plan, tmp_path):
    """'--resume s.json --compare s.json' said '-o s.json: is s.json, an input of this run' with no
    -o given (a new user's try): --resume's path is the output then, and is named so."""
    from results_docs import document

    path = tmp_path / "s.json"
    path.write_text(json.dumps(document(record("manual", 1.0))))
    code, _, err = run(capsys, "--replay", str(session_file), "--resume", str(path), "--compare", str(path))
    assert code == 2 and f"--resume {path}: is {path}, an input of this run" in " ".join(err.split()), err
    assert "-o " not in err and fake_plan.calls == []


@pytest.mark.slow  # the plugin's manifest is built in a subprocess
@pytest.mark.parametrize("body, says", [
    ("import sys\nsys.exit(3)\n", "{path}: called sys.exit(3) while being imported (a plugin module must not exit)"),
    ("import os\nos._exit(4)\n", "loading the plugins failed (exit 4) for {path}: (no output)")])
def test_a_plugin_that_exits_while_imported_is_named(capsys, tmp_path, body, says):
    """'loading the plugins failed (exit 3): (no output)' named no file (a new user's try)."""
    plugin = tmp_path / "exits.py"
    plugin.write_text(body)
    code, _, err = run(capsys, "--list", "--kernels", str(plugin))
    assert code == 2 and says.format(path=plugin) in " ".join(err.split()), err


def test_a_folder_named_like_a_session_is_called_a_folder(capsys, session_file, fake_plan, tmp_path):
    """--resume dir.yaml and --plot dir.yaml (folders) were refused as 'a session file'."""
    folder = tmp_path / "dir.yaml"
    folder.mkdir()
    code, _, err = run(capsys, "--replay", str(session_file), "--resume", str(folder))
    assert code == 2 and f"--resume {folder}: a folder;" in err and "session file" not in err
    code, _, err = run(capsys, "--plot", str(folder), "-o", str(tmp_path / "f.svg"))
    assert code == 2 and "Is a directory" in err and "session file" not in err
