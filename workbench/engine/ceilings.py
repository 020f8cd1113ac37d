"""Physical ceilings (MEASUREMENT.md rule 11): measured on the device on first use, cached per
device (name + driver) as JSON in the user cache folder, with the datasheet value beside them.

- copy_gbps: a large device-to-device copy, counting bytes read plus bytes written;
- matmul_tflops[key]: a large matrix product on random data, key "bfloat16", "float16",
  "float32" (IEEE, CUDA cores) or "tf32" (float32 inputs on TF32 tensor cores).
The compute ceiling of a non-matmul op is matmul_tflops["float32"] measured IEEE: elementwise
kernels compute in float32 on CUDA cores, never on tensor cores.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from workbench.engine.stats import StopRule, summarize
from workbench.engine.timing import Timer, measure

# NVIDIA datasheets, dense figures (no sparsity). H200: "NVIDIA H200 Tensor Core GPU" datasheet
# (SXM): 4.8 TB/s HBM3e, FP32 67 TFLOPS, TF32 494, BF16/FP16 989. H100 SXM: 3.35 TB/s, same FLOPs.
DATASHEET = {
    "H200": {"hbm_gbps": 4800.0,
             "matmul_tflops": {"bfloat16": 989.0, "float16": 989.0, "tf32": 494.0, "float32": 67.0}},
    "H100 80GB HBM3": {"hbm_gbps": 3350.0,
                       "matmul_tflops": {"bfloat16": 989.0, "float16": 989.0, "tf32": 494.0, "float32": 67.0}},
}
COPY_BYTES = 2**30          # 1 GiB each way: far beyond any L2
MATMUL_N = 8192             # 2 * 8192^3 = 1.1 TFLOP per product
# The matmul ceiling is the best of these sizes (memory permitting): on the H200 cuBLAS float32
# IEEE ran 50.8 TFLOP/s at 8192^3 but 53.4 at 16384^3, so an 8192-only ceiling flagged the
# lecture's 16384 row as a measurement error.
MATMUL_SIZES = (8192, 16384)
CACHE_VERSION = 2           # bumped when how a ceiling is measured changes: older entries re-measure
CEILING_RULE = StopRule(rep_ms=300.0, min_samples=10, target_rel_error=0.005)


@dataclass(frozen=True)
class Ceilings:
    """The ceilings for one row. compute_key names the matmul ceiling used ("float32", ...)."""

    copy_gbps: float | None = None
    compute_tflops: float | None = None
    compute_key: str | None = None
    datasheet_gbps: float | None = None
    datasheet_tflops: float | None = None


def datasheet_for(device_name: str | None) -> dict | None:
    """Datasheet figures for a device name ("NVIDIA H200" matches "H200"), or None."""
    for key, figures in DATASHEET.items():
        if device_name and key in device_name:
            return figures
    return None


def compute_key(matmul_like: bool, dtype: str, fp32_precision: str) -> str:
    """Which matmul ceiling bounds an op's arithmetic (module docstring)."""
    if not matmul_like:
        return "float32"
    if dtype == "float32":
        return "tf32" if fp32_precision == "tf32" else "float32"
    return dtype


def copy_gbps(bytes_moved: int, median_ms: float) -> float:
    """GB/s (1e9 bytes/s) of `bytes_moved` (read + written) in `median_ms`."""
    return bytes_moved / (median_ms * 1e-3) / 1e9


def matmul_tflops(n: int, median_ms: float) -> float:
    """TFLOP/s (1e12) of one n x n x n product (2 n^3 FLOPs) in `median_ms`."""
    return 2 * n**3 / (median_ms * 1e-3) / 1e12


class CeilingCache:
    """JSON file {device_key: {"copy_gbps": x, "matmul_tflops": {key: y}, "launch_floor_ms": z}}.

    cache_dir None keeps values in memory only. Writes are atomic (temporary file, rename).
    """

    def __init__(self, cache_dir: Path | None):
        self.path = Path(cache_dir) / "ceilings.json" if cache_dir else None
        self._memory: dict = {}

    def load(self) -> dict:
        """Entries of this CACHE_VERSION only (an entry measured another way is measured again)."""
        if self.path is None:
            return self._memory
        try:
            data = json.loads(self.path.read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return {}
        if not isinstance(data, dict):
            return {}
        return {k: v for k, v in data.items() if isinstance(v, dict) and v.get("version") == CACHE_VERSION}

    def get(self, device_key: str, field: str, sub: str | None = None) -> float | None:
        value = self.load().get(device_key, {}).get(field)
        return value.get(sub) if sub is not None and isinstance(value, dict) else value

    def put(self, device_key: str, field: str, value: float, sub: str | None = None) -> None:
        data = self.load()
        entry = data.setdefault(device_key, {})
        entry["version"] = CACHE_VERSION
        if sub is None:
            entry[field] = value
        else:
            entry.setdefault(field, {})[sub] = value
        self._write(data)

    def get_or_measure(self, device_key: str, field: str, measure_fn: Callable[[], float],
                       sub: str | None = None) -> float:
        value = self.get(device_key, field, sub)
        if value is None:
            value = float(measure_fn())
            self.put(device_key, field, value, sub)
        return value

    def _write(self, data: dict) -> None:
        if self.path is None:
            self._memory = data
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".ceilings.", dir=self.path.parent)
        with os.fdopen(fd, "w") as fh:
            json.dump(data, fh, indent=2)
        os.replace(tmp, self.path)


def measure_copy_gbps(device: str, timer: Timer, nbytes: int = COPY_BYTES,
                      rule: StopRule = CEILING_RULE) -> float:
    """Copy `nbytes` device to device; GB/s counting read plus written bytes."""
    import torch

    src = torch.ones(nbytes // 4, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    samples = measure(lambda: dst.copy_(src), timer, rule, warmup_ms=25.0)
    return copy_gbps(2 * src.numel() * 4, summarize(samples).median_ms)


def measure_matmul_tflops(device: str, key: str, timer: Timer, n: int = MATMUL_N,
                          rule: StopRule = CEILING_RULE) -> float:
    """One n^3 product of random matrices of `key`'s dtype; TF32 switched on only for "tf32"."""
    import torch

    dtype = {"bfloat16": torch.bfloat16, "float16": torch.float16}.get(key, torch.float32)
    gen = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(n, n, device=device, dtype=dtype, generator=gen)
    b = torch.randn(n, n, device=device, dtype=dtype, generator=gen)
    out = torch.empty(n, n, device=device, dtype=dtype)
    with _fp32_precision(device, "tf32" if key == "tf32" else "ieee"):
        samples = measure(lambda: torch.mm(a, b, out=out), timer, rule, warmup_ms=25.0)
    return matmul_tflops(n, summarize(samples).median_ms)


def measure_matmul_ceiling(device: str, key: str, timer: Timer, sizes: tuple[int, ...] = MATMUL_SIZES,
                           memory_bytes: int | None = None, rule: StopRule = CEILING_RULE) -> float:
    """The best TFLOP/s of `measure_matmul_tflops` over `sizes`, skipping a size whose three
    n x n operands need more than a quarter of `memory_bytes` (the smallest size always runs)."""
    itemsize = 2 if key in ("bfloat16", "float16") else 4
    fits = [n for n in sizes if memory_bytes is None or 3 * n * n * itemsize <= memory_bytes // 4]
    return max(measure_matmul_tflops(device, key, timer, n=n, rule=rule) for n in fits or [min(sizes)])


class _fp32_precision:
    """Temporarily set torch's CUDA float32 matmul precision (no-op on CPU)."""

    def __init__(self, device: str, value: str):
        import torch

        self.matmul = torch.backends.cuda.matmul if device.startswith("cuda") else None
        self.value = value

    def __enter__(self):
        if self.matmul is not None:
            self.attr = "fp32_precision" if hasattr(self.matmul, "fp32_precision") else "allow_tf32"
            self.saved = getattr(self.matmul, self.attr)
            setattr(self.matmul, self.attr, self.value if self.attr == "fp32_precision" else self.value == "tf32")

    def __exit__(self, *exc):
        if self.matmul is not None:
            setattr(self.matmul, self.attr, self.saved)


def ceilings_for(dev, op, spec, fp32_precision: str) -> Ceilings:
    """Ceilings for a row on `dev` (a DeviceSession), measuring and caching what is missing."""
    from workbench.engine.timing import make_timer

    cache, key = CeilingCache(dev.cache_dir), dev.info.cache_key
    timer = make_timer(dev.device)
    mem = dev.info.memory_bytes or 8 * COPY_BYTES
    copy = cache.get_or_measure(key, "copy_gbps",
                                lambda: measure_copy_gbps(dev.device, timer, min(COPY_BYTES, mem // 8)))
    ckey = compute_key(op.matmul_like, str(spec.dtype), fp32_precision)
    tflops = cache.get_or_measure(
        key, "matmul_tflops", lambda: measure_matmul_ceiling(dev.device, ckey, timer, memory_bytes=dev.info.memory_bytes),
        sub=ckey)
    sheet = datasheet_for(dev.info.name) or {}
    return Ceilings(copy_gbps=copy, compute_tflops=tflops, compute_key=ckey,
                    datasheet_gbps=sheet.get("hbm_gbps"),
                    datasheet_tflops=sheet.get("matmul_tflops", {}).get(ckey))
