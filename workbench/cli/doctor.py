"""`workbench --list` (ops, implementations, availability per action and why) and
`workbench --doctor` (GPU, versions, tools, ceilings cache, bars: peaks and references, the
kernels' tuning cache for this device, colour system, paths, the start-up packages' bytecode).
"""

from __future__ import annotations

import argparse
import csv
import importlib.metadata
import io
import json
import platform
import shutil
import subprocess
import sys
from typing import Any

from rich import box
from rich.table import Table
from rich.text import Text

from workbench.cli.common import EXIT_OK, Env, output_style, write_output
from workbench.registry import Action

ACTIONS = tuple(a.value for a in Action)
PACKAGES = ("torch", "triton", "textual", "textual-plotext", "rich", "pyyaml", "platformdirs", "numpy",
            "nvidia-ml-py", "ninja")


# -- --list ----------------------------------------------------------------------------------
def inventory(kernels: list[str], device: str, cache_dir=None) -> dict[str, Any]:
    """Every op and implementation with availability per action on this machine (from the
    declarations in the manifest cache and NVML: no torch, workbench/plugins/manifest.py)."""
    from workbench.machine import note, probe, unavailable_reason
    from workbench.plugins.manifest import declare, empty_sources
    from workbench.session.checks import math_problem

    registry = declare(kernels, cache_dir=cache_dir)
    machine = probe()
    ops = []
    for name in sorted(registry.ops):
        op = registry.op(name)
        default = op.spec()
        dtype = getattr(default, "dtype", None)
        impls = []
        for impl in op.impls.values():
            available = {a: unavailable_reason(impl, a, machine, dtype=dtype, device=device) for a in ACTIONS}
            unchecked = math_problem(op, impl)  # --check refuses a row of it, whatever its actions
            available = {a: reason or unchecked for a, reason in available.items()}
            described = impl.describe()
            impls.append({
                **described, "dtypes": [d.value for d in (impl.dtypes or op.dtypes)],
                "interpreter_dtypes": (described["source"] or {}).get("interpreter_dtypes"),
                "unavailable": available, "note": note(impl, machine, device) or None,
            })
        ops.append({"name": op.name, "description": op.description, "shape": default.shape,
                    "dtype": dtype.value if dtype is not None else None, "dtypes": [d.value for d in op.dtypes],
                    "impls": impls})
    return {"machine": {"has_cuda": machine.has_cuda, "device_name": machine.device_name, "nvcc": machine.nvcc,
                        "triton": machine.triton, "triton_interpreted": machine.triton_interpreted,
                        "ninja": machine.ninja, "device": device},
            "sources": list(registry.loaded_sources), "ops": ops,
            "empty_sources": empty_sources(registry)}  # loaded, but declared nothing


def run_list(args: argparse.Namespace, env: Env) -> int:
    from workbench.plugins.manifest import empty_source_note

    data = inventory(args.kernels, args.device or "auto", env.cache_dir)
    for source in data["empty_sources"]:  # never taken silently
        env.console().print(f"warning: {empty_source_note(source)}", markup=False)
    if args.format == "json":
        write_output(json.dumps(data, indent=2) + "\n", args, env)
    elif args.format == "csv":
        write_output(_list_csv(data), args, env)
    else:
        write_output(_render(_list_tables(data), env, args), args, env)
    _say_written(args, env, "list")
    return EXIT_OK


def _say_written(args: argparse.Namespace, env: Env, what: str) -> None:
    """'list written to PATH (json)' on stderr after -o PATH, as --check, --schema and --replay say
    (with -o and nothing else printed the terminal said nothing at all)."""
    if args.output is not None:
        env.console().print(f"{what} written to {args.output} ({args.format})", markup=False)


def _list_csv(data: dict[str, Any]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["op", "impl", "kind", "math", "params", "dtypes", *(f"{a}.unavailable" for a in ACTIONS), "note"])
    for op in data["ops"]:
        for impl in op["impls"]:
            writer.writerow([op["name"], impl["name"], impl["kind"], impl["math"], json.dumps(impl["params"]),
                             " ".join(impl["dtypes"]), *(impl["unavailable"][a] or "" for a in ACTIONS),
                             impl["note"] or ""])
    return buffer.getvalue()


def _list_tables(data: dict[str, Any]) -> list:
    """One table per op that fits 80 columns: a line per implementation, where only the notes
    column (params, notes, why an action is unavailable) wraps. The kind is the name's first
    part (CONTRACTS.md "Implementations"), so it is left to --format json/csv."""
    m = data["machine"]
    head = (f"GPU: {m['device_name'] or 'none'} · nvcc: {m['nvcc'] or 'not found'} · "
            f"Triton: {'interpreter only' if m['triton_interpreted'] else ('yes' if m['triton'] else 'not installed')}"
            f" · device setting: {m['device']}")
    items: list = [Text(head, "dim")]
    for op in data["ops"]:
        shape = " ".join(f"{k}={v}" for k, v in (op["shape"] or {}).items())
        items.append(Text(""))
        items.append(Text.assemble((op["name"], "bold"), f" — {op['description']} ({shape}, {op['dtype']}; "
                                   f"dtypes {', '.join(op['dtypes'])})"))
        items.append(_impl_table(op))
    return items


def _impl_table(op: dict[str, Any]) -> Table:
    with_math = any(impl["math"] != "default" for impl in op["impls"])
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True, header_style="bold")
    fixed = ["impl", *(["math"] if with_math else []), *ACTIONS]
    for col in fixed:  # never wrapped or cut: every cell is one word
        table.add_column(col, no_wrap=True, overflow="ignore")
    table.add_column("notes", overflow="fold", ratio=1)
    for impl in op["impls"]:
        reasons = [impl["unavailable"][a] for a in ACTIONS]
        cells = [Text("yes", "green") if r is None else Text("no", "dim") for r in reasons]
        why = "; ".join(dict.fromkeys(_which(r, reasons) for r in reasons if r))
        params = " ".join(f"{k}={v}" for k, v in impl["params"].items())
        notes = "; ".join(x for x in (params, impl["note"], why) if x)
        table.add_row(impl["name"], *([impl["math"]] if with_math else []), *cells, notes)
    return table


def _which(reason: str, reasons: list[str | None]) -> str:
    """A reason that holds for the ptx action only names it ("ptx: no source declared")."""
    only_ptx = [a for a, r in zip(ACTIONS, reasons) if r == reason] == ["ptx"]
    return f"ptx: {reason}" if only_ptx else reason


# -- --doctor --------------------------------------------------------------------------------
def diagnose(env: Env, kernels: list[str]) -> dict[str, Any]:
    from workbench.machine import probe

    machine = probe()
    return {
        "workbench": _workbench_info(),
        "python": {"version": platform.python_version(), "executable": sys.executable,
                   "platform": platform.platform()},
        "versions": {name: _version(name) for name in PACKAGES},
        "gpu": _gpu_info(machine, env),
        "tools": {"nvcc": machine.nvcc, "nvcc_version": _nvcc_version(machine.nvcc),
                  "ninja": shutil.which("ninja"), "ninja_importable": machine.ninja,
                  "triton": machine.triton, "triton_interpreted": machine.triton_interpreted},
        "ceilings": _ceilings(env),
        "bars": _bars(machine, env),
        "tuning": _tuning(machine, env),
        "colour": _colour(env),
        "paths": _paths(env),
        "bytecode": _bytecode(),
    }


def run_doctor(args: argparse.Namespace, env: Env) -> int:
    data = diagnose(env, args.kernels)
    if args.format == "json":
        write_output(json.dumps(data, indent=2, default=str) + "\n", args, env)
    else:
        write_output(_render(_doctor_tables(data), env, args), args, env)
    _say_written(args, env, "doctor report")
    return EXIT_OK


def _workbench_info() -> dict[str, Any]:
    import workbench
    from workbench.results.provenance import git_sha

    return {"version": workbench.__version__, "git_sha": git_sha(), "package": workbench.__file__}


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _gpu_info(machine, env: Env) -> dict[str, Any]:
    """NVML's view (no torch here), then the worker's: torch's CUDA, SM count, L2."""
    from workbench.machine import nvml_gpus

    gpus = nvml_gpus()
    info: dict[str, Any] = {"available": machine.has_cuda, "name": machine.device_name, "count": len(gpus),
                            "memory_bytes": gpus[0].memory_bytes if gpus else None,
                            "driver": gpus[0].driver if gpus else _driver_version()}
    info.update(_worker_view(env, machine.has_cuda))
    return info


def _worker_view(env: Env, has_cuda: bool) -> dict[str, Any]:
    """What a worker's torch sees (one worker started and stopped; its start is the cost)."""
    from workbench.engine.plan import new_pool
    from workbench.engine.options import RunOptions
    from workbench.engine.protocol import WorkerKey
    from workbench.engine.supervisor import query

    key = WorkerKey(interpret=False, plugin_paths=(), device="cuda:0" if has_cuda else "cpu")
    try:
        with new_pool(RunOptions(cache_dir=env.cache_dir, warm_spare=False)) as pool:
            _answers, facts = query(pool, key, [])
    except Exception as exc:  # a broken torch install: say so, do not fail the doctor
        return {"torch_cuda": None, "torch_sees_cuda": None, "worker_error": str(exc)}
    view = {"torch_cuda": facts.cuda_version, "torch_sees_cuda": facts.has_cuda}
    props = facts.device_info or {}
    view.update({k: props.get(k) for k in ("sm_count", "l2_bytes") if props})
    return view


def _driver_version() -> str | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            version = pynvml.nvmlSystemGetDriverVersion()
        finally:
            pynvml.nvmlShutdown()
        return version.decode() if isinstance(version, bytes) else str(version)
    except Exception:  # no NVML, no driver: say nothing rather than fail the doctor
        return None


def _nvcc_version(nvcc: str | None) -> str | None:
    if nvcc is None:
        return None
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    lines = [line for line in out.splitlines() if "release" in line]
    return lines[-1].strip() if lines else None


def _ceilings(env: Env) -> dict[str, Any]:
    """The measured-ceilings cache (engine/ceilings.py): its path and contents."""
    from workbench.engine.measure.ceilings import CeilingCache

    cache = CeilingCache(env.cache_dir)
    contents = None
    if cache.path.is_file():
        try:
            contents = json.loads(cache.path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            contents = f"unreadable: {exc}"
    return {"path": str(cache.path), "exists": cache.path.is_file(), "contents": contents}


def _bars(machine, env: Env) -> dict[str, Any]:
    """This GPU's physical peaks and cached references (workbench/bars_view.py)."""
    from workbench.bars_view import bars_summary

    return bars_summary(machine.device_name, _driver_version() if machine.has_cuda else None, env.cache_dir)


def _tuning(machine, env: Env) -> dict[str, Any]:
    """The kernels' tuned choices cached for this GPU (workbench/tuning_view.py)."""
    from workbench.tuning_view import tuning_summary

    return tuning_summary(env.cache_dir, machine.device_name if machine.has_cuda else None)


def _colour(env: Env) -> dict[str, Any]:
    return {"color_system": env.console().color_system, "no_color": env.no_color,
            "stdout_tty": env.stdout_tty, "stderr_tty": env.stderr_tty}


def _paths(env: Env) -> dict[str, Any]:
    from workbench.session.api import shipped_names, shipped_path

    names = shipped_names()
    return {"config": str(env.config_dir), "data": str(env.data_dir), "cache": str(env.cache_dir),
            "shipped_sessions": str(shipped_path(names[0]).parent) if names else None,
            "shipped_session_names": names}


def _bytecode() -> dict[str, Any]:
    """Whether the worker's start-up packages have bytecode and may write it (workbench/bytecode.py):
    without either, every worker start compiles torch from source."""
    from workbench.bytecode import bytecode_report

    report = bytecode_report()
    packages = report.pop("packages")
    lines = {name: f"{info['without_bytecode']} of {info['modules']} modules without .pyc"
                   f"{'' if info['may_write'] else ', none written here'} ({info['folder']})"
             for name, info in packages.items()}
    return {**report, **lines}


def _doctor_tables(data: dict[str, Any]) -> list:
    items = []
    for section in ("workbench", "python", "versions", "gpu", "tools", "ceilings", "bars", "tuning", "colour", "paths",
                    "bytecode"):
        if section not in data:  # a section this doctor's data lacks (a test's, an older one's)
            continue
        table = Table(title=section, title_justify="left", show_header=False)
        table.add_column("key", style="bold")
        table.add_column("value", overflow="fold")
        for key, value in data[section].items():
            shown = json.dumps(value, default=str) if isinstance(value, (dict, list)) else (
                "-" if value is None else str(value))
            if section == "tuning" and key == "this_device":  # one cached choice a line
                shown = "\n".join(value) if value else "- (none cached for this device yet)"
            table.add_row(key, shown)
        items.append(table)
    return items


def _render(items: list, env: Env, args: argparse.Namespace) -> str:
    from rich.console import Console

    width, color = output_style(env, args)
    console = Console(file=io.StringIO(), width=width, highlight=False, force_terminal=color,
                      no_color=not color, color_system="auto" if color else None)
    for item in items:
        console.print(item)
    return "\n".join(line.rstrip() for line in console.file.getvalue().splitlines()) + "\n"
