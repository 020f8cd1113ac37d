"""CI's pin check (.ci/check_pins.py) against a fake index: fake torch wheel metadata, no network."""

from __future__ import annotations

import importlib.util
import io
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("check_pins", ROOT / ".ci" / "check_pins.py")
check_pins = importlib.util.module_from_spec(_spec)
sys.modules["check_pins"] = check_pins
_spec.loader.exec_module(check_pins)

PYPROJECT = """
[project]
name = "x"
dependencies = ["torch>=2.11", "triton>=3.6; sys_platform == 'linux'", "rich>=14"]
"""

TORCH_213 = """Metadata-Version: 2.4
Name: torch
Version: 2.13.0
Requires-Dist: filelock
Requires-Dist: triton==3.7.1; platform_system == "Linux" and python_version < "3.15"
Requires-Dist: optree>=0.13.0; extra == "optree"
"""
TORCH_211 = TORCH_213.replace("2.13.0", "2.11.0").replace(
    'triton==3.7.1; platform_system == "Linux" and python_version < "3.15"', 'triton==3.6.0; platform_system == "Linux"')


def makefile(pins: str, *extra: str) -> str:
    return "\n".join(["# pins", f"PINS = {pins}", *extra, "setup:", "\techo"])


def wheel_zip(metadata: str, version: str) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("torch/__init__.py", "x = 1\n" * 5000)
        z.writestr(f"torch-{version}.dist-info/METADATA", metadata)
        z.writestr(f"torch-{version}.dist-info/RECORD", "")
    return buf.getvalue()


class FakeIndex:
    """torch 2.11.0 and 2.13.0 (cp311-cp313 manylinux x86_64 + a macOS wheel), triton 3.6.0-3.9.0.
    `pep658=False` serves no .metadata files, so the check must read the wheel by ranges."""

    base = "https://fake.invalid/simple"

    def __init__(self, pep658: bool = True, unreachable: bool = False):
        self.pep658, self.unreachable = pep658, unreachable
        self.blobs: dict[str, bytes] = {}
        self.requests: list[tuple[str, object]] = []
        self.torch_files, self.triton_files = [], []
        for version, meta in (("2.11.0", TORCH_211), ("2.13.0", TORCH_213)):
            for py in ("311", "312", "313"):
                name = f"torch-{version}-cp{py}-cp{py}-manylinux_2_28_x86_64.whl"
                url = f"https://files.invalid/{name}"
                self.torch_files.append({"filename": name, "url": url})
                self.blobs[url] = wheel_zip(meta, version)
                if pep658:
                    self.blobs[url + ".metadata"] = meta.encode()
            self.torch_files.append({"filename": f"torch-{version}-cp312-none-macosx_11_0_arm64.whl",
                                     "url": "https://files.invalid/mac.whl"})
        for version in ("3.6.0", "3.7.1", "3.8.0", "3.9.0"):
            name = f"triton-{version}-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl"
            self.triton_files.append({"filename": name, "url": f"https://files.invalid/{name}"})

    def project(self, name):
        if self.unreachable:
            raise check_pins.Unreachable(f"{self.base}/{name}/: [Errno -2] Name or service not known")
        return {"files": {"torch": self.torch_files, "triton": self.triton_files}[name]}

    def get(self, url, byte_range=None):
        self.requests.append((url, byte_range))
        if url not in self.blobs:
            raise check_pins.NotFound(url)
        blob = self.blobs[url]
        return blob if byte_range is None else blob[byte_range[0]:byte_range[1] + 1]

    def size(self, url):
        return len(self.blobs[url])


def run(make: str, index: FakeIndex, pyproject: str = PYPROJECT) -> tuple[int, str]:
    out = io.StringIO()
    rc = check_pins.check(make, pyproject, index, out=out)
    return rc, out.getvalue()


def test_a_setup_pair_torch_refuses_fails_naming_the_requirement():
    rc, text = run(makefile("torch==2.13.0 triton==3.6.0"), FakeIndex())
    assert rc == 1
    assert "FAIL PINS: torch==2.13.0 triton==3.6.0 cannot resolve on a Linux x86_64 GPU box" in text
    assert "requires triton==3.7.1" in text


def test_the_pair_torch_requires_passes():
    rc, text = run(makefile("torch==2.13.0 triton==3.7.1"), FakeIndex())
    assert rc == 0, text
    assert "cp311 cp312 cp313: torch 2.13.0 requires triton==3.7.1: resolves on a GPU box" in text


def test_cpu_only_pairs_are_reported_not_failed_and_newest_is_nagged():
    make = makefile("torch==2.11.0 triton==3.6.0", "CPU_ONLY_NEWEST_PINS = torch==2.13.0 triton==3.8.0")
    rc, text = run(make, FakeIndex())
    assert rc == 0, text
    assert "CPU_ONLY_NEWEST_PINS (CPU-only job)" in text and "not on a GPU box" in text
    assert "Triton 3.9.0 is out (this job pins 3.8.0)" in text


def test_other_pin_sets_must_resolve_too():
    rc, text = run(makefile("torch==2.13.0 triton==3.7.1", "NEWEST_PINS = torch==2.13.0 triton==3.9.0"), FakeIndex())
    assert rc == 1
    assert "FAIL NEWEST_PINS: torch==2.13.0 triton==3.9.0" in text


def test_without_pep658_metadata_the_wheel_is_read_by_ranges_only():
    index = FakeIndex(pep658=False)
    rc, text = run(makefile("torch==2.13.0 triton==3.7.1"), index)
    assert rc == 0, text
    wheel_reads = [r for u, r in index.requests if u.endswith(".whl")]
    assert wheel_reads and all(r is not None for r in wheel_reads), "a wheel was downloaded whole"


def test_missing_releases_fail():
    rc, text = run(makefile("torch==2.99.0 triton==3.7.1"), FakeIndex())
    assert rc == 1 and "torch 2.99.0 has no manylinux x86_64 wheel" in text
    rc, text = run(makefile("torch==2.13.0 triton==3.7.1", "CPU_ONLY_X_PINS = torch==2.13.0 triton==3.5.9"),
                   FakeIndex())
    assert rc == 1 and "triton 3.5.9 has no manylinux x86_64 wheel" in text


def test_setup_pins_below_pyproject_floors_fail():
    rc, text = run(makefile("torch==2.11.0 triton==3.6.0"), FakeIndex(),
                   PYPROJECT.replace("torch>=2.11", "torch>=2.12"))
    assert rc == 1 and "torch==2.11.0 is outside pyproject's `torch>=2.12`" in text


def test_unreachable_index_fails_and_says_nothing_was_checked(tmp_path, capsys):
    (tmp_path / "Makefile").write_text(makefile("torch==2.13.0 triton==3.7.1"))
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    rc = check_pins.main(["--makefile", str(tmp_path / "Makefile"), "--pyproject", str(tmp_path / "pyproject.toml")],
                         index=FakeIndex(unreachable=True))
    assert rc == 2
    assert "the index could not be read" in capsys.readouterr().out


@pytest.mark.parametrize("line", ["PINS = torch>=2.13 triton==3.7.1", "PINS = torch==2.13.0 triton"])
def test_a_pin_that_is_not_exact_is_refused_naming_it(line):
    with pytest.raises(ValueError, match="is not an exact pin"):
        check_pins.read_pins(line)


def test_the_projects_makefile_has_the_form_the_check_reads():
    sets = {p.var: p for p in check_pins.read_pins((ROOT / "Makefile").read_text())}
    assert set(sets["PINS"].pins) == {"torch", "triton"}
    assert not sets["PINS"].cpu_only
    assert any(p.cpu_only for p in sets.values())
