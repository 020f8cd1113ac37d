"""Where the truth stage's noisy rows lose their agreement: every sample of every method, with
the SM clock, power and clock-event reasons sampled beside them (issue #11).

    python benchmarks/truth_trace.py [--quick] [--rounds N] [--out DIR] [--only op.impl.dtype,...]

For each row (default: torch.compile's GeLU bf16 and softmax fp32/bf16, whose medians over
rounds came out 2.5-5% apart between the engine and do_bench (results/history/h200/2026-12-03d, -03e), Triton's softmax
fp32 as a steady control, and cuBLAS bf16 8192^3) the row is built and checked as the truth
stage does (benchmarks/stages/_truth_gpu.GpuTruth), then timed for N rounds with the three
methods in rotating order: the engine's loop with its read flush, triton.testing.do_bench with
return_mode="all" (every sample of its window), and the engine's loop with do_bench's zero
flush. One NVML thread samples the whole row every 2 ms: host time, SM clock (MHz), power (W)
and the clock-event reason bits. Writes `truth-trace.json` (per call: host start and end,
every sample in ms) after each row, and prints per row and method the median over rounds, the
paired ratio to do_bench, the share of samples in the row's slow state (above 1.03 x the row's
10th percentile), that share in the first and second half of each window, and the median SM
clock and power during the calls. Needs a CUDA GPU (exit 2 without one).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: the repository root on the path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

DEFAULT_ROWS = ("gelu.compiled.bfloat16", "softmax.compiled.float32", "softmax.compiled.bfloat16",
                "softmax.triton.float32", "matmul.pytorch.bfloat16")
SLOW = 1.03          # a sample above SLOW x the row's 10th percentile is in the slow state
INTERVAL_S = 0.002   # NVML sampling period


class Trace:
    """NVML samples (t_s, sm_mhz, power_w, reason_bits) from a thread, for one row."""

    def __init__(self, handle, nvml):
        self.handle, self.nvml, self.samples = handle, nvml, []
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._done.set()
        self._thread.join(timeout=1.0)

    def _loop(self):
        nvml, h = self.nvml, self.handle
        get_reasons = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
            nvml.nvmlDeviceGetCurrentClocksThrottleReasons
        while not self._done.wait(INTERVAL_S):
            try:
                self.samples.append((time.perf_counter(), nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_SM),
                                     nvml.nvmlDeviceGetPowerUsage(h) / 1e3, int(get_reasons(h))))
            except Exception:  # one failed poll is not worth the row
                pass

    def during(self, t0: float, t1: float) -> dict:
        inside = [s for s in self.samples if t0 <= s[0] <= t1]
        if not inside:
            return {"sm_mhz": None, "power_w": None, "reasons": 0}
        reasons = 0
        for s in inside:
            reasons |= s[3]
        return {"sm_mhz": statistics.median(s[1] for s in inside), "power_w": statistics.median(s[2] for s in inside),
                "reasons": reasons}


def _nvml_handle(info):
    import pynvml

    pynvml.nvmlInit()
    try:
        return pynvml, pynvml.nvmlDeviceGetHandleByPciBusId(info.pci_bus_id)
    except Exception:
        return pynvml, pynvml.nvmlDeviceGetHandleByIndex(0)


def time_row(gpu, case, rounds: int, handle, nvml) -> dict:
    """Build and check `case` as the truth stage does, then `rounds` rotating rounds of the three
    methods under one NVML trace; every sample kept."""
    from triton.testing import do_bench

    from benchmarks.stages._truth_core import REP_MS, WARMUP_MS
    from benchmarks.stages._truth_gpu import RULE
    from workbench.engine.measure.timing import measure_run

    fn, inputs, build_ms, check = gpu._build_and_check(case)
    if check.get("passed") is False:
        return {"case": case.__dict__, "error": "check failed", "check": check}
    call = lambda: fn(*inputs)  # noqa: E731

    def engine(kind):
        return measure_run(call, gpu.timer, RULE, warmup_ms=WARMUP_MS, flush=gpu.flush[kind],
                           limited=lambda: True).samples_ms  # sustained: the whole rep_ms, as on a limited row

    methods = {"engine": lambda: engine("read"),
               "do_bench": lambda: [float(t) for t in do_bench(call, warmup=WARMUP_MS, rep=REP_MS, return_mode="all")],
               "engine_zero_flush": lambda: engine("zero")}
    names = list(methods)
    calls = []
    with Trace(handle, nvml) as trace:
        gpu._settle(call)
        for r in range(rounds):
            for name in names[r % 3:] + names[:r % 3]:
                t0 = time.perf_counter()
                samples = methods[name]()
                t1 = time.perf_counter()
                calls.append({"round": r, "method": name, "t0": t0, "t1": t1, "samples_ms": [round(s, 5) for s in samples]})
    for c in calls:
        c.update(trace.during(c["t0"], c["t1"]))
    t_first = calls[0]["t0"]
    return {"case": case.__dict__, "build_ms": build_ms, "calls": calls,
            "trace": [(round(t - t_first, 4), mhz, round(w, 1), bits) for t, mhz, w, bits in trace.samples]}


def summarize_row(row: dict) -> list[str]:
    """Per method: median over rounds of per-call medians, paired ratio to do_bench, slow share
    (whole window, first half, second half), median SM clock and power."""
    if "calls" not in row:
        return [f"{row['case']}: {row.get('error')}"]
    allsamples = sorted(s for c in row["calls"] for s in c["samples_ms"])
    p10 = allsamples[len(allsamples) // 10]
    by = {}
    for c in row["calls"]:
        by.setdefault(c["method"], []).append(c)
    db = {c["round"]: statistics.median(c["samples_ms"]) for c in by["do_bench"]}
    case = row["case"]
    lines = [f"{case['op']} {case['impl']} {case['dtype']}: p10 {p10:.4f} ms, slow > {SLOW * p10:.4f}"]
    for name, cs in by.items():
        meds = [statistics.median(c["samples_ms"]) for c in cs]
        paired = statistics.median(statistics.median(c["samples_ms"]) / db[c["round"]] for c in cs)

        def slow(xs):
            return sum(x > SLOW * p10 for x in xs) / max(1, len(xs))
        halves = [(c["samples_ms"][: len(c["samples_ms"]) // 2], c["samples_ms"][len(c["samples_ms"]) // 2:]) for c in cs]
        mhz = [c["sm_mhz"] for c in cs if c["sm_mhz"]]
        watts = [c["power_w"] for c in cs if c["power_w"]]
        lines.append(f"  {name:18} median {statistics.median(meds):.4f} paired {paired:.3f} n/call "
                     f"{statistics.median(len(c['samples_ms']) for c in cs):.0f} slow {statistics.mean(slow(c['samples_ms']) for c in cs):.2f} "
                     f"(1st half {statistics.mean(slow(a) for a, _ in halves):.2f}, 2nd {statistics.mean(slow(b) for _, b in halves):.2f}) "
                     f"sm {statistics.median(mhz) if mhz else float('nan'):.0f} MHz power {statistics.median(watts) if watts else float('nan'):.0f} W")
    return lines


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 rows, 4 rounds")
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--only", default=",".join(DEFAULT_ROWS), help="rows op.impl.dtype, comma-separated")
    parser.add_argument("--out", type=Path, default=Path("truth-trace-out"))
    args = parser.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("truth_trace: no CUDA GPU here", file=sys.stderr)
        return 2
    from benchmarks.stages._truth_core import cases
    from benchmarks.stages._truth_gpu import GpuTruth
    from benchmarks.stages.truth import selected

    only = tuple(args.only.split(","))[: 2 if args.quick else None]
    todo = selected(cases(False), only)
    gpu = GpuTruth("cuda:0", rounds=args.rounds, quick=args.quick)
    nvml, handle = _nvml_handle(gpu.info)
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for case in todo:
        rows.append(time_row(gpu, case, 4 if args.quick else args.rounds, handle, nvml))
        (args.out / "truth-trace.json").write_text(json.dumps({"rows": rows}))
        print("\n".join(summarize_row(rows[-1])), flush=True)
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
