"""The `--devices` / `settings.devices` request: parsed and checked without torch (the session
loader, the CLI and engine/placement.py read it)."""

from __future__ import annotations

import re
from typing import Sequence

from workbench.errors import WorkbenchError

DEVICES_ALLOWED = "all, cpu, or a comma-separated list of cuda:N (e.g. cuda:0,cuda:2)"
_CUDA_RE = re.compile(r"^cuda:(\d+)$")


def parse_devices(value: str, what: str = "--devices") -> tuple[str, ...]:
    """The request as written: ("all",), ("cpu",) or ("cuda:0", "cuda:2"). Raises
    WorkbenchError naming the value and what is allowed: an empty entry, an unknown word, a
    device listed twice, or cpu mixed with GPUs."""
    parts = tuple(p.strip() for p in str(value).split(","))
    if len(parts) == 1 and parts[0] in ("all", "cpu"):
        return parts
    bad = [p for p in parts if not _CUDA_RE.match(p)]
    if bad:
        raise WorkbenchError(f"{what}: {bad[0]!r} in {value!r} is not a device; allowed: {DEVICES_ALLOWED}")
    dup = next((p for p in parts if parts.count(p) > 1), None)
    if dup is not None:
        raise WorkbenchError(f"{what}: {dup!r} appears twice in {value!r}; list each device once")
    return parts


def resolve_devices(requested: Sequence[str], gpu_count: int, what: str = "--devices") -> list[str]:
    """Torch device strings for the request: "all" -> cuda:0..cuda:{gpu_count-1} (["cpu"] on a
    host without a GPU); "cpu" -> ["cpu"]; cuda:N entries as given, each below gpu_count.
    gpu_count: the GPUs NVML sees (machine.nvml_gpus). Raises WorkbenchError for a cuda:N this
    host does not have."""
    if tuple(requested) == ("all",):
        return [f"cuda:{i}" for i in range(gpu_count)] or ["cpu"]
    if tuple(requested) == ("cpu",):
        return ["cpu"]
    for device in requested:
        index = int(_CUDA_RE.match(device).group(1))
        if index >= gpu_count:
            have = f"cuda:0..cuda:{gpu_count - 1}" if gpu_count else "no GPU"
            raise WorkbenchError(f"{what}: {device} is not on this host (it has {have}); allowed: {DEVICES_ALLOWED}")
    return list(requested)


def visible_gpu_count(cuda_visible_devices: str | None) -> int | None:
    """How many GPUs CUDA_VISIBLE_DEVICES leaves visible: its entries up to the first empty or
    negative one (CUDA ignores the rest); None when it is not set (every GPU NVML sees)."""
    if cuda_visible_devices is None:
        return None
    count = 0
    for entry in cuda_visible_devices.split(","):
        entry = entry.strip()
        if not entry or entry.startswith("-"):
            break
        count += 1
    return count
