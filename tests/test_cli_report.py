"""Output formats of results documents (table, JSON, CSV), provenance, and the progress display,
on hand-made documents."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import math
import types
from pathlib import Path

import pytest
from results_docs import document, record
from rich.console import Console

from workbench import events
from workbench.results import report
from workbench.cli.common import Env
from workbench.results.provenance import PROVENANCE_KEYS, fill_provenance, git_sha, provenance, utc_now_iso
from workbench.cli.progress import InOrder, progress


def test_json_is_the_document_with_nan_as_null():
    rec = record("triton")
    rec["check"]["max_abs_err"] = math.inf
    rec["timing"]["mean_ms"] = math.nan
    text = report.to_json(document(rec))
    doc = json.loads(text)  # strict JSON: no NaN / Infinity tokens
    assert "NaN" not in text and "Infinity" not in text
    assert doc["results"][0]["check"]["max_abs_err"] is None and doc["results"][0]["label"] == "triton"


def test_csv_one_row_per_result_scalar_dotted_columns():
    rec = record("triton", shape={"M": 2, "N": 3}, sweep_value=3)
    rec["timing"]["samples_ms"] = [1.0, 2.0]
    rec["profile"] = {"rows": [{"name": "k"}], "kernel_count": 1.0, "device_events": True}
    rows = list(csv.DictReader(io.StringIO(report.to_csv(document(rec, record("manual", status="failed"))))))
    assert len(rows) == 2
    first = rows[0]
    assert first["shape.M"] == "2" and first["sweep_value"] == "3" and first["timing.median_ms"] == "1.0"
    assert first["check.passed"] == "true" and first["profile.kernel_count"] == "1.0"
    assert not any(k.startswith(("timing.samples_ms", "profile.rows")) for k in first)
    assert rows[1]["status"] == "failed" and rows[1]["timing.median_ms"] == ""


def test_csv_of_no_results():
    assert report.to_csv(document()) == "\n"


def test_table_columns_and_rows():
    ok = record("triton", 0.51, shape={"M": 16384, "N": 16384})
    ok["traffic"] = {"gbps": 4209.9, "tflops": 7.9, "ceiling": "copy_gbps", "pct_of_ceiling": 99.6}
    failed = record("cuda", status="failed")
    failed["check"]["passed"] = False
    text = report.to_table(document(ok, failed, record("manual", run_index=1, sweep_value=128)))
    assert "run 0: gelu float32" in text and "run 1: gelu float32" in text
    for cell in ("16384x16384", "0.51", "4210", "7.9", "99.6% copy", "pass", "FAIL", "failed", "boom", "sweep", "128"):
        assert cell in text, cell
    assert "NVIDIA H200" in text and "\x1b[" not in text
    assert all(line == line.rstrip() for line in text.splitlines())


def test_table_in_colour_on_request():
    assert "\x1b[" in report.to_table(document(record()), color=True)


def test_table_notes_say_what_the_timing_is():
    rec = record("triton")
    rec["timing"].update(timer="interpreter", launch_bound=True, clock_fell=True)
    rec["flags"] = ["above the copy ceiling: measurement error"]
    text = report.to_table(document(rec), width=400)
    for note in ("Triton interpreter", "launch-bound", "clock fell", "above the copy ceiling"):
        assert note in text


def test_interpreter_note_is_said_once():
    from workbench.results.document import INTERPRETER_FLAG

    rec = record("triton")
    rec["timing"].update(timer="interpreter")
    rec["flags"] = [INTERPRETER_FLAG]  # what the engine writes (engine/bench.py)
    assert report._notes(rec) == INTERPRETER_FLAG
    rec["flags"] = []  # a document from before the flag: the note still says it, once
    assert report._notes(rec) == INTERPRETER_FLAG


def test_fmt_num():
    assert report.fmt_num(None) == "-" and report.fmt_num(True) == "-"
    assert report.fmt_num(0.000123456) == "0.0001235" and report.fmt_num(123456.7) == "123,457"
    assert report.fmt_num(math.inf) == "inf"


# -- provenance ------------------------------------------------------------------------------
def test_provenance_record():
    prov = provenance("s", session_sha256="ab", argv=["workbench", "--replay", "s"])
    assert tuple(prov) == PROVENANCE_KEYS
    assert prov["session"] == "s" and prov["argv"] == ["workbench", "--replay", "s"]
    sha = git_sha()
    assert sha is None or (len(sha) >= 7 and all(c in "0123456789abcdef" for c in sha))
    assert (prov["git_dirty"] is None) == (sha is None)


def test_git_dirty_says_whether_the_checkout_differs_from_its_commit(tmp_path, monkeypatch):
    """A copy of a working tree with edits (the GPU box's) must not pass for its base commit."""
    import shutil as sh
    import subprocess

    import workbench
    from workbench.results import provenance as prov_mod

    git = sh.which("git")
    if git is None:
        pytest.skip("no git")
    repo = tmp_path / "repo"
    (repo / "workbench").mkdir(parents=True)
    init = repo / "workbench" / "__init__.py"
    init.write_text("__version__ = '0'\n")
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "x"]):
        subprocess.run([git, *args], cwd=repo, check=True, env={**__import__("os").environ, **env})
    monkeypatch.setattr(workbench, "__file__", str(init))
    prov_mod.git_state.cache_clear()
    try:
        sha, dirty = prov_mod.git_state()
        assert sha and dirty is False
        init.write_text("__version__ = '1'\n")
        prov_mod.git_state.cache_clear()
        assert prov_mod.git_state() == (sha, True)
    finally:
        prov_mod.git_state.cache_clear()


def test_utc_now_iso():
    when = dt.datetime(2026, 11, 29, 15, 0, 0, 123, tzinfo=dt.timezone(dt.timedelta(hours=1)))
    assert utc_now_iso(when) == "2026-11-29T14:00:00Z"


def test_fill_provenance_keeps_the_engines_values():
    doc = {"provenance": {"workbench": "9.9", "git_sha": None, "session": None, "extra": 1}}
    fill_provenance(doc, provenance("mine", session_sha256="cd", argv=["x"], started="2026-01-01T00:00:00Z"))
    prov = doc["provenance"]
    assert prov["workbench"] == "9.9" and prov["session"] == "mine" and prov["session_sha256"] == "cd"
    assert prov["extra"] == 1 and set(PROVENANCE_KEYS) <= set(prov)
    assert fill_provenance({}, {"session": "x"})["provenance"]["session"] == "x"


# -- progress --------------------------------------------------------------------------------
def fake_env(tty: bool) -> Env:
    return Env(no_color=True, stdout_tty=False, stderr_tty=tty, config_dir=Path("."), data_dir=Path("."),
               cache_dir=Path("."))


KEYS = [(0, "manual", None), (0, "cuda", None)]


def feed(on_event, order=("manual", "cuda")):
    recs = {"manual": record("manual"), "cuda": record("cuda", status="failed")}
    for rec in (recs[label] for label in order):
        key = (0, rec["label"], None)
        on_event(events.Started(key, "gelu", rec["impl"], "2x8 float32", "cpu"))
        on_event(events.Log(key, "chatty info line", "info"))
        on_event(events.Result(key, rec))


def test_progress_lines_without_a_terminal():
    err = Console(file=io.StringIO(), width=200)
    with progress(KEYS, fake_env(False), err, verbose=False) as on_event:
        feed(on_event)
    text = err.file.getvalue()
    assert "[1/2] gelu manual 1024x1024 float32: ok 1 ms" in text
    assert "[2/2] gelu cuda 1024x1024 float32: failed (boom)" in text
    assert "chatty" not in text


@pytest.mark.parametrize("verbose", [False, True])
def test_a_hung_workers_stacks_are_counted_and_shown_with_verbose(verbose):
    """A row past its timeout_s: the worker's thread stacks (faulthandler lines) went to stderr as
    ~25 `warning:` lines; without -v one line counts them, -v shows them."""
    err = Console(file=io.StringIO(), width=200)
    key = (0, "manual", None)
    stack = ['Thread 0x00007f01 (most recent call first):', '  File "/x/threading.py", line 982 in run']
    with progress(KEYS, fake_env(False), err, verbose=verbose) as on_event:
        for line in stack:
            on_event(events.Log(key, line, "warning"))
        on_event(events.Log(key, "a real warning", "warning"))
    text = err.file.getvalue()
    assert "a real warning" in text
    assert ("threading.py" in text) == verbose
    assert ("2 line(s) of a hung worker's thread stacks left out (-v shows them)" in text) == (not verbose)


def test_progress_lines_follow_session_order():
    """A row that finishes first (an unavailable or ptx-only one) waits for the rows before it:
    a first user saw [1/11] be cuda_naive, the fourth row of the session."""
    err = Console(file=io.StringIO(), width=200)
    with progress(KEYS, fake_env(False), err, verbose=False) as on_event:
        feed(on_event, order=("cuda", "manual"))
    lines = [line for line in err.file.getvalue().splitlines() if line.startswith("[")]
    assert lines == ["[1/2] gelu manual 1024x1024 float32: ok 1 ms", "[2/2] gelu cuda 1024x1024 float32: failed (boom)"]


def test_in_order_numbers_by_session_place_and_skips_resumed_rows():
    keys = [(0, "a", None), (0, "b", None), (1, "c", 1), (1, "c", 2)]
    order = InOrder(keys, done=[(0, "b", None)])
    assert order.add((1, "c", 2), {"n": 4}) == []
    assert order.add((0, "a", None), {"n": 1}) == [(1, {"n": 1})]          # b was kept: c@1 is next
    assert order.add((1, "c", 1), {"n": 3}) == [(3, {"n": 3}), (4, {"n": 4})]
    assert order.add((9, "x", None), {"n": 0}) == [(4, {"n": 0})]          # unknown: at once


def test_progress_bar_on_a_terminal():
    err = Console(file=io.StringIO(), width=120, force_terminal=True)
    with progress(KEYS, fake_env(True), err, verbose=True) as on_event:
        feed(on_event)
    text = err.file.getvalue()
    assert "failed (boom)" in text and "info: chatty info line" in text


def test_env_console_honours_no_color():
    env = types.SimpleNamespace(no_color=True, stderr_tty=False, stdout_tty=False)
    assert Env.console(env).color_system is None


def test_a_console_that_is_not_a_terminal_is_200_columns_wide():
    """A first user's --compare table on a redirected stderr cut its numbers at 80 columns."""
    env = types.SimpleNamespace(no_color=True, stderr_tty=False, stdout_tty=False)
    assert Env.console(env).width == 200


# -- --list at 80 columns --------------------------------------------------------------------
def test_list_fits_80_columns_one_line_per_implementation():
    """A first user at 80 columns saw words broken ("pytorc|h") and a 22-line-tall matmul row:
    now only the notes column wraps, every other cell stays whole on the row's first line."""
    from workbench.cli import doctor

    data = doctor.inventory([], "auto")
    console = Console(file=io.StringIO(), width=80, no_color=True)
    for item in doctor._list_tables(data):
        console.print(item)
    text = console.file.getvalue()
    assert max(len(line) for line in text.splitlines()) <= 80
    blocks = {block.split(" — ", 1)[0]: block.splitlines() for block in text.split("\n\n")[1:]}
    for op in data["ops"]:
        lines = blocks[op["name"]]
        header = next(i for i, line in enumerate(lines) if line.startswith("impl "))
        notes_at = lines[header].index("notes")
        rows = lines[header + 2:]
        names = [line.split(" ", 1)[0] for line in rows if line[:notes_at].strip()]
        assert names == [impl["name"] for impl in op["impls"]], "one line per implementation, in order"
        for impl in op["impls"]:
            first = next(line for line in rows if line.split(" ", 1)[0] == impl["name"])
            assert first[:notes_at].split()[-4:] == ["yes" if impl["unavailable"][a] is None else "no"
                                                     for a in doctor.ACTIONS]
        assert len(rows) <= 6 * len(op["impls"]), "no 22-line rows"


def test_csv_has_dotted_columns_only():
    """A first user's CSV repeated empty `launch`, `timing`, `check`, `traffic`, `profile`
    columns beside the dotted ones."""
    ok = record("triton")
    ok["timing"]["sm_clock_mhz"] = {"min": 1980, "median": 1980, "max": 1980, "n": 4}
    failed = record("cuda", status="failed")            # timing None
    failed["check"] = None
    no_clock = record("manual")
    no_clock["timing"]["sm_clock_mhz"] = None
    reader = csv.DictReader(io.StringIO(report.to_csv(document(ok, failed, no_clock))))
    rows, columns = list(reader), reader.fieldnames
    for name in ("timing", "check", "traffic", "launch", "profile", "timing.sm_clock_mhz"):
        assert name not in columns, name
    assert {"launch.grid", "traffic.gbps", "profile.kernel_count", "timing.sm_clock_mhz.median"} <= set(columns)
    assert rows[0]["timing.sm_clock_mhz.median"] == "1980" and rows[2]["timing.sm_clock_mhz.median"] == ""
    assert rows[1]["timing.median_ms"] == "" and rows[1]["check.passed"] == ""


def test_a_contended_row_says_so_in_its_progress_line():
    """With -o only these lines reach the screen: a row timed 1700x slow on a busy 2-core host
    read `ok 15.99 ms`, its CPU-contended flag in the document only (a new user's try)."""
    from workbench.cli.progress import row_line

    busy = {**record("manual"), "flags": ["CPU contended: while timing, the worker's threads waited 0.80 s"]}
    assert row_line(busy, 1, 2).endswith("ok 1 ms (CPU contended: other processes held the cores, not the op's "
                                         "time alone)")
    assert row_line(record("manual"), 1, 2).endswith("ok 1 ms")
