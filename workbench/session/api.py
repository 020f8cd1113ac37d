"""Sessions in YAML: load (safe loader, every problem with its path and line), validate, save.

    session = load_session("my.yaml", kernels=["my_ops.py"])     # raises SessionError
    save_session(dataclasses.replace(session, name="mine"), "mine.yaml")   # atomic

The file format is CONTRACTS.md "Session file"; the model is `workbench.session.model`.
Loading runs no code from the file: a `!!python/...` tag is a problem, reported before
anything (even the session's own `plugins`) is imported. Shipped sessions are package data
of `workbench.sessions`, read through importlib.resources; they are read-only, so saving one
and its results go to the user data directory (`user_session_path`, `results_path`), and that
saved copy is what the shipped name finds from then on (`workbench.session.paths`).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any, Iterable

import yaml

from workbench.errors import WorkbenchError
from workbench.fileio import atomic_write_text
from workbench.plugins.sources import plugin_path, with_resolved_plugins
from workbench.registry import Registry, discover
from workbench.session.checks import check_runs
from workbench.session.model import Session
from workbench.session.paths import (DEFAULT_CPU_SESSION, DEFAULT_SESSION, SHIPPED_PACKAGE,
                                     SHIPPED_PREFIX, default_session_name, is_shipped,
                                     new_session_path, resolve_session_path, results_path, save_target,
                                     saved_copy, shipped_names, shipped_original, shipped_path,
                                     user_session_path)
from workbench.session.schema import build_session, session_to_data
from workbench.session.yaml_io import Problem, Problems, read_yaml

__all__ = [
    "Problem", "SessionError", "load_session", "parse_session", "session_from_data",
    "session_to_data", "dump_session", "save_session", "leading_comments", "validate_session", "load_plugins",
    "file_sha256", "shipped_names", "shipped_path", "is_shipped", "resolve_session_path",
    "default_session_name", "results_path", "user_session_path", "new_session_path", "save_target", "plugin_path",
    "with_resolved_plugins", "saved_copy", "shipped_original", "SHIPPED_PREFIX",
    "DEFAULT_SESSION", "DEFAULT_CPU_SESSION", "SHIPPED_PACKAGE",
]


class SessionError(WorkbenchError):
    """A session that cannot be used; `problems` lists every one (path, line, message)."""

    def __init__(self, problems: Iterable[Problem], source: str | None = None):
        self.problems = tuple(problems)
        self.source = source
        count = len(self.problems)
        head = f"{source}: " if source else ""
        lines = [f"{head}{count} problem{'s' if count != 1 else ''} in the session"]
        lines += [f"  {p}" for p in self.problems]
        super().__init__("\n".join(lines))


# -- loading ---------------------------------------------------------------------------------
def load_session(path: str | Path, *, kernels: Iterable[str | Path] = (), registry: Registry | None = None,
                 check_ops: bool = True) -> Session:
    """Read, parse and validate a session file.

    kernels: extra plugin paths (--kernels) loaded before validation, as are the session's own
    `plugins` (relative to the file's folder); registry: where ops are looked up (a given
    Registry is filled through `discover`, importing the plugins; default: a Registry of the
    plugins' declarations from the manifest cache, without torch: workbench/plugins/manifest.py);
    check_ops False skips the registry checks.
    Raises SessionError listing every problem (a missing or unreadable file is one problem).
    """
    path = Path(path)
    try:
        raw = read_session_bytes(path)
    except OSError as exc:
        raise SessionError([Problem("", f"cannot read the file: {exc.strerror or exc}")], str(path)) from None
    except ValueError as exc:
        raise SessionError([Problem("", str(exc))], str(path)) from None
    return parse_session(raw, source=str(path), base_dir=path.parent, kernels=kernels,
                         registry=registry, check_ops=check_ops)


def read_session_bytes(path: str | Path) -> bytes:
    """A session file's bytes: a regular file of at most MAX_FILE_BYTES, checked before and while
    reading (`/dev/zero` grew to 5.2 GB, a FIFO blocked, 100 MB of comments took 44 s: a red
    team's tries). Raises OSError, or ValueError saying what the file is instead."""
    import stat as stat_

    from workbench.session.yaml_io import MAX_FILE_BYTES, size_message

    mode = os.stat(path).st_mode
    if not stat_.S_ISREG(mode):
        kind = ("a folder" if stat_.S_ISDIR(mode) else "a FIFO (named pipe)" if stat_.S_ISFIFO(mode) else
                "a device node" if stat_.S_ISCHR(mode) or stat_.S_ISBLK(mode) else
                "a socket" if stat_.S_ISSOCK(mode) else "not a regular file")
        raise ValueError(f"{kind}: a session is a regular YAML file; refused without reading it")
    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        if size > MAX_FILE_BYTES:
            raise ValueError(size_message(size))
        raw = handle.read(MAX_FILE_BYTES + 1)  # a file still growing is cut at the cap
    if len(raw) > MAX_FILE_BYTES:
        raise ValueError(size_message(len(raw)))  # it grew while read
    return raw


def parse_session(text: str | bytes, *, source: str | None = None, base_dir: str | Path | None = None,
                  kernels: Iterable[str | Path] = (), registry: Registry | None = None,
                  check_ops: bool = True) -> Session:
    """Parse and validate session text (see load_session). Raises SessionError."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise SessionError([Problem("", f"not a text file (invalid UTF-8 at byte {exc.start})")], source) from None
    data, marks, parse_problems = read_yaml(text)
    if parse_problems:
        raise SessionError(parse_problems, source)
    return session_from_data(data, marks=marks, source=source, base_dir=base_dir, kernels=kernels,
                             registry=registry, check_ops=check_ops)


def session_from_data(data: Any, *, marks: dict[str, int] | None = None, source: str | None = None,
                      base_dir: str | Path | None = None, kernels: Iterable[str | Path] = (),
                      registry: Registry | None = None, check_ops: bool = True) -> Session:
    """A Session from plain data (a parsed YAML mapping). Raises SessionError."""
    problems = Problems(marks)
    built = build_session(data, problems)
    if built.runs and check_ops:
        registry, complete = _loaded_registry(built.plugins, problems, base_dir, kernels, registry)
        if registry is not None:
            # a plugin that failed may be what registers a run's op: those runs wait for it, the
            # others are still checked (a missing plugin hid M: -4 of a shipped op's run)
            runs = built.runs if complete else [r for r in built.runs if r[1].op in registry]
            check_runs(runs, registry, problems, plugin_failed=not complete)
        _check_compare_plugins(built.runs, base_dir, problems)  # with the plugins: check_ops only
    if problems or built.session is None:
        raise SessionError(sorted(problems.items, key=lambda p: p.line or 0), source)
    return built.session


def validate_session(session: Session, *, registry: Registry | None = None, base_dir: str | Path | None = None,
                     kernels: Iterable[str | Path] = ()) -> list[Problem]:
    """Every problem of an in-memory session (e.g. edited in the TUI); [] when it is sound."""
    try:
        session_from_data(session_to_data(session), base_dir=base_dir, kernels=kernels, registry=registry)
    except SessionError as exc:
        return list(exc.problems)
    except TypeError as exc:  # a non-plain value put into the model by code
        return [Problem("", str(exc))]
    return []


def load_plugins(plugins: Iterable[str], *, base_dir: str | Path | None = None,
                 kernels: Iterable[str | Path] = (), registry: Registry | None = None) -> Registry:
    """Discover ops: entry points, `kernels`, then the session's `plugins`.

    A plugin is a path, relative to base_dir (the session's folder), to an op file or a folder
    (of op files, or a package). Raises WorkbenchError naming the plugin that failed.
    """
    registry = _discover(kernels, registry=registry)
    for plugin in plugins:
        _load_plugin(plugin, base_dir, registry)
    return registry


def _check_compare_plugins(runs, base_dir, problems: Problems) -> None:
    """An A/B side's `plugin` file must exist (relative to the session's folder, as it is run):
    --check refuses a missing one, which the replay's A/B would fail on."""
    for index, run, _bad in runs:
        for number, side in enumerate(getattr(run, "compare", None) or ()):
            if not side.plugin or (base_dir is None and not Path(side.plugin).is_absolute()):
                continue  # text with no folder: a relative path has nothing to resolve against yet
            where = plugin_path(side.plugin, base_dir)
            if not where.exists():
                problems.add(f"runs[{index}].compare[{number}].plugin",
                             f"no such file {side.plugin!r} (looked for {where.absolute()})")


def _loaded_registry(plugins: list[str], problems: Problems, base_dir, kernels,
                     registry) -> tuple[Registry | None, bool]:
    """(the registry with every plugin that loaded, whether all did); each failure is a problem."""
    complete = True
    try:
        registry = _discover(kernels, registry=registry)
    except WorkbenchError as exc:
        problems.add("", str(exc))
        complete = False
        try:  # the session's own plugins and the runs of other ops are still checked
            registry = _discover((), registry=registry)
        except WorkbenchError:
            return None, False
    for index, plugin in enumerate(plugins):
        try:
            _load_plugin(plugin, base_dir, registry)
        except WorkbenchError as exc:
            problems.add(f"plugins[{index}]", str(exc))
            complete = False
    return registry, complete


def _load_plugin(plugin: str, base_dir: str | Path | None, registry: Registry) -> None:
    path = plugin_path(plugin, base_dir)
    if not path.exists():
        relative = base_dir is not None and not Path(plugin).expanduser().is_absolute()
        raise WorkbenchError(f"plugin {plugin!r}: no such file or folder (looked for {path.absolute()}"
                             f"{', relative to the session file' if relative else ''})")
    _discover([path], entry_points=False, registry=registry)


def _discover(paths, *, entry_points: bool = True, registry: Registry | None = None) -> Registry:
    """`registry.discover` into a given registry; without one, the declarations (no torch)."""
    if registry is not None and not getattr(registry, "declared", False):
        return discover(paths, entry_points=entry_points, registry=registry)
    from workbench.plugins.manifest import declare

    return declare(paths, entry_points=entry_points, registry=registry)


# -- saving ----------------------------------------------------------------------------------
class _BlockDumper(yaml.SafeDumper):
    """SafeDumper that indents list items under their key (`runs:\n  - op: gelu`)."""

    def increase_indent(self, flow: bool = False, indentless: bool = False):
        return super().increase_indent(flow, False)


class _Block(dict):
    """A mapping written in block style whatever it holds (settings: one key a line)."""


_BlockDumper.add_representer(_Block, lambda dumper, data: dumper.represent_mapping(
    "tag:yaml.org,2002:map", data, flow_style=False))


def dump_session(session: Session) -> str:
    """The session as YAML text: plain types, keys in the contract's order, block style except
    for lists and mappings of plain values (`impls: [manual, triton]`, `shape: {M: 64, N: 64}`,
    as the shipped sessions and people write them), settings and actions only where they differ
    from the defaults."""
    data = session_to_data(session)
    for holder in (data, *data["runs"]):
        if "settings" in holder:
            holder["settings"] = _Block(holder["settings"])
    return yaml.dump(data, Dumper=_BlockDumper, sort_keys=False, default_flow_style=None, allow_unicode=True,
                     width=100)


def save_session(session: Session, path: str | Path, header: str = "") -> Path:
    """Write the session to `path` atomically (temp file in the same folder, then rename);
    header: comment lines to put first (`leading_comments` of the file it was opened from).

    Refuses to overwrite a shipped session (package data): use `save_target` first.
    Raises WorkbenchError for a shipped path, OSError for a failed write (the old file is
    then untouched), TypeError for non-plain data in the model.
    """
    path = Path(path)
    if is_shipped(path):
        raise WorkbenchError(f"{path} is a shipped session (read-only); save a copy in the user "
                             "data directory instead (see save_target)")
    return atomic_write_text(path, header + dump_session(session))


SCHEMA_COMMENT = "# yaml-language-server: $schema="  # the YAML language server's modeline (docs/CONTRACTS.md)


def leading_comments(path: str | Path | None, target: str | Path | None = None) -> str:
    """The comment lines a session file opens with (up to its first other line), each kept as
    it is: what a save of that session keeps, the rest being data (a saved copy of a shipped
    session lost the shipped file's explanation). '' when there are none or it cannot be read.

    target: where the save writes. The schema modeline's relative path (a shipped session's
    `../docs/schemas/session.schema.json`) is then rewritten to name the same schema file from
    target's folder (_rebased_schema_line), or left out when it names no file (an installed
    wheel ships no docs/): a saved copy's modeline pointed at a file that does not exist there."""
    if path is None:
        return ""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines(keepends=True)
    except (OSError, ValueError):
        return ""
    header = []
    for line in lines:
        if not line.lstrip().startswith("#"):
            break
        if target is not None and line.startswith(SCHEMA_COMMENT):
            line = _rebased_schema_line(line[len(SCHEMA_COMMENT):].strip(), Path(path), Path(target))
        header.append(line if line.endswith("\n") or not line else line + "\n")
    return "".join(header)


def _rebased_schema_line(schema: str, source: Path, target: Path) -> str:
    """The modeline for `target` naming the schema that `schema` names from `source`: as it is
    when saved in source's folder, else the schema file's absolute path (a copy in the data
    folder must not depend on where the two folders sit); '' when that is no file. A URL or an
    absolute path is kept as it is."""
    if "://" in schema or Path(schema).is_absolute():
        return SCHEMA_COMMENT + schema
    found = (source.parent / schema).resolve()
    if not found.is_file():
        return ""
    if source.resolve().parent == target.resolve().parent:
        return SCHEMA_COMMENT + schema
    return SCHEMA_COMMENT + found.as_posix()


def file_sha256(path: str | Path) -> str:
    """sha256 of the file's bytes (provenance `session_sha256`)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


# -- shipped sessions and where files go: workbench.session.paths (no torch), re-exported here --
