"""Stage `kernels`: sessions/bench-kernels.yaml through the engine, the kernels table at the end.

    python benchmarks/gpu_evidence.py --stage kernels [--quick] [--out DIR] [--only gelu,softmax]

Every row of the shipped bench-kernels session (our GeLU, softmax and add in each dtype at
16384 x 16384, long-row softmax, the GEMMs and the fused GeLU epilogue, beside pytorch,
torch.compile and cuBLAS), each checked against float64, then timed. Writes
`bench-kernels_results.json` (the document the lead commits as results/h200/bench-kernels.json),
`bench-kernels_log.txt` and `kernels_table.md` (benchmarks/kernels_table.py) to `out`.

Builds: the compile-heavy ones (torch.compile, load_inline) are warmed first in parallel
processes (BuildContext(tune=False): a tuner there takes its first candidate); the autotuned
Triton and CUDA kernels tune in their own rows, one at a time, so no candidate is timed beside
another process's kernels (their tuning is their build_ms; a rerun on
the same machine reads the cached choice). --quick: the bfloat16 rows and one GEMM of each kind
(about 2 minutes); full: every row (about 5 minutes on an H200). Without a GPU: the same rows at
CPU sizes (CUDA rows unavailable, Triton interpreted), to try the stage anywhere.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from benchmarks.kernels_markdown import markdown, rows as table_rows
from benchmarks.stages._op_runs import has_gpu, run_session, warm_builds
from workbench.session.model import ImplRef, Session

TITLE = "kernels: bench-kernels.yaml (our kernels vs the libraries, every dtype)"
BUDGET_S = 330       # run_plan, after the warm-up: rows not started by then come back skipped
WARM_BUDGET_S = 100  # parallel torch.compile and load_inline builds
ONLY: tuple[str, ...] | None = None  # op names (gpu_evidence.py --only)
SESSION = "bench-kernels"
CPU_SHAPES = {"gelu": {"M": 64, "N": 512}, "add": {"M": 64, "N": 512}, "softmax": {"M": 8, "N": 1024},
              "matmul": {"M": 128, "N": 128, "K": 64}, "matmul_gelu": {"M": 128, "N": 128, "K": 64}}


def load() -> Session:
    from workbench.session.api import load_session, shipped_path

    return load_session(shipped_path(SESSION), check_ops=False)


def select(session: Session, *, gpu: bool, quick: bool, only: tuple[str, ...] | None = None) -> Session:
    """The runs this stage replays: all of them (full), the bfloat16 ones plus one GEMM per shape
    kind (quick), op names in `only`; without a GPU at CPU_SHAPES (one run per op and dtype)."""
    runs = [r for r in session.runs if not only or r.op in only]
    if quick:
        runs = [r for r in runs if r.dtype == "bfloat16" and not (r.op == "matmul" and r.shape.get("M") == 8192)]
    settings = session.settings
    if quick or not gpu:
        settings = dataclasses.replace(settings, rep_ms=30.0, warmup_ms=5.0, min_samples=5)
    if not gpu:
        seen, small = set(), []
        for r in runs:
            if (r.op, r.dtype) not in seen:
                seen.add((r.op, r.dtype))
                small.append(dataclasses.replace(r, shape=dict(CPU_SHAPES[r.op])))
        runs = small
        settings = dataclasses.replace(settings, device="cpu", flush_l2=False, target_rel_error=0.5)
    return dataclasses.replace(session, runs=tuple(runs), settings=settings)


def warm_session(session: Session) -> Session:
    """The rows to build ahead in parallel: compiled and cuda ones, but not those that tune (a
    candidate timed beside other processes' kernels would be timed wrong): triton rows and the
    CUDA softmax of clustered rows tune in their own row."""
    from workbench.dtypes import DType
    from workbench.kernels._onepass import cluster_candidates

    runs = []
    for r in session.runs:
        keep = []
        for ref in r.impls or ():
            kind = ref.name.split("_")[0]
            clustered = r.op == "softmax" and cluster_candidates(int(r.shape["N"]), DType.parse(r.dtype).itemsize)
            if kind == "compiled" or (kind == "cuda" and not clustered):
                keep.append(ImplRef(ref.name, params=dict(ref.params)))
        if keep:
            runs.append(dataclasses.replace(r, impls=tuple(keep)))
    return dataclasses.replace(session, runs=tuple(runs))


def run(quick: bool, out: Path) -> list[dict]:
    gpu = has_gpu()
    if not gpu:
        print("kernels stage: no CUDA GPU here: CPU-sized shapes, CUDA rows unavailable, Triton interpreted")
    session = select(load(), gpu=gpu, quick=quick, only=ONLY)
    out.mkdir(parents=True, exist_ok=True)
    if gpu:
        from workbench.engine.plan import default_cache_dir

        for note in warm_builds(warm_session(session), default_cache_dir() / "build", WARM_BUDGET_S):
            print(f"  {note}")
    doc = run_session(session, out, BUDGET_S)
    (out / "kernels_table.md").write_text(markdown(doc))
    return [_short(r) for r in table_rows(doc)]


def _short(row: dict) -> dict:
    """The printed table's columns (the markdown file has them all)."""
    keep = ("op", "shape", "dtype", "impl", "status", "median_ms", "spread_pct", "value", "pct", "x_lib", "tuned")
    short = {k: row[k] for k in keep}
    if row["status"] != "ok":
        short["tuned"] = row["error"]
    return short
