"""One results document from the documents of several places (engine/spread.py): plain data.

Each place (a local device's worker, a Ray actor) ran `run_plan` on its own rows, so its document
holds that device's environment: its name, SM count, driver, its measured references
(`ceilings`: copy, cuBLAS, launch floors, each with the SM clock sampled while it was measured)
and its datasheet. The merged document is shaped like a one-device run's:
- `results`: every row in session order (the order `order` gives), each record as its place
  wrote it; a record's `device` names its place ("cuda:2"; a Ray actor's "NODE_IP/cuda:N");
- `environment`: the first place's fields as they are (a one-device reader sees what it always
  saw), plus `devices`: each place's environment by its device string, so a row's references
  are `environment.devices[row.device]`;
- `provenance` and `ab` (A/B rows run on the first place) from the first place; `cancelled`
  when any place was cancelled, `cancel_signal` the first one set.
Ratios between rows (traffic.speedup_vs_pytorch) were computed inside each place, where a
point's rows all ran (engine/placement.py), so they never mix devices.
"""

from __future__ import annotations

from typing import Any, Sequence

from workbench.events import RowKey


def record_key(record: dict) -> tuple:
    """A hashable key of a record: (run_index, label, repr(sweep_value)) (sweep values may be lists)."""
    return (record["run_index"], record["label"], repr(record["sweep_value"]))


def row_key_text(key: RowKey) -> tuple:
    return (key[0], key[1], repr(key[2]))


def device_environment(environment: dict) -> dict:
    """A place's environment as it goes under `environment.devices` (without a nested map)."""
    return {k: v for k, v in environment.items() if k != "devices"}


def merge_documents(parts: Sequence[tuple[str, dict]], order: Sequence[RowKey]) -> dict:
    """The one document of a run spread over places (module docstring). parts: (device string,
    that place's document), the first place first; order: every row key in session order.
    Raises KeyError naming a row no place answered (a bug: each row belongs to one place)."""
    if not parts:
        raise ValueError("merge_documents needs at least one place's document")
    first = parts[0][1]
    by_key: dict[tuple, dict] = {}
    for _device, doc in parts:
        for record in doc["results"]:
            by_key[record_key(record)] = record
    merged = dict(first)
    merged["environment"] = dict(first["environment"])
    merged["environment"]["devices"] = {device: device_environment(doc["environment"]) for device, doc in parts}
    missing = [key for key in order if row_key_text(key) not in by_key]
    if missing:
        raise KeyError(f"no place answered row {missing[0]}")
    merged["results"] = [by_key[row_key_text(key)] for key in order]
    merged["cancelled"] = any(doc.get("cancelled") for _d, doc in parts)
    merged["cancel_signal"] = next((doc.get("cancel_signal") for _d, doc in parts if doc.get("cancel_signal")), None)
    return merged


def device_name_of(record: dict, doc: dict) -> Any:
    """The device *name* a record ran on ("NVIDIA H200", "cpu"): its place's entry under
    `environment.devices`, else the document's `environment.device` (a one-device run)."""
    environment = doc.get("environment") or {}
    place = (environment.get("devices") or {}).get(record.get("device"))
    if place is not None:
        return place.get("device")
    if str(record.get("device") or "").startswith("cuda"):
        return environment.get("device")
    return "cpu"
