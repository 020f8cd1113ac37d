"""Where `-o PATH` writes (a symlink's target; a device node, FIFO or /dev/stdout written through;
an empty or unwritable path refused before the run), the format picked from its extension, the
journal beside it while rows finish, `--format jsonl`, and `--resume`, against the stand-in for
run_plan (cli_fakes.py). The signals themselves: test_cli_stop.py (subprocesses)."""

from __future__ import annotations

import csv
import io
import json
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from cli_fakes import fake_plan, run, session_file, user_dirs  # noqa: F401 (fixtures)
from results_docs import document, record

from workbench.results import journal


@pytest.fixture(autouse=True)
def _user_dirs(user_dirs):
    """Every test here: platformdirs' folders under tmp_path, no colour."""


# -- where -o writes -------------------------------------------------------------------------
def test_a_symlink_is_followed_and_stays_a_link(capsys, session_file, fake_plan, tmp_path):
    target = tmp_path / "real" / "r.json"
    target.parent.mkdir()
    target.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    code, out, _ = run(capsys, "--replay", str(session_file), "-o", str(link))
    assert code == 0 and out == ""
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert json.loads(target.read_text())["results"][0]["label"] == "manual"
    assert sorted(p.name for p in target.parent.iterdir()) == ["r.json"], "no journal or temp file left"


def test_a_dangling_symlink_creates_its_target(capsys, session_file, fake_plan, tmp_path):
    link = tmp_path / "link.json"
    link.symlink_to(tmp_path / "new.json")
    code, _, _ = run(capsys, "--replay", str(session_file), "-o", str(link))
    assert code == 0 and link.is_symlink() and json.loads((tmp_path / "new.json").read_text())["results"]


def test_a_fifo_is_written_through_not_replaced(capsys, session_file, fake_plan, tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()))
    reader.start()
    code, out, _ = run(capsys, "--replay", str(session_file), "-o", str(fifo), "--format", "json")
    reader.join(timeout=10)
    assert code == 0 and out == ""
    assert stat.S_ISFIFO(os.stat(fifo).st_mode), "still a FIFO"
    assert json.loads(got[0])["results"][1]["label"] == "triton"
    assert sorted(p.name for p in tmp_path.iterdir() if "journal" in p.name) == [], "no journal beside a FIFO"


def test_dev_null_stays_a_device_node(capsys, session_file, fake_plan):
    code, out, _ = run(capsys, "--replay", str(session_file), "-o", os.devnull)
    assert code == 0 and out == "" and stat.S_ISCHR(os.stat(os.devnull).st_mode)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full on this system")
def test_dev_full_is_written_through_and_its_error_keeps_the_data(capsys, session_file, fake_plan):
    """A first user's `-o /dev/full` turned the device node into a 27 KB regular file (exit 0)."""
    code, out, err = run(capsys, "--replay", str(session_file), "-o", "/dev/full", "--format", "json")
    assert code == 2 and "No space left" in err and json.loads(out)["results"]
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


@pytest.mark.slow
def test_dev_stdout_writes_to_the_descriptor_and_appends(tmp_path, session_file):
    """`-o /dev/stdout >> log` appends: the descriptor is written, the file is never reopened
    (which would truncate it) or replaced."""
    log = tmp_path / "log.txt"
    log.write_text("earlier line\n")
    with open(log, "a") as out:
        proc = subprocess.run([sys.executable, "-m", "workbench", "--check", str(session_file), "-o", "/dev/stdout",
                               "--format", "json"], stdout=out, stderr=subprocess.PIPE, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    first, rest = log.read_text().split("\n", 1)
    assert first == "earlier line" and json.loads(rest)["ok"] is True


def test_an_empty_path_is_refused(capsys, session_file, fake_plan):
    code, out, err = run(capsys, "--replay", str(session_file), "-o", "")
    assert code == 2 and out == "" and "-o '': an empty path" in err and fake_plan.calls == []


def test_the_session_file_itself_is_refused_and_kept(capsys, session_file, fake_plan, tmp_path):
    """`--replay self.yaml -o self.yaml` replaced the session with the results table (exit 0)."""
    before = session_file.read_bytes()
    link = tmp_path / "same.yaml"
    link.symlink_to(session_file)
    for target in (str(session_file), str(link)):
        code, out, err = run(capsys, "--replay", str(session_file), "-o", target, "--format", "table")
        assert code == 2 and out == "" and "an input of this run" in err
    code, _, err = run(capsys, "--replay", str(session_file), "--kernels", str(session_file), "-o", str(session_file),
                       "--format", "json")
    assert code == 2
    # without --format a .yaml target is refused by its extension (it wrote a table into another.yaml)
    other = tmp_path / "another.yaml"
    code, out, err = run(capsys, "--replay", str(session_file), "-o", str(other))
    assert code == 2 and "a session file's extension: results are not a session" in err and not other.exists()
    assert session_file.read_bytes() == before and fake_plan.calls == []
    # another session, not this run's, with --format json: refused too (a new user's session was
    # replaced by the results); a results file of an earlier run may be replaced
    other_session = tmp_path / "mine.yaml"
    other_session.write_bytes(before)
    code, out, err = run(capsys, "--replay", str(session_file), "-o", str(other_session), "--format", "json")
    assert code == 2 and "is a session file; it would be replaced" in err
    assert other_session.read_bytes() == before and fake_plan.calls == []
    earlier = tmp_path / "earlier.json"
    earlier.write_text('{"schema_version": 1, "results": []}')
    code, out, err = run(capsys, "--replay", str(session_file), "-o", str(earlier), "--format", "json")
    assert "is a session file" not in err


@pytest.mark.parametrize("name, word", [("newdir/", "names a folder"), ("out.json.journal.jsonl", "journal")])
def test_a_folder_or_a_journal_name_is_refused(capsys, session_file, fake_plan, tmp_path, name, word):
    code, out, err = run(capsys, "--replay", str(session_file), "-o", str(tmp_path) + "/" + name)
    assert code == 2 and word in err and fake_plan.calls == []
    assert not (tmp_path / name.rstrip("/")).exists()


@pytest.mark.skipif(not os.path.isdir("/sys/kernel"), reason="no sysfs here")
def test_a_file_system_that_refuses_new_files_is_refused_before_the_run(capsys, session_file, fake_plan):
    """`-o /sys/out.json` ran the whole replay, then fell back to stdout (root passes os.access)."""
    code, out, err = run(capsys, "--replay", str(session_file), "-o", "/sys/out.json")
    assert code == 2 and out == "" and "-o /sys/out.json: folder /sys takes no new file (creating one there failed" in err
    assert fake_plan.calls == []


@pytest.mark.skipif(not os.path.isdir("/sys/kernel"), reason="no sysfs here")
def test_a_missing_folder_under_one_that_refuses_files_is_named(capsys, session_file, fake_plan):
    code, out, err = run(capsys, "--replay", str(session_file), "-o", "/sys/nope/out.json")
    assert code == 2 and "/sys/nope does not exist and cannot be made there" in err and fake_plan.calls == []


# -- the format from the extension -----------------------------------------------------------
@pytest.mark.parametrize("name, fmt", [("r.json", "json"), ("r.JSON", "json"), ("r.csv", "csv"),
                                       ("r.jsonl", "jsonl"), ("r.txt", "table")])
def test_the_extension_picks_the_format(capsys, session_file, fake_plan, tmp_path, name, fmt):
    target = tmp_path / name
    code, _, _ = run(capsys, "--replay", str(session_file), "-o", str(target))
    text = target.read_text()
    assert code == 0
    if fmt == "json":
        assert json.loads(text)["results"][0]["label"] == "manual"
    elif fmt == "csv":
        assert [r["label"] for r in csv.DictReader(io.StringIO(text))] == ["manual", "triton"]
    elif fmt == "jsonl":
        assert [r["label"] for r in journal.from_jsonl(text)["results"]] == ["manual", "triton"]
    else:
        assert "median ms" in text


def test_format_given_wins_over_the_extension(capsys, session_file, fake_plan, tmp_path):
    target = tmp_path / "r.json"
    code, _, _ = run(capsys, "--replay", str(session_file), "-o", str(target), "--format", "csv")
    assert code == 0 and target.read_text().startswith("run_index,")


def test_a_json_output_can_be_the_next_baseline(capsys, session_file, fake_plan, tmp_path):
    """`-o out.json` wrote the Rich table, which `--compare out.json` could not read."""
    base = tmp_path / "base.json"
    assert run(capsys, "--replay", str(session_file), "-o", str(base))[0] == 0
    code, _, err = run(capsys, "--replay", str(session_file), "--compare", str(base))
    assert code == 0 and "2 same" in err


@pytest.mark.parametrize("argv, word", [(["--list", "-o", "x.jsonl"], "goes with --replay"),
                                        (["--doctor", "-o", "x.csv"], "not csv (from the extension"),
                                        (["--check", "smoke-quick", "--format", "csv"], "--check writes table or json")])
def test_a_format_the_mode_cannot_write_is_refused(capsys, argv, word):
    code, _, err = run(capsys, *argv)
    assert code == 2 and word in err


# -- the journal, jsonl, --resume ------------------------------------------------------------
def test_the_journal_holds_each_finished_row_until_the_document_is_written(capsys, session_file, fake_plan,
                                                                          tmp_path):
    target = tmp_path / "r.json"
    seen = {}

    def look(stop):
        seen["journal"] = journal.from_jsonl(journal.journal_path(target).read_text())
    fake_plan.during = look
    code, _, _ = run(capsys, "--replay", str(session_file), "-o", str(target))
    partial = seen["journal"]
    assert code == 0 and [r["label"] for r in partial["results"]] == ["manual"], "the first row, fsynced"
    assert partial["provenance"]["session"] == "cli-test" and partial["environment"]["device"] == "NVIDIA H200"
    assert not journal.journal_path(target).exists() and json.loads(target.read_text())["cancelled"] is False


def test_jsonl_streams_rows_to_stdout_as_they_finish(capsys, session_file, fake_plan):
    seen = {}
    fake_plan.during = lambda stop: seen.setdefault("so_far", capsys.readouterr().out)
    code, out, _ = run(capsys, "--replay", str(session_file), "--format", "jsonl")
    lines = [json.loads(line) for line in (seen["so_far"] + out).splitlines()]
    assert code == 0 and [next(iter(line)) for line in lines] == ["header", "result", "result", "end"]
    assert len(seen["so_far"].splitlines()) == 2, "header and the first row before the run went on"
    assert lines[-1]["end"]["cancelled"] is False and lines[1]["result"]["label"] == "manual"


def test_resume_runs_only_the_missing_rows(capsys, session_file, fake_plan, tmp_path):
    target = tmp_path / "r.json"
    fake_plan.during = lambda stop: stop.set()              # as a SIGTERM after the first row
    code, _, _ = run(capsys, "--replay", str(session_file), "-o", str(target))
    first = json.loads(target.read_text())
    first["results"][1].update(status="skipped", error="cancelled", timing=None)  # what run_plan leaves
    first["cancelled"] = True
    target.write_text(json.dumps(first))
    fake_plan.ran.clear()
    code, _, err = run(capsys, "--replay", str(session_file), "--resume", str(target))
    doc = json.loads(target.read_text())
    assert code == 0 and fake_plan.ran == [(0, "triton", None)], "only the missing row ran"
    assert "1 finished row(s) kept" in err and [r["status"] for r in doc["results"]] == ["ok", "ok"]
    assert doc["provenance"]["resumed_from"]["rows_kept"] == 1 and doc["cancelled"] is False
    assert f"results written to {target} (2 row(s), json)" in err  # where the data went


def test_resume_prefers_the_journal_a_kill_left(capsys, session_file, fake_plan, tmp_path):
    target = tmp_path / "r.csv"
    sha = __import__("hashlib").sha256(session_file.read_bytes()).hexdigest()
    head = {"provenance": {"session": "cli-test", "session_sha256": sha}, "environment": {"device": "NVIDIA H200"}}
    kept = journal.Journal(journal.journal_path(target), head)
    kept.add(record("manual", 7.0))
    kept.close()
    with open(kept.path, "a") as torn:
        torn.write('{"result": {"run_index": 0, "lab')          # killed mid-line
    code, _, _ = run(capsys, "--replay", str(session_file), "--resume", str(target))
    rows = list(csv.DictReader(io.StringIO(target.read_text())))
    assert code == 0 and fake_plan.ran == [(0, "triton", None)]
    assert rows[0]["timing.median_ms"] == "7.0" and not kept.path.exists()


@pytest.mark.parametrize("change, word", [("session", "sha256"), ("device", "it ran on 'NVIDIA A100'")])
def test_resume_refuses_another_session_or_device(capsys, session_file, fake_plan, tmp_path, change, word):
    target = tmp_path / "r.json"
    doc = document(record("manual"), device="NVIDIA A100" if change == "device" else "NVIDIA H200")
    import hashlib
    doc["provenance"]["session_sha256"] = ("0" * 64 if change == "session"
                                           else hashlib.sha256(session_file.read_bytes()).hexdigest())
    target.write_text(json.dumps(doc))
    code, _, err = run(capsys, "--replay", str(session_file), "--resume", str(target))
    assert code == 2 and word in err and fake_plan.calls == []
    if change == "session":  # which run it was, and the two ways on (a new user's try)
        assert "any change counts, a comment too" in err and "run this one afresh without --resume" in err


def test_resume_of_nothing_says_so(capsys, session_file, fake_plan, tmp_path):
    code, _, err = run(capsys, "--replay", str(session_file), "--resume", str(tmp_path / "none.json"))
    assert code == 2 and "no such results file, and no journal none.json.journal.jsonl" in err
    assert " ".join(err.split()).count(str(tmp_path / "none.json")) == 1  # the path named once


def test_a_journal_read_back_is_the_document_it_was_for(tmp_path):
    doc = document(record("manual"), record("cuda", status="unavailable"))
    doc.update(cancelled=False, cancel_signal=None)
    back = journal.from_jsonl(journal.to_jsonl(doc))
    assert back["results"] == doc["results"] and back["provenance"] == doc["provenance"]
    assert back["cancelled"] is False and back["environment"] == doc["environment"]
    with pytest.raises(ValueError, match="no header line"):
        journal.from_jsonl('{"result": {}}\n', "x.jsonl")
    with pytest.raises(ValueError, match="line 1 is not JSON"):
        journal.from_jsonl('nope\n{"header": {}}\n', "x.jsonl")


def test_cancelled_rows_are_not_journaled(tmp_path):
    kept = journal.Journal(tmp_path / "j.jsonl", {"provenance": {}, "environment": {}})
    kept.add({**record("manual"), "status": "skipped", "error": "cancelled"})
    kept.add(record("triton"))
    kept.close()
    assert [r["label"] for r in journal.from_jsonl(Path(kept.path).read_text())["results"]] == ["triton"]


def test_a_journal_held_by_a_live_run_refuses_a_second_one_and_keeps_its_rows(tmp_path):
    """Two replays given one -o path: the second overwrote the first's journal and document
    (a new user's try). Now the second is refused before it touches the file."""
    from workbench.results.journal import Journal, JournalBusy, read_partial

    path = tmp_path / "out.json.journal.jsonl"
    first = Journal(path, {"schema_version": 1, "provenance": {"session": "first"}})
    first.add({"op": "gelu", "impl": "pytorch", "label": "pytorch", "status": "ok", "run_index": 0,
               "sweep_value": None, "error": None})
    with pytest.raises(JournalBusy):
        Journal(path, {"schema_version": 1, "provenance": {"session": "second"}})
    kept = read_partial(path)
    assert kept["provenance"]["session"] == "first" and len(kept["results"]) == 1
    first.discard()
    assert not path.exists()
    second = Journal(path, {"schema_version": 1, "provenance": {"session": "second"}})  # free again
    assert read_partial(path)["provenance"]["session"] == "second"
    second.close()


def test_a_replay_given_an_o_path_another_run_writes_is_refused_before_it_runs(tmp_path):
    import argparse

    from workbench.cli.common import Env
    from workbench.cli.sink import Sink
    from workbench.errors import WorkbenchError
    from workbench.results.journal import Journal, journal_path

    out = tmp_path / "same.json"
    held = Journal(journal_path(out), {"schema_version": 1})
    args = argparse.Namespace(output=str(out), format="json")
    with pytest.raises(WorkbenchError, match="another workbench run is writing it now"):
        Sink(args, Env(True, False, False, tmp_path, tmp_path, tmp_path), {"provenance": {}, "environment": None})
    held.close()


def test_an_o_path_whose_extension_names_no_format_is_refused(capsys, tmp_path):
    """-o results.xlsx wrote the text table into it without a word (a new user's try)."""
    from workbench import cli

    code = cli.main(["--replay", "smoke-quick", "-o", str(tmp_path / "results.xlsx")])
    err = capsys.readouterr().err
    assert code == 2 and "no format is known for '.xlsx'" in err and not (tmp_path / "results.xlsx").exists()
    code = cli.main(["--check", "smoke-quick", "-o", str(tmp_path / "results.xlsx"), "--format", "table"])
    assert code == 0  # an explicit --format takes any name


def test_resume_given_a_session_file_says_what_resume_takes(capsys, tmp_path):
    from workbench import cli

    code = cli.main(["--replay", "smoke-quick", "--resume", str(tmp_path / "long.yaml")])
    err = capsys.readouterr().err
    assert code == 2 and "a session file; --resume takes the results path of a stopped run" in err and "-o " not in err.split("error:")[-1].split(";")[0]


def test_the_closing_line_names_the_folders_minus_o_made(capsys, session_file, fake_plan, tmp_path):
    # a typo in a path builds a tree: said, not done silently
    target = tmp_path / "new" / "deeper" / "r.json"
    code, _, err = run(capsys, "--replay", str(session_file), "-o", str(target))
    assert code == 0 and target.exists()
    assert f"results written to {target} (2 row(s), json; made the folder {tmp_path / 'new'} and those under it)" in err
    code, _, err = run(capsys, "--replay", str(session_file), "-o", str(target))  # there now: nothing made
    assert f"results written to {target} (2 row(s), json)" in err
