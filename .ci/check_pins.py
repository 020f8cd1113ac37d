#!/usr/bin/env python3
"""Check the Makefile's torch/Triton pins against what torch's Linux x86_64 wheel requires.

A pin pair works on this CPU box even when it cannot resolve on a GPU box: torch's CPU build
requires no triton, its Linux x86_64 (CUDA) wheel on the public registry pins one exact Triton.
This script reads every `*PINS = torch==X triton==Y` line of the Makefile, fetches the metadata
of torch X's manylinux x86_64 wheels from PyPI (the PEP 658 `.metadata` file; where the index has
none, the wheel's METADATA member read by HTTP range requests: kilobytes, never the wheel) and
evaluates their `Requires-Dist: triton...` for Linux x86_64 and each CPython the project supports.

- `PINS` (make setup / make run / make test) and any other `*PINS` must resolve on a GPU box:
  a Triton outside the requirement fails the check.
- `CPU_ONLY_*PINS` are CI's extra CPU jobs (a Triton beside torch's CPU build): reported, never
  failed for not resolving on a GPU box; the note names which torch release does pair with it.
- every pinned release must exist on the index with a Linux x86_64 wheel, and the pins of the
  setup pair must satisfy pyproject.toml's own floors (else `pip install -e .` would replace them).

Exit 0: every check passed; 1: a pin cannot resolve (each problem printed); 2: the index could not
be reached or answered nonsense (nothing was checked: CI fails rather than passing blind).

    python .ci/check_pins.py [--makefile Makefile] [--pyproject pyproject.toml] [--table]
"""

from __future__ import annotations

import argparse
import io
import json
import re
import sys
import tomllib
import urllib.error
import urllib.request
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

INDEX = "https://pypi.org/simple"
PYTHONS = ("3.11", "3.12", "3.13")  # pyproject's classifiers: the CPythons a user may have
SETUP_VAR = "PINS"
CPU_ONLY_PREFIX = "CPU_ONLY_"
TIMEOUT_S = 30

class NotFound(Exception):
    pass


class Unreachable(Exception):
    pass


class Index:
    """A PEP 691 simple index over HTTP(S). Tests pass a fake with the same three methods."""

    def __init__(self, base: str = INDEX):
        self.base = base.rstrip("/")

    def _open(self, url: str, headers: dict[str, str], method: str = "GET"):
        headers = {"User-Agent": "kernel-workbench-ci-check-pins", **headers}
        try:
            return urllib.request.urlopen(urllib.request.Request(url, headers=headers, method=method),
                                          timeout=TIMEOUT_S)
        except urllib.error.HTTPError as e:
            if e.code == 404:
                raise NotFound(url) from e
            raise Unreachable(f"{url}: HTTP {e.code}") from e
        except (urllib.error.URLError, TimeoutError, OSError) as e:
            raise Unreachable(f"{url}: {getattr(e, 'reason', e)}") from e

    def project(self, name: str) -> dict:
        """The project's PEP 691 JSON page: {"files": [{"filename", "url", ...}, ...]}."""
        url = f"{self.base}/{name}/"
        with self._open(url, {"Accept": "application/vnd.pypi.simple.v1+json"}) as r:
            raw = r.read()
        try:
            data = json.loads(raw)
            if not isinstance(data["files"], list):
                raise TypeError("files is not a list")
        except (ValueError, KeyError, TypeError) as e:
            raise Unreachable(f"{url} did not answer the PEP 691 JSON simple API ({e})") from e
        return data

    def get(self, url: str, byte_range: tuple[int, int] | None = None) -> bytes:
        headers = {} if byte_range is None else {"Range": f"bytes={byte_range[0]}-{byte_range[1]}"}
        with self._open(url, headers) as r:
            return r.read()

    def size(self, url: str) -> int:
        with self._open(url, {}, "HEAD") as r:
            return int(r.headers["Content-Length"])


# --- the Makefile and pyproject -------------------------------------------------------------------

@dataclass
class PinSet:
    var: str
    pins: dict[str, str]  # name -> exact version

    @property
    def cpu_only(self) -> bool:
        return self.var.startswith(CPU_ONLY_PREFIX)


PIN_LINE = re.compile(r"^([A-Z0-9_]*PINS)\s*[:?]?=\s*(.*?)\s*(?:#.*)?$")


def read_pins(makefile_text: str) -> list[PinSet]:
    """Every `NAME_PINS = a==1 b==2` line; a token that is not `name==version` is an error."""
    found = []
    for line in makefile_text.splitlines():
        m = PIN_LINE.match(line)
        if not m:
            continue
        pins = {}
        for token in m.group(2).split():
            name, sep, version = token.partition("==")
            if not sep or not name or not version:
                raise ValueError(f"{m.group(1)}: {token!r} is not an exact pin (allowed: name==version)")
            pins[name.lower()] = version
        found.append(PinSet(m.group(1), pins))
    if not any(p.var == SETUP_VAR for p in found):
        raise ValueError(f"no `{SETUP_VAR} = ...` line in the Makefile (the pair make setup installs)")
    return found


def pyproject_requirements(pyproject_text: str) -> list[Requirement]:
    return [Requirement(r) for r in tomllib.loads(pyproject_text)["project"]["dependencies"]]


# --- the index --------------------------------------------------------------------------------------

def linux_env(python: str) -> dict[str, str]:
    return {"platform_system": "Linux", "sys_platform": "linux", "platform_machine": "x86_64",
            "os_name": "posix", "implementation_name": "cpython", "platform_python_implementation": "CPython",
            "python_version": python, "python_full_version": python + ".0", "extra": ""}


def linux_wheels(files: list[dict], project: str, version: str) -> dict[str, dict]:
    """CPython tag ('3.12') -> the file entry of `project`'s manylinux x86_64 wheel of `version`."""
    out = {}
    pat = re.compile(rf"^{re.escape(project)}-{re.escape(version)}(?:-\d+)?-cp(\d)(\d+)-cp\d+-\S*manylinux\S*x86_64\.whl$")
    for f in files:
        m = pat.match(f.get("filename", ""))
        if m:
            out.setdefault(f"{m.group(1)}.{m.group(2)}", f)
    return out


def wheel_metadata(index: Index, url: str) -> str:
    """The wheel's METADATA: PEP 658's `.metadata` file, else the zip member by range requests."""
    try:
        return index.get(url + ".metadata").decode()
    except NotFound:
        pass
    return zip_member_by_ranges(index, url, lambda n: n.endswith(".dist-info/METADATA")).decode()


class _RangeFile(io.RawIOBase):
    """A remote file read by HTTP range requests, for zipfile (which reads the end record, the
    central directory and one member: a handful of requests, kilobytes)."""

    def __init__(self, index: "Index", url: str):
        self.index, self.url, self.pos, self.size = index, url, 0, index.size(url)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = 0) -> int:
        self.pos = offset if whence == 0 else self.pos + offset if whence == 1 else self.size + offset
        return self.pos

    def readinto(self, buf) -> int:
        n = min(len(buf), self.size - self.pos)
        if n <= 0:
            return 0
        data = self.index.get(self.url, (self.pos, self.pos + n - 1))
        if len(data) != n:
            raise Unreachable(f"{self.url}: asked for {n} bytes at {self.pos}, got {len(data)} "
                              f"(the index ignores Range requests?)")
        buf[:n] = data
        self.pos += n
        return n


def zip_member_by_ranges(index: "Index", url: str, want: Callable[[str], bool]) -> bytes:
    try:
        with zipfile.ZipFile(io.BufferedReader(_RangeFile(index, url), buffer_size=1 << 16)) as z:
            names = [n for n in z.namelist() if want(n)]
            if not names:
                raise Unreachable(f"{url}: no METADATA member in the wheel")
            return z.read(names[0])
    except zipfile.BadZipFile as e:
        raise Unreachable(f"{url}: not a readable zip ({e})") from e


@dataclass
class TorchFacts:
    version: str
    triton: dict[str, SpecifierSet | None] = field(default_factory=dict)  # python -> requirement


def torch_facts(index: Index, torch_files: list[dict], version: str,
                pythons: tuple[str, ...] = PYTHONS) -> TorchFacts:
    wheels = linux_wheels(torch_files, "torch", version)
    facts = TorchFacts(version)
    for py in pythons:
        if py not in wheels:
            continue
        text = wheel_metadata(index, wheels[py]["url"])
        facts.triton[py] = triton_requirement(text, py)
    return facts


def triton_requirement(metadata_text: str, python: str) -> SpecifierSet | None:
    """The Triton specifier torch's metadata requires on Linux x86_64 under `python`, or None."""
    env = linux_env(python)
    spec = None
    for line in metadata_text.splitlines():
        if not line.lower().startswith("requires-dist:"):
            continue
        req = Requirement(line.split(":", 1)[1].strip())
        if req.name.lower() != "triton":
            continue
        if req.marker is None or req.marker.evaluate(env):
            spec = req.specifier if spec is None else SpecifierSet(f"{spec},{req.specifier}")
    return spec


# --- the checks ---------------------------------------------------------------------------------------

def _pyproject_problems(pins: PinSet, reqs: list[Requirement]) -> list[str]:
    problems = []
    env = linux_env(PYTHONS[0])
    for req in reqs:
        name = req.name.lower()
        if name not in pins.pins or (req.marker is not None and not Marker(str(req.marker)).evaluate(env)):
            continue
        if not req.specifier.contains(pins.pins[name], prereleases=True):
            problems.append(f"{pins.var}: {name}=={pins.pins[name]} is outside pyproject's `{req}`: "
                            f"`pip install -e .` would replace it")
    return problems


def check(makefile_text: str, pyproject_text: str, index: Index, table: bool = False, out=sys.stdout) -> int:
    pin_sets = read_pins(makefile_text)
    reqs = pyproject_requirements(pyproject_text)
    torch_index = index.project("torch")
    triton_index = index.project("triton")
    triton_releases = sorted({v for v in (_version(f["filename"], "triton") for f in triton_index["files"])
                              if v is not None and not v.is_prerelease})
    problems: list[str] = []
    cache: dict[str, TorchFacts] = {}

    def facts(version: str) -> TorchFacts:
        if version not in cache:
            cache[version] = torch_facts(index, torch_index["files"], version)
        return cache[version]

    for ps in pin_sets:
        torch_v, triton_v = ps.pins.get("torch"), ps.pins.get("triton")
        role = "CPU-only job" if ps.cpu_only else ("make setup / run / test" if ps.var == SETUP_VAR else "a job")
        print(f"{ps.var} ({role}): " + " ".join(f"{k}=={v}" for k, v in ps.pins.items()), file=out)
        if not ps.cpu_only:
            problems += _pyproject_problems(ps, reqs)
        if torch_v is None:
            problems.append(f"{ps.var}: no torch pin")
            continue
        tf = facts(torch_v)
        if not tf.triton:
            problems.append(f"{ps.var}: torch {torch_v} has no manylinux x86_64 wheel on {index.base} for "
                            f"CPython {', '.join(PYTHONS)}")
            continue
        if triton_v is not None and not linux_wheels(triton_index["files"], "triton", triton_v):
            problems.append(f"{ps.var}: triton {triton_v} has no manylinux x86_64 wheel on {index.base}")
        groups: dict[str, list[str]] = {}
        for py, spec in tf.triton.items():
            groups.setdefault("" if spec is None else str(spec), []).append("cp" + py.replace(".", ""))
        for spec_text, tags in groups.items():
            spec = SpecifierSet(spec_text)
            wanted = f"triton{spec_text}" if spec_text else "no triton"
            where = " ".join(tags)
            if triton_v is None or not spec_text or spec.contains(triton_v, prereleases=True):
                print(f"  {where}: torch {torch_v} requires {wanted}: resolves on a GPU box", file=out)
            elif ps.cpu_only:
                print(f"  {where}: torch {torch_v} requires {wanted}: CPU-only, installs beside torch's CPU "
                      f"build (which requires no triton), not on a GPU box", file=out)
            else:
                problems.append(f"{ps.var}: torch=={torch_v} triton=={triton_v} cannot resolve on a Linux "
                                f"x86_64 GPU box ({where}): torch's wheel requires {wanted}")
        if ps.cpu_only and triton_v is not None and triton_releases and "NEWEST" in ps.var:
            newest = str(triton_releases[-1])
            if Version(triton_v) < triton_releases[-1]:
                print(f"  note: Triton {newest} is out (this job pins {triton_v}): raise {ps.var}", file=out)
    if table:
        floor = next((s for r in reqs if r.name.lower() == "torch" for s in r.specifier if s.operator == ">="), None)
        versions = sorted({v for v in (_version(f["filename"], "torch") for f in torch_index["files"])
                           if v is not None and not v.is_prerelease and not v.local
                           and (floor is None or v >= Version(floor.version))})
        print(f"torch releases {floor or ''} and the Triton each one's Linux x86_64 wheel requires (CPython 3.12):",
              file=out)
        for v in versions:
            spec = torch_facts(index, torch_index["files"], str(v), ("3.12",)).triton.get("3.12", "?")
            print(f"  torch {v}: triton{spec if spec is not None else ' (none)'}", file=out)
    for p in problems:
        print(f"FAIL {p}", file=out)
    print("pin check: " + ("FAILED" if problems else "ok") + f" ({len(pin_sets)} pin sets against {index.base})",
          file=out)
    return 1 if problems else 0


def _version(filename: str, project: str) -> Version | None:
    m = re.match(rf"^{re.escape(project)}-([^-]+)-", filename)
    if not m or not filename.endswith(".whl"):
        return None
    try:
        return Version(m.group(1))
    except InvalidVersion:
        return None


def main(argv: list[str] | None = None, index: Index | None = None) -> int:
    here = Path(__file__).resolve().parent.parent
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--makefile", type=Path, default=here / "Makefile")
    ap.add_argument("--pyproject", type=Path, default=here / "pyproject.toml")
    ap.add_argument("--index", default=INDEX, help="a PEP 691 simple index (default: PyPI)")
    ap.add_argument("--table", action="store_true", help="also list torch releases and the Triton each requires")
    args = ap.parse_args(argv)
    try:
        return check(args.makefile.read_text(), args.pyproject.read_text(), index or Index(args.index), args.table)
    except Unreachable as e:
        print(f"pin check: FAILED, the index could not be read ({e}); nothing was checked. The check needs "
              f"network access to {args.index} (metadata only, a few hundred KB).", file=sys.stdout)
        return 2
    except ValueError as e:
        print(f"pin check: FAILED, {e}", file=sys.stdout)
        return 1


if __name__ == "__main__":
    sys.exit(main())
