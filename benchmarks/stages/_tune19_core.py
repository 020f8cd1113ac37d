"""The sweep behind the `tune19` stage: check, then time, every candidate of one target beside the
measured copy and the library forms, and ask the autotuner which it would choose.

A target is one (op, shape, dtype) and a list of candidates (label, config, runner). Checks use
the engine's gates (workbench.check.row.compare_output: float64 reference in chunks, the op's
tolerance for the implementation) on the first and the special input sets; timing uses the
engine's loop (workbench.engine.measure.timing.measure: CUDA events, the L2 flushed by a 2 x L2 read
before each sample, the same stopping rule) on the first set. Nothing here is GPU-only: on CPU
the same code runs interpreted Triton at small shapes (the dry run).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass
class Sweep:
    """Stage-wide state: the device, the timing rule, the flush buffer and the deadline."""

    device: str
    rep_ms: float
    warmup_ms: float
    deadline: float  # time.monotonic() past which no new target starts
    flush: Any = None
    notes: list[str] = field(default_factory=list)

    @classmethod
    def make(cls, device: str, quick: bool, budget_s: float) -> "Sweep":
        from workbench.engine.measure.environment import device_info
        from workbench.engine.measure.timing import make_l2_flush

        flush = make_l2_flush(device, device_info(device).l2_bytes) if device.startswith("cuda") else None
        rep = (30.0 if quick else 80.0) if device.startswith("cuda") else 5.0
        return cls(device, rep, 5.0 if quick else 15.0, time.monotonic() + budget_s, flush)

    def left_s(self) -> float:
        return self.deadline - time.monotonic()

    def time(self, fn: Callable[[], Any]) -> dict[str, float]:
        """median_ms, p20_ms, p80_ms, spread_pct (p20-p80 over the median) and n of `fn`."""
        from workbench.engine.measure.stats import StopRule, summarize
        from workbench.engine.measure.timing import make_timer, measure

        interpreted = not self.device.startswith("cuda")
        rule = StopRule(rep_ms=self.rep_ms, min_samples=3 if interpreted else 10, target_rel_error=0.002)
        samples = measure(fn, make_timer(self.device, interpreted), rule, warmup_ms=self.warmup_ms, flush=self.flush)
        s = summarize(samples)
        return {"median_ms": round(s.median_ms, 5), "p20_ms": round(s.p20_ms, 5), "p80_ms": round(s.p80_ms, 5),
                "spread_pct": round(100 * (s.p80_ms - s.p20_ms) / s.median_ms, 2), "n": s.n}


def check(op: Any, impl: Any, spec: Any, ctx: Any, fn: Callable[..., Any], inputs: tuple, input_set: str) -> dict:
    """The engine's check of fn(*inputs): {passed, input_set, max_rel_err, rel_l2_err[, detail]};
    an exception is a failed check naming it."""
    from workbench.check.row import compare_output

    try:
        report = compare_output(op, impl, spec, ctx, inputs, fn(*inputs), input_set=input_set)
    except Exception as exc:  # a config that cannot launch here (shared memory, cluster shape)
        return {"passed": False, "input_set": input_set, "detail": f"{type(exc).__name__}: {str(exc)[:200]}"}
    out = {"passed": bool(report.passed), "input_set": input_set, "max_rel_err": report.max_rel_err,
           "rel_l2_err": report.rel_l2_err}
    if not report.passed:
        out["detail"] = report.detail or report.gate
    return out


def sweep_target(sw: Sweep, target: dict, candidates: list[tuple[str, dict, Callable]], references: dict[str, Callable],
                 save: Callable[[], None], copy: bool = True) -> dict:
    """Check every candidate on both input sets, then time the passing ones, the references and
    (copy: memory-bound ops) a copy of the first input; fills and returns `target`, saving after
    each phase. candidates: (label, config, runner(*inputs) -> output); references: name ->
    callable(*inputs) (timed, not checked: the engine checks the libraries elsewhere)."""
    import torch

    op, impl, spec, ctx = target.pop("_op"), target.pop("_impl"), target.pop("_spec"), target.pop("_ctx")
    inputs = op.make_inputs(spec, sw.device, 0)
    rows = target.setdefault("candidates", [])
    for label, cfg, fn in candidates:
        rows.append({"label": label, "config": cfg, "check": [check(op, impl, spec, ctx, fn, inputs, "first")]})
    special = op.fill_special(spec, inputs, 1)
    for row, (_, _, fn) in zip(rows, candidates):
        if special is not None and row["check"][0]["passed"]:
            row["check"].append(check(op, impl, spec, ctx, fn, special, "special"))
        row["passed"] = all(c["passed"] for c in row["check"])
    save()
    inputs = op.make_inputs(spec, sw.device, 0, out=inputs)
    if copy:
        copy_out = torch.empty_like(inputs[0])
        target["copy"] = sw.time(lambda: copy_out.copy_(inputs[0]))
        del copy_out
    target["references"] = {}
    for name, fn in references.items():
        try:
            t0 = time.perf_counter()
            fn(*inputs)  # torch.compile compiles here, outside the timing loop's warm-up
            build_s = round(time.perf_counter() - t0, 2)
            target["references"][name] = {**sw.time(lambda fn=fn: fn(*inputs)), "first_call_s": build_s}
        except Exception as exc:  # a library form that fails here is reported, not fatal
            target["references"][name] = {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
    for row, (_, _, fn) in zip(rows, candidates):
        if row["passed"]:
            row["timing"] = sw.time(lambda fn=fn: fn(*inputs))
    _figures(target)
    save()
    return target


def _figures(target: dict) -> None:
    """pct_of_copy (where a copy was timed) and x_<reference> (reference ms / ours) per timed
    candidate; `fastest`: the fastest passing one."""
    copy_ms = (target.get("copy") or {}).get("median_ms")
    refs = {k: v["median_ms"] for k, v in target["references"].items() if "median_ms" in v}
    timed = [r for r in target["candidates"] if "timing" in r]
    for r in timed:
        ms = r["timing"]["median_ms"]
        if copy_ms:
            r["pct_of_copy"] = round(100 * copy_ms / ms, 2)
        for name, ref_ms in refs.items():
            r[f"x_{name}"] = round(ref_ms / ms, 3)
    if copy_ms:
        for name, ref_ms in refs.items():
            target["references"][name]["pct_of_copy"] = round(100 * copy_ms / ref_ms, 2)
    if timed:
        best = min(timed, key=lambda r: r["timing"]["median_ms"])
        target["fastest"] = {"label": best["label"], "median_ms": best["timing"]["median_ms"],
                             "pct_of_copy": best.get("pct_of_copy"),
                             "within_spread_of_next": _within_spread(best, timed)}


def _within_spread(best: dict, timed: list[dict]) -> list[str]:
    """Labels whose median lies within the fastest one's p80 (indistinguishable from it here)."""
    return [r["label"] for r in timed if r is not best and r["timing"]["median_ms"] <= best["timing"]["p80_ms"]]


def autotuner_choice(op_name: str, impl: str, spec: Any, configs: list[dict], run: Callable[[dict], Any],
                     version: str) -> dict:
    """What workbench.tuning.autotune (do_bench medians, no cache) picks among `configs`."""
    from workbench.tuning import TuneKey, autotune, device_tag, spec_shape

    key = TuneKey(op_name, impl, device_tag() or "cpu", spec_shape(spec), str(spec.dtype), version)
    try:
        tuned = autotune(key, configs, run, None)
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
    return {"config": tuned.config, "timings_ms": tuned.timings_ms, "tuning_s": round(tuned.tuning_s, 2),
            "note": tuned.note}
