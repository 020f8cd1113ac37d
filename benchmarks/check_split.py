"""Where a row's check time goes on a GPU, piece by piece, with the value gates' statistics taken
by the one-pass Triton kernel (workbench/check/compare_triton.py) and by the torch path
(WORKBENCH_COMPARE=torch), interleaved; and whether the two paths' reports agree on the row's
real outputs (first set and special set).

    python benchmarks/check_split.py [--op gelu] [--impls pytorch,triton] [--M 16384 --N 16384]
                                     [--dtype float32] [--repeats 3] [--json OUT]

Each figure is the least of `repeats` wall times in ms, the device synchronized before and after.
Needs a CUDA device (the torch path alone would be measured on a CPU, which says nothing here).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from workbench.check.chunks import CHUNK_ELEMENTS  # noqa: E402
from workbench.check.compare import ChunkTotals  # noqa: E402
from workbench.check.inputs import fingerprint  # noqa: E402
from workbench.check.row import RowCheck, _Pieces, compare_output, tolerance_for  # noqa: E402
from workbench.registry import BuildContext, discover  # noqa: E402


def _least_ms(fn, repeats: int) -> float:
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return round(min(times) * 1e3, 2)


class _Path:
    """WORKBENCH_COMPARE set for the statements inside (the check reads it at every chunk)."""

    def __init__(self, value: str):
        self.value = value

    def __enter__(self):
        self.old = os.environ.get("WORKBENCH_COMPARE")
        os.environ["WORKBENCH_COMPARE"] = self.value

    def __exit__(self, *exc):
        if self.old is None:
            os.environ.pop("WORKBENCH_COMPARE", None)
        else:
            os.environ["WORKBENCH_COMPARE"] = self.old


def split(op_name: str, impl_name: str, shape: dict, dtype: str, repeats: int) -> dict:
    device = "cuda"
    op = discover([]).op(op_name)
    impl = op.get_impl(impl_name)
    spec = op.make_spec(shape, dtype)
    ctx = BuildContext(device=device, fp32_precision="ieee", interpret=False)
    fn = impl.builder(spec, impl.resolve_params({}), ctx)
    inputs = op.make_inputs(spec, device, 0)
    out = fn(*inputs)
    torch.cuda.synchronize()
    row: dict = {"op": op_name, "impl": impl_name, "shape": shape, "dtype": dtype, "device": torch.cuda.get_device_name()}
    row["make_inputs_ms"] = _least_ms(lambda: op.make_inputs(spec, device, 0, out=inputs), repeats)
    row["fingerprint_ms"] = _least_ms(lambda: fingerprint(inputs[0]), repeats)
    row["call_ms"] = _least_ms(lambda: fn(*inputs), repeats)
    out_row = out.numel() // out.shape[0] if out.dim() and out.shape[0] else out.numel()
    pieces = _Pieces(op, impl, inputs, out_row, CHUNK_ELEMENTS)
    row["chunks"] = pieces.count
    row["reference_ms"] = _least_ms(lambda: [pieces.piece(k) for k in range(pieces.count)], repeats)
    refs = [pieces.piece(k).reshape(-1) for k in range(pieces.count)]
    flat = out.reshape(-1)
    tol = tolerance_for(op, impl, spec, ctx)

    def statistics():
        totals, start = ChunkTotals(), 0
        for ref in refs:
            totals.add(start, flat[start:start + ref.numel()], ref, tol.rtol)
            start += ref.numel()
        return totals

    for path in ("triton", "torch"):
        with _Path(path):
            row[f"{path}: statistics_ms"] = _least_ms(statistics, repeats)
            row[f"{path}: compare_output_ms"] = _least_ms(
                lambda: compare_output(op, impl, spec, ctx, inputs, out), repeats)
    refs.clear()  # the float64 chunks freed before the whole sequences
    for path in ("triton", "torch"):
        with _Path(path):
            op.make_inputs(spec, device, 0, out=inputs)  # set "first" again (run_all leaves the timed set)
            reports = {"first": compare_output(op, impl, spec, ctx, inputs, out).as_dict()}
            special = op.fill_special(spec, inputs, 0)
            if special is not None:
                got = fn(*inputs)
                reports["special"] = compare_output(op, impl, spec, ctx, inputs, got, input_set="special").as_dict()
                del got
                op.make_inputs(spec, device, 0, out=inputs)
            row[f"{path}: reports"] = reports

            def sequence():
                first = fn(*inputs)
                torch.cuda.synchronize()
                check = RowCheck(op, impl, spec, ctx, inputs, 0, sync=torch.cuda.synchronize)
                return check.run_all(fn, first)

            row[f"{path}: run_all_ms"] = _least_ms(sequence, max(1, repeats - 1))
    row["reports agree"] = _agree(row["triton: reports"], row["torch: reports"])
    return row


def _agree(a: dict, b: dict, rel: float = 1e-9) -> bool:
    """Same sets, same verdicts and counts, float fields equal within `rel` (the sums' last bits)."""
    if a.keys() != b.keys():
        return False
    for name in a:
        for key, x in a[name].items():
            y = b[name][key]
            if isinstance(x, float) and isinstance(y, float):
                if not (x == y or abs(x - y) <= rel * max(abs(x), abs(y))):
                    return False
            elif x != y:
                return False
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--op", default="gelu")
    parser.add_argument("--impls", default="pytorch,triton")
    parser.add_argument("--M", type=int, default=16384)
    parser.add_argument("--N", type=int, default=16384)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("check_split: needs a CUDA device", file=sys.stderr)
        return 2
    rows = [split(args.op, impl, {"M": args.M, "N": args.N}, args.dtype, args.repeats)
            for impl in args.impls.split(",")]
    for row in rows:
        print(json.dumps({k: v for k, v in row.items() if not k.endswith("reports")}))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0 if all(row["reports agree"] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
