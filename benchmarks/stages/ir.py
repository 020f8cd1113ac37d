"""Stage `ir`: inside the kernel, line by line, on the GPU (issue #18).

    python benchmarks/gpu_evidence.py --stage ir [--quick] [--out DIR]

Each case is built, checked and timed in one call, and written to OUT/ir/<case>.json as soon as
it finishes (a later failure or the budget loses nothing):

- matmul_dot: the bf16 Triton matmul, launched once: its `tl.dot` line maps to `wgmma` in the
  PTX and to `HGMMA` in the SASS of the kernel the launch compiled;
- softmax_1000_vs_1024: the Triton softmax launched at N = 1000 and N = 1024 (the lecture's
  case): for each, the launched kernel against the ahead-of-time one (same compile hash, same
  specialisation, same per-line counts); then the two launched kernels against each other (which
  arguments are divisible by 16, and the `tl.load` line: scalar loads against 16-byte ones);
- gelu_triton: launched; `tl.load` -> `ld.global.v4`, `tl.store` -> `st.global.v4`;
- gelu_cuda: nvcc -lineinfo; the loop body's load line -> `ld.global.v4` and `LDG.E.128`;
- softmax_compiled: Inductor's Triton kernel, mapped against the source Inductor generated (its
  `tl.load` line holds global loads: the line numbers line up).

Without a GPU the cases run ahead of time (matmul, softmax, gelu) or through nvcc, Inductor's is
skipped (the CPU test of this stage). --quick: smaller shapes, same cases (~30-60 s on an H200, cold caches).
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any, Callable

TITLE = "ir: source line -> PTX -> SASS (launched, AOT, nvcc, Inductor)"
ROW_KEYS = ("case", "source", "line", "ptx", "sass", "verdict", "seconds")
BUDGET_S = 100  # cases not started by then are reported skipped


def _has_gpu() -> bool:
    import torch
    return torch.cuda.is_available()


def _line(texts: dict, needle: str, after: str | None = None) -> int:
    """1-based line of the first source line containing `needle` (after the line holding `after`)."""
    lines = texts["source"].splitlines()
    start = next((i for i, line in enumerate(lines, 1) if after in line), 0) if after else 0
    return next(i for i, line in enumerate(lines, 1) if i > start and needle in line)


def _entry(kernel: dict, line: int) -> dict:
    return next((e for e in kernel.get("source_map") or () if e["source_line"] == line), {})


def _short(counts: dict, keys: tuple[str, ...]) -> str:
    return " ".join(f"{k}×{counts[k]}" for k in keys if counts.get(k)) or "-"


def _launched(op: Any, impl_name: str, spec: Any) -> tuple[dict, dict]:
    """Launch the implementation once on the GPU, then the ptx record of the kernel it compiled."""
    import torch

    from workbench.ptx.extract import ptx_record
    from workbench.registry import BuildContext

    impl, ctx = op.get_impl(impl_name), BuildContext(device="cuda")
    fn = impl.builder(spec, impl.resolve_params({}), ctx)
    fn(*op.make_inputs(spec, "cuda", 0))
    torch.cuda.synchronize()
    return ptx_record(op, impl, spec, ctx=ctx)


def _row(case: str, record: dict, line: str, ptx: str, sass: str, problems: list[str]) -> dict:
    return {"case": case, "source": record.get("source"), "line": line, "ptx": ptx, "sass": sass,
            "verdict": "ok" if not problems else "FAIL: " + "; ".join(problems)}


# -- cases -------------------------------------------------------------------------------------------
def matmul_dot(registry: Any, gpu: bool, quick: bool) -> tuple[list[dict], dict]:
    from workbench.ptx.extract import ptx_record

    op = registry.op("matmul")
    size = 1024 if quick else 4096
    spec = op.make_spec({"M": size, "N": size, "K": size}, "bfloat16")
    record, texts = _launched(op, "triton", spec) if gpu else ptx_record(op, "triton", spec)
    kernel = record["kernels"][0]
    t = texts[kernel["name"]]
    line = _line(t, "tl.dot(", f"def {kernel['name']}(")  # the TMA kernel in bf16 (kernels/_tma_gemm.py)
    entry = _entry(kernel, line)
    problems = [p for p, bad in (("not the launched kernel", gpu and record["source"] != "launched"),
                                 ("no wgmma on the tl.dot line", not entry.get("counts", {}).get("wgmma")),
                                 ("no HGMMA on the tl.dot line", not entry.get("sass_counts", {}).get("HGMMA"))) if bad]
    row = _row("matmul_dot", record, f"{line}: tl.dot", _short(entry.get("counts", {}), ("wgmma", "mma")),
               _short(entry.get("sass_counts", {}), ("HGMMA", "HMMA")), problems)
    return [row], {"spec": spec.label, "line": line, "entry": entry, "ptx": record}


def softmax_1000_vs_1024(registry: Any, gpu: bool, quick: bool) -> tuple[list[dict], dict]:
    from workbench.ptx.extract import ptx_record
    from workbench.ptx.launch_diff import diff_records, line_summary, specialisation_summary

    op = registry.op("softmax")
    rows, payload, launched = [], {}, {}
    for n in (1000, 1024):
        spec = op.make_spec({"M": 1024 if quick else 4096, "N": n}, "float32")
        if gpu:  # launched first: its num_warps is tuned on the device and cached, and the
            # ahead-of-time build below reads that choice (else it would compare two configs)
            launched[n], _ = _launched(op, "triton", spec)
        aot, texts = ptx_record(op, "triton", spec, prefer_launched=False)
        if gpu:
            ran, ahead = launched[n]["kernels"][0], aot["kernels"][0]
            problems = [p for p, bad in (
                ("not the launched kernel", launched[n]["source"] != "launched"),
                ("compile hash differs", ran.get("hash") != ahead.get("hash")),
                ("specialisation differs", ran.get("specialisation") != ahead.get("specialisation")),
                ("per-line counts differ", [e["counts"] for e in ran["source_map"]] != [e["counts"] for e in ahead["source_map"]]),
            ) if bad]
            rows.append(_row(f"softmax N={n} launched vs AOT", launched[n], "all", "", "", problems))
        else:
            launched[n] = aot  # the diff below still shows the lecture's case, ahead of time
        payload[str(n)] = {"spec": spec.label, "launched" if gpu else "aot": launched[n], "aot": aot}
        payload["texts_source"] = texts[aot["kernels"][0]["name"]]["source"]
    diff = diff_records(launched[1000], launched[1024])["kernels"]["_softmax_kernel"]
    load = _line({"source": payload.pop("texts_source")}, "tl.load(", "def _softmax_kernel(")
    changed = next((e["changed"] for e in diff["lines"] if e["source_line"] == load), {})
    problems = [p for p, bad in (("tl.load line: no 16-byte loads at 1024", not changed.get("ld_global_v4", [0, 0])[1]),
                                 ("tl.load line: no scalar loads at 1000", not changed.get("ld_global", [0, 0])[0]),
                                 ("n_cols not divisible at 1024 only", "n_cols" not in specialisation_summary(diff))) if bad]
    rows.append(_row("softmax 1000 vs 1024", launched[1024], f"{load}: tl.load", line_summary(changed),
                     specialisation_summary(diff, "1000", "1024"), problems))
    payload["diff_1000_vs_1024"] = diff
    return rows, payload


def gelu_triton(registry: Any, gpu: bool, quick: bool) -> tuple[list[dict], dict]:
    from workbench.ptx.extract import ptx_record

    op = registry.op("gelu")
    size = 1024 if quick else 4096
    spec = op.make_spec({"M": size, "N": size}, "float32")
    record, texts = _launched(op, "triton", spec) if gpu else ptx_record(op, "triton", spec)
    kernel = record["kernels"][0]
    t = texts[kernel["name"]]
    load, store = _line(t, "tl.load(", "def _gelu_kernel("), _line(t, "tl.store(", "def _gelu_kernel(")
    lc, sc = _entry(kernel, load).get("counts", {}), _entry(kernel, store).get("counts", {})
    problems = [p for p, bad in (("tl.load line without ld.global.v4", not lc.get("ld_global_v4")),
                                 ("tl.store line without st.global.v4", not sc.get("st_global_v4")),
                                 ("not the launched kernel", gpu and record["source"] != "launched")) if bad]
    row = _row("gelu_triton", record, f"{load}/{store}: load/store", f"{_short(lc, ('ld_global_v4', 'ld_global'))} / "
               f"{_short(sc, ('st_global_v4', 'st_global'))}", _short(_entry(kernel, load).get("sass_counts", {}), ("LDG",)),
               problems)
    return [row], {"spec": spec.label, "ptx": record}


def gelu_cuda(registry: Any, gpu: bool, quick: bool) -> tuple[list[dict], dict]:
    from workbench.ptx.extract import ptx_record

    op = registry.op("gelu")
    record, texts = ptx_record(op, "cuda", op.make_spec({"M": 1024, "N": 1024}, "float32"))
    # float, VEC=4, UNROLL=1: by the mangled name (demanglers print "4, 1>" or "(int)4, (int)1>")
    kernel = next((k for k in record["kernels"] if "IfLi4ELi1E" in (k.get("mangled") or "")
                   or re.search(r"float, (\(int\))?4, (\(int\))?1>", k["name"])), None)
    if kernel is None:
        return [{"case": "gelu_cuda", "verdict": f"skipped: {'; '.join(record['notes'])[:80]}"}], {"ptx": record}
    t = texts[kernel["name"]]
    entry = _entry(kernel, _line(t, "p[u] = in_p[i];"))
    sass = [t["sass"].splitlines()[i - 1] for i in entry.get("sass_lines", ())] if t.get("sass") else []
    problems = [p for p, bad in (("loop body without ld.global.v4", not entry.get("counts", {}).get("ld_global_v4")),
                                 ("loop body without LDG.E.128", not any("LDG.E.128" in s for s in sass))) if bad]
    row = _row("gelu_cuda", record, f"{entry.get('source_line')}: p[u] = in_p[i]",
               _short(entry.get("counts", {}), ("ld_global_v4",)), _short(entry.get("sass_counts", {}), ("LDG",)), problems)
    return [row], {"ptx": record}


def softmax_compiled(registry: Any, gpu: bool, quick: bool) -> tuple[list[dict], dict]:
    from workbench.ptx.extract import ptx_record

    if not gpu:
        return [{"case": "softmax_compiled", "verdict": "skipped: no GPU (Inductor does not cross-compile)"}], {}
    op = registry.op("softmax")
    record, texts = ptx_record(op, "compiled", op.make_spec({"M": 1024 if quick else 4096, "N": 1024}, "float32"))
    rows = []
    for kernel in record["kernels"]:
        t = texts[kernel["name"]]
        n_lines = len((t.get("source") or "").splitlines())
        load = _line(t, "tl.load(") if "tl.load(" in (t.get("source") or "") else None
        counts = _entry(kernel, load).get("counts", {}) if load else {}
        problems = [p for p, bad in (("no source map", not kernel.get("source_map")),
                                     ("map lines outside the source", any(not 1 <= e["source_line"] <= n_lines
                                                                         for e in kernel.get("source_map") or ())),
                                     ("first tl.load line without global loads", load and not counts.get("ld_global_total"))) if bad]
        rows.append(_row(f"compiled {kernel['name'][:28]}", record, f"{load}: tl.load", _short(counts, ("ld_global_v4", "ld_global")),
                         ",".join(kernel.get("stages") or ()), problems))
    return rows or [{"case": "softmax_compiled", "verdict": f"FAIL: no kernel ({record['notes'][:1]})"}], {"ptx": record}


CASES: tuple[Callable, ...] = (matmul_dot, softmax_1000_vs_1024, gelu_triton, gelu_cuda, softmax_compiled)


def run(quick: bool, out: Path) -> list[dict]:
    from workbench.registry import discover

    gpu = _has_gpu()
    if not gpu:
        print("ir stage: no GPU here: ahead-of-time and nvcc kernels stand in for launched ones; Inductor skipped")
    folder = out / "ir"
    folder.mkdir(parents=True, exist_ok=True)
    registry, start, rows = discover(), time.perf_counter(), []
    for case in CASES:
        if time.perf_counter() - start > BUDGET_S:
            rows.append({**dict.fromkeys(ROW_KEYS), "case": case.__name__,
                         "verdict": f"skipped: stage budget {BUDGET_S} s spent"})
            continue
        t0 = time.perf_counter()
        try:
            case_rows, payload = case(registry, gpu, quick)
        except Exception as exc:  # one broken case must not hide the others
            case_rows, payload = [{"case": case.__name__, "verdict": f"FAIL: {type(exc).__name__}: {exc}"[:120]}], {}
        seconds = round(time.perf_counter() - t0, 2)
        case_rows = [{**dict.fromkeys(ROW_KEYS), **row, "seconds": seconds} for row in case_rows]
        (folder / f"{case.__name__}.json").write_text(json.dumps({"rows": case_rows, **payload}, indent=1, default=str))
        rows += case_rows
    return rows
