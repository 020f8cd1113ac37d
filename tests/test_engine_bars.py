"""Bars per MEASUREMENT.md rule 11: the datasheet table (workbench/datasheet.py), peaks vs measured
references (engine/ceilings.py, traffic.py, bench.py), ratios to pytorch (relative.py), with
recorded H200 numbers. No device needed."""

from __future__ import annotations

import pytest

from workbench.cost import Cost
from workbench.datasheet import PEAK_MARGIN, PEAKS, REFERENCE_MARGIN, normalise, peaks_for
from workbench.engine.measure.bench import _flag_bars
from workbench.engine.measure.ceilings import bars
from workbench.engine.measure.relative import relate_to_pytorch
from workbench.engine.measure.traffic import above_peak, reference_flags, traffic_record
from workbench.results.document import new_record
from workbench.results.record import Record, Timing

NAMES = {  # as torch.cuda.get_device_properties().name / NVML report them
    "NVIDIA H200": "H200 SXM", "NVIDIA H100 80GB HBM3": "H100 SXM", "NVIDIA H100 PCIe": "H100 PCIe",
    "NVIDIA A100-SXM4-80GB": "A100 SXM4 80GB", "NVIDIA A100-SXM4-40GB": "A100 SXM4 40GB",
    "NVIDIA A100 80GB PCIe": "A100 PCIe 80GB", "NVIDIA A100-PCIE-40GB": "A100 PCIe 40GB",
    "NVIDIA B200": "B200", "NVIDIA L4": "L4", "NVIDIA L40S": "L40S", "NVIDIA L40": "L40",
    "NVIDIA GeForce RTX 4090": "RTX 4090", "NVIDIA A10": "A10", "NVIDIA A40": "A40",
    "Tesla V100-SXM2-32GB": "V100 SXM2", "Tesla T4": "T4",
}
NOT_LISTED = ("NVIDIA H200 NVL", "NVIDIA H100 NVL", "NVIDIA GH200 480GB", "NVIDIA GB200",
              "NVIDIA GeForce RTX 4090 D", "NVIDIA GeForce RTX 4090 Laptop GPU", "NVIDIA A10G", "cpu", "", None)


@pytest.mark.parametrize("name", sorted(NAMES))
def test_device_names_from_torch_and_nvml_find_their_datasheet_entry(name):
    assert peaks_for(name).device == NAMES[name]


@pytest.mark.parametrize("name", NOT_LISTED)
def test_variants_not_in_the_table_find_no_entry(name):
    assert peaks_for(name) is None


def test_names_are_normalised():
    assert normalise("NVIDIA A100-SXM4-80GB") == "a100 sxm4 80gb"
    assert normalise("Tesla V100-SXM2-16GB") == "v100 sxm2 16gb"
    assert normalise("NVIDIA GeForce RTX 4090") == "rtx 4090"


def test_every_entry_is_sourced_dense_and_plausible():
    assert len({p.device for p in PEAKS}) == len(PEAKS)
    for p in PEAKS:
        assert p.source and p.seen_at.startswith("https://") and p.memory_gbps > 0
        figures = [p.tflops(k) for k in ("bfloat16", "float16", "tf32", "float32", "float64")]
        assert all(f is None or f > 0 for f in figures), p.device
        tensor = p.float16_tflops or p.bfloat16_tflops
        assert tensor is None or tensor > p.float32_tflops, p.device  # tensor cores beat CUDA cores
    h200 = peaks_for("NVIDIA H200")
    assert (h200.memory_gbps, h200.bfloat16_tflops, h200.tf32_tflops, h200.float32_tflops) == (4800.0, 989.5, 494.5, 67.0)
    assert h200.tflops("float64") == 67.0 and peaks_for("NVIDIA L4").tflops("float64") is None


# -- recorded H200 numbers -------------------------------------------------------------------------
REFERENCES = {"copy_gbps": 4200.0, "matmul_tflops": {"bfloat16": 730.0, "float32": 50.78, "tf32": 407.0}}


def _row(cost: Cost, median_ms: float, matmul_like: bool, dtype: str, device: str = "NVIDIA H200",
         refs: dict = REFERENCES, flush: bool = True):
    ceilings = bars(device, refs, matmul_like, dtype, "ieee")
    timing = Timing(timer="cuda_event", median_ms=median_ms, flush_l2=flush)
    record = Record(timing=timing)
    record.traffic = traffic_record(cost, timing, ceilings, l2_bytes=60 * 2**20)
    _flag_bars(record, ceilings, 60 * 2**20)
    return record, ceilings


def _matmul(n: int, itemsize: int) -> Cost:
    return Cost(bytes_read=2 * n * n * itemsize, bytes_written=n * n * itemsize, flops=2 * n**3)


def test_triton_bf16_matmul_faster_than_the_cached_cublas_is_shown_never_failed():
    """H200: Triton bf16 8192^3 ran 1.426 ms (771 TFLOP/s) and was failed as "above the measured
    bfloat16 ceiling +5% (766.4)", the cached cuBLAS being 730. Now it is a result."""
    record, _ = _row(_matmul(8192, 2), 1.426, True, "bfloat16")
    t = record["traffic"]
    assert record["status"] is None and record["error"] is None
    assert t["tflops"] == pytest.approx(771.0, abs=0.5)
    assert t["pct_of_cublas"] == pytest.approx(100 * 771.0 / 730.0, abs=0.1)
    assert t["bound"] == "compute" and t["peak"] == "tflops.bfloat16"
    assert t["pct_of_peak"] == pytest.approx(100 * 771.0 / 989.5, abs=0.1)
    assert t["ceiling"] == "matmul_tflops.bfloat16" and t["pct_of_ceiling"] == t["pct_of_cublas"]
    assert any(f.startswith("beats cuBLAS bfloat16 1.06x") for f in record["flags"])


def test_cublas_fp32_above_its_own_cached_reference_is_not_a_measurement_error():
    """lecture06-matmul.json (H200): cuBLAS float32 16384^3 at 164.757 ms = 53.4 TFLOP/s was failed
    against the cached 50.78 +5%; the FP32 peak is 67."""
    record, _ = _row(_matmul(16384, 4), 164.75718688964844, True, "float32")
    assert record["status"] is None and record["traffic"]["tflops"] == pytest.approx(53.39, abs=0.01)


def test_only_a_figure_above_the_datasheet_peak_fails_and_the_message_names_the_source():
    record, _ = _row(_matmul(8192, 2), 1.0, True, "bfloat16")  # 1099.5 TFLOP/s > 989.5 x 1.05
    assert record["status"] == "failed" and record["error"].startswith("measurement error: 1100 TFLOP/s")
    assert "datasheet bfloat16 peak of H200 SXM" in record["error"]
    assert record["traffic"]["tflops"] is None and record["timing"]["median_ms"] == 1.0  # timing kept
    just_under, _ = _row(_matmul(8192, 2), 2 * 8192**3 / (989.5e12 * PEAK_MARGIN * 0.999) * 1e3, True, "bfloat16")
    assert just_under["status"] is None


def test_an_add_above_the_copy_is_flagged_as_odd_not_failed_and_above_hbm_peak_fails():
    add = Cost(bytes_read=2 * 2**28, bytes_written=2**28, flops=2**26)  # 768 MiB moved
    fast, _ = _row(add, 805306368 / 4450e9 * 1e3, False, "float32")   # 4450 GB/s: above copy 4200
    assert fast["status"] is None and fast["traffic"]["pct_of_copy"] == pytest.approx(100 * 4450 / 4200)
    assert any("above the measured copy 1.06x" in f and "L2-resident" in f for f in fast["flags"])
    physics, _ = _row(add, 805306368 / 5100e9 * 1e3, False, "float32")  # above 4800 x 1.05
    assert physics["status"] == "failed" and "datasheet HBM bandwidth of H200 SXM" in physics["error"]


def test_bound_comes_from_the_peaks():
    # at 13 FLOP/B the references' balance (50.78 TFLOP/s / 4200 GB/s = 12.1) would say compute;
    # the peaks' balance for float32 math (67 / 4.8 = 13.96) says memory, and it decides.
    for intensity, bound in ((20.0, "compute"), (13.0, "memory")):
        cost = Cost(bytes_read=2**30, bytes_written=0, flops=int(intensity * 2**30))
        record, ceilings = _row(cost, 10.0, False, "float32")
        assert record["traffic"]["bound"] == bound


def test_a_device_without_a_datasheet_entry_is_bounded_by_its_references_times_the_margin():
    refs = {"copy_gbps": 1000.0, "matmul_tflops": {"bfloat16": 100.0}}
    cost = Cost(bytes_read=10**9, bytes_written=0, flops=10**6)
    ok, ceilings = _row(cost, 1e3 / 1400, False, "bfloat16", device="Some GPU", refs=refs)  # 1400 GB/s
    assert ok["status"] is None and ceilings.peak_gbps == 1000.0 * REFERENCE_MARGIN
    bad, _ = _row(cost, 1e3 / 1600, False, "bfloat16", device="Some GPU", refs=refs)
    assert bad["status"] == "failed" and "measured copy x1.5 (no datasheet entry for this device)" in bad["error"]
    v100, ceilings = _row(_matmul(1024, 2), 1.0, True, "bfloat16", device="Tesla V100-SXM2-16GB", refs=refs)
    assert ceilings.datasheet_tflops is None and ceilings.peak_tflops == 150.0
    assert "no datasheet bfloat16 peak for V100 SXM2" in ceilings.peak_source("tflops")


def test_l2_resident_rows_have_no_memory_bars():
    record, ceilings = _row(Cost(bytes_read=2**20, bytes_written=2**20, flops=0), 0.0001, False, "float32", flush=False)
    t = record["traffic"]
    assert t["l2_resident"] and t["pct_of_copy"] is None and t["peak"] is None
    assert record["status"] is None and reference_flags(t, ceilings) == [] and above_peak(t, ceilings) is None


def test_speedup_vs_pytorch_within_the_same_run_shape_and_dtype():
    def rec(impl, median, shape=(4, 4), run_index=0, dtype="float32", status="ok", timer="cuda_event"):
        r = new_record(run_index=run_index, op="gelu", impl=impl, label=impl, shape={"M": shape[0], "N": shape[1]},
                       dtype=dtype, status=status, timing={"timer": timer, "median_ms": median}, traffic={})
        return r
    records = [rec("manual", 4.0), rec("pytorch", 2.0), rec("triton", 1.0), rec("triton", 1.0, shape=(8, 8)),
               rec("triton", 1.0, run_index=1), rec("triton", 1.0, dtype="bfloat16"),
               rec("cuda", 1.0, status="failed"), rec("triton", 30.0, timer="interpreter")]
    relate_to_pytorch(records)
    got = [r["traffic"].get("speedup_vs_pytorch") for r in records]
    assert got == [0.5, 1.0, 2.0, None, None, None, None, None]


def test_doctor_shows_the_peaks_and_the_cached_references(tmp_path):
    from workbench.bars_view import bars_summary
    from workbench.engine.measure.ceilings import CeilingCache
    from workbench.engine.measure.environment import DeviceInfo

    key = DeviceInfo(name="NVIDIA H200", driver="580.1").cache_key
    cache = CeilingCache(tmp_path)
    cache.put(key, "matmul_tflops", 730.0, "bfloat16")
    cache.put(key, "sm_clock_mhz", {"min": 1700.0, "median": 1755.0, "max": 1980.0, "n": 40}, "matmul_tflops.bfloat16")
    cache.put(key, "matmul_tflops", None, "float16")
    cache.put(key, "reference_errors", "RuntimeError: no", "matmul_tflops.float16")
    view = bars_summary("NVIDIA H200", "580.1", tmp_path)
    assert view["datasheet"] == "H200 SXM" and view["source"].startswith("NVIDIA H200")
    assert view["bfloat16"] == "peak 989.5 TFLOP/s · cuBLAS 730 TFLOP/s at SM 1755 MHz (74% of peak)"
    assert view["float16"] == "peak 989.5 TFLOP/s · cuBLAS: RuntimeError: no"
    assert view["memory"] == "peak 4800 GB/s · copy: not measured yet (the first benched row whose bars use it measures it)"
    unknown = bars_summary("Some GPU", None, tmp_path)
    assert unknown["datasheet"].startswith("no datasheet entry for 'Some GPU'") and "H200 SXM" in unknown["datasheet"]
    assert bars_summary(None, None, tmp_path)["datasheet"].startswith("no GPU")
