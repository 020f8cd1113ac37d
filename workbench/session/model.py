"""The session as data: frozen dataclasses mirroring the YAML of CONTRACTS.md ("Session file").

Loading/validating YAML and saving lives in `workbench.session.api`; this module is the plain model
that the engine (`run_plan`), replay and the TUI share. Change with `dataclasses.replace`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

SCHEMA_VERSION = 1
ACTIONS = ("check", "bench", "profile", "counters", "ptx")


@dataclass(frozen=True)
class Settings:
    """Run settings (CONTRACTS.md); every key may also be overridden per run.

    warmup_ms: warm-up budget (at least one untimed call); rep_ms: time cap for timed
    repetitions; min_samples: never fewer samples; target_rel_error: stop once the median's
    estimated relative standard error is below this; timeout_s: per row, build included.
    """

    device: str = "auto"            # auto | cpu | cuda | cuda:N
    warmup_ms: float = 25.0
    rep_ms: float = 100.0
    min_samples: int = 10
    target_rel_error: float = 0.005
    timeout_s: float = 120.0
    flush_l2: bool = True
    fp32_precision: str = "ieee"    # ieee | tf32
    seed: int = 0
    timing_mode: str = "eager"      # eager | graph (engine/graph_mode.py; `<impl>+graph` per row)
    keep_samples: bool = False      # keep timing.samples_ms in the results (--compare's intervals)
    nvtx: bool = True               # NVTX ranges named after the row on a CUDA device (engine/measure/nvtx.py)
    devices: str | None = None      # session level only: all | cpu | cuda:0,cuda:2 (engine/placement.py)


@dataclass(frozen=True)
class ImplRef:
    """One implementation in a run: its registered name, param overrides, display label."""

    name: str
    params: Mapping[str, Any] = field(default_factory=dict)
    label: str | None = None

    @property
    def display(self) -> str:
        return self.label or self.name


@dataclass(frozen=True)
class ABSide:
    """One side of a run's `compare: [A, B]`: a label of the run's impls or an implementation
    name (`+graph` allowed), with params/label as in `impls`; plugin: a plugin file that
    registers `name` (loaded privately for this side); rev: a git revision of the file that
    defines `name` (that version, loaded privately). engine/ab_sides.py resolves them."""

    name: str
    params: Mapping[str, Any] = field(default_factory=dict)
    label: str | None = None
    plugin: str | None = None
    rev: str | None = None

    @property
    def display(self) -> str:
        where = f"@{self.rev}" if self.rev else (f"@{self.plugin.rsplit('/', 1)[-1]}" if self.plugin else "")
        return self.label or f"{self.name}{where}"


@dataclass(frozen=True)
class Sweep:
    """Tied parameters (shape fields or impl params) set together to each value in turn."""

    params: tuple[str, ...]
    values: tuple[Any, ...]


@dataclass(frozen=True)
class RunSpec:
    """One run of a session. impls None means `all` (every registered implementation)."""

    op: str
    impls: tuple[ImplRef, ...] | None = None
    shape: Mapping[str, Any] = field(default_factory=dict)
    dtype: str | None = None
    actions: tuple[str, ...] = ("check", "bench")
    sweep: Sweep | None = None
    settings: Mapping[str, Any] = field(default_factory=dict)  # per-run overrides of Settings
    compare: tuple[ABSide, ABSide] | None = None  # A/B with confidence (engine/ab.py)


@dataclass(frozen=True)
class Session:
    name: str
    runs: tuple[RunSpec, ...]
    description: str | None = None
    plugins: tuple[str, ...] = ()
    settings: Settings = field(default_factory=Settings)
    schema_version: int = SCHEMA_VERSION


def device_settings(session: Session) -> list[tuple[str, str]]:
    """(where, device) for each device the session's settings name: `settings.device`, then
    each run's own `runs[i].settings.device` (what --replay checks against the host and the TUI
    warns of)."""
    found: list[tuple[str, Any]] = [("settings.device", session.settings.device)]
    found += [(f"runs[{i}].settings.device", run.settings.get("device")) for i, run in enumerate(session.runs)]
    return [(where, device) for where, device in found if isinstance(device, str)]
