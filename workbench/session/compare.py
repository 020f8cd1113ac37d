"""A run's `compare: [A, B]` (CONTRACTS.md "Session file"): structure, registry checks, plain data.

    compare: [triton, pytorch]                          # labels of the run's impls, or impl names
    compare: [triton, {name: triton, rev: HEAD~3}]      # the same implementation at a git revision
    compare: [triton, {name: triton, plugin: old.py}]   # ... as registered by another plugin file

Each side is text (a label of the run's `impls`, else an implementation name of the op, `+graph`
allowed) or a mapping {name, params, label, plugin, rev}; plugin and rev exclude each other.
`[triton, triton]` is an A/A comparison: the same implementation built twice, which must come
out as "no difference". A `plugin` path is resolved like the session's `plugins`; a plugin's or a
revision's implementation names are checked when the A/B runs (they are not in this registry).
"""

from __future__ import annotations

from typing import Any

from workbench.session.model import ABSide, RunSpec
from workbench.session.settings import kind_of, suggest, unknown_keys
from workbench.session.yaml_io import Problems, child_path, show
from workbench.variants import base_name

SIDE_KEYS = ("name", "params", "label", "plugin", "rev")


def parse_compare(value: Any, path: str, problems: Problems) -> tuple[ABSide, ABSide] | None:
    """The two sides, or None (absent, or with problems recorded under `path`)."""
    if value is None:
        return None
    if not isinstance(value, list) or len(value) != 2:
        problems.add(path, f"must be a list of two implementations [A, B], got {show(value)}")
        return None
    sides = [_side(item, child_path(path, index), problems) for index, item in enumerate(value)]
    return (sides[0], sides[1]) if None not in sides else None


def _side(item: Any, path: str, problems: Problems) -> ABSide | None:
    if isinstance(item, str) and item.strip():
        return ABSide(name=item)
    if not isinstance(item, dict):
        problems.add(path, f"must be an implementation name or {{{', '.join(SIDE_KEYS)}}}, got {show(item)}")
        return None
    unknown_keys(item, path, SIDE_KEYS, problems)
    texts = {}
    for key in ("name", "label", "plugin", "rev"):
        value = item.get(key)
        if value is not None and not (isinstance(value, str) and value.strip()):
            problems.add(child_path(path, key), f"must be non-empty text, got {show(value)}")
            return None
        texts[key] = value
    params = item.get("params") or {}
    if not isinstance(params, dict) or not all(isinstance(k, str) for k in params):
        problems.add(child_path(path, "params"), f"must be a mapping of parameter names to values, got {kind_of(params)}")
        return None
    if texts["name"] is None:
        problems.add(child_path(path, "name"), "missing (required)")
        return None
    if texts["plugin"] and texts["rev"]:
        problems.add(path, "give `plugin` or `rev`, not both")
        return None
    return ABSide(name=texts["name"], params=dict(params), label=texts["label"], plugin=texts["plugin"],
                  rev=texts["rev"])


def check_compare(run: RunSpec, op: Any, path: str, problems: Problems) -> None:
    """Sides against the op: a plain side must be a label of the run's impls or an implementation
    of the op (checked here); plugin and rev sides are checked when the A/B runs."""
    if run.compare is None:
        return
    labels = [ref.display for ref in run.impls] if run.impls is not None else list(op.impls)
    allowed = list(dict.fromkeys([*labels, *op.impls]))
    for index, side in enumerate(run.compare):
        where = child_path(child_path(path, "compare"), index)
        if side.plugin or side.rev:
            continue
        if side.name in labels or base_name(side.name) in op.impls:
            continue
        name_path = child_path(where, "name") if (side.params or side.label) else where
        problems.add(name_path, f"{show(side.name)} is neither a label of this run's impls nor an "
                                f"implementation of {op.name}{suggest(side.name, allowed)}; allowed: {', '.join(allowed)}")


def compare_to_data(sides: tuple[ABSide, ABSide]) -> list:
    """Plain data for saving (text for a bare name, else a mapping of the keys that are set)."""
    out = []
    for side in sides:
        if not side.params and side.label is None and side.plugin is None and side.rev is None:
            out.append(side.name)
            continue
        data: dict[str, Any] = {"name": side.name}
        if side.params:
            data["params"] = dict(side.params)
        for key in ("label", "plugin", "rev"):
            if getattr(side, key) is not None:
                data[key] = getattr(side, key)
        out.append(data)
    return out
