"""Session settings (CONTRACTS.md "Session file", `settings`): one rule per key, types and ranges,
and the small helpers the structure checks share (`kind_of`, `suggest`, `unknown_keys`).
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import re
from typing import Any, Callable

from workbench.device_list import DEVICES_ALLOWED, parse_devices
from workbench.dtypes import Fp32Precision
from workbench.errors import WorkbenchError
from workbench.session.model import Settings
from workbench.session.yaml_io import Problems, child_path, show
from workbench.variants import TIMING_MODES

DEVICE_RE = re.compile(r"^(auto|cpu|cuda|cuda:\d+)$")


def kind_of(value: object) -> str:
    """A value's YAML kind in words, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def suggest(value: object, allowed: "list[str] | tuple[str, ...]") -> str:
    close = difflib.get_close_matches(str(value), [str(a) for a in allowed], n=1)
    return f" (did you mean {show(close[0])}?)" if close else ""


def unknown_keys(data: dict, path: str, allowed: tuple[str, ...], problems: Problems) -> None:
    for key in data:
        if key not in allowed:
            problems.add(child_path(path, key),
                         f"unknown key{suggest(key, allowed)}; allowed: {', '.join(allowed)}")


# -- settings --------------------------------------------------------------------------------
def _yaml_number_hint(value: Any) -> str:
    """YAML (1.1, PyYAML) reads `1e12` as text: a number needs a dot and a signed exponent."""
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return ""
        if not math.isfinite(number) or (number == 0 and any(c in "123456789" for c in value.lower().split("e")[0])):
            return f" (YAML reads {value} as text; as a number it is {number:g}: outside what a float holds)"
        return f" (YAML reads {value} as text: write {yaml_float_text(value)})"
    return ""


def yaml_float_text(text: str) -> str:
    """`text` (a number YAML 1.1 read as a string: '1e12', '5E-3') written so that YAML reads a
    float, the same digits: a dot in the mantissa and a signed exponent ('1.0e+12', '5.0e-3')."""
    text = text.strip()
    mantissa, _, exponent = text.lower().partition("e")
    if "." not in mantissa:
        mantissa += ".0"
    if not exponent:
        return mantissa
    if exponent[0] not in "+-":
        exponent = "+" + exponent
    return f"{mantissa}e{exponent}"


def _number(low: float, *, low_open: bool = False, high: float | None = None, high_open: bool = False):
    def rule(value: Any) -> tuple[Any, str | None]:
        bounds = f"{'>' if low_open else '>='} {low:g}" + (f" and {'<' if high_open else '<='} {high:g}" if high is not None else "")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None, f"must be a number {bounds}, got {show(value)}{_yaml_number_hint(value)}"
        bad_low = value <= low if low_open else value < low
        bad_high = high is not None and (value >= high if high_open else value > high)
        if bad_low or bad_high or value != value:
            return None, f"must be a number {bounds}, got {show(value)}"
        return float(value), None
    bound = {("exclusiveMinimum" if low_open else "minimum"): low}
    if high is not None:
        bound[("exclusiveMaximum" if high_open else "maximum")] = high
    rule.schema = {"type": "number", **bound}  # type: ignore[attr-defined]  # the same rule as JSON Schema (schemas.py)
    return rule


def _integer(low: int):
    def rule(value: Any) -> tuple[Any, str | None]:
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            word = "a positive integer" if low == 1 else f"an integer >= {low}"
            return None, f"must be {word}, got {show(value)}"
        return value, None
    rule.schema = {"type": "integer", "minimum": low}  # type: ignore[attr-defined]
    return rule


def _device(value: Any) -> tuple[Any, str | None]:
    if isinstance(value, str) and DEVICE_RE.match(value):
        return value, None
    return None, f"must be auto, cpu, cuda or cuda:N, got {show(value)}"


def _devices(value: Any) -> tuple[Any, str | None]:
    if not isinstance(value, str):
        return None, f"must be {DEVICES_ALLOWED}, got {show(value)}"
    try:
        parse_devices(value, "devices")
    except WorkbenchError as exc:
        return None, str(exc).removeprefix("devices: ")
    return value, None


def _boolean(value: Any) -> tuple[Any, str | None]:
    return (value, None) if isinstance(value, bool) else (None, f"must be true or false, got {show(value)}")


def _precision(value: Any) -> tuple[Any, str | None]:
    allowed = [p.value for p in Fp32Precision]
    return (value, None) if value in allowed else (None, f"must be one of {', '.join(allowed)}, got {show(value)}")


def _timing_mode(value: Any) -> tuple[Any, str | None]:
    return (value, None) if value in TIMING_MODES else (None, f"must be one of {', '.join(TIMING_MODES)}, got {show(value)}")


# each rule as JSON Schema (workbench/schemas.py builds the session file's schema from these)
_device.schema = {"type": "string", "pattern": DEVICE_RE.pattern}  # type: ignore[attr-defined]
_devices.schema = {"type": "string", "description": DEVICES_ALLOWED}  # type: ignore[attr-defined]
_boolean.schema = {"type": "boolean"}  # type: ignore[attr-defined]
_precision.schema = {"enum": [p.value for p in Fp32Precision]}  # type: ignore[attr-defined]
_timing_mode.schema = {"enum": list(TIMING_MODES)}  # type: ignore[attr-defined]

SETTING_RULES: dict[str, Callable[[Any], tuple[Any, str | None]]] = {
    "device": _device,
    "warmup_ms": _number(0),
    "rep_ms": _number(0, low_open=True),
    "min_samples": _integer(1),
    "target_rel_error": _number(0, low_open=True, high=1, high_open=True),
    "timeout_s": _number(0, low_open=True),
    "flush_l2": _boolean,
    "fp32_precision": _precision,
    "seed": _integer(0),
    "timing_mode": _timing_mode,
    "keep_samples": _boolean,
    "nvtx": _boolean,
    "devices": _devices,
}
SETTING_KEYS = tuple(f.name for f in dataclasses.fields(Settings))
SESSION_ONLY = ("devices",)  # where the whole session runs: refused in a run's settings


def check_settings(data: Any, path: str, problems: Problems) -> dict[str, Any]:
    """Validated settings overrides (only the keys present), normalised (ints -> floats for ms)."""
    if data is None:
        return {}
    if not isinstance(data, dict):
        problems.add(path, f"must be a mapping of settings, got {kind_of(data)}")
        return {}
    unknown_keys(data, path, SETTING_KEYS, problems)
    out = {}
    for key in SETTING_KEYS:
        if key in data:
            value, error = SETTING_RULES[key](data[key])
            if key in SESSION_ONLY and path != "settings":
                error = "is a session setting (settings.devices), not a run's"
            if error:
                problems.add(child_path(path, key), error)
            else:
                out[key] = value
    return out
