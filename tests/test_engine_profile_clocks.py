"""Profiler rows on CPU (no device events), the kernel-table arithmetic with injected rows, clock
sampling rules, and torch.compile recompile / eager-fallback detection (rules 8, 10; P4-P6)."""

from __future__ import annotations

import warnings

import pytest
import torch

from workbench.engine.measure.clocks import ClockSampler, clock_fell, clock_fields, reason_names
from workbench.backends.compiled import CompileWatch
from workbench.engine.measure.profile import build_profile, profile_calls
from workbench.results.document import PROFILE_KEYS, PROFILE_ROW_KEYS, blank


def _gelu(x):
    return 0.5 * x * (1 + torch.tanh(0.79788456 * (x + 0.044715 * x * x * x)))


def test_cpu_profile_says_there_are_no_device_events():
    x = torch.randn(64, 64)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no FutureWarning from the profiler API
        record = profile_calls(lambda: _gelu(x), on_cuda=False, calls=3)
    assert set(record) == set(PROFILE_KEYS)
    assert record["device_events"] is False and record["kernel_count"] is None
    assert "no device events" in record["reason"]
    names = {r["name"] for r in record["rows"]}
    assert "aten::tanh" in names and not any(n.startswith("Activity Buffer") for n in names)
    tanh = next(r for r in record["rows"] if r["name"] == "aten::tanh")
    assert set(tanh) == set(PROFILE_ROW_KEYS)
    assert tanh["kind"] == "operator" and tanh["calls"] == 3 and tanh["self_device_us"] == 0.0
    assert sum(r["pct"] for r in record["rows"]) == pytest.approx(100.0)
    assert record["wall_us"] > 0


@pytest.mark.slow  # a fresh Python process (tests/conftest.py)
def test_profiling_does_not_import_inductor(tmp_path):
    """torch.profiler.profile's first start imports Inductor and dynamo (`hasattr(torch,
    "_inductor")`): seconds of a worker that may never compile. A fresh process, so nothing
    imported them before."""
    import subprocess
    import sys

    code = ("import sys, torch\n"
            "from workbench.engine.measure.profile import profile_calls\n"
            "x = torch.randn(8, 8)\n"
            "record = profile_calls(lambda: torch.tanh(x), on_cuda=False, calls=2)\n"
            "assert any(r['name'] == 'aten::tanh' for r in record['rows']), record\n"
            "print(sorted(m for m in ('torch._inductor', 'torch._dynamo') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]"


def _row(name, kind, calls, device_us=0.0, cpu_us=0.0):
    return blank(PROFILE_ROW_KEYS, name=name, kind=kind, calls=calls, self_device_us=device_us, self_cpu_us=cpu_us)


def test_kernel_table_counts_kernels_per_call_and_stays_under_wall_time():
    rows = [_row("vectorized_elementwise_kernel", "kernel", 45, device_us=300.0),
            _row("triton_poi_fused", "kernel", 5, device_us=100.0),
            _row("aten::mul", "operator", 30, cpu_us=50.0),
            _row("cudaLaunchKernel", "runtime", 50, cpu_us=150.0)]
    record = build_profile(rows, calls=5, wall_us=100.0, on_cuda=True)
    assert record["device_events"] is True and record["reason"] is None
    assert record["kernel_count"] == 10.0                       # 50 kernels over 5 calls
    kernels = [r for r in record["rows"] if r["kind"] == "kernel"]
    assert [r["pct"] for r in kernels] == [75.0, 25.0]
    assert sum(r["self_device_us"] for r in kernels) / 5 <= record["wall_us"]
    assert record["rows"][0]["name"] == "vectorized_elementwise_kernel"


def test_cuda_profile_without_device_rows_says_why():
    record = build_profile([_row("aten::mul", "operator", 3, cpu_us=10.0)], calls=3, wall_us=5.0, on_cuda=True)
    assert record["device_events"] is False and "CUPTI" in record["reason"]


def test_clock_rules():
    assert not clock_fell([1980.0] * 10, [])
    assert clock_fell([1980.0] * 9 + [1500.0], [])           # min < 0.9 x median
    assert clock_fell([1980.0] * 10, ["sw_thermal"])
    assert reason_names(0x1 | 0x4 | 0x40) == ["gpu_idle", "sw_power_cap", "hw_thermal"]
    fields = clock_fields([1980.0, 1975.0, 1990.0], 0x1, sampled=True)
    assert fields["sm_clock_mhz"] == {"min": 1975.0, "median": 1980.0, "max": 1990.0, "n": 3}
    assert fields["throttle"] == [] and fields["clock_fell"] is False   # idle between calls is not a limit
    assert clock_fields([], 0, sampled=False) == {"sm_clock_mhz": None, "throttle": [], "clock_fell": None}


def test_clock_sampler_without_a_gpu_reports_nothing():
    with ClockSampler(None) as sampler:
        pass
    assert sampler.fields()["sm_clock_mhz"] is None


class _Channel:
    def __init__(self):
        self.events = []

    def event(self, event):
        self.events.append(event)


class _Row:
    key = (0, "compiled", None)


def test_compile_watch_counts_recompiles_and_catches_eager_fallback():
    watch, record, channel = CompileWatch(), {"status": None, "error": None, "recompiles": None}, _Channel()
    fn = torch.compile(_gelu, dynamic=False, backend="eager")
    watch.start()
    fn(torch.randn(4, 4))
    watch.after_build()
    fn(torch.randn(4, 4))
    fn(torch.randn(5, 4))  # a new shape: dynamo recompiles
    watch.finish(_Row(), record, channel)
    assert watch.build_graphs == 1 and record["recompiles"] == 1 and record["status"] is None
    assert channel.events and "recompiled 1" in channel.events[0].text

    # dynamo past its recompile limit runs eager code silently: simulated with a limit of 0
    watch, record = CompileWatch(), {"status": None, "error": None, "recompiles": None}
    watch.start()
    with torch._dynamo.config.patch(recompile_limit=0):
        torch.compile(_gelu, dynamic=False, backend="eager")(torch.randn(4, 4))
    watch.after_build()
    watch.finish(_Row(), record, _Channel())
    assert record["status"] == "failed" and "not labelled compiled" in record["error"]


def test_kernel_time_above_wall_time_is_called_unreliable():
    rows = [_row("k", "kernel", 5, device_us=1000.0)]
    record = build_profile(rows, calls=5, wall_us=100.0, on_cuda=True)
    assert record["device_events"] is True and "unreliable" in record["reason"]


def test_device_time_read_from_instance_attribute_of_key_averages_entries():
    """FunctionEventAvg keeps self_device_time_total on the instance (torch 2.11-2.13): it must be
    read, not mistaken for an old torch and replaced by a missing self_cuda_time_total (0)."""
    from workbench.engine.measure.profile import profile_row

    class DeviceType:  # stands in for torch.autograd.DeviceType.CUDA
        def __str__(self):
            return "DeviceType.CUDA"

    class Avg:  # like FunctionEventAvg: plain instance attributes
        def __init__(self):
            self.key, self.count, self.device_type = "void gelu_kernel(float*)", 5, DeviceType()
            self.self_device_time_total, self.self_cpu_time_total = 2500.0, 0.0

    class OldAvg:  # old torch: only the cuda_* name
        def __init__(self):
            self.key, self.count, self.device_type = "void gelu_kernel(float*)", 5, DeviceType()
            self.self_cuda_time_total, self.self_cpu_time_total = 1200.0, 0.0

    assert profile_row(Avg())["self_device_us"] == 2500.0
    assert profile_row(OldAvg())["self_device_us"] == 1200.0
