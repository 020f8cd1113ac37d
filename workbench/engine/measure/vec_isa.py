"""Inductor's CPU vector-ISA check, done once per host instead of once per worker.

The first torch.compile on a CPU device in a process asks Inductor which SIMD ISAs it may use
(`torch._inductor.cpu_vec_isa.valid_vec_isa_list`): for each one the CPU's flags claim (AMX,
AVX512-VNNI, AVX512, AVX2) it builds a small test library, or finds it in the cache, and starts
a Python child to `dlopen` it. On the 2-core CPU box that was 1.96 s of a 3.2 s compiled GeLU row
with every cache warm (cProfile: `pick_vec_isa`, 80 `time.sleep` polls of the children), paid by
every new worker, so by every `workbench --replay`.

Here the worker that ran the check records its answer under workbench's cache folder, keyed by
what the answer depends on: the machine, the CPU's flags, the torch version and the C++
compiler (Inductor's `CXX`, else `g++`: its resolved path, size and mtime). When a later worker
starts on the same key and the check passed every claimed ISA, the core sets Inductor's own
switch `TORCHINDUCTOR_VEC_ISA_OK=1` in its environment, which makes Inductor take the claimed
ISAs without the test builds; that is the same list the check gave. Where the check refused one
(a compiler too old for AVX512, say), nothing is set and each worker checks again. A user's own
TORCHINDUCTOR_VEC_ISA_OK is left alone. Only Linux on x86_64 is handled; elsewhere nothing is
recorded or set.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import sys
from pathlib import Path

ENV = "TORCHINDUCTOR_VEC_ISA_OK"   # Inductor's switch (torch/_inductor/config.py, cpp.vec_isa_ok)
RECORD = "inductor-vec-isa.json"   # in the cache folder


def record_path(cache_dir: str | Path) -> Path:
    return Path(cache_dir) / RECORD


def host_key(environ: dict[str, str] | None = None) -> str | None:
    """A hash of what Inductor's ISA check depends on, or None where it is not handled (not
    Linux on x86_64, no /proc/cpuinfo, no torch installed, no C++ compiler found)."""
    environ = dict(os.environ if environ is None else environ)
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
        return None
    try:
        from importlib.metadata import version

        torch_version = version("torch")
        flags = next((line for line in Path("/proc/cpuinfo").read_text().splitlines()
                      if line.startswith("flags")), "")
    except Exception:  # no torch distribution, no cpuinfo
        return None
    compiler = shutil.which(environ.get("CXX", "g++"), path=environ.get("PATH"))
    if compiler is None or not flags:
        return None
    real = Path(compiler).resolve()
    stat = real.stat()
    parts = (platform.machine(), flags, torch_version, str(real), str(stat.st_size), str(stat.st_mtime_ns))
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:24]


def worker_env(cache_dir: str | Path, environ: dict[str, str] | None = None) -> dict[str, str]:
    """`{TORCHINDUCTOR_VEC_ISA_OK: "1"}` where a worker on this host key recorded that the check
    passed every ISA the CPU claims; else `{}` (and always where the user set the switch)."""
    environ = dict(os.environ if environ is None else environ)
    if ENV in environ:
        return {}
    try:
        record = json.loads(record_path(cache_dir).read_text())
    except (OSError, ValueError):
        return {}
    key = host_key(environ)
    if key is None or not isinstance(record, dict) or record.get("key") != key:
        return {}
    return {ENV: "1"} if record.get("all_claimed_valid") is True else {}


_recorded = False


def record_if_checked(cache_dir: str | Path | None) -> bool:
    """In a worker, after a row: where Inductor ran its ISA check in this process (and not
    under the switch), write what it found; returns whether a record was written. Reads
    Inductor's private module only where it is imported already, so it costs nothing to a row
    that did not compile; any change in that module's names leaves this a no-op."""
    global _recorded
    if _recorded or cache_dir is None or ENV in os.environ:
        return False
    isa = sys.modules.get("torch._inductor.cpu_vec_isa")
    if isa is None:
        return False
    try:
        if not isa.valid_vec_isa_list.cache_info().currsize:  # not asked yet in this process
            return False
        cpu = set(isa.x86_isa_checker())
        claimed = [str(v) for v in isa.supported_vec_isa_list if all(f in cpu for f in str(v).split())]
        valid = [str(v) for v in isa.valid_vec_isa_list()]
    except Exception:  # noqa: BLE001 - Inductor's internals moved: check in every worker as before
        return False
    key = host_key()
    if key is None:
        return False
    from workbench.fileio import atomic_write_text

    _recorded = True
    record = {"key": key, "claimed": claimed, "valid": valid, "all_claimed_valid": claimed == valid}
    try:
        atomic_write_text(record_path(cache_dir), json.dumps(record, indent=1) + "\n")
    except OSError:  # a read-only cache: each worker checks, as before
        return False
    return True
