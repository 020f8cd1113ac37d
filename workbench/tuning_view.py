"""`--doctor`'s view of the kernels' tuning cache (workbench/tuning.py), torch-free: the choices
cached under `<cache>/build/autotune/`, each keyed by device (name and sm_XY), Triton version and
candidate list; those made on this machine's GPU listed one a line, the others counted per device.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def autotune_dir(cache_dir: Path) -> Path:
    """Where the engine's builds cache their tuned choices (its default build dir, `<cache>/build`)."""
    return Path(cache_dir) / "build" / "autotune"


def entry_line(data: dict[str, Any]) -> str:
    """`matmul/triton M4096xN4096xK4096 bfloat16: BLOCK_M=128 ... (list H100 sm_90, triton 3.6.0)`."""
    shape = "x".join(f"{k}{v}" for k, v in (data.get("shape") or {}).items())
    config = " ".join(f"{k}={v}" for k, v in (data.get("config") or {}).items())
    return (f"{data.get('op')}/{data.get('impl')} {shape} {data.get('dtype')}: {config} "
            f"(list {data.get('candidates')}, triton {data.get('triton')})")


def tuning_summary(cache_dir: Path, device_name: str | None) -> dict[str, Any]:
    """{"path", "entries", "device", "this_device": [lines], "other_devices": {device: count},
    "older_format": count}. device_name: the GPU's name as NVML gives it (None: no GPU); an entry
    is this device's when its device tag is that name and an sm_XY."""
    folder = autotune_dir(cache_dir)
    files = sorted(folder.glob("*.json")) if folder.is_dir() else []
    mine: list[str] = []
    others: dict[str, int] = {}
    older = 0
    for path in files:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            older += 1
            continue
        device = data.get("device") if isinstance(data, dict) else None
        if not device:  # written before the key named device and Triton (issue #40): never read now
            older += 1
            continue
        if device_name and device.rpartition(" ")[0] == device_name:
            mine.append(entry_line(data))
        else:
            others[device] = others.get(device, 0) + 1
    return {"path": str(folder), "entries": len(files), "device": device_name or "-",
            "this_device": mine, "other_devices": others, "older_format": older}
