"""ncu CSV parsing (fixtures written in Nsight Compute's documented CSV shapes) and the reasons
counters are unavailable (CPU here: no GPU, usually no ncu)."""

from __future__ import annotations

from pathlib import Path

import pytest

from workbench import counters
from workbench.counters import (MEASURED_KEYS, failure_reason, find_ncu, measured_record, ncu_command,
                                parse_ncu_csv, unavailable_reason, unmeasured)

FIXTURES = Path(__file__).parent / "fixtures" / "ncu"
GiB = 2**30


def _text(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_details_page_nine_kernels_of_manual_gelu():
    kernels = parse_ncu_csv(_text("gelu_manual_16384_f32.details.csv"))
    assert len(kernels) == 9
    assert "MulFunctor" in kernels[0].name and "tanh_kernel_cuda" in kernels[6].name
    assert kernels[0].grid == "(524288, 1, 1)" and kernels[0].block == "(128, 1, 1)"
    assert kernels[2].dram_bytes_read == 2 * GiB - 1835008 * 2   # thousands separators dropped
    assert kernels[0].kernel_us == pytest.approx(1019.23)        # nsecond -> us
    record = measured_record(kernels, model_bytes=22 * GiB, ideal_bytes=2 * GiB)
    assert set(record) == set(MEASURED_KEYS)
    assert record["kernel_count"] == 9 and record["complete"] is True
    assert record["dram_bytes"] == record["dram_bytes_read"] + record["dram_bytes_write"]
    assert 0.97 < record["dram_bytes"] / (22 * GiB) < 1.0
    assert record["pct_of_model"] == pytest.approx(100 * record["dram_bytes"] / (22 * GiB))
    assert record["kernel_us"] == pytest.approx(sum(k.kernel_us for k in kernels))


def test_details_page_scaled_units():
    (kernel,) = parse_ncu_csv(_text("gelu_pytorch_16384_f32.details.csv"))
    assert kernel.dram_bytes_read == 1_070_000_000 and kernel.dram_bytes_write == 1_050_000_000
    assert kernel.kernel_us == pytest.approx(512.35)


def test_raw_page_with_units_line():
    (kernel,) = parse_ncu_csv(_text("softmax_triton_16384_bf16.raw.csv"))
    assert kernel.name == "_softmax_kernel"
    assert kernel.dram_bytes_read == 536_936_448 and kernel.kernel_us == pytest.approx(263.104)


def test_unknown_unit_is_an_error_not_a_wrong_scale():
    text = _text("gelu_pytorch_16384_f32.details.csv").replace('"Gbyte"', '"Gfoo"', 1)
    with pytest.raises(ValueError, match="unknown unit 'Gfoo'"):
        parse_ncu_csv(text)


def test_no_table():
    with pytest.raises(ValueError, match="no ncu CSV table"):
        parse_ncu_csv(_text("permission_denied.log"))


def test_permission_error_reason():
    reason = failure_reason(_text("permission_denied.log"), 0)
    assert reason.startswith("ERR_NVGPUCTRPERM") and "performance counters" in reason
    assert failure_reason("==ERROR== Failed to connect\n", 1) == "ncu: Failed to connect"
    assert "no kernels" in failure_reason("==WARNING== No kernels were profiled.\n", 0)
    assert "exit" in failure_reason("", 9)


def test_unavailable_reasons_on_cpu():
    assert "CUDA device" in unavailable_reason("cpu", "/usr/bin/ncu")
    assert "no ncu" in unavailable_reason("cuda:0", None)
    assert unavailable_reason("cuda:0", "/usr/bin/ncu") is None
    record = unmeasured(unavailable_reason("cpu", find_ncu()))
    assert set(record) == set(MEASURED_KEYS) and record["dram_bytes"] is None and record["kernels"] == []


def test_find_ncu_falls_back_to_cuda_folder():
    assert find_ncu(which=lambda _n: None, exists=lambda p: p == counters.NCU_PATHS[0]) == counters.NCU_PATHS[0]
    assert find_ncu(which=lambda _n: None, exists=lambda _p: False) is None
    assert find_ncu(which=lambda _n: "/x/ncu") == "/x/ncu"


def test_command_leaves_clocks_alone_and_profiles_one_range():
    argv = ncu_command("ncu", "/tmp/log", ["python", "-m", "x"])
    assert argv[argv.index("--clock-control") + 1] == "none"
    assert argv[argv.index("--profile-from-start") + 1] == "off"
    assert "dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum" in argv
    assert argv[-3:] == ["python", "-m", "x"]


def test_truncated_call_is_incomplete():
    kernels = parse_ncu_csv(_text("gelu_manual_16384_f32.details.csv"))
    assert measured_record(kernels, max_kernels=9)["complete"] is False
    assert measured_record([])["reason"].startswith("ncu profiled no kernels")
