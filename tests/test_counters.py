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


def test_the_report_is_kept_where_asked_and_opened_with_ncu_ui():
    argv = ncu_command("ncu", "/tmp/log", ["python", "-m", "x"], report="/r/s-run0-triton.ncu-rep")
    assert argv[argv.index("--export") + 1] == "/r/s-run0-triton.ncu-rep" and "--force-overwrite" in argv
    assert argv[-3:] == ["python", "-m", "x"]
    assert "--export" not in ncu_command("ncu", "/tmp/log", ["python"])
    assert counters.import_command("ncu", "/r/a.ncu-rep")[:3] == ["ncu", "--import", "/r/a.ncu-rep"]
    assert counters.open_commands("/r/a.ncu-rep") == "ncu-ui /r/a.ncu-rep  ·  ncu --import /r/a.ncu-rep --page details"
    assert unmeasured("no ncu")["report_path"] is None


def test_report_file_beside_the_results_else_in_the_cache(tmp_path):
    import types

    from workbench.cli.common import report_dir
    from workbench.engine.measure.counters_run import report_file

    job = types.SimpleNamespace(report_dir=str(tmp_path / "out.ncu"), cache_dir=str(tmp_path / "cache"),
                                trace_session="lecture06-gelu")
    assert report_file(job, (0, "triton", None)) == str(tmp_path / "out.ncu" / "lecture06-gelu-run0-triton.ncu-rep")
    job.report_dir = None
    assert report_file(job, (1, "a b", 64)) == str(tmp_path / "cache" / "ncu" / "lecture06-gelu-run1-a_b-64.ncu-rep")
    assert report_dir(str(tmp_path / "res" / "out.json")) == tmp_path / "res" / "out.ncu"
    assert report_dir(None) is None and report_dir("/dev/null") is None


FAKE_NCU = """#!{python}
import sys, pathlib
argv = sys.argv[1:]
if "--import" in argv:  # print the kept report's counters
    print(pathlib.Path(argv[argv.index("--import") + 1]).read_text())
    sys.exit(0)
log = pathlib.Path(argv[argv.index("--log-file") + 1])
if "--export" in argv:
    pathlib.Path(argv[argv.index("--export") + 1]).write_text({csv!r})
log.write_text({log!r})
"""


@pytest.mark.slow  # runs a fake ncu
@pytest.mark.parametrize("prints_csv", [True, False])
def test_run_under_ncu_keeps_the_report_and_names_it(tmp_path, prints_csv):
    import sys

    from workbench.engine.measure.counters_run import run_under_ncu

    csv_text = _text("gelu_pytorch_16384_f32.details.csv")
    fake = tmp_path / "ncu"
    fake.write_text(FAKE_NCU.format(python=sys.executable, csv=csv_text, log=csv_text if prints_csv else "==PROF== done"))
    fake.chmod(0o755)
    report = tmp_path / "out.ncu" / "s-run0-pytorch.ncu-rep"
    report.parent.mkdir()
    record = run_under_ncu(str(fake), {"op": "gelu"}, 30.0, report=str(report))
    assert record["reason"] is None and record["kernel_count"] == 1
    assert record["report_path"] == str(report) and report.is_file()
    assert run_under_ncu(str(fake), {"op": "gelu"}, 30.0)["report_path"] is None  # nothing asked: none kept
