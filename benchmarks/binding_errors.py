"""GPU check that the CUDA softmax binding's refusals raise instead of killing the process.

    python benchmarks/binding_errors.py      # on a CUDA machine

Calls the `wb_softmax` binding directly (past cuda_call's own Python checks) with three inputs
its TORCH_CHECK / WB_CHECK refuse: the EVEN twin on a row 8 columns short (softmax.cu returns
cudaErrorInvalidValue), an int32 tensor and a 1-D tensor. Each must raise RuntimeError with its
message. Before the bindings formatted their messages with snprintf (workbench/cuda_build.py
CHECK_HELPERS), the first ended the process on the H200 (SIGSEGV in std::basic_ostream::
_M_insert<long> under c10::str, seen under cuda-gdb). Prints one line per input and "process
alive"; exits 1 if one did not raise, 2 without a GPU.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: the repository root on the path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks._gpu_script import cuda_torch  # noqa: E402


def main(argv: list[str]) -> int:
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    if argv:
        print(f"binding_errors: takes no arguments, got {' '.join(argv)!r} (--help for more)", file=sys.stderr)
        return 2
    torch = cuda_torch("binding_errors")
    if torch is None:
        return 2
    from workbench.engine.plan import default_cache_dir
    from workbench.kernels.softmax import load_module

    module = load_module(default_cache_dir() / "build")
    x = torch.randn(64, 262144 - 8, device="cuda").to(torch.bfloat16)
    failed = 0
    for args, what in (((x, 1024, 8, 8, 2, 1, 1, 0), "EVEN twin on a short row"),
                       ((x.int(), 0, 0, 0, 0, 0, 0, 0), "int32 input"),
                       ((x[0], 0, 0, 0, 0, 0, 0, 0), "1-D input")):
        try:
            module.softmax_rows(*args)
            torch.cuda.synchronize()
            print(f"{what}: no error", flush=True)
            failed += 1
        except RuntimeError as exc:
            print(f"{what}: raised RuntimeError {str(exc).splitlines()[0][:200]}", flush=True)
    print("process alive", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
