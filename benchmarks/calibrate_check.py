"""How close every shipped implementation comes to the check's tolerance (workbench.check.tolerance).

    python benchmarks/calibrate_check.py [--device cpu|cuda:0] [--kinds manual,pytorch,...]
    TRITON_INTERPRET=1 python benchmarks/calibrate_check.py --kinds triton      # CPU, interpreted

For each (op, implementation, dtype, test spec, input set) it prints the factor by which the
tolerance would have to grow for the output to pass just barely (workbench.check.compare.needed_factor):
elementwise and norm-wise, without the implementation's declared factor (`raw`) and with it
(`declared`). A shipped implementation passes where both declared factors are <= 1; the margin of
a constant is 1 / the largest raw factor of the implementations it covers. The GPU stage
(benchmarks/stages/check.py) records the same numbers on the H200.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

import torch

from workbench.check.compare import needed_factor
from workbench.registry import BuildContext, discover
from workbench.check.row import SECOND_SEED_OFFSET, reference_output, tolerance_for

SHIPPED_MODULE = "workbench.kernels."
# Larger shapes than the ops' test specs, where accumulation error shows (K up to 16384).
EXTRA_SPECS = {"matmul": [{"M": 64, "N": 64, "K": 4096}, {"M": 32, "N": 32, "K": 16384}],
               "matmul_gelu": [{"M": 64, "N": 64, "K": 4096}],
               "softmax": [{"M": 64, "N": 8192}], "gelu": [{"M": 256, "N": 4096}]}


def shipped(op) -> list:
    return [impl for impl in op.impls.values() if impl.builder.__module__.startswith(SHIPPED_MODULE)]


def calibrate_one(op, impl, spec, device: str, *, fp32_precision: str = "ieee", seed: int = 0) -> list[dict]:
    """needed_factor rows of one (impl, spec) on its "first" and "special" input sets."""
    ctx = BuildContext(device=device, fp32_precision=fp32_precision, interpret=not device.startswith("cuda"))
    fn = impl.builder(spec, impl.resolve_params({}), ctx)
    tol = tolerance_for(op, impl, spec, ctx)
    raw = tolerance_for(op, replace(impl, tolerance_scale=1.0), spec, ctx)
    rows = []
    inputs = op.make_inputs(spec, device, seed)
    for name in ("first", "special", "timed"):
        if name == "special" and op.fill_special(spec, inputs, seed) is None:
            continue
        if name == "timed":
            op.make_inputs(spec, device, seed + SECOND_SEED_OFFSET, out=inputs)
        ref = reference_output(op, impl, inputs)
        out = fn(*inputs)
        if torch.is_tensor(out) and device.startswith("cuda"):
            torch.cuda.synchronize()
        raw_e, raw_n = needed_factor(out, ref, raw)
        dec_e, dec_n = needed_factor(out, ref, tol)
        rows.append({"op": op.name, "impl": impl.name, "dtype": str(spec.dtype), "shape": spec.shape,
                     "set": name, "raw_elementwise": raw_e, "raw_norm": raw_n,
                     "declared_elementwise": dec_e, "declared_norm": dec_n,
                     "factor": impl.tolerance_factor(spec.dtype),
                     "least_factor": least_factor(op, impl, spec, ctx, out, ref)})
    return rows


def least_factor(op, impl, spec, ctx, out, ref) -> float | None:
    """The smallest power-of-two declared factor (1 .. 2^16) with which `out` passes; None: none."""
    for exponent in range(17):
        trial = replace(impl, tolerance_scale=float(2 ** exponent))
        if max(needed_factor(out, ref, tolerance_for(op, trial, spec, ctx))) <= 1.0:
            return float(2 ** exponent)
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--kinds", default="manual,pytorch,compiled")
    parser.add_argument("--ops", default=None, help="comma-separated op names (default: all shipped)")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    parser.add_argument("--test-specs-only", action="store_true", help="skip the larger EXTRA_SPECS")
    args = parser.parse_args(argv)
    kinds = set(args.kinds.split(","))
    registry = discover()
    rows = []
    for op in registry.ops.values():
        if args.ops and op.name not in args.ops.split(","):
            continue
        for impl in shipped(op):
            if impl.kind not in kinds:
                continue
            extra = [] if args.test_specs_only else EXTRA_SPECS.get(op.name, [])
            for shape in [*op.test_specs, *extra]:
                for dtype in op.dtypes:
                    if not impl.supports(dtype):
                        continue
                    watch = impl.backend.watch()  # compiled: dynamo reset, each shape compiles fresh
                    if watch is not None:
                        watch.start()
                    try:
                        rows += calibrate_one(op, impl, op.make_spec(shape, dtype), args.device)
                    except Exception as exc:  # one line per failing case; the rest still run
                        rows.append({"op": op.name, "impl": impl.name, "dtype": str(dtype), "shape": shape,
                                     "error": f"{type(exc).__name__}: {str(exc)[:200]}"})
                    print(json.dumps(rows[-1]), flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
