"""workbench/trace.py: phase marks across processes, only when WORKBENCH_TRACE names a file."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from workbench import trace


def test_marks_are_written_only_when_asked_and_read_back_in_time_order(tmp_path, monkeypatch):
    path = tmp_path / "trace.txt"
    monkeypatch.delenv(trace.ENV, raising=False)
    trace.mark("nothing")
    assert not path.exists()
    monkeypatch.setenv(trace.ENV, str(path))
    trace.mark("row x: start")
    trace.mark("row x: built")
    # only this test's marks: a pool thread an earlier test left running may mark here too
    marks = [m for m in trace.read(str(path)) if m[2].startswith("row x:")]
    assert [m[2] for m in marks] == ["row x: start", "row x: built"]
    assert marks[0][1] == os.getpid() and marks[0][0] <= marks[1][0]


@pytest.mark.slow
def test_a_child_process_appends_to_the_same_timeline(tmp_path, monkeypatch):
    path = tmp_path / "trace.txt"
    monkeypatch.setenv(trace.ENV, str(path))
    trace.mark("parent: before")
    subprocess.run([sys.executable, "-c", "from workbench.trace import mark; mark('child: hello world')"],
                   check=True)
    trace.mark("parent: after")
    marks = [m for m in trace.read(str(path)) if m[2].startswith(("parent:", "child:"))]
    assert [m[2] for m in marks] == ["parent: before", "child: hello world", "parent: after"]
    assert len({m[1] for m in marks}) == 2


def test_a_missing_or_garbled_file_reads_as_what_parses(tmp_path):
    assert trace.read(str(tmp_path / "none.txt")) == []
    (tmp_path / "t.txt").write_text("1.5 12 a b c\nnot a line\n0.5 x y\n0.25 7 first\n")
    assert trace.read(str(tmp_path / "t.txt")) == [(0.25, 7, "first"), (1.5, 12, "a b c")]


def test_marks_of_one_instant_keep_the_order_they_were_written_in(tmp_path):
    path = tmp_path / "trace.txt"
    # same time and pid; text order ("b" < "z") is the opposite of write order
    path.write_text("5.000000 7 z: start\n5.000000 7 b: built\n4.000000 8 a: first\n")
    assert [m[2] for m in trace.read(str(path))] == ["a: first", "z: start", "b: built"]
