"""SM clock and throttle reasons sampled during the timed window (MEASUREMENT.md rule 10, P4).

A thread polls NVML (nvidia-ml-py) every SAMPLE_INTERVAL_S while the row is timed: the SM clock
in MHz and the clock-event ("throttle") reason bits. `clock_fell` is true when the minimum
clock fell below 0.9 x the median, or a thermal or power limit was hit. Read-only: nothing
here changes a device setting. Without NVML (CPU, no driver) every field is None / empty.
"""

from __future__ import annotations

import threading
from typing import Any, Sequence

from workbench.engine.measure.stats import quantile

SAMPLE_INTERVAL_S = 0.005
CLOCK_FALL_RATIO = 0.9
# NVML clock-event reason bits (nvml.h, nvmlClocksEventReason*), named here so a renamed
# Python constant cannot break us.
REASON_BITS = {0x1: "gpu_idle", 0x2: "applications_clocks", 0x4: "sw_power_cap", 0x8: "hw_slowdown",
               0x10: "sync_boost", 0x20: "sw_thermal", 0x40: "hw_thermal", 0x80: "hw_power_brake",
               0x100: "display_clock"}
LIMIT_REASONS = frozenset({"sw_power_cap", "hw_slowdown", "sw_thermal", "hw_thermal", "hw_power_brake"})


def reason_names(bits: int) -> list[str]:
    return [name for bit, name in REASON_BITS.items() if bits & bit]


def clock_fell(clocks_mhz: Sequence[float], reasons: Sequence[str]) -> bool:
    """min < 0.9 x median, or a thermal/power limit among `reasons`."""
    if any(r in LIMIT_REASONS for r in reasons):
        return True
    if not clocks_mhz:
        return False
    ordered = sorted(clocks_mhz)
    return ordered[0] < CLOCK_FALL_RATIO * quantile(ordered, 0.5)


def clock_fields(clocks_mhz: Sequence[float], reason_bits: int, sampled: bool) -> dict:
    """timing fields sm_clock_mhz, throttle, clock_fell from the samples (None when not sampled)."""
    if not sampled or not clocks_mhz:
        return {"sm_clock_mhz": None, "throttle": [], "clock_fell": None}
    ordered = sorted(clocks_mhz)
    reasons = [r for r in reason_names(reason_bits) if r != "gpu_idle"]  # gaps between calls
    return {"sm_clock_mhz": {"min": ordered[0], "median": quantile(ordered, 0.5), "max": ordered[-1],
                             "n": len(ordered)},
            "throttle": reasons, "clock_fell": clock_fell(ordered, reasons)}


class ClockSampler:
    """Context manager sampling NVML from a thread; `fields()` after exit. info: DeviceInfo or None."""

    def __init__(self, info: Any | None, interval_s: float = SAMPLE_INTERVAL_S):
        self.info, self.interval_s = info, interval_s
        self.clocks_mhz: list[float] = []
        self.reason_bits = 0
        self._nvml = self._handle = None
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> "ClockSampler":
        if self.info is not None and self._open():
            self._sample()
            self._thread = threading.Thread(target=self._loop, name="wb-nvml-clock", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._thread is not None:
            self._done.set()
            self._thread.join(timeout=1.0)
            self._sample()

    def limited(self) -> bool:
        """Whether a power or thermal limit reason was seen so far (False without NVML)."""
        return any(reason in LIMIT_REASONS for reason in reason_names(self.reason_bits))

    def fields(self) -> dict:
        return clock_fields(self.clocks_mhz, self.reason_bits, sampled=self._handle is not None)

    def _open(self) -> bool:
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nvml = pynvml
        except Exception:  # no NVML here: the fields stay None
            return False
        self._handle = self._by_bus_id() or self._by_index()
        return self._handle is not None

    def _by_bus_id(self) -> Any:
        """The NVML handle of our device by PCI bus id (robust to CUDA_VISIBLE_DEVICES)."""
        try:
            return self._nvml.nvmlDeviceGetHandleByPciBusId(self.info.pci_bus_id) if self.info.pci_bus_id else None
        except Exception:
            return None

    def _by_index(self) -> Any:
        """Fallback: NVML index 0 when this machine has one GPU (else unknown: no sampling)."""
        try:
            return self._nvml.nvmlDeviceGetHandleByIndex(0) if self._nvml.nvmlDeviceGetCount() == 1 else None
        except Exception:
            return None

    def _loop(self) -> None:
        while not self._done.wait(self.interval_s):
            self._sample()

    def _sample(self) -> None:
        nvml = self._nvml
        try:
            self.clocks_mhz.append(float(nvml.nvmlDeviceGetClockInfo(self._handle, nvml.NVML_CLOCK_SM)))
            get = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
                nvml.nvmlDeviceGetCurrentClocksThrottleReasons
            self.reason_bits |= int(get(self._handle))
        except Exception:  # one failed poll is not worth a row
            pass
