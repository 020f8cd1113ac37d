"""workbench/bytecode.py: the start-up packages' bytecode, counted without importing them, and
the one line a daemon's start says when torch is compiled from source at every start."""

from __future__ import annotations

import importlib
import py_compile
import sys
from pathlib import Path

import pytest

from workbench import bytecode


def _package(root: Path, name: str, modules: list[str], compiled: list[str]) -> Path:
    folder = root / name
    for rel in modules:
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("X = 1\n")
    for rel in compiled:
        py_compile.compile(str(folder / rel), cfile=importlib.util.cache_from_source(str(folder / rel)))
    return folder


@pytest.fixture
def site(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    return tmp_path


def test_report_counts_modules_without_bytecode_and_names_the_fix(site, monkeypatch):
    folder = _package(site, "wbfakepkg", ["__init__.py", "a.py", "sub/__init__.py", "sub/b.py"], ["__init__.py"])
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    report = bytecode.bytecode_report(("wbfakepkg", "wb_not_installed_pkg"))
    info = report["packages"]["wbfakepkg"]
    assert (info["modules"], info["without_bytecode"], info["may_write"]) == (4, 3, False)
    assert "wb_not_installed_pkg" not in report["packages"]
    assert report["slow_starts"] == ["wbfakepkg"]
    assert report["fix"].endswith(f"-m compileall -q {folder}")
    assert "wbfakepkg" not in sys.modules  # found, never imported


def test_writable_or_compiled_packages_are_not_slow(site, monkeypatch):
    _package(site, "wbfakepkg2", ["__init__.py", "a.py"], [])
    monkeypatch.setattr(sys, "dont_write_bytecode", False)  # the first import writes it
    assert bytecode.bytecode_report(("wbfakepkg2",))["slow_starts"] == []
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    assert bytecode.bytecode_report(("wbfakepkg2",))["slow_starts"] == ["wbfakepkg2"]
    # one module in 11 without bytecode (under SLOW_SHARE) is not a slow start
    names = ["__init__.py", *[f"m{i}.py" for i in range(10)]]
    _package(site, "wbfakepkg3", names, names[:-1])
    assert bytecode.bytecode_report(("wbfakepkg3",))["slow_starts"] == []


def test_dotted_names_are_refused():
    with pytest.raises(ValueError, match="torch._dynamo"):
        bytecode.bytecode_report(("torch._dynamo",))


def test_slow_start_note_only_when_torch_is_compiled_at_every_start(site, monkeypatch):
    folder = _package(site, "faketorch", list(bytecode.SAMPLE), [])
    monkeypatch.setattr(bytecode, "_package_folder", lambda name: folder if name == "torch" else None)
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    note = bytecode.slow_start_note()
    assert note is not None and "PYTHONDONTWRITEBYTECODE" in note and f"compileall -q {folder}" in note
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    assert bytecode.slow_start_note() is None  # the first start writes it
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    for rel in bytecode.SAMPLE:
        py_compile.compile(str(folder / rel), cfile=importlib.util.cache_from_source(str(folder / rel)))
    assert bytecode.slow_start_note() is None
    monkeypatch.setattr(bytecode, "_package_folder", lambda name: None)
    assert bytecode.slow_start_note() is None  # no torch: nothing to say


def test_doctor_has_a_bytecode_section(monkeypatch):
    from workbench.cli import doctor

    section = doctor._bytecode()
    assert {"dont_write_bytecode", "slow_starts", "fix"} <= set(section)


def test_a_daemon_start_says_the_slow_start_in_a_second_line(monkeypatch):
    from workbench.engine.daemon import client

    said: list[str] = []
    monkeypatch.setattr(client, "slow_start_note", lambda: "torch here has no bytecode")
    client._say_started(said.append, "started a workbench daemon (pid 1)")
    assert said == ["started a workbench daemon (pid 1)", "torch here has no bytecode"]
    said.clear()
    monkeypatch.setattr(client, "slow_start_note", lambda: None)
    client._say_started(said.append, "started a workbench daemon (pid 1)")
    assert said == ["started a workbench daemon (pid 1)"]
