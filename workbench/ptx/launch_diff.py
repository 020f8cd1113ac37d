"""Launch differences: the same kernel under two specialisations or two configs.

    spec = ttir_specialisation(ttir)      # which specialisation this compile is
    diff = diff_records(ptx_a, ptx_b)     # what changed, line by line

The JIT specialises a launch on its arguments (a pointer or an integer divisible by 16 gets
`tt.divisibility = 16`, an integer equal to 1 becomes a constant); the kernel's TTIR signature
records the outcome, for a launched kernel and an ahead-of-time one alike, so it is read from
there (`tt.func public @k(%n_cols: i32 {tt.divisibility = 16 : i32} loc(...), ...)`). The
lecture's case: a softmax over 1000 columns cannot prove 16-byte alignment of its rows and loads
one element at a time (`ld.global.b32`), over 1024 columns it loads 16 bytes (`ld.global.v4`).
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from workbench.ptx.irlocs import split_top

_FUNC = re.compile(r"\btt\.func\s+(?:public\s+|private\s+)?@[\w$.]+\(")
_ARG = re.compile(r"^%([\w$.]+)\s*:\s*(.*?)\s*(?:\{([^}]*)\})?\s*(?:loc\(.*)?$")
_DIVISIBILITY = re.compile(r"tt\.divisibility\s*=\s*(\d+)")


def _signature_text(ttir: str) -> str | None:
    m = _FUNC.search(ttir)
    if not m:
        return None
    depth, start = 1, m.end()
    for i in range(start, len(ttir)):
        depth += (ttir[i] == "(") - (ttir[i] == ")")
        if depth == 0:
            return ttir[start:i]
    return None


def ttir_specialisation(ttir: str | None) -> dict[str, dict[str, Any]]:
    """Argument name -> {"type": "i32" | "!tt.ptr<f32>" | ..., "divisibility": 16 or None} for
    every runtime argument of the kernel (arguments specialised to constants are not there)."""
    text = _signature_text(ttir or "")
    found: dict[str, dict[str, Any]] = {}
    for arg in split_top(text, ",") if text else ():
        m = _ARG.match(arg)
        if m:
            div = _DIVISIBILITY.search(m.group(3) or "")
            found[m.group(1)] = {"type": m.group(2), "divisibility": int(div.group(1)) if div else None}
    return found


def _changed(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, list[int]]:
    return {k: [a.get(k, 0), b.get(k, 0)] for k in sorted(set(a) | set(b)) if a.get(k, 0) != b.get(k, 0)}


def diff_kernels(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    """What differs between two record entries of one kernel (CONTRACTS `ptx.kernels[i]` with
    `source_map` and `specialisation`):

    {"specialisation": [{"arg", "a", "b"}]  arguments whose type or divisibility differ,
     "counts": {key: [a, b]}                 whole-kernel counts that differ,
     "lines": [{"source_line", "a", "b", "changed": {key: [a, b]}}]  per source line, where the
                                             line's PTX counts differ (a, b: the two counts)}
    """
    spec_a, spec_b = a.get("specialisation") or {}, b.get("specialisation") or {}
    spec = [{"arg": name, "a": spec_a.get(name), "b": spec_b.get(name)}
            for name in dict.fromkeys([*spec_a, *spec_b]) if spec_a.get(name) != spec_b.get(name)]
    lines_a = {e["source_line"]: e.get("counts") or {} for e in a.get("source_map") or ()}
    lines_b = {e["source_line"]: e.get("counts") or {} for e in b.get("source_map") or ()}
    lines = []
    for line in sorted(set(lines_a) | set(lines_b)):
        changed = _changed(lines_a.get(line, {}), lines_b.get(line, {}))
        if changed:
            lines.append({"source_line": line, "a": lines_a.get(line, {}), "b": lines_b.get(line, {}),
                          "changed": changed})
    return {"specialisation": spec, "counts": _changed(a.get("counts") or {}, b.get("counts") or {}),
            "lines": lines}


def diff_records(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    """diff_kernels for each kernel name the two `ptx` records share, plus where each came from
    (`source`: aot | launched | ...) and the config keys that differ."""
    config_a, config_b = a.get("config") or {}, b.get("config") or {}
    kernels_b = {k.get("name"): k for k in b.get("kernels") or ()}
    return {
        "source": [a.get("source"), b.get("source")],
        "config": {k: [config_a.get(k), config_b.get(k)] for k in dict.fromkeys([*config_a, *config_b])
                   if config_a.get(k) != config_b.get(k)},
        "kernels": {k["name"]: diff_kernels(k, kernels_b[k["name"]])
                    for k in a.get("kernels") or () if k.get("name") in kernels_b},
    }


def line_summary(changed: Mapping[str, list[int]]) -> str:
    """`ld_global 8→0, ld_global_v4 0→2` for one line's changed counts (totals left out: the
    keys they sum are there)."""
    return ", ".join(f"{k} {a}→{b}" for k, (a, b) in changed.items() if not k.endswith("_total"))


def specialisation_summary(diff: Mapping[str, Any], a: str = "a", b: str = "b") -> str:
    """`÷16 only in b: n_cols, x_row_stride` (and other differences) from diff_kernels'
    specialisation; a, b: how to name the two compiles."""
    only_b = [d["arg"] for d in diff.get("specialisation") or () if (d["a"] or {}).get("divisibility") is None
              and (d["b"] or {}).get("divisibility")]
    only_a = [d["arg"] for d in diff.get("specialisation") or () if (d["b"] or {}).get("divisibility") is None
              and (d["a"] or {}).get("divisibility")]
    parts = ([f"÷16 only in {a}: {', '.join(only_a)}"] if only_a else []) + \
        ([f"÷16 only in {b}: {', '.join(only_b)}"] if only_b else [])
    others = [d["arg"] for d in diff.get("specialisation") or () if d["arg"] not in only_a + only_b]
    return "; ".join(parts + ([f"differs: {', '.join(others)}"] if others else [])) or "same specialisation"
