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

Per device (issue #40): a kernel's candidates are a `CandidateLists`, one list per device family
it was measured on ("H100 sm_90": a name fragment and the compute capability) and a generic list
for any other device. The key of a choice names the device (name and sm_XY), the Triton version
and which list was timed, so a choice made on one GPU, or under another Triton, is never read on
another. A device with no list of its own tunes on first use over the generic list, and the
choice's note says so (`autotune: no candidate list for <device>: ...`).
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
from typing import Any, Callable, Mapping, Protocol, Sequence, cast

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
    shape and dtype, the kernel's version tag (bump it when the candidates change), the Triton
    version and the candidate list timed (a CandidateLists key, or "generic")."""

    op: str
    impl: str
    device: str
    shape: Mapping[str, int]
    dtype: str
    version: str = "1"
    triton: str = "?"
    candidates: str = "generic"

    def text(self) -> str:
        shape = "x".join(f"{k}{v}" for k, v in self.shape.items())
        return (f"{self.op}/{self.impl} {self.device} {shape} {self.dtype} v{self.version} {METHOD} "
                f"triton {self.triton} list {self.candidates}")

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


GENERIC = "generic"


@dataclass(frozen=True)
class CandidateLists:
    """A kernel's candidate configs per device: `by_device` maps a device key, "<name fragment>
    sm_XY" (e.g. "H100 sm_90"), to the list measured on that device family, the first its default;
    `generic` is the list for any other device (tuned on first use). A key matches a device tag
    ("NVIDIA H100 80GB HBM3 sm_90") when the compute capability is the same and the fragment is a
    word of the name (case-insensitive): "H100" matches "NVIDIA H100 80GB HBM3" and "H100 NVL",
    not "H1000"."""

    by_device: Mapping[str, Sequence[Config]]
    generic: Sequence[Config]

    def __post_init__(self) -> None:
        for key, configs in self.by_device.items():
            _split_device_key(key)
            if not configs:
                raise ValueError(f"CandidateLists: the list for {key!r} is empty")
        if not self.generic:
            raise ValueError("CandidateLists: the generic list is empty")

    @classmethod
    def same(cls, configs: Sequence[Config], devices: Sequence[str]) -> "CandidateLists":
        """One list measured on every device in `devices` and used as the generic list too (a
        memory-bound kernel whose candidates travel: the device still picks among them)."""
        return cls({d: configs for d in devices}, configs)

    def select(self, device: str | None) -> tuple[str, list[dict[str, Any]]]:
        """(the key of the list for `device`, its configs as dicts): the first by_device key that
        matches, else (GENERIC, the generic list). device None (no GPU): the generic list."""
        for key, configs in self.by_device.items():
            if device is not None and device_matches(key, device):
                return key, [dict(c) for c in configs]
        return GENERIC, [dict(c) for c in self.generic]


def _split_device_key(key: str) -> tuple[str, str]:
    """("H100", "sm_90") of "H100 sm_90"; ValueError naming the key otherwise."""
    fragment, _, sm = key.strip().rpartition(" ")
    if not fragment or not sm.startswith("sm_") or not sm[3:].isdigit():
        raise ValueError(f"device key {key!r}: expected '<name fragment> sm_XY', e.g. 'H100 sm_90'")
    return fragment, sm


def device_matches(key: str, device: str) -> bool:
    """Whether device key "H100 sm_90" matches device tag "NVIDIA H100 80GB HBM3 sm_90"."""
    fragment, sm = _split_device_key(key)
    name, _, device_sm = device.strip().rpartition(" ")
    if device_sm != sm:
        return False
    words, want = name.lower().split(), fragment.lower().split()
    return any(words[i:i + len(want)] == want for i in range(len(words) - len(want) + 1))


def triton_version() -> str:
    """The installed Triton's version ("none" without Triton): part of every choice's key."""
    try:
        import triton
    except ImportError:
        return "none"
    return str(getattr(triton, "__version__", "?"))


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
                rounds[label].append(float(bench(lambda c=config: run(c))))  # type: ignore[misc]
            except Exception as exc:  # noqa: BLE001 - as in the check: skipped, not fatal
                skip(config, exc)
                del rounds[label]
    timings = {label: statistics.median(times) for label, times in rounds.items()}
    if not timings:
        raise RuntimeError(f"autotune {key.text()}: no candidate ran: {'; '.join(skipped)}")
    best = min(timings, key=timings.get)  # type: ignore[arg-type]
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
    data = {"key": key.text(), "op": key.op, "impl": key.impl, "device": key.device, "triton": key.triton,
            "candidates": key.candidates, "shape": dict(key.shape), "dtype": key.dtype,
            "config": tuned.config, "timings_ms": tuned.timings_ms, "note": tuned.note,
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


def choose(ctx: Any, op: str, impl: str, spec: Any, candidates: Sequence[Config] | CandidateLists,
           run: Callable[[Config], Any] | None = None, version: str = "1") -> Tuned:
    """The config of (op, impl) at `spec` on the run's device.

    candidates: a CandidateLists (the list for this device, else the generic one), or one plain
    list (for every device: the key then says "generic"). With `run`, a builder's call: tuned
    now (or cached). Without, a launch's call (PTX view, launch geometry; ctx may be None there),
    or in a context with tune=False (the build-ahead worker): the cached choice, else the first
    candidate; nothing is launched. No GPU: the first candidate of the generic list.
    """
    lists = candidates if isinstance(candidates, CandidateLists) else CandidateLists({}, candidates)
    if not (compiled_on_gpu(ctx) if ctx is not None else _gpu_here()):
        return default_choice(lists.generic, "no CUDA device here: nothing timed")
    device = device_tag() or "?"
    return choose_on(device, op, impl, spec_shape(spec), str(spec.dtype), lists, version,
                     run if can_tune(ctx) else None, cache_root(ctx), tuning_off=run is not None and not can_tune(ctx))


def choose_on(device: str, op: str, impl: str, shape: Mapping[str, int], dtype: str, lists: CandidateLists,
              version: str, run: Callable[[Config], Any] | None, cache_dir: Path | None, *,
              tuning_off: bool = False, bench: Callable[[Callable[[], Any]], float] | None = None) -> Tuned:
    """choose() past the GPU test, for a known device tag: the list for `device` (else the generic
    one, and the note says so), keyed by device, Triton version and list; tuned with `run`, else
    the cached choice or the list's first config (tuning_off: a context that must not launch)."""
    list_key, configs = lists.select(device)
    key = TuneKey(op, impl, device, dict(shape), dtype, version, triton_version(), list_key)
    if run is None:
        why = f"not tuned yet for {key.text()}" + (" (tuning off in this context)" if tuning_off else "")
        hit = cached_config(key, cache_dir) or default_choice(configs, why)
    else:
        hit = autotune(key, configs, run, cache_dir, bench=bench)
    if list_key != GENERIC or not lists.by_device:
        return hit
    generic_note = (f"autotune: no candidate list for {device} (lists for {', '.join(lists.by_device)}): "
                    f"the generic list of {len(configs)} configs, tuned on this device on first use; ")
    return Tuned(hit.config, hit.source, generic_note + hit.note, hit.timings_ms, hit.tuning_s)


def _gpu_here() -> bool:
    import torch

    return torch.cuda.is_available()


class TunedCallable(Protocol):
    """A built callable that carries its autotuned choice in the attribute `tuned`: the row's
    `tuned` entry (`Tuned.record()`, a dict), or a `Tuned`. `attach` sets it; a plugin's builder
    may set `fn.tuned` itself. The engine reads it with `tuned_record(fn)` after the build."""

    tuned: Mapping[str, Any] | Tuned | None

    def __call__(self, *args: Any) -> Any: ...


def attach(fn: Callable[..., Any], tuned: Tuned) -> TunedCallable:
    """`fn` carrying `tuned.record()` as `fn.tuned` (the engine copies it into the result row)."""
    carrier = cast(TunedCallable, fn)
    carrier.tuned = tuned.record()
    return carrier


def tuned_record(fn: Callable[..., Any]) -> dict[str, Any] | None:
    """The result row's `tuned` entry of a built callable: its `tuned` attribute (TunedCallable)
    as a dict, None where it has none. Raises TypeError naming the value when `tuned` is neither
    a Tuned, a mapping (Tuned.record()'s shape) nor None."""
    value = getattr(fn, "tuned", None)
    if value is None:
        return None
    if isinstance(value, Tuned):
        return value.record()
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"the built callable's `tuned` is {value!r} ({type(value).__name__}); allowed: a "
                    f"workbench.tuning.Tuned, a dict as Tuned.record() makes, or None")
