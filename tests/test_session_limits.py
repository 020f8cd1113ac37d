"""A session file is read in bounded time and memory (issue 42, items 2 and 14): size, kind,
nesting depth, value count and integer length are capped before and while composing, each bad
input one clean problem naming the limit (a red team's 41 bad inputs: 14 were tracebacks, hangs
or gigabytes)."""

from __future__ import annotations

import os

import pytest

from workbench.session import yaml_io as session_yaml
from workbench.session.api import SessionError, load_session, parse_session
from workbench.session.yaml_io import MAX_DEPTH, MAX_FILE_BYTES, MAX_INT_DIGITS

MAX_NODES = 2000  # the count cap as the tests set it (100000 takes seconds to reach in pure Python)

HEAD = "schema_version: 1\nname: x\n"

BAD = {
    "nested brackets": ("[" * 500, f"at most {MAX_DEPTH} deep"),
    "deep block lists": ("".join("  " * i + "-\n" for i in range(200)), f"at most {MAX_DEPTH} deep"),
    "100k-deep flow list": ("[" * 100_000 + "]" * 100_000, f"at most {MAX_DEPTH} deep"),
    "nested mappings": ("".join("  " * i + f"k{i}:\n" for i in range(100)) + "  " * 100 + "v: 1\n",
                        f"at most {MAX_DEPTH} deep"),
    "5000-digit integer": (HEAD + "runs:\n  - op: gelu\n    shape: {M: " + "9" * 5000 + "}\n",
                           f"at most {MAX_INT_DIGITS} digits"),
    "a 5000-digit hex integer": (HEAD + "runs:\n  - op: gelu\n    shape: {M: 0x" + "f" * 5000 + "}\n",
                                 f"at most {MAX_INT_DIGITS} digits"),
    "nested flow mappings": ("{a:" * 500 + "1" + "}" * 500, f"at most {MAX_DEPTH} deep"),
    "a run list that holds itself": (HEAD + "runs: &a [*a]\n", "a run must be a mapping"),
    "a shape that holds itself": (HEAD + "runs:\n  - op: gelu\n    shape: &s {M: *s}\n", "must be a positive integer"),
    "a flow list of many items": (HEAD + "runs: [" + "1," * (MAX_NODES + 10) + "1]\n", f"more than {MAX_NODES} values"),
    "a sweep of many values": (HEAD + "runs:\n  - op: gelu\n    sweep: {N: [" + ",".join(["1"] * 1_000_000) + "]}\n",
                               "at most 1048576 bytes"),
    "mostly comments, over the cap": (HEAD + "# x\n" * (MAX_FILE_BYTES // 4 + 1), "at most 1048576 bytes"),
    "billion laughs": ("a: &a [1,1,1,1,1,1,1,1,1,1]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
                       "c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\n",
                       f"more than {MAX_NODES} values"),
}


@pytest.mark.parametrize("name", list(BAD))
def test_each_bad_input_is_one_clean_problem(name, tmp_path, monkeypatch):
    """(Time and peak memory of the real caps on a 50 MB file: docs/CONTRACTS.md, "Session file".)"""
    monkeypatch.setattr(session_yaml, "MAX_NODES", MAX_NODES)
    text, words = BAD[name]
    path = tmp_path / "s.yaml"
    path.write_text(text)
    with pytest.raises(SessionError) as caught:
        load_session(path, check_ops=False)
    assert len(caught.value.problems) == 1 and words in str(caught.value), str(caught.value)[:300]


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "folder"])
def test_a_session_that_is_not_a_regular_file_is_refused_without_reading_it(kind, tmp_path):
    if kind == "fifo":
        path = tmp_path / "s.yaml"
        os.mkfifo(path)                      # no writer: opening it would block for ever
    elif kind == "dev-zero":
        path = "/dev/zero"
        if not os.path.exists(path):
            pytest.skip("no /dev/zero")
    else:
        path = tmp_path
    with pytest.raises(SessionError) as caught:
        load_session(path, check_ops=False)
    assert len(caught.value.problems) == 1 and "a regular YAML file" in str(caught.value)


def test_a_file_over_the_cap_is_refused_by_its_size_before_it_is_read(tmp_path, monkeypatch):
    path = tmp_path / "s.yaml"
    with open(path, "wb") as handle:
        handle.truncate(50 * MAX_FILE_BYTES)          # 50 MiB, sparse
    import yaml
    monkeypatch.setattr(yaml, "SafeLoader", None)     # never parsed
    with pytest.raises(SessionError, match=f"the file is {50 * MAX_FILE_BYTES} bytes"):
        load_session(path, check_ops=False)


def test_text_over_the_cap_is_refused_by_parse_session_too():
    with pytest.raises(SessionError, match="at most 1048576 bytes"):
        parse_session(HEAD + "#" * MAX_FILE_BYTES, check_ops=False)


def test_the_limits_leave_a_real_session_alone():
    deep = HEAD + "runs:\n  - op: gelu\n    shape: {M: " + "9" * MAX_INT_DIGITS + ", N: 2}\n"
    session = parse_session(deep, check_ops=False)
    assert session.runs[0].shape["M"] == int("9" * MAX_INT_DIGITS)
