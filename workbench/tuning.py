"""Autotuning for the op files' kernels: pick a config by timing the candidates on this GPU, once
per (device, shape, dtype), and cache the choice on disk.

    tuned = autotune(key, candidates, run, cache_dir)   # in a builder: the tuning is build time
    cfg = cached_config(key, cache_dir) or candidates[0]  # in a launch: no timing, the same choice

`run(config)` launches the kernel with `config` and returns its output. Every candidate is first
checked against the first one's output (a config that computes something else is dropped, with a
note: the engine checks the winner against float64 later); the survivors are timed with
`triton.testing.do_bench` (median of repeated runs, L2 flushed between them, the documented
timing call of Triton's own autotuner) in ROUNDS rounds, forward and backward in turn, each
config's time the median of its rounds: timed one after the other, a power-limited GPU's clock
drift ranked the configs by when they ran (the long-row CUDA softmax's tuner picked a config at
88.9% of the copy on the H200 where another had measured 92.8-93.4%; README, issue #19). With
the rounds alternating, a drift linear in time adds the same to every config's median of four.
One JSON file per key under `cache_dir/autotune/` holds
the winner, every candidate's median and the tuning time, so parallel builds never write the same
file and a rerun on the same device and shape costs a file read. Without a GPU nothing is timed:
the first candidate is the config, and the note says so.
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

Config = Mapping[str, Any]
# Sanity bound for the candidate-versus-first-candidate check (not the engine's tolerance): a
# config that differs by more than this computes something else (a bad tile, a race).
AGREE_RTOL = {"float32": 1e-4, "float16": 2e-2, "bfloat16": 5e-2}
WARMUP_MS, REP_MS = 10, 10  # do_bench's budgets per candidate and round
ROUNDS = 4  # forward, backward, forward, backward: linear drift cancels in each median of four
METHOD = "rounds4"  # in the cache key: a choice made by an older method is tuned again


@dataclass(frozen=True)
class TuneKey:
    """What a choice is valid for: the op, the implementation, the device (name and sm_XY), the
    shape and dtype, and the kernel's version tag (bump it when the candidates change)."""

    op: str
    impl: str
    device: str
    shape: Mapping[str, int]
    dtype: str
    version: str = "1"

    def text(self) -> str:
        shape = "x".join(f"{k}{v}" for k, v in self.shape.items())
        return f"{self.op}/{self.impl} {self.device} {shape} {self.dtype} v{self.version} {METHOD}"

    def file(self, cache_dir: Path) -> Path:
        digest = hashlib.sha256(self.text().encode()).hexdigest()[:16]
        return Path(cache_dir) / "autotune" / f"{self.op}-{self.impl}-{digest}.json"


@dataclass(frozen=True)
class Tuned:
    """The chosen config and how it was chosen (source: "tuned", "cached" or "default")."""

    config: dict[str, Any]
    source: str
    note: str
    timings_ms: dict[str, float] = field(default_factory=dict)
    tuning_s: float = 0.0

    def record(self) -> dict[str, Any]:
        """The results row's `tuned` entry."""
        return {"config": dict(self.config), "source": self.source, "note": self.note,
                "timings_ms": dict(self.timings_ms), "tuning_s": round(self.tuning_s, 3)}


def config_label(config: Config) -> str:
    """`BLOCK_M=128 BLOCK_N=256 num_warps=8` (stable order: as given)."""
    return " ".join(f"{k}={v}" for k, v in config.items())


def device_tag() -> str | None:
    """`NVIDIA H200 sm_90` for the current CUDA device, or None without one."""
    import torch

    if not torch.cuda.is_available():
        return None
    major, minor = torch.cuda.get_device_capability()
    return f"{torch.cuda.get_device_name()} sm_{major}{minor}"


def cached_config(key: TuneKey, cache_dir: Path | None) -> Tuned | None:
    """The cached choice for `key`, or None (no cache dir, no file, or an unreadable one)."""
    if cache_dir is None:
        return None
    try:
        data = json.loads(key.file(cache_dir).read_text())
    except (OSError, ValueError):
        return None
    if data.get("key") != key.text() or not isinstance(data.get("config"), dict):
        return None
    return Tuned(dict(data["config"]), "cached", f"autotune: cached choice for {key.text()} "
                 f"(tuned in {data.get('tuning_s', 0):.1f} s over {len(data.get('timings_ms', {}))} configs)",
                 dict(data.get("timings_ms", {})), 0.0)


def autotune(key: TuneKey, candidates: Sequence[Config], run: Callable[[Config], Any],
             cache_dir: Path | None, *, bench: Callable[[Callable[[], Any]], float] | None = None) -> Tuned:
    """The fastest correct candidate for `key` (cached after the first call).

    candidates: configs, the first the default (always kept: it is the reference); run(config):
    one launch returning the output tensor; bench(fn) -> median ms of one round (default
    do_bench). The configs are timed in ROUNDS rounds, forward and backward in turn; a config's
    time is the median of its rounds. A candidate that raises (out of shared memory, too many
    registers), in its check or in any round, or disagrees with the first is skipped and named in
    the note. Raises ValueError for an empty candidate list, RuntimeError when none ran.
    """
    if not candidates:
        raise ValueError(f"autotune {key.text()}: no candidate configs")
    hit = cached_config(key, cache_dir)
    if hit is not None:
        return hit
    t0 = time.perf_counter()
    bench = bench or _do_bench
    reference = run(candidates[0])
    survivors, skipped = [], []

    def skip(config: Config, exc: Exception) -> None:
        skipped.append(f"{config_label(config)} ({type(exc).__name__}: "
                       f"{str(exc).splitlines()[0][:80] if str(exc) else ''})")
    for config in candidates:
        try:
            if config is not candidates[0] and not _agrees(run(config), reference, key.dtype):
                skipped.append(f"{config_label(config)} (output differs from the first config)")
                continue
        except Exception as exc:  # a config the device cannot run is skipped, not fatal
            skip(config, exc)
            continue
        survivors.append(config)
    rounds: dict[str, list[float]] = {config_label(c): [] for c in survivors}
    for index in range(ROUNDS):
        for config in (survivors if index % 2 == 0 else survivors[::-1]):
            label = config_label(config)
            if label not in rounds:
                continue  # raised in an earlier round
            try:
                rounds[label].append(float(bench(lambda c=config: run(c))))
            except Exception as exc:  # noqa: BLE001 - as in the check: skipped, not fatal
                skip(config, exc)
                del rounds[label]
    timings = {label: statistics.median(times) for label, times in rounds.items()}
    if not timings:
        raise RuntimeError(f"autotune {key.text()}: no candidate ran: {'; '.join(skipped)}")
    best = min(timings, key=timings.get)
    config = dict(next(c for c in candidates if config_label(c) == best))
    tuning_s = time.perf_counter() - t0
    note = (f"autotune: {best} fastest of {len(timings)} configs ({timings[best]:.4f} ms, median of "
            f"{ROUNDS} alternating rounds), tuned in {tuning_s:.1f} s on {key.device}") + (
            f"; skipped {', '.join(skipped)}" if skipped else "")
    tuned = Tuned(config, "tuned", note, timings, tuning_s)
    if cache_dir is not None:
        _write(key, tuned, cache_dir)
    return tuned


def default_choice(candidates: Sequence[Config], why: str) -> Tuned:
    """The first candidate, untimed (no GPU, or tuning switched off): `why` says which."""
    return Tuned(dict(candidates[0]), "default", f"autotune: first config ({why})")


def _agrees(out: Any, reference: Any, dtype: str) -> bool:
    import torch

    rtol = AGREE_RTOL.get(dtype, 1e-2)
    return bool(torch.allclose(out.float(), reference.float(), rtol=rtol, atol=rtol))


def _do_bench(fn: Callable[[], Any]) -> float:
    import triton.testing

    return float(triton.testing.do_bench(fn, warmup=WARMUP_MS, rep=REP_MS, return_mode="median"))


def _write(key: TuneKey, tuned: Tuned, cache_dir: Path) -> None:
    """Atomic write (a temp file in the same directory, then os.replace)."""
    path = key.file(cache_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"key": key.text(), "config": tuned.config, "timings_ms": tuned.timings_ms,
            "tuning_s": round(tuned.tuning_s, 3), "tuned_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=1)
    os.replace(tmp, path)


# -- what the op files call ------------------------------------------------------------------
def spec_shape(spec: Any) -> dict[str, int]:
    """The integer fields of a spec (its shape), in declaration order."""
    import dataclasses

    return {f.name: getattr(spec, f.name) for f in dataclasses.fields(spec)
            if isinstance(getattr(spec, f.name), int) and not isinstance(getattr(spec, f.name), bool)}


def cache_root(ctx: Any) -> Path:
    """Where choices are cached: the run's build directory, else the user cache (platformdirs)."""
    if ctx is not None and getattr(ctx, "build_dir", None) is not None:
        return Path(ctx.build_dir)
    import platformdirs

    return Path(platformdirs.user_cache_dir("workbench"))


def compiled_on_gpu(ctx: Any) -> bool:
    """Whether the run is on a CUDA device with compiled (not interpreted) kernels."""
    import torch

    return ctx is not None and ctx.is_cuda and not ctx.interpret and torch.cuda.is_available()


def can_tune(ctx: Any) -> bool:
    """Whether a builder may time candidates here: compiled kernels on a CUDA device, and a
    context that allows launches (BuildContext.tune: not the build-ahead worker's)."""
    return compiled_on_gpu(ctx) and getattr(ctx, "tune", True)


def choose(ctx: Any, op: str, impl: str, spec: Any, candidates: Sequence[Config],
           run: Callable[[Config], Any] | None = None, version: str = "1") -> Tuned:
    """The config of (op, impl) at `spec` on the run's device.

    With `run`, a builder's call: tuned now (or cached). Without, a launch's call (PTX view,
    launch geometry; ctx may be None there), or in a context with tune=False (the build-ahead
    worker): the cached choice, else the first candidate; nothing is launched. No GPU: the first
    candidate.
    """
    if not (compiled_on_gpu(ctx) if ctx is not None else _gpu_here()):
        return default_choice(candidates, "no CUDA device here: nothing timed")
    key = TuneKey(op, impl, device_tag() or "?", spec_shape(spec), str(spec.dtype), version)
    if run is None or not can_tune(ctx):  # a launch's call, or a context that must not launch
        why = f"not tuned yet for {key.text()}" + ("" if run is None else " (tuning off in this context)")
        return cached_config(key, cache_root(ctx)) or default_choice(candidates, why)
    return autotune(key, candidates, run, cache_root(ctx))


def _gpu_here() -> bool:
    import torch

    return torch.cuda.is_available()


def attach(fn: Callable[..., Any], tuned: Tuned) -> Callable[..., Any]:
    """`fn` carrying `tuned.record()` as `fn.tuned` (the engine copies it into the result row)."""
    fn.tuned = tuned.record()
    return fn
