"""`workbench --check FILE`: validate a session only; every problem at once, exit 0 or 2."""

from __future__ import annotations

import argparse
import json
from typing import Any

from rich.console import Console

from workbench.cli.common import EXIT_OK, EXIT_USAGE, Env, check_output_plugins, print_problems, write_output


def run_check(args: argparse.Namespace, env: Env, err: Console) -> int:
    from pathlib import Path

    from workbench.session.api import (SessionError, load_session, resolve_session_path, shipped_original,
                                   with_resolved_plugins)

    path = resolve_session_path(args.check, env.data_dir)
    if shipped_original(path, env.data_dir) and not Path(args.check).expanduser().exists():  # as --replay says it
        err.print(f"{args.check}: your saved copy {path} (shipped:{args.check} checks the shipped original)",
                  markup=False)
    from workbench.plugin_trust import refusal, untrusted_plugins

    untrusted = untrusted_plugins(path, bool(getattr(args, "trust_plugins", False)))
    if untrusted:  # nothing imported: the plugins are code, and --check promises validation only
        if args.format == "json":
            write_output(json.dumps({"ok": False, "session": str(path), "untrusted_plugins": untrusted,
                                     "problems": [{"path": "plugins", "message": refusal(path, untrusted)}]},
                                    indent=2) + "\n", args, env)
        err.print(refusal(path, untrusted), markup=False)
        return EXIT_USAGE
    try:
        session = load_session(path, kernels=args.kernels)
    except SessionError as exc:
        if args.format == "json":
            write_output(json.dumps({"ok": False, "session": str(path),
                                     "problems": [p.as_dict() for p in exc.problems]}, indent=2) + "\n", args, env)
        elif args.output is not None:  # the verdict goes to -o whatever it is (stdout stays empty)
            write_output(str(exc) + "\n", args, env)
        print_problems(exc, err)
        _say_written(args, err, f"{len(exc.problems)} problem(s)")
        return EXIT_USAGE
    resolved = with_resolved_plugins(session, path.parent)
    check_output_plugins(args.output, resolved.plugins)  # before the verdict is written over a plugin
    rows = len(session_row_keys(resolved, args.kernels))
    from workbench.cli.plugin_check import warn_empty
    from workbench.plugins.manifest import declare

    declared = declare([*args.kernels, *resolved.plugins], cache_dir=env.cache_dir)
    warn_empty(declared, err)
    for line in dtype_warnings(session, declared):  # rows that can never run here or anywhere
        err.print(f"warning: {line}", markup=False)
    if args.format == "json":
        write_output(json.dumps({"ok": True, "session": str(path), "name": session.name,
                                 "runs": len(session.runs), "rows": rows, "problems": []}, indent=2) + "\n", args, env)
    else:
        write_output(f"ok: {path}: session {session.name!r}, {len(session.runs)} run(s), {rows} row(s)\n", args, env)
    _say_written(args, err, f"ok, {rows} row(s)")
    return EXIT_OK


def _say_written(args: argparse.Namespace, err: Console, verdict: str) -> None:
    """With -o the verdict is in the file: the terminal says where (with -o and no other line,
    nothing at all would show)."""
    if args.output is not None:
        err.print(f"check written to {args.output} ({verdict})", markup=False)


def session_row_keys(session, kernels=()) -> list:
    """The key of every row the session asks for, in document order (engine/rows.row_keys);
    `impls: all` counted from the ops' declarations (workbench/plugins/manifest.py: cached, no torch),
    with --kernels `kernels` and the session's own plugins (absolute, as run_plan gets them:
    the caller resolves them against the session's folder)."""
    from workbench.engine.rows import row_keys
    from workbench.plugins.manifest import declare

    registry: list[Any] = []

    def registered(op: str):
        if not registry:  # only a run with `impls: all` needs the declarations
            registry.append(declare([*kernels, *session.plugins]))
        return registry[0].op(op).impls
    return row_keys(session, registered)


def dtype_warnings(session: Any, registry: Any) -> list[str]:
    """`runs[I]: IMPL supports D only, not DTYPE: its row will be unavailable` for every named
    implementation that does not support its run's dtype (the registry's declarations, no torch):
    such a row can run on no machine. `impls: all`, a default dtype and unknown names are left to
    the other checks."""
    from workbench.dtypes import DType
    from workbench.errors import WorkbenchError

    lines = []
    for index, run in enumerate(session.runs):
        if not run.impls or not run.dtype:
            continue
        try:
            impls, dtype = registry.op(run.op).impls, DType(run.dtype)
        except (WorkbenchError, ValueError):  # an unknown op or dtype: the session's own check says so
            continue
        for ref in run.impls:
            impl = impls.get(ref.name)
            if impl is not None and not impl.supports(dtype):
                allowed = ", ".join(d.value for d in impl.dtypes or ())
                lines.append(f"runs[{index}]: {run.op} {ref.display} supports {allowed} only, not {dtype.value}: "
                             "its row will be unavailable")
    return lines
