"""Calibration (engine/calibrate.py): references measured once per device with the SM clock beside
them, errors recorded and not retried, and the supervisor's row clock paused meanwhile
(engine/supervisor.py). Injected measurers and clocks; no device."""

from __future__ import annotations

import types

import workbench.engine.measure.calibrate as calibrate
from workbench.engine.measure.ceilings import CACHE_VERSION, CeilingCache
from workbench.engine.measure.environment import DeviceInfo
from workbench.engine.supervisor import CALIBRATION_S, _JobRun


class Channel:
    def __init__(self):
        self.controls = []

    def control(self, kind, payload=None):
        self.controls.append((kind, payload))


class FakeDev:
    device = "cpu"

    def __init__(self, cache_dir, is_cuda=True):
        self.is_cuda, self.cache_dir, self.channel = is_cuda, cache_dir, Channel()
        self.info = DeviceInfo(name="NVIDIA H200", driver="580.1", memory_bytes=2**30)

    def flush(self):
        return None


def _measurers(calls):
    def make(device, timer, memory_bytes, flush):
        def one(name):
            calls.append(name)
            if name == "matmul_tflops.bfloat16":
                raise RuntimeError("bf16 gemm not supported here\nmore")
            return {"copy_gbps": 4200.0}.get(name, 1.0)
        return {name: (lambda name=name: one(name)) for name in calibrate.REFERENCES}
    return make


def test_calibration_measures_once_records_errors_and_tells_the_parent(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(calibrate, "reference_measurers", _measurers(calls))
    dev = FakeDev(tmp_path)
    entry = calibrate.calibrate(dev)
    assert dev.channel.controls == [("calibrating", "NVIDIA H200"), ("calibrated", None)]
    assert calls == list(calibrate.REFERENCES)
    assert entry["version"] == CACHE_VERSION and entry["copy_gbps"] == 4200.0
    assert entry["matmul_tflops"]["bfloat16"] is None
    assert entry["reference_errors"] == {"matmul_tflops.bfloat16": "RuntimeError: bf16 gemm not supported here"}
    assert set(entry["sm_clock_mhz"]) == set(calibrate.REFERENCES)  # None here: no NVML on this host
    again = FakeDev(tmp_path)
    assert calibrate.calibrate(again) == entry and again.channel.controls == [] and len(calls) == len(calibrate.REFERENCES)


def test_only_missing_references_are_measured(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(calibrate, "reference_measurers", _measurers(calls))
    dev = FakeDev(tmp_path)
    cache = CeilingCache(tmp_path)
    for name in calibrate.REFERENCES:
        if name != "launch_floor_ms_warm":
            field, _, sub = name.partition(".")
            cache.put(dev.info.cache_key, field, 2.0, sub or None)
    calibrate.calibrate(dev)
    assert calls == ["launch_floor_ms_warm"]


def test_no_calibration_off_cuda(tmp_path):
    dev = FakeDev(tmp_path, is_cuda=False)
    assert calibrate.calibrate(dev) is None and dev.channel.controls == []


def test_the_supervisor_pauses_the_row_clock_while_calibrating():
    now = [0.0]
    run = object.__new__(_JobRun)
    run.sup = types.SimpleNamespace(clock=lambda: now[0])
    run.worker = types.SimpleNamespace(note=lambda kind, payload: None)
    run.rows = [types.SimpleNamespace(settings=types.SimpleNamespace(timeout_s=10.0))]
    run.index, run.ready, run.mark, run.failure, run.calibrating_since = 0, True, 0.0, None, None
    now[0] = 2.0
    run._handle("calibrating", "NVIDIA H200")
    now[0] = 302.0                      # a 300 s calibration: far past timeout_s, not charged
    assert not run._timed_out()
    run._handle("calibrated", None)
    assert run.mark == 300.0            # the row has used 2 s of its 10
    now[0] = 309.0
    assert not run._timed_out()
    now[0] = 311.0
    assert run._timed_out() and run.failure == "timed out after 10 s (timeout_s)"
    stuck = object.__new__(_JobRun)
    stuck.sup, stuck.rows, stuck.index, stuck.ready = run.sup, run.rows, 0, True
    stuck.mark, stuck.failure, stuck.calibrating_since = now[0], None, now[0]
    now[0] += CALIBRATION_S + 1
    assert stuck._timed_out() and "calibrating" in stuck.failure


# -- which references a row asks for (references_for) ------------------------------------------------
def _row(op_name, impl_name, shape, dtype):
    from workbench.registry import discover

    op = discover().op(op_name)
    return op, op.get_impl(impl_name), op.make_spec(shape, dtype)


def test_an_elementwise_row_asks_for_the_copy_and_floors_only():
    op, impl, spec = _row("gelu", "pytorch", {"M": 16384, "N": 16384}, "float32")
    assert calibrate.references_for("NVIDIA H200", op, impl, spec, "ieee") == calibrate.ALWAYS


def test_a_matmul_row_asks_for_cublas_in_its_own_dtype_and_precision():
    op, impl, spec = _row("matmul", "pytorch", {"M": 256, "N": 256, "K": 256}, "bfloat16")
    assert calibrate.references_for("NVIDIA H200", op, impl, spec, "ieee") == (*calibrate.ALWAYS, "matmul_tflops.bfloat16")
    op, impl, spec = _row("matmul", "pytorch", {"M": 256, "N": 256, "K": 256}, "float32")
    assert calibrate.references_for("NVIDIA H200", op, impl, spec, "tf32")[-1] == "matmul_tflops.tf32"
    assert calibrate.references_for("NVIDIA H200", op, impl, spec, "ieee")[-1] == "matmul_tflops.float32"


def test_unknown_balance_or_cost_asks_for_the_compute_reference_too():
    op, impl, spec = _row("gelu", "pytorch", {"M": 64, "N": 64}, "float32")
    # no datasheet entry: the roofline's bound rests on the references, so both are measured
    assert calibrate.references_for("Some Future GPU", op, impl, spec, "ieee")[-1] == "matmul_tflops.float32"

    class NoCost:
        def cost(self, op, spec):
            raise RuntimeError("no cost model")
    assert calibrate.references_for("NVIDIA H200", op, NoCost(), spec, "ieee")[-1] == "matmul_tflops.float32"


def test_calibration_measures_only_the_names_asked_and_refuses_unknown_ones(tmp_path, monkeypatch):
    import pytest

    calls = []
    monkeypatch.setattr(calibrate, "reference_measurers", _measurers(calls))
    dev = FakeDev(tmp_path)
    calibrate.calibrate(dev, calibrate.ALWAYS)
    assert calls == list(calibrate.ALWAYS)
    calibrate.calibrate(FakeDev(tmp_path), (*calibrate.ALWAYS, "matmul_tflops.float16"))
    assert calls == [*calibrate.ALWAYS, "matmul_tflops.float16"]  # the cached ones are not measured again
    with pytest.raises(ValueError, match="matmul_tflops.int8"):
        calibrate.calibrate(FakeDev(tmp_path), ("matmul_tflops.int8",))
