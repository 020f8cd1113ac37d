"""The streams gate's decision on CPU with synthetic windows (MEASUREMENT.md rule 13, issue 38 class
5): a model device runs a call's work split between the timed stream and a side stream (sharing
the device's bandwidth while both run); the event window ends at the timed stream's end event, the
device-wide window when the side stream is done too. CudaEventTimer.spill_ms reads that difference
through a fake `torch.cuda.synchronize` and a fake clock, and unjoined_failure decides. The GPU
version of these cases is tests/plugins/cheats_cuda.py in benchmarks/stages/cheats.py."""

from __future__ import annotations

import pytest

from workbench.engine.measure.timing import UNJOINED_MIN_MS, CudaEventTimer, unjoined_failure

IDLE_SYNC_MS = 0.01  # an idle synchronize's own time (H100/H200: ~5-20 us)


def windows(work_ms: float, on_side: float, joined: bool) -> tuple[float, float]:
    """(event window, device-wide window) in ms of one call whose work (work_ms alone on the
    device) puts the share `on_side` on a side stream started with the timed stream's part: while
    both run each gets half the device; joined: the timed stream waits for the side one before
    its end event."""
    timed, side = work_ms * (1 - on_side), work_ms * on_side
    both = 2 * min(timed, side)          # both streams busy, half speed each
    device = both + abs(timed - side)    # then the longer one alone at full speed
    timed_done = 2 * timed if timed <= side else device
    return (device if joined else timed_done), device


class ModelDevice:
    """The fake torch for CudaEventTimer.spill_ms: the host clock starts at the end event; a
    synchronize returns when the device-wide window has ended, plus its own idle time."""

    def __init__(self, event_ms: float, device_ms: float):
        self.now, self.busy_until = event_ms, device_ms
        self.cuda = self

    def synchronize(self) -> None:
        self.now = max(self.now, self.busy_until) + IDLE_SYNC_MS

    def clock(self) -> float:
        return self.now / 1e3


def spill(event_ms: float, device_ms: float) -> float:
    timer = CudaEventTimer()
    timer._torch = device = ModelDevice(event_ms, device_ms)
    return timer.spill_ms(clock=device.clock)


def gate(work_ms: float, on_side: float, joined: bool, samples: int = 3) -> str | None:
    event_ms, device_ms = windows(work_ms, on_side, joined)
    return unjoined_failure([spill(event_ms, device_ms)] * samples, event_ms)


def test_the_model_windows():
    assert windows(1.0, 0.0, joined=False) == (1.0, 1.0)
    assert windows(1.0, 0.9, joined=False) == pytest.approx((0.2, 1.0))   # 10% at half speed, then 80% alone
    assert windows(1.0, 0.9, joined=True) == pytest.approx((1.0, 1.0))
    assert spill(0.2, 1.0) == pytest.approx(0.8) and spill(1.0, 1.0) == pytest.approx(0.0)


@pytest.mark.parametrize("work_ms", [0.2, 1.0, 10.0])
def test_ninety_percent_on_an_unjoined_side_stream_fails_the_streams_gate(work_ms):
    reason = gate(work_ms, 0.9, joined=False)
    assert reason is not None and reason.startswith("streams gate: work left on another stream"), reason


@pytest.mark.parametrize("on_side", [0.0, 0.5, 0.9, 1.0])
def test_work_joined_back_into_the_timed_stream_passes(on_side):
    assert gate(1.0, on_side, joined=True) is None


def test_a_small_unjoined_share_within_the_bound_passes_and_a_larger_one_fails():
    # 5% on the side: it runs beside the timed 95% and ends first: nothing is left after the end event
    assert gate(1.0, 0.05, joined=False) is None
    # 60% on the side: 0.2 of the work is left after the end event (> 10% of the 0.8 ms window)
    assert gate(1.0, 0.6, joined=False) is not None


def test_below_the_floor_the_gate_cannot_tell_and_says_nothing():
    # a 0.04 ms kernel leaves 0.032 ms behind: under UNJOINED_MIN_MS (idle synchronize jitter);
    # such a row is bounded by the datasheet peak instead (its events time 5x too fast)
    event_ms, device_ms = windows(0.04, 0.9, joined=False)
    assert device_ms - event_ms < UNJOINED_MIN_MS
    assert gate(0.04, 0.9, joined=False) is None
