"""Where a results document came from (CONTRACTS.md, "Results": `provenance`).

    {"workbench": "0.1.0", "git_sha": "abc1234", "session": "lecture06-gelu",
     "session_sha256": "...", "argv": [...], "started": "2026-11-29T14:00:00Z",
     "plugins": [{"path": "/abs/my_ops.py", "sha256": "..."}]}

git_sha is the commit of the checkout this package runs from (an editable install), or None
when it is not in a git checkout (a wheel) or git is absent; git_dirty says whether that
checkout's tracked files differ from the commit (True: the code that ran is not git_sha's alone;
None where git_sha is None). A copy of a working tree with edits (a GPU box given the tree, not
a commit) records its base commit and git_dirty true.
"""

from __future__ import annotations

import datetime as dt
import functools
import shutil
import subprocess
from pathlib import Path
from typing import Any, Iterable, Mapping

import workbench

# `plugins` (the plugin files the run used, workbench/plugins/sources.py) extends the contract's keys.
# `git_dirty` (git_state) extends them too.
PROVENANCE_KEYS = ("workbench", "git_sha", "git_dirty", "session", "session_sha256", "argv", "started", "plugins")


def utc_now_iso(now: dt.datetime | None = None) -> str:
    """UTC time as ISO 8601 with a Z, to the second: 2026-11-29T14:00:00Z."""
    now = now or dt.datetime.now(dt.timezone.utc)
    return now.astimezone(dt.timezone.utc).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


@functools.lru_cache(maxsize=1)
def git_state() -> tuple[str | None, bool | None]:
    """(short commit of the checkout holding this package, whether its tracked files differ from
    that commit), or (None, None): not a checkout, or no git. One `git status` more than the
    commit alone (~10 ms), once per process."""
    package = Path(workbench.__file__).resolve().parent
    git = shutil.which("git")
    if git is None:
        return None, None
    try:
        top = _git(git, package, "rev-parse", "--show-toplevel")
        if top is None or not (Path(top) / "workbench" / "__init__.py").resolve() == package / "__init__.py":
            return None, None  # this package is not a file of that repository (e.g. site-packages in a repo)
        sha = _git(git, package, "rev-parse", "--short=12", "HEAD")
        if sha is None:
            return None, None
        proc = subprocess.run([git, "status", "--porcelain", "--untracked-files=no"], cwd=package,
                              capture_output=True, text=True, timeout=5)
        return sha, (bool(proc.stdout.strip()) if proc.returncode == 0 else None)
    except (OSError, subprocess.TimeoutExpired):
        return None, None


def git_sha() -> str | None:
    """Short commit of the checkout holding this package, or None (not a checkout, no git)."""
    return git_state()[0]


def _git(git: str, cwd: Path, *args: str) -> str | None:
    proc = subprocess.run([git, *args], cwd=cwd, capture_output=True, text=True, timeout=5)
    return (proc.stdout.strip() or None) if proc.returncode == 0 else None


def provenance(session: str | None, *, session_sha256: str | None, argv: Iterable[str],
               started: str | None = None, plugins: list[dict] | None = None) -> dict[str, Any]:
    """The provenance record, every key present. plugins: [{"path", "sha256"}] of the plugin
    files used (None: not known to the caller; the engine fills it)."""
    sha, dirty = git_state()
    return {"workbench": workbench.__version__, "git_sha": sha, "git_dirty": dirty, "session": session,
            "session_sha256": session_sha256, "argv": list(argv), "started": started or utc_now_iso(),
            "plugins": plugins}


def fill_provenance(doc: dict[str, Any], ours: Mapping[str, Any]) -> dict[str, Any]:
    """Give `doc` a provenance with every key: the engine's values where set, else ours."""
    theirs = doc.get("provenance") or {}
    merged = {key: theirs.get(key) if theirs.get(key) is not None else ours.get(key) for key in PROVENANCE_KEYS}
    merged.update({k: v for k, v in theirs.items() if k not in merged})
    doc["provenance"] = merged
    return doc
