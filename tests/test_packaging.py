"""pyproject lists every package the wheel must hold (a forgotten subpackage installs without its
modules: CI's wheel job would catch it late, this names it at once), and the version is written once."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CFG = tomllib.loads((ROOT / "pyproject.toml").read_text())


def _packages_on_disk() -> set[str]:
    dirs = CFG["tool"]["setuptools"]["package-dir"]
    found = set()
    for pkg, folder in dirs.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            if "__pycache__" in rel.parts:
                continue
            found.add(".".join([pkg, *rel.parts]))
    return found


def test_every_package_folder_is_listed_in_pyproject():
    listed = set(CFG["tool"]["setuptools"]["packages"])
    missing = sorted(_packages_on_disk() - listed)
    assert not missing, f"add {missing} to [tool.setuptools] packages in pyproject.toml"
    stale = sorted(listed - _packages_on_disk())
    assert not stale, f"{stale} are listed in pyproject.toml but have no __init__.py"


def test_the_version_is_written_once():
    assert "version" not in CFG["project"] and "version" in CFG["project"]["dynamic"]
    assert CFG["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "workbench.__version__"}
    text = (ROOT / "workbench" / "__init__.py").read_text()
    assert re.search(r'^__version__ = "\d+\.\d+\.\d+"', text, re.M)


def test_the_distribution_has_its_own_name_and_hints_use_it():
    assert CFG["project"]["name"] == "kernel-workbench"
    stale = []
    for folder in ("workbench", "screens", "kernels", "benchmarks", "docs", "examples"):
        for path in (ROOT / folder).rglob("*"):
            if path.suffix in (".py", ".md", ".yaml", ".sh") and re.search(
                    r"(?<![\w-])workbench\[", path.read_text(errors="replace")):
                stale.append(str(path.relative_to(ROOT)))
    assert not stale, f"install hints naming the `workbench` distribution (PyPI's is another package): {stale}"
