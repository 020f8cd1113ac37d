"""Before a replay runs: did a plugin file change since the session's earlier results were made?

A results document records the plugin files its run used (`provenance.plugins`: path and
sha256, workbench/plugins/sources.py). Replay compares them with the files now:
- the `--compare` baseline: a baseline made with other plugin code is refused (exit 2) unless
  `--force`: the comparison would be of two different kernels, not of two runs;
- the `--resume` document: likewise refused unless `--force` (its kept rows ran other code);
- otherwise the session's saved results (the TUI's NAME.results.json) and an existing `-o` file:
  a warning on stderr, before anything runs.
A document without `provenance.plugins` (made before it was recorded) is not compared.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

from rich.console import Console

from workbench.plugins.sources import FileChange, changed_files, compare_plugin_files, plugin_records


def current_records(session: Any, kernels: Iterable[str], cache_dir: Path | None = None,
                    registry: Any = None) -> list[dict]:
    """The plugin files this replay will use (--kernels, then the session's resolved plugins,
    with the kernel sources they declare: their manifests, cached, say which; then the A/B
    sides' plugin files). registry: declare_plugins' answer, where the caller has it."""
    paths = [*kernels, *session.plugins]
    registry = registry if registry is not None else declare_plugins(session, kernels, cache_dir)
    return plugin_records([*paths, *compare_plugin_files(session)], registry)  # as run_plan records them


def declare_plugins(session: Any, kernels: Iterable[str], cache_dir: Path | None = None) -> Any:
    """The declared registry of --kernels and the session's (resolved) plugins that exist
    (manifests, cached: no torch)."""
    from workbench.plugins.manifest import declare

    return declare([p for p in [*kernels, *session.plugins] if Path(p).exists()], cache_dir=cache_dir)


def changes_since(doc: dict | None, current: list[dict]) -> list[FileChange]:
    return changed_files(((doc or {}).get("provenance") or {}).get("plugins"), current)


def describe(changes: list[FileChange]) -> str:
    return "; ".join(str(c) for c in changes)


def refuse_changed(what: str, doc: dict | None, current: list[dict], force: bool, err: Console) -> bool:
    """True (after saying why) when `doc` (the --compare baseline, the --resume document) was
    made with other plugin files and `force` is not given; a warning when it is."""
    changes = changes_since(doc, current)
    if not changes:
        return False
    text = f"{what} was made with other plugin code: changed since: {describe(changes)}"
    if force:
        err.print(f"warning: {text} (--force: going on)", markup=False)
        return False
    err.print(f"error: {text}; its results ran different kernels. Give --force to go on anyway", markup=False)
    return True


def warn_changed(paths: Iterable[str | Path | None], current: list[dict], err: Console) -> None:
    """A warning for each existing results document among `paths` made with other plugin files."""
    for path in dict.fromkeys(str(p) for p in paths if p):
        doc = _read(Path(path))
        changes = changes_since(doc, current)
        if changes:
            err.print(f"warning: plugin files changed since the results in {path} were made: "
                      f"{describe(changes)}", markup=False)


def _read(path: Path) -> dict | None:
    try:
        doc = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def warn_empty(registry: Any, err: Console) -> list[str]:
    """A warning on stderr for each plugin source of `registry` (declared: workbench/plugins/manifest.py)
    that loaded but registers no op and no implementation (an empty file, the wrong file: never
    taken silently); returns their keys."""
    from workbench.plugins.manifest import empty_source_note, empty_sources

    empty = empty_sources(registry)
    for key in empty:
        err.print(f"warning: {empty_source_note(key)}", markup=False)
    return empty
