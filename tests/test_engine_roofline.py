"""Launch floor, ceilings (cache, arithmetic), traffic/roofline and launch geometry, with injected
timers and hand-checked tiny specs (MEASUREMENT.md rules 5 and 11, P1)."""

from __future__ import annotations

import json

import pytest

from workbench.cost import Cost
from workbench.engine.measure.calibrate import measure_copy_gbps, measure_matmul_tflops
from workbench.engine.measure.ceilings import CeilingCache, Ceilings, compute_key, copy_gbps, datasheet_for, matmul_tflops
from workbench.engine.measure.environment import DeviceInfo
from workbench.engine.measure.launch_floor import below_floor_flag, is_launch_bound, measure_floor_ms
from workbench.engine.measure.stats import StopRule
from workbench.engine.measure.timing import SerialTimer
from workbench.engine.measure.traffic import above_peak, machine_balance, traffic_record
from workbench.results.document import TIMING_KEYS, TRAFFIC_KEYS, blank

FEW = StopRule(rep_ms=1e6, min_samples=5)


class ConstTimer(SerialTimer):
    """Calls the callable (so the real work happens) and reports a fixed time."""

    name = "fake"

    def __init__(self, ms: float):
        self.ms, self.calls, self.batches = ms, 0, []

    def time_batch(self, call, n, flush=None, headroom_ms=0.0):
        self.batches.append(n)
        return super().time_batch(call, n, flush)

    def time_call(self, call) -> float:
        call()
        self.calls += 1
        return self.ms


# -- launch floor ---------------------------------------------------------------------------------
def test_floor_is_measured_like_a_row_with_an_injected_timer():
    timer = ConstTimer(0.0042)
    assert measure_floor_ms("cpu", timer, rule=FEW) == pytest.approx(0.0042)
    # warm-up: one-sample batches for 10 ms of host time; then one batch of min_samples
    assert timer.batches[-1] == 5 and set(timer.batches[:-1]) == {1}


def test_launch_bound_rule():
    assert is_launch_bound(0.010, None)            # under 20 us
    assert is_launch_bound(0.030, 0.016)           # under twice the floor
    assert not is_launch_bound(0.5, 0.005)


def test_a_median_below_the_floor_is_flagged_and_never_changed():
    measured = dict(median_ms=0.0040, p20_ms=0.0039, p80_ms=0.0041, min_ms=0.0035, mean_ms=0.0040)
    timing = blank(TIMING_KEYS, **measured)
    flag = below_floor_flag(timing, floor_ms=0.0045)
    assert "below the launch floor" in flag and timing["below_launch_floor"] is True
    assert {k: timing[k] for k in measured} == measured  # the statistics stay as measured
    above = blank(TIMING_KEYS, median_ms=0.01)
    assert below_floor_flag(above, 0.0045) is None and above["median_ms"] == 0.01
    assert above["below_launch_floor"] is False
    unknown = blank(TIMING_KEYS, median_ms=0.001)
    assert below_floor_flag(unknown, None) is None and unknown["below_launch_floor"] is None


# -- ceilings ----------------------------------------------------------------------------------------
def test_ceiling_arithmetic():
    assert copy_gbps(2 * 2**30, 0.5) == pytest.approx(2 * 2**30 / 0.5e-3 / 1e9)
    assert matmul_tflops(8192, 1.0) == pytest.approx(2 * 8192**3 / 1e-3 / 1e12)


def test_copy_and_matmul_ceilings_with_injected_timers():
    assert measure_copy_gbps("cpu", ConstTimer(1.0), nbytes=4096, rule=FEW) == pytest.approx(8192 / 1e-3 / 1e9)
    assert measure_matmul_tflops("cpu", "float32", ConstTimer(2.0), n=16, rule=FEW) == \
        pytest.approx(2 * 16**3 / 2e-3 / 1e12)


def test_ceiling_cache_measures_once_per_device(tmp_path):
    calls = []

    def measure():
        calls.append(1)
        return 4226.0
    cache = CeilingCache(tmp_path)
    key = DeviceInfo(name="NVIDIA H200", driver="580.1").cache_key
    assert cache.get_or_measure(key, "copy_gbps", measure) == 4226.0
    assert CeilingCache(tmp_path).get_or_measure(key, "copy_gbps", measure) == 4226.0
    CeilingCache(tmp_path).get_or_measure(key, "matmul_tflops", lambda: 776.0, sub="bfloat16")
    assert calls == [1]
    data = json.loads((tmp_path / "ceilings.json").read_text())
    assert data[key] == {"version": 3, "copy_gbps": 4226.0, "matmul_tflops": {"bfloat16": 776.0}}
    other = DeviceInfo(name="NVIDIA H200", driver="590.0").cache_key  # a new driver measures again
    CeilingCache(tmp_path).get_or_measure(other, "copy_gbps", measure)
    assert calls == [1, 1]
    memory_only = CeilingCache(None)
    memory_only.put(key, "launch_floor_ms", 0.005)
    assert memory_only.get(key, "launch_floor_ms") == 0.005


def test_compute_key_and_datasheet():
    assert compute_key(False, "bfloat16", "ieee") == "float32"  # elementwise math: CUDA cores
    assert compute_key(True, "float32", "tf32") == "tf32"
    assert compute_key(True, "float32", "ieee") == "float32"
    assert compute_key(True, "bfloat16", "ieee") == "bfloat16"
    sheet = datasheet_for("NVIDIA H200")
    assert sheet["hbm_gbps"] == 4800.0 and sheet["matmul_tflops"]["bfloat16"] == 989.5
    assert sheet["source"].startswith("NVIDIA H200") and sheet["dense"] is True
    assert datasheet_for("cpu") is None


# -- traffic and roofline -------------------------------------------------------------------------
H200 = Ceilings(copy_gbps=4000.0, compute_tflops=50.0, compute_key="float32", datasheet_gbps=4800.0,
                datasheet_tflops=67.0)


def _timing(median_ms: float, timer: str = "cuda_event", flush: bool = True) -> dict:
    return blank(TIMING_KEYS, timer=timer, median_ms=median_ms, flush_l2=flush)


def test_gelu_traffic_hand_checked():
    # GeLU 1024 x 1024 float32: 4 MiB read + 4 MiB written, 9 FLOPs per element
    cost = Cost(bytes_read=4 * 2**20, bytes_written=4 * 2**20, flops=9 * 2**20)
    rec = traffic_record(cost, _timing(0.004), H200, l2_bytes=60 * 2**20)
    assert set(rec.to_dict()) == set(TRAFFIC_KEYS)
    assert rec["bytes"] == 8 * 2**20 and rec["bytes_moved_est"] == 8 * 2**20
    assert rec["gbps"] == pytest.approx(8 * 2**20 / 4e-6 / 1e9)       # 2097.152 GB/s
    assert rec["tflops"] == pytest.approx(9 * 2**20 / 4e-6 / 1e12)
    assert rec["intensity"] == pytest.approx(1.125)
    assert machine_balance(H200) == pytest.approx(67.0e12 / 4800e9)  # from the peaks, not the references
    assert rec["bound"] == "memory" and rec["ceiling"] == "copy_gbps"
    assert rec["pct_of_ceiling"] == pytest.approx(100 * 2097.152 / 4000.0)
    assert rec["l2_resident"] is False
    assert rec["peak"] == "hbm_gbps" and rec["pct_of_peak"] == pytest.approx(100 * 2097.152 / 4800.0)
    assert rec["pct_of_copy"] == rec["pct_of_ceiling"] and rec["pct_of_cublas"] is None
    assert above_peak(rec, H200) is None


def test_compute_bound_matmul_placement():
    n = 4096  # bf16 matmul: 3 n^2 * 2 bytes, 2 n^3 FLOPs
    cost = Cost(bytes_read=2 * n * n * 2, bytes_written=n * n * 2, flops=2 * n**3)
    ceilings = Ceilings(copy_gbps=4000.0, compute_tflops=800.0, compute_key="bfloat16")
    rec = traffic_record(cost, _timing(0.25), ceilings, l2_bytes=None)
    assert rec["bound"] == "compute" and rec["ceiling"] == "matmul_tflops.bfloat16"
    assert rec["pct_of_ceiling"] == pytest.approx(100 * rec["tflops"] / 800.0)


def test_a_figure_above_the_ceiling_is_a_measurement_error():
    cost = Cost(bytes_read=2**28, bytes_written=2**28, flops=2**28)  # a 256 MiB add
    too_fast = traffic_record(cost, _timing(0.1), H200, l2_bytes=60 * 2**20)  # 5369 GB/s
    assert "above the physical bound" in above_peak(too_fast, H200)
    ok = traffic_record(cost, _timing(0.14), H200, l2_bytes=60 * 2**20)   # 3834 GB/s
    assert above_peak(ok, H200) is None


def test_l2_resident_working_sets_are_labelled_and_have_no_hbm_ceiling():
    cost = Cost(bytes_read=2**20, bytes_written=2**20, flops=2**18)
    rec = traffic_record(cost, _timing(0.0001, flush=False), H200, l2_bytes=60 * 2**20)  # 21 TB/s warm
    assert rec["l2_resident"] is True and rec["ceiling"] is None and rec["pct_of_ceiling"] is None
    assert rec["pct_of_copy"] is None and rec["peak"] is None
    assert above_peak(rec, H200) is None


def test_interpreter_time_is_not_speed():
    cost = Cost(bytes_read=4096, bytes_written=4096, flops=9 * 1024)
    rec = traffic_record(cost, _timing(30.0, timer="interpreter", flush=False), Ceilings(), l2_bytes=None)
    assert rec["gbps"] is None and rec["tflops"] is None and rec["bound"] is None
    assert rec["bytes"] == 8192 and rec["intensity"] == pytest.approx(1.125)


# -- launch geometry --------------------------------------------------------------------------------
def test_launch_record_comes_from_the_ptx_module_with_registers_and_ctx():
    """One occupancy model: engine rows get workbench.ptx.extract.launch_record (register
    allocation granularity, sm_90 limits), fed the ptx record's registers and the run's ctx."""
    from workbench.engine.worker.execute import launch_for
    from workbench.registry import REGISTRY, BuildContext, discover

    discover()
    op = REGISTRY.op("add")
    impl = op.get_impl("triton")
    spec = op.make_spec({"M": 1024, "N": 1024}, "float32")
    h200 = DeviceInfo(name="NVIDIA H200", sm_count=132, max_threads_per_sm=2048)
    ctx = BuildContext(device="cuda:0", fp32_precision="tf32")
    rec = launch_for(op, impl, spec, impl.resolve_params({}), h200, None, ctx)
    assert rec["grid"] == [1024, 1, 1] and rec["block_threads"] == 128 and rec["blocks_per_sm"] == 16
    assert rec["waves"] == pytest.approx(1024 / (132 * 16), abs=1e-3)
    ptx = {"kernels": [{"registers": 128, "shared_bytes": 0}]}
    rec = launch_for(op, impl, spec, impl.resolve_params({}), h200, ptx, ctx)
    assert rec["limiter"] == "registers" and rec["blocks_per_sm"] == 4
    assert launch_for(op, op.get_impl("pytorch"), spec, {}, h200, None, ctx) is None


def test_the_engine_has_no_second_occupancy_model():
    import importlib.util

    assert importlib.util.find_spec("workbench.engine.launch") is None


class _FakeDevice:
    """A DeviceSession stand-in that claims CUDA but runs on CPU tensors (plumbing only)."""

    is_cuda = True
    device = "cpu"

    def __init__(self, cache_dir):
        self.cache_dir = cache_dir
        self.info = DeviceInfo(name="Fake GPU", driver="1.0", memory_bytes=64 * 2**20)

    def flush(self):
        return None


def test_launch_floor_and_ceilings_are_measured_once_at_calibration_and_cached(tmp_path, monkeypatch):
    import workbench.engine.measure.calibrate as calibrate
    import workbench.engine.measure.ceilings as ceilings
    from workbench.engine.measure.launch_floor import launch_floor_ms
    from workbench.registry import discover

    dev = _FakeDevice(tmp_path)
    measured = []

    def measurers(device, timer, memory_bytes, flush):
        values = {"copy_gbps": 100.0, "launch_floor_ms": 0.004, "launch_floor_ms_warm": 0.003}
        return {name: (lambda name=name: measured.append(name) or values.get(name, 2.0))
                for name in calibrate.REFERENCES}
    monkeypatch.setattr(calibrate, "reference_measurers", measurers)
    assert launch_floor_ms(dev) is None  # nothing calibrated yet
    calibrate.calibrate(dev)
    calibrate.calibrate(dev)  # a second child on the same device finds them cached
    assert launch_floor_ms(dev) == 0.004 and launch_floor_ms(dev, flushed=False) == 0.003
    op = discover().op("gelu")
    spec = op.make_spec({"M": 2, "N": 2}, "float32")
    for _ in range(2):
        got = ceilings.ceilings_for(dev, op, spec, "ieee")
    assert measured == list(calibrate.REFERENCES)  # each once, all at the first calibration
    assert (got.copy_gbps, got.compute_tflops, got.compute_key) == (100.0, 2.0, "float32")
    assert got.datasheet_gbps is None and got.peak_gbps == pytest.approx(150.0)  # no entry: reference x1.5
    cached = ceilings.CeilingCache(tmp_path).load()[dev.info.cache_key]
    assert {"version", "launch_floor_ms", "launch_floor_ms_warm", "copy_gbps", "matmul_tflops",
            "sm_clock_mhz", "flush_kind"} == set(cached)
    assert set(cached["sm_clock_mhz"]) == set(calibrate.REFERENCES)


def test_the_matmul_ceiling_is_the_best_size_that_fits(monkeypatch):
    """H200: cuBLAS float32 ran faster at 16384^3 than at 8192^3; the ceiling takes the best."""
    import workbench.engine.measure.calibrate as ceilings

    tried = []

    def fake(device, key, timer, n, rule, flush):
        tried.append(n)
        return {8192: 50.8, 16384: 53.4}[n]
    monkeypatch.setattr(ceilings, "measure_matmul_tflops", fake)
    assert ceilings.measure_matmul_ceiling("cuda:0", "float32", None, memory_bytes=141 * 2**30) == 53.4
    assert tried == [8192, 16384]
    tried.clear()  # 16384^2 float32 operands (3 GiB) do not fit a quarter of 8 GiB
    assert ceilings.measure_matmul_ceiling("cuda:0", "float32", None, memory_bytes=8 * 2**30) == 50.8
    assert tried == [8192]


def test_ceilings_cached_by_an_older_method_are_measured_again(tmp_path):
    from workbench.engine.measure.ceilings import CACHE_VERSION

    (tmp_path / "ceilings.json").write_text(json.dumps({"GPU | driver 1": {"copy_gbps": 1.0}}))
    cache = CeilingCache(tmp_path)
    assert cache.get("GPU | driver 1", "copy_gbps") is None
    assert cache.get_or_measure("GPU | driver 1", "copy_gbps", lambda: 2.0) == 2.0
    assert json.loads((tmp_path / "ceilings.json").read_text())["GPU | driver 1"]["version"] == CACHE_VERSION
