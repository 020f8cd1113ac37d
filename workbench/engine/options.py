"""How to run a session: `RunOptions`, plain data importable without torch (the TUI and the CLI
build it before any worker starts; engine/plan.py reads it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

# Cache folders a worker gets under workbench's cache folder unless the user set them (theirs stand:
# engine/plan.worker_env, engine/entry.set_environment).
USER_CACHE_VARS = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "TORCH_EXTENSIONS_DIR", "CUPY_CACHE_DIR")


@dataclass(frozen=True)
class RunOptions:
    """How to run a session. device: overrides every run's device (auto|cpu|cuda|cuda:N);
    kernels: extra plugin paths (--kernels); force: run rows estimated too large; argv and
    session_sha256: provenance; cache_dir: ceilings, manifests, Inductor and Triton caches
    (None: the platformdirs user cache folder "workbench"); build_dir: load_inline builds (None:
    cache_dir/build); trace_dir: write a chrome trace per profiled row there (None: none);
    report_dir: keep each `counters` row's Nsight Compute report there (None: cache_dir/ncu);
    warm_spare: keep a spare worker started ahead of need (engine/workers.py; False: never;
    None, the default: only when every row runs on a CUDA device, since CPU rows are timed on
    the host's cores that a starting spare would share); strict: one fresh worker process per
    row (for untrusted plugin code: no state can pass between rows; each row pays a start);
    start_method: "forkserver" (a zygote with torch imported forks the workers) | "spawn" |
    None (forkserver where the platform has it); build_ahead: compile a run's Triton and CUDA
    kernels in a worker of their own while its rows are timed (engine/build_ahead.py; None:
    where that does not disturb timing, i.e. CUDA rows that are not launch-bound; False: never;
    never in strict mode); done: records of rows already finished (by row key, from a stopped
    run's journal: `--resume`), put in the document as they are, not run; devices: the
    `--devices` request, parsed (workbench/device_list.py: ("all",), ("cuda:0", "cuda:2")), None:
    the session's settings.devices, else one device; cluster: "ray" runs the rows as Ray actors
    (engine/ray_cluster.py), None: on this host; rows_here (set by engine/spread.py for each
    place): only these rows run, each on the device given, and only they are in the document;
    ab: run the session's A/B rows here (engine/spread.py: the first place only); visible_gpus:
    how many GPUs CUDA_VISIBLE_DEVICES leaves this process (None: every GPU NVML sees), the
    count `--devices all` spreads over."""

    device: str | None = None
    kernels: tuple[str, ...] = ()
    force: bool = False
    argv: tuple[str, ...] = ()
    session_sha256: str | None = None
    cache_dir: Path | None = None
    build_dir: Path | None = None
    trace_dir: Path | None = None
    report_dir: Path | None = None
    warm_spare: bool | None = None
    strict: bool = False
    start_method: str | None = None
    build_ahead: bool | None = None
    done: Mapping[Any, dict] = field(default_factory=dict)
    devices: tuple[str, ...] | None = None
    cluster: str | None = None
    rows_here: Mapping[Any, str] | None = None
    ab: bool = True
    visible_gpus: int | None = None
