"""Per-device state inside a worker: device facts, the L2 flush buffer, precision switches,
peak-memory accounting, and the bench / profile / ptx stages of a row. One DeviceSession per
device lives as long as its worker; each job binds its own job, channel and stop flag."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from workbench.engine.measure.environment import device_info


class DeviceSession:
    """One torch device as seen by one worker. CUDA is initialised on construction for cuda:N."""

    def __init__(self, device: str, job: Any, channel: Any, stop: Any):
        import torch

        self.torch = torch
        self.device = device
        self.bind(job, channel, stop)
        self.is_cuda = device.startswith("cuda")
        if self.is_cuda:
            torch.cuda.set_device(torch.device(device))
            torch.cuda.init()
        self.info = device_info(device)
        self._flush = None
        self._base_bytes = 0
        self.kept_bytes = 0  # device memory this session keeps between rows (the flush buffer)
        self.nvtx = True  # the row's `nvtx` setting (execute.py sets it per row): NVTX ranges or none

    def bind(self, job: Any, channel: Any, stop: Any) -> None:
        """The job now running (its cache and trace folders), its event channel and stop flag."""
        self.job, self.channel, self.stop = job, channel, stop
        self.cache_dir = Path(job.cache_dir) if job.cache_dir else None

    # -- small device helpers ---------------------------------------------------------------
    def phase(self, name: str):
        """An NVTX range named `name` around a block on a CUDA device with the row's `nvtx` setting on
        (engine/measure/nvtx.py); else nothing."""
        from workbench.engine.measure.nvtx import nvtx_range

        return nvtx_range(name, self.is_cuda and self.nvtx)

    def sync(self) -> None:
        if self.is_cuda:
            self.torch.cuda.synchronize()

    def flush(self):
        """The L2 flush callable (buffer allocated once per worker), None on CPU."""
        from workbench.engine.measure.timing import make_l2_flush

        if self._flush is None and self.is_cuda:
            before = self.torch.cuda.memory_allocated(self.device)
            self._flush = make_l2_flush(self.device, self.info.l2_bytes)
            self.kept_bytes = self.torch.cuda.memory_allocated(self.device) - before
        return self._flush

    def apply_precision(self, fp32_precision: str) -> None:
        """Set torch's float32 matmul precision for the row (rule 7; engine/precision.py owns it)."""
        from workbench.engine.worker.precision import set_fp32_precision

        if self.is_cuda:
            set_fp32_precision(fp32_precision)

    def reset_peak(self) -> None:
        """Start a peak-memory window (the flush buffer is allocated first, outside it)."""
        if self.is_cuda:
            self.flush()
            self.torch.cuda.synchronize()
            self.torch.cuda.reset_peak_memory_stats(self.device)
            self._base_bytes = self.torch.cuda.memory_allocated(self.device)

    def restart_peak(self) -> None:
        """Reset the peak to what is allocated now, keeping the window's base."""
        if self.is_cuda:
            self.torch.cuda.synchronize()
            self.torch.cuda.reset_peak_memory_stats(self.device)

    def allocated_bytes(self) -> int:
        """Device memory allocated now (0 on CPU)."""
        return int(self.torch.cuda.memory_allocated(self.device)) if self.is_cuda else 0

    def peak_bytes(self) -> int | None:
        if not self.is_cuda:
            return None
        return int(self.torch.cuda.max_memory_allocated(self.device) - self._base_bytes)

    # -- stages -----------------------------------------------------------------------------
    def bench(self, rc, record, fn, inputs, rotation=None) -> None:
        """Time the row (rc: engine/rows.RowContext) into record.timing and .traffic (bench.py)."""
        from workbench.engine.measure.bench import bench_row
        from workbench.engine.measure.ceilings import Ceilings, ceilings_for

        # ceilings first (measured once per device, cached): their buffers stay out of the row's peak
        ceilings = ceilings_for(self, rc.op, rc.spec, rc.row.settings.fp32_precision) if self.is_cuda else Ceilings()
        self.restart_peak()
        bench_row(self, rc, record, fn, inputs, ceilings, rotation)
        peak = self.peak_bytes()
        if peak is not None:
            record.peak_mem_bytes = max(record.peak_mem_bytes or 0, peak)

    def profile(self, row, record, fn, inputs) -> None:
        from workbench.engine.measure.profile import profile_calls, trace_file
        from workbench.events import Profile

        trace = trace_file(self.job.trace_dir, row.key, self.job.trace_session) if self.job.trace_dir else None
        with self.phase("profile"):
            record.profile = profile_calls(lambda: fn(*inputs), self.is_cuda, sync=self.sync, trace_path=trace)
        record.profile["trace_path"] = trace
        self.channel.event(Profile(row.key, record.profile))

    def ptx(self, rc, record) -> None:
        """The row's PTX record (rc: engine/rows.RowContext; worker/ptx_stage.py)."""
        from workbench.engine.worker.ptx_stage import ptx_row

        ptx_row(self.channel, rc.row, record, rc.op, rc.impl, rc.spec, rc.params,
                cache_dir=self.cache_dir / "ptx" if self.cache_dir else None, ctx=rc.ctx)
