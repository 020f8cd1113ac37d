"""nvcc time of softmax.cu's module: every kernel against one row's (issue #39, item 2).

Runs the `.cu` compile load_inline runs (torch's COMMON_NVCC_FLAGS, sm_90 SASS and PTX, -fPIC,
-O3, -std=c++20; torch's include folders left out: softmax.cu includes no torch header) three
times each for the whole file and for the rows named below (kernels/softmax.py cuda_build_flags),
and prints the median wall and CPU (user + sys of nvcc and its children) seconds. No GPU needed.

    python benchmarks/softmax_nvcc_time.py [--repeats 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROWS = ({"M": 16384, "N": 16384, "dtype": "float32"},   # the default session's softmax row
        {"M": 4096, "N": 262144, "dtype": "bfloat16"},  # the long rows: the largest candidate set
        {"M": 64, "N": 1000, "dtype": "float32"})       # a short row: the plan alone


def nvcc_argv(nvcc: str, cu: Path, out: Path, extra: tuple[str, ...]) -> list[str]:
    from torch.utils.cpp_extension import COMMON_NVCC_FLAGS

    return [nvcc, *COMMON_NVCC_FLAGS, "-gencode=arch=compute_90,code=compute_90", "-gencode=arch=compute_90,code=sm_90",
            "--compiler-options", "-fPIC", "-O3", f"-I{cu.parent}", *extra, "-std=c++20", "-c", str(cu), "-o", str(out)]


def timed(argv: list[str]) -> tuple[float, float]:
    """(wall s, CPU s of the children) of one compile; raises CalledProcessError when it fails."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure(repeats: int = 3) -> list[dict]:
    from workbench.kernels import softmax as sm
    from workbench.machine import find_nvcc
    from workbench.registry import discover

    nvcc = find_nvcc()
    if nvcc is None:
        raise SystemExit("nvcc not found")
    op = discover().op("softmax")
    cases = [("whole softmax.cu", ())]
    for row in ROWS:
        spec = op.make_spec({"M": row["M"], "N": row["N"]}, row["dtype"])
        cases.append((f"{row['M']}x{row['N']} {row['dtype']} ({len(sm.cuda_kernels(spec))} kernels)",
                      sm.cuda_build_flags(spec)))
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for label, flags in cases:
            runs = [timed(nvcc_argv(nvcc, sm.CU_FILE, Path(tmp) / "k.o", flags)) for _ in range(repeats)]
            out.append({"case": label, "flags": list(flags), "wall_s": [round(w, 2) for w, _ in runs],
                        "cpu_s": [round(c, 2) for _, c in runs],
                        "median_wall_s": round(statistics.median(w for w, _ in runs), 2),
                        "median_cpu_s": round(statistics.median(c for _, c in runs), 2)})
            print(f"{label}: median {out[-1]['median_wall_s']} s wall, {out[-1]['median_cpu_s']} s CPU "
                  f"(walls {out[-1]['wall_s']})", flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error(f"--repeats must be >= 1, got {args.repeats}")
    results = measure(args.repeats)
    if args.json:
        args.json.write_text(json.dumps({"cpus": os.cpu_count(), "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
