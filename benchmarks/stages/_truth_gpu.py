"""The GPU half of stage `truth` (benchmarks/stages/truth.py): build, check and time one case with
every method, and measure the references with SM clocks. Needs CUDA and Triton for real numbers;
on "cpu" the same code runs with host timers (tests/test_stage_truth.py, do_bench replaced)."""

from __future__ import annotations

import random
import statistics
import time
from typing import Any, Callable

from benchmarks.stages._truth_core import (REP_MS, WARMUP_MS, Case, all_rounds, clock_matched, flush_split,
                                           interleave, paired_ratio, state_split, summary_row, unsettled)
from workbench.engine.measure.clocks import ClockSampler
from workbench.engine.measure.stats import StopRule, quantile, summarize
from workbench.engine.measure.timing import make_l2_flush, make_timer, measure_run

RULE = StopRule(rep_ms=REP_MS, min_samples=10, target_rel_error=0.005)
SETTLE_MS = 500.0      # back-to-back calls before a case's first round (_truth_core.interleave)
RESETTLE_MS = 200.0    # ... and before each extra round of an unsettled row
MAX_ROUNDS = 15        # rounds while _truth_core.unsettled says the medians are not pinned down yet
# The power-limited GEMMs: their rounds sit at a few clock states 2-4% apart (H200,
# results/history/h200/2026-12-03c:
# triton bf16 8192^3 rounds at 1.518-1.528, 1.559 and 1.594 ms in both methods), so a median of
# 9-15 rounds follows whichever state held the majority of that row's rounds: 0.978-0.9995 over
# five full runs, 1.25 x 2.5% / sqrt(15) ~ 0.8% standard error per method. 30 rounds halve the
# variance; three methods a round (~0.45 s) keep a row near 15 s. They did not bring the two
# GEMM rows inside 2% every time: in three 30-round runs (results/history/h200/2026-12-03d) a median over rounds read
# 0.977 for Triton in one and for cuBLAS in another, 0.990-1.000 at matching clocks in all three.
MATMUL_ROUNDS = 30
MATMUL_MAX_ROUNDS = 40


class GpuTruth:
    """One device, its timers and both flush kinds, reused across cases."""

    def __init__(self, device: str, rounds: int, quick: bool):
        from workbench.engine.measure.environment import device_info
        from workbench.registry import discover

        self.device, self.rounds, self.quick = device, rounds, quick
        self.info = device_info(device)
        self.registry = discover()
        self.timer = make_timer(device)
        self.flush = {kind: make_l2_flush(device, self.info.l2_bytes, kind) for kind in ("read", "zero")}
        self.last_engine: dict = {}
        self.do_bench_spread: list[dict | None] = []
        self.call_samples: dict[str, list[list[float]]] = {}  # per method, every sample of each call (state_split)
        self.on_cuda = device.startswith("cuda")

    # -- the document's context -------------------------------------------------------------
    def environment(self) -> dict:
        from workbench.engine.measure.ceilings import datasheet_for
        from workbench.engine.measure.environment import environment_record

        return {**environment_record(self.info), "datasheet": datasheet_for(self.info.name),
                "rule": {"warmup_ms": WARMUP_MS, "rep_ms": REP_MS, "min_samples": RULE.min_samples,
                         "target_rel_error": RULE.target_rel_error}, "rounds": self.rounds}

    def references(self) -> dict:
        """copy, cuBLAS per dtype and launch floors, measured as calibration does, SM clock beside
        each (--quick: cuBLAS at 8192^3 only)."""
        from workbench.engine.measure import calibrate

        measurers = calibrate.reference_measurers(self.device, self.timer, self.info.memory_bytes, self.flush["read"])
        if self.quick:
            for key in calibrate.MATMUL_KEYS:
                measurers[f"matmul_tflops.{key}"] = (lambda key=key: calibrate.measure_matmul_tflops(
                    self.device, key, self.timer, n=8192, flush=self.flush["read"]))
        found: dict[str, dict] = {}

        def store(name, value, clocks, error):
            found[name] = {"value": value, "sm_clock_mhz": clocks, "error": error}
        calibrate.measure_references(measurers, self.info, store)
        return found

    # -- one case -----------------------------------------------------------------------------
    def time_case(self, case: Case) -> tuple[dict | None, dict]:
        import torch

        detail: dict[str, Any] = {"op": case.op, "impl": case.impl, "dtype": case.dtype, "shape": dict(case.shape)}
        fn, inputs, detail["build_ms"], detail["check"] = self._build_and_check(case)
        detail["tuned"] = getattr(fn, "tuned", None)  # the tuner's pick and its timings (workbench.tuning.attach)
        try:
            if detail["check"].get("passed") is False:
                detail["error"] = "check failed: no speed for a wrong result"
                return None, detail
            call = lambda: fn(*inputs)  # noqa: E731, F821 (F821: called before the del below)
            methods = self.methods(call)
            matmul = case.op == "matmul"
            rounds = max(self.rounds, MATMUL_ROUNDS) if matmul else self.rounds
            self.do_bench_spread = []
            self.call_samples = {name: [] for name in methods}
            orders: list[list[str]] = []
            found = interleave(methods, rounds, settle=lambda: self._settle(call),
                               max_rounds=max(rounds, MATMUL_MAX_ROUNDS if matmul else MAX_ROUNDS), unsettled=unsettled,
                               resettle=lambda: self._settle(call, RESETTLE_MS),
                               rng=random.Random(f"{case.op}.{case.impl}.{case.dtype}"), orders=orders)
            detail["orders"] = orders
            detail["rounds"] = {name: [{"ms": ms, "sm_clock_mhz": mhz} for ms, mhz in got] for name, got in found.items()}
            detail["engine_method"] = dict(self.last_engine)
            detail["do_bench_spread"] = list(self.do_bench_spread)  # per do_bench round, in order
            detail["clock_matched"] = clock_matched(found)
            detail["paired_ratio"] = paired_ratio(found)
            detail["flush_split"] = flush_split(found)
            detail["n_rounds"] = len(found["engine"])
            detail["state_split"] = state_split(self.call_samples)
            detail["all_rounds"] = all_rounds(found)
            detail["statistic"] = "same_state" if detail["state_split"].get("ratio") is not None else "all_rounds"
            return summary_row(case, found, detail["state_split"]), detail
        finally:
            del fn, inputs
            if self.on_cuda:
                torch.cuda.empty_cache()

    def _build_and_check(self, case: Case):
        import torch

        from workbench.engine.plan import default_cache_dir
        from workbench.registry import BuildContext

        op = self.registry.op(case.op)
        impl = op.get_impl(case.impl)
        spec = op.make_spec(case.shape, case.dtype)
        ctx = BuildContext(device=self.device, fp32_precision="ieee", interpret=False,
                           build_dir=default_cache_dir() / "build")
        watch = impl.backend.watch()  # compiled: dynamo reset, every shape compiles fresh, as in the engine
        if watch is not None:
            watch.start()
        inputs = op.make_inputs(spec, self.device, 0)
        t0 = time.perf_counter()
        fn = impl.builder(spec, impl.resolve_params({}), ctx)
        out = fn(*inputs)
        if self.on_cuda:
            torch.cuda.synchronize()
        build_ms = (time.perf_counter() - t0) * 1e3
        check = _check(op, impl, spec, ctx, inputs, out)
        del out
        return fn, inputs, build_ms, check

    # -- the methods: each returns (ms, median SM clock in MHz or None) ------------------------
    def methods(self, call) -> dict[str, Callable[[], tuple[float, float | None]]]:
        """The stage's three methods for `call`, as interleave takes them: the engine's loop
        (read flush), do_bench, and the engine's loop with do_bench's zero flush."""
        return {"engine": lambda: self._engine(call, "read"), "do_bench": lambda: self._do_bench(call),
                "engine_zero_flush": lambda: self._engine(call, "zero")}

    def _engine(self, call, kind: str) -> tuple[float, float | None]:
        """The engine's loop (engine/timing.measure_run, as engine/bench.py calls it) with the
        `kind` L2 flush ("read": the engine's; "zero": do_bench's, for the A/B)."""
        with ClockSampler(self.info) as clocks:
            run = measure_run(call, self.timer, RULE, warmup_ms=WARMUP_MS, flush=self.flush[kind],
                              limited=clocks.limited)
        self.call_samples.setdefault("engine" if kind == "read" else "engine_zero_flush", []).append(list(run.samples_ms))
        if kind != "read":
            return summarize(run.samples_ms).median_ms, _mhz(clocks)
        self.last_engine = {"n": len(run.samples_ms), "batches": run.batches, "sustained": run.sustained, "host_launch_ms": run.host_launch_ms,
                            "headroom_ms": run.headroom_ms, "flush_kind": kind, "warmup_calls": run.warmup_calls,
                            "warmup_back_to_back": run.warmup_back_to_back}
        return summarize(run.samples_ms).median_ms, _mhz(clocks)

    def _settle(self, call, ms: float = SETTLE_MS) -> None:
        """Calls back to back for `ms` of host time, then a synchronize (not timed)."""
        t0 = time.perf_counter()
        while (time.perf_counter() - t0) * 1e3 < ms:
            for _ in range(8):
                call()
            self.timer.sync()
        self.timer.sync()

    def _do_bench(self, call) -> tuple[float, float | None]:
        """do_bench's median of one call, from its every sample (return_mode="all": kept for
        state_split) where it has that mode, else from its quantiles or its median statistic; the
        p20 and p80 of the same call go to do_bench_spread (a round whose whole distribution
        moved, against one with a slow tail: truth-details.json)."""
        from benchmarks.dobench import do_bench_median_ms, do_bench_quantiles_ms, do_bench_samples_ms

        samples: list[float] = []
        with ClockSampler(self.info) as clocks:
            samples = do_bench_samples_ms(call, warmup_ms=WARMUP_MS, rep_ms=REP_MS) or []
            if samples:
                ordered = sorted(samples)
                found = [quantile(ordered, 0.2), statistics.median(ordered), quantile(ordered, 0.8)]
            else:
                found = do_bench_quantiles_ms(call, (0.2, 0.5, 0.8), warmup_ms=WARMUP_MS, rep_ms=REP_MS)
            if found is None:
                ms, statistic = do_bench_median_ms(call, warmup_ms=WARMUP_MS, rep_ms=REP_MS)
                if statistic != "median":
                    raise RuntimeError(f"do_bench here has no median statistic (got {statistic!r})")
            else:
                ms = found[1]
        self.call_samples.setdefault("do_bench", []).append(samples)
        self.do_bench_spread.append(None if found is None else {"p20_ms": found[0], "p80_ms": found[2]})
        return ms, _mhz(clocks)


def _mhz(clocks: ClockSampler) -> float | None:
    sampled = clocks.fields()["sm_clock_mhz"]
    return sampled["median"] if sampled else None


def _check(op, impl, spec, ctx, inputs, out) -> dict:
    """workbench.check.row's check of the first call's output ({"passed": bool, ...}); a check that
    itself cannot run is reported as {"error": ...} (the timing comparison still stands)."""
    try:
        from workbench.check.row import check_output

        report = check_output(op, impl, spec, ctx, inputs, out)
        return report.as_dict()
    except Exception as exc:  # the check module's API may move under another helper's issue
        return {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"}
