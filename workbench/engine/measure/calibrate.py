"""Calibration: a device's measured references (MEASUREMENT.md rule 11) and launch floors, once per
device and driver, before the first row that benches on it, and only those the row's bars use.

`calibrate(dev, names)` measures what its cache entry (engine/ceilings.CeilingCache) lacks of
`names` (default: every reference; a row asks for `references_for(...)`'s: the copy and the launch
floors always, cuBLAS in the row's compute key only for a matmul-like op or one whose cost model
puts it at or above the peaks' machine balance; the float32 IEEE GEMM at 16384^3 alone took ~2 s
on the H200, and a session of elementwise rows never shows it):
- copy_gbps: a 1 GiB device-to-device copy, counting bytes read plus written;
- matmul_tflops[key]: cuBLAS (`torch.mm`) on random n x n operands, the best of MATMUL_SIZES that
  fit, key "bfloat16", "float16", "tf32" (float32 inputs on TF32 tensor cores) or "float32" (IEEE);
- launch_floor_ms (L2 flushed) and launch_floor_ms_warm (engine/floor.py);
each timed exactly as rows are (engine/timing.py: batched events, read flush), with the SM clock
sampled during it (`sm_clock_mhz[name]`). A reference that cannot run here (a dtype the device
lacks) is stored as None with its error in `reference_errors`, and not retried.

It is not charged to a row's timeout: the child sends ("calibrating", device name) before and
("calibrated", None) after, and the supervisor pauses the row clock in between.
"""

from __future__ import annotations

from typing import Any, Callable

from workbench.engine.measure.ceilings import (COPY_BYTES, MATMUL_KEYS, MATMUL_N, MATMUL_SIZES, CeilingCache, copy_gbps,
                                       matmul_tflops)
from workbench.engine.worker.precision import fp32_precision
from workbench.engine.measure.stats import StopRule, summarize
from workbench.engine.measure.timing import Timer, flush_kind, measure

CEILING_RULE = StopRule(rep_ms=300.0, min_samples=10, target_rel_error=0.005)
REFERENCES = ("copy_gbps", *(f"matmul_tflops.{k}" for k in MATMUL_KEYS), "launch_floor_ms", "launch_floor_ms_warm")
ALWAYS = ("copy_gbps", "launch_floor_ms", "launch_floor_ms_warm")  # every benched row's bars and floor


def references_for(device_name: str | None, op: Any, impl: Any, spec: Any, fp32_precision: str) -> tuple[str, ...]:
    """The REFERENCES a benched row of `impl` at `spec` uses: ALWAYS, plus cuBLAS in the row's
    compute key (ceilings.compute_key) when "% of cuBLAS" applies (a matmul-like op) or when the
    roofline may name it as the row's ceiling (traffic._place: the cost model's intensity at or
    above the peaks' machine balance; also when either is unknown: no datasheet figure, or a
    cost model that raises)."""
    from workbench.engine.measure.ceilings import bars, compute_key
    from workbench.engine.measure.traffic import machine_balance

    key = compute_key(op.matmul_like, str(spec.dtype), fp32_precision)
    cublas = f"matmul_tflops.{key}"
    if op.matmul_like:
        return (*ALWAYS, cublas)
    balance = machine_balance(bars(device_name, None, False, str(spec.dtype), fp32_precision))
    try:
        intensity = impl.cost(op, spec).intensity
    except Exception:  # no cost model here: the bars may need it
        intensity = None
    if balance is None or intensity is None or intensity >= balance:
        return (*ALWAYS, cublas)
    return ALWAYS


def measure_copy_gbps(device: str, timer: Timer, nbytes: int = COPY_BYTES, rule: StopRule = CEILING_RULE,
                      flush: Callable[[], None] | None = None) -> float:
    """Copy `nbytes` device to device; GB/s counting read plus written bytes."""
    import torch

    src = torch.ones(nbytes // 4, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    samples = measure(lambda: dst.copy_(src), timer, rule, warmup_ms=25.0, flush=flush)
    return copy_gbps(2 * src.numel() * 4, summarize(samples).median_ms)


def measure_matmul_tflops(device: str, key: str, timer: Timer, n: int = MATMUL_N, rule: StopRule = CEILING_RULE,
                          flush: Callable[[], None] | None = None) -> float:
    """One n^3 product of random matrices of `key`'s dtype; TF32 switched on only for "tf32"."""
    import torch

    dtype = {"bfloat16": torch.bfloat16, "float16": torch.float16}.get(key, torch.float32)
    gen = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(n, n, device=device, dtype=dtype, generator=gen)
    b = torch.randn(n, n, device=device, dtype=dtype, generator=gen)
    out = torch.empty(n, n, device=device, dtype=dtype)
    with fp32_precision("tf32" if key == "tf32" else "ieee"):  # engine/precision.py owns it
        samples = measure(lambda: torch.mm(a, b, out=out), timer, rule, warmup_ms=25.0, flush=flush)
    return matmul_tflops(n, summarize(samples).median_ms)


def measure_matmul_ceiling(device: str, key: str, timer: Timer, sizes: tuple[int, ...] = MATMUL_SIZES,
                           memory_bytes: int | None = None, rule: StopRule = CEILING_RULE,
                           flush: Callable[[], None] | None = None) -> float:
    """The best TFLOP/s of `measure_matmul_tflops` over `sizes`, skipping a size whose three
    n x n operands need more than a quarter of `memory_bytes` (the smallest size always runs)."""
    itemsize = 2 if key in ("bfloat16", "float16") else 4
    fits = [n for n in sizes if memory_bytes is None or 3 * n * n * itemsize <= memory_bytes // 4]
    return max(measure_matmul_tflops(device, key, timer, n=n, rule=rule, flush=flush) for n in fits or [min(sizes)])


def reference_measurers(device: str, timer: Timer, memory_bytes: int | None,
                        flush: Callable[[], None] | None) -> dict[str, Callable[[], float]]:
    """One callable per name in REFERENCES, measuring it on `device`."""
    from workbench.engine.measure.launch_floor import measure_floor_ms

    mem = memory_bytes or 8 * COPY_BYTES
    measurers: dict[str, Callable[[], float]] = {
        "copy_gbps": lambda: measure_copy_gbps(device, timer, min(COPY_BYTES, mem // 8), flush=flush)}
    for key in MATMUL_KEYS:
        measurers[f"matmul_tflops.{key}"] = (
            lambda key=key: measure_matmul_ceiling(device, key, timer, memory_bytes=memory_bytes, flush=flush))
    measurers["launch_floor_ms"] = lambda: measure_floor_ms(device, timer, flush)
    measurers["launch_floor_ms_warm"] = lambda: measure_floor_ms(device, timer, None)
    return measurers


def measure_references(measurers: dict[str, Callable[[], float]], info: Any,
                       store: Callable[[str, float | None, dict | None, str | None], None]) -> None:
    """Run each measurer with the SM clock sampled around it; `store(name, value, sm_clock_mhz,
    error)` after each (value None and a one-line error where it raised)."""
    from workbench.engine.measure.clocks import ClockSampler

    for name, measure_fn in measurers.items():
        value, error = None, None
        with ClockSampler(info) as clocks:
            try:
                value = float(measure_fn())
            except Exception as exc:  # e.g. a dtype this device lacks: recorded, not fatal
                error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        store(name, value, clocks.fields()["sm_clock_mhz"], error)


def calibrate(dev: Any, names: tuple[str, ...] = REFERENCES) -> dict | None:
    """Measure the references of `names` (a subset of REFERENCES) that `dev` (a DeviceSession)
    lacks; return its cache entry (None on CPU). Raises ValueError for a name not in REFERENCES."""
    if not dev.is_cuda:
        return None
    unknown = [name for name in names if name not in REFERENCES]
    if unknown:
        raise ValueError(f"calibrate: unknown reference(s) {', '.join(unknown)}; known: {', '.join(REFERENCES)}")
    cache, key = CeilingCache(dev.cache_dir), dev.info.cache_key
    missing = [name for name in names if not cache.has(key, *name.split(".", 1))]
    if missing:
        flush = dev.flush()
        measurers = reference_measurers(dev.device, _timer(dev.device), dev.info.memory_bytes, flush)
        channel = getattr(dev, "channel", None)
        _control(channel, "calibrating", dev.info.name)
        try:
            measure_references({n: measurers[n] for n in missing}, dev.info, _storer(cache, key))
            cache.put(key, "flush_kind", flush_kind(flush))
        finally:
            _release_memory(dev)
            _control(channel, "calibrated", None)
    return cache.load().get(key)


def _storer(cache: CeilingCache, key: str):
    def store(name: str, value: float | None, clocks: dict | None, error: str | None) -> None:
        field, _, sub = name.partition(".")
        cache.put(key, field, value, sub or None)
        cache.put(key, "sm_clock_mhz", clocks, name)
        if error is not None:
            cache.put(key, "reference_errors", error, name)
    return store


def _release_memory(dev: Any) -> None:
    """Give the references' buffers (GiBs) back to the driver before the row allocates its own."""
    import torch

    if dev.device.startswith("cuda"):
        torch.cuda.empty_cache()


def _timer(device: str) -> Timer:
    from workbench.engine.measure.timing import make_timer

    return make_timer(device)


def _control(channel: Any, kind: str, payload: Any) -> None:
    if channel is not None:
        channel.control(kind, payload)
