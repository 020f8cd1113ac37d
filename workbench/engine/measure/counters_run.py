"""The `counters` action of a row, inside the worker: one call of the row's implementation under
Nsight Compute in a subprocess (engine/counters_entry.py), parsed into `record["measured"]`.

The subprocess builds the implementation itself (a build cache such as load_inline's is shared
through build_dir), so the worker's own state is untouched. It runs in its own process group and
dies with the worker (PR_SET_PDEATHSIG); the stop flag or the row's timeout_s kill the group.
Where counters cannot be measured (a CPU row, no ncu, ERR_NVGPUCTRPERM, a failed run) the record
says why in `measured.reason`; the row itself is not failed by that.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from workbench.counters import (failure_reason, find_ncu, measured_record, ncu_command, parse_ncu_csv,
                                unavailable_reason, unmeasured)
from workbench.events import Log

POLL_S = 0.1
WARMUP_CALLS = 3


def counters_job(row: Any, build_dir: str | None, plugin_paths: tuple[str, ...]) -> dict:
    """What counters_entry needs to rebuild the row's implementation (plain JSON data)."""
    return {"plugin_paths": list(plugin_paths), "op": row.op, "impl": row.impl, "params": dict(row.params),
            "shape": dict(row.shape), "dtype": row.dtype, "device": row.device,
            "fp32_precision": row.settings.fp32_precision, "seed": row.settings.seed,
            "build_dir": build_dir, "warmup_calls": WARMUP_CALLS}


def counters_row(dev: Any, row: Any, record: dict, op: Any, impl: Any, spec: Any) -> None:
    """Fill record["measured"] (workbench/counters.py) and say what happened in a Log line."""
    ncu = find_ncu()
    reason = unavailable_reason(row.device, ncu)
    if reason is None:
        cost = impl.cost(op, spec)
        job = counters_job(row, dev.job.build_dir, tuple(dev.job.plugin_paths))
        record["measured"] = run_under_ncu(ncu, job, row.settings.timeout_s, dev.stop.is_set,
                                           model_bytes=cost.moved, ideal_bytes=cost.bytes)
    else:
        record["measured"] = unmeasured(reason)
    why = record["measured"]["reason"]
    dev.channel.event(Log(row.key, f"counters: {why}" if why else
                          f"counters: {record['measured']['kernel_count']} kernels measured by ncu",
                          "warning" if why else "info"))


def run_under_ncu(ncu: str, job: dict, timeout_s: float, stopped=lambda: False, *,
                  model_bytes: int | None = None, ideal_bytes: int | None = None,
                  python: str = sys.executable) -> dict:
    """Run counters_entry for `job` under ncu; the `measured` record (or why there is none)."""
    with tempfile.TemporaryDirectory(prefix="workbench-ncu-") as tmp:
        job_path, log_path = Path(tmp) / "job.json", Path(tmp) / "ncu.log"
        job_path.write_text(json.dumps(job))
        argv = ncu_command(ncu, log_path, [python, "-m", "workbench.engine.measure.counters_entry", str(job_path)])
        returncode, stdout, stderr, why = _run(argv, timeout_s, stopped)
        log_text = log_path.read_text(errors="replace") if log_path.exists() else ""
    if why:
        return unmeasured(why)
    try:  # the report goes to --log-file; an ncu that printed it to stdout is read there
        kernels = parse_ncu_csv(log_text if '"Kernel Name"' in log_text else stdout)
    except ValueError:
        program = next((ln for ln in stderr.splitlines() if ln.startswith("counters run failed")), None)
        return unmeasured(program or failure_reason("\n".join((log_text, stdout, stderr)), returncode))
    return measured_record(kernels, model_bytes=model_bytes, ideal_bytes=ideal_bytes)


def _run(argv: list[str], timeout_s: float, stopped) -> tuple[int | None, str, str, str | None]:
    """(exit code, stdout, stderr, why it was cut short or None)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    with tempfile.TemporaryFile(mode="w+") as out, tempfile.TemporaryFile(mode="w+") as err:
        proc = subprocess.Popen(argv, stdout=out, stderr=err, env=env,
                                start_new_session=True, preexec_fn=_die_with_parent)
        deadline = time.monotonic() + timeout_s
        why = None
        while proc.poll() is None:
            if stopped():
                why = "counters cancelled"
            elif time.monotonic() > deadline:
                why = f"ncu run timed out after {timeout_s:g} s (timeout_s)"
            if why:
                _kill_group(proc)
                break
            time.sleep(POLL_S)
        proc.wait()
        out.seek(0)
        err.seek(0)
        return proc.returncode, out.read(), err.read(), why


def _die_with_parent() -> None:
    """In the subprocess, before exec (Linux): killed when the worker that started it dies."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the stop flag and the timeout still kill it
        pass


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
