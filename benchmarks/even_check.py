"""GPU check of the CUDA softmax's EVEN twin (softmax.cu ONEPASS_EVEN_V8): right in float16 and
bfloat16 on rows of exactly the cluster's slices, refused for any other row length.

    python benchmarks/even_check.py [ROWS]      # on a CUDA machine; ROWS defaults to 64

Builds the `cuda` softmax module, then for each 16-bit dtype: the twin (1024 x (8 + 8), KEEP, a
cluster of 2, even = 1) at ROWS x 262144 against torch.softmax in float64 (max abs error and
relative L2 error, no worse than the same config with even = 0; whether the two are bit for bit
the same is printed), and the twin
asked for a row 8 columns short, which must raise (the kernel would read and write past the
row's end without its bounds checks). Prints one line per check and exits 1 if any failed, 2 for a ROWS that is not a whole number or
without a GPU.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: the repository root on the path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks._gpu_script import cuda_torch  # noqa: E402

TWIN = {"threads": 1024, "packs": 8, "spacks": 8, "cluster": 2, "keep": 1, "even": 1}
N_COLS = 262144  # 2 blocks x 1024 threads x 16 packs x 8 elements


def main(argv: list[str]) -> int:
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    if argv and (len(argv) > 1 or not argv[0].isdigit() or int(argv[0]) < 1):
        print(f"even_check: ROWS must be one whole number >= 1, got {' '.join(argv)!r}", file=sys.stderr)
        return 2
    torch = cuda_torch("even_check")
    if torch is None:
        return 2
    from workbench.engine.plan import default_cache_dir
    from workbench.errors import LimitError
    from workbench.kernels.softmax import cuda_call, load_module

    rows = int(argv[0]) if argv else 64
    module = load_module(default_cache_dir() / "build")
    failed = 0
    for dtype in (torch.bfloat16, torch.float16):
        gen = torch.Generator(device="cuda").manual_seed(0)
        x = (torch.randn(rows, N_COLS, device="cuda", generator=gen) * 4).to(dtype)
        twin = cuda_call(module, TWIN)(x)
        checked = cuda_call(module, {**TWIN, "even": 0})(x)
        ref = torch.softmax(x.double(), dim=-1)
        err = (twin.double() - ref).abs().max().item()
        rel = ((twin.double() - ref).norm() / ref.norm()).item()
        rel_checked = ((checked.double() - ref).norm() / ref.norm()).item()
        same = torch.equal(twin, checked)
        ok = rel < 4e-3 and rel <= rel_checked * 1.01 + 1e-12
        failed += not ok
        print(f"{str(dtype)[6:]:9} twin {rows}x{N_COLS}: max abs err {err:.3g}, rel L2 {rel:.3g}, "
              f"bit-identical to the checked kernel: {same} -> {'ok' if ok else 'FAILED'}")
        short = x[:, : N_COLS - 8].contiguous()
        try:
            cuda_call(module, TWIN)(short)
            torch.cuda.synchronize()
            failed += 1
            print(f"{str(dtype)[6:]:9} twin asked for {N_COLS - 8} columns: ran -> FAILED (must be refused)")
        except (LimitError, RuntimeError) as exc:  # cuda_call's own refusal, or the binding's
            print(f"{str(dtype)[6:]:9} twin asked for {N_COLS - 8} columns: refused ({str(exc).splitlines()[0]})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
