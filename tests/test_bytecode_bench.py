"""benchmarks/bytecode.py: the .pyc a user's pip install writes, written where missing before a
stage times start-ups (the lent GPU boxes run under PYTHONDONTWRITEBYTECODE=1)."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from benchmarks.bytecode import write_bytecode


@pytest.mark.slow  # starts a child Python
def test_missing_bytecode_is_counted_written_and_then_found(tmp_path, monkeypatch):
    package = tmp_path / "wbpkg_no_pyc"
    package.mkdir()
    for name in ("__init__.py", "mod.py"):
        (package / name).write_text("X = 1\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    first = write_bytecode(sys.executable, ("wbpkg_no_pyc", "no_such_package_here"))
    assert first["ok"] and first["folders"] == 1 and first["modules"] == 2 and first["without_bytecode"] == 2
    assert first["still_without"] == 0
    for name in ("__init__.py", "mod.py"):
        assert (tmp_path / importlib.util.cache_from_source(str(package / name))).exists()
    again = write_bytecode(sys.executable, ("wbpkg_no_pyc",))
    assert again["without_bytecode"] == 0 and again["ok"]


@pytest.mark.slow
def test_a_folder_it_cannot_write_is_reported_not_fixed(tmp_path, monkeypatch):
    package = tmp_path / "wbpkg_read_only"
    package.mkdir()
    (package / "__init__.py").write_text("X = 1\n")
    package.chmod(0o555)
    try:
        monkeypatch.setenv("PYTHONPATH", str(tmp_path))
        report = write_bytecode(sys.executable, ("wbpkg_read_only",))
    finally:
        package.chmod(0o755)
    import os
    if os.geteuid() == 0:  # root writes anyway
        assert report["ok"]
    else:
        assert not report["ok"] and report["still_without"] == 1
