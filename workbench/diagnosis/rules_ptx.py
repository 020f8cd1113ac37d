"""Rules over the PTX record, the launch record and the shape: FP64 in a float32 kernel, register
spills, low occupancy, scalar loads where vector loads were possible, wave quantization, and a
misaligned size against its aligned neighbour (matmul 4097 against 4096).

Counts are the PTX record's static counts (CONTRACTS.md `ptx`; `fp64_arith`/`fp64_cvt` are
instructions with an .f64 type, workbench/ptx/counts.py); occupancy and waves come from the
launch record (engine/execute.py launch_for: sm_90 limits, the kernel's registers).
"""

from __future__ import annotations

import math

from workbench.diagnosis.core import Context, Finding
from workbench.diagnosis.figures import launch, label, median_ms, number, ptx_kernels, section, traffic, x
from workbench.diagnosis.rules_traffic import AT_ROOF, tensor_cores
from workbench.results.record import Record

LOW_OCCUPANCY = 0.25    # resident warps / the SM's maximum, below which latency is poorly hidden
TAIL_EFFICIENCY = 0.8   # waves / ceil(waves) below this: the last wave leaves much of the GPU idle
ALIGN = 16              # elements: tensor-core tiles and 16-byte vectors want multiples of this
SLOWER = 0.9            # throughput ratio against the aligned neighbour that counts as a drop
NARROW_DTYPES = ("float32", "float16", "bfloat16")
ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8}


def fp64(record: Record, ctx: Context) -> Finding | None:
    """FP64 arithmetic in a kernel of a narrower dtype (the lecture's `cuda_naive` GeLU:
    double literals and tanh() promote the whole expression)."""
    if record.dtype not in NARROW_DTYPES:
        return None
    hits = [(k.get("name"), (k.get("counts") or {}).get("fp64_arith", 0), (k.get("counts") or {}).get("fp64_cvt", 0))
            for k in ptx_kernels(record)]
    hits = [h for h in hits if h[1]]
    if not hits:
        return None
    name, arith, cvt = max(hits, key=lambda h: h[1])
    peak = number(section(ctx.environment.get("datasheet") or {}, "matmul_tflops").get("float64"))
    evidence = (f"{name}: {arith} FP64 arithmetic instructions and {cvt} conversions to or from FP64 in the "
                f"PTX of a {record.dtype} kernel")
    if peak:
        evidence += f" (FP64 peak {peak:g} TFLOP/s, a fraction of FP32's)"
    return Finding("fp64", evidence, "write float literals (0.5f, 1.0f, 0.044715f) and call float functions "
                   "(tanhf, expf): one double literal promotes the expression to FP64", "problem",
                   {"fp64_arith": arith, "fp64_cvt": cvt, "kernel": name})


def spills(record: Record, ctx: Context) -> Finding | None:
    worst = max(ptx_kernels(record), key=lambda k: number(k.get("spills")) or 0, default=None)
    if worst is None or not number(worst.get("spills")):
        return None
    return Finding("spills", f"{worst.get('name')}: {worst['spills']:g} bytes of registers spilled to local "
                   f"memory ({worst.get('registers')} registers per thread)",
                   "spills go through L1/L2 to HBM: smaller tiles (BLOCK_*), fewer num_stages or fewer live "
                   "values per thread", "problem", {"spills": worst["spills"], "registers": worst.get("registers")})


def low_occupancy(record: Record, ctx: Context) -> Finding | None:
    geometry = launch(record)
    occupancy = number(geometry.occupancy)
    if occupancy is None or occupancy >= LOW_OCCUPANCY or number(geometry.registers) is None:
        return None
    t = traffic(record)
    at_roof = max(number(t.pct_of_copy) or 0, number(t.pct_of_cublas) or 0) >= AT_ROOF
    if at_roof or tensor_cores(record)[0]:  # a tensor-core GEMM runs few, large blocks by design
        return None
    limiter = geometry.limiter or "?"
    return Finding("low_occupancy", f"occupancy {100 * occupancy:.0f}% ({geometry.blocks_per_sm} blocks of "
                   f"{geometry.block_threads} threads per SM; limited by {limiter}; "
                   f"{geometry.registers} registers per thread)",
                   "more resident warps hide memory latency: fewer registers per thread or less shared "
                   "memory per block (smaller tiles, fewer stages), or more threads per block", "problem",
                   {"occupancy": occupancy, "limiter": limiter})


def scalar_loads(record: Record, ctx: Context) -> Finding | None:
    """Only 4-byte (or narrower) global loads in a memory-bound kernel whose rows allow 16-byte ones."""
    shape = record.shape or {}
    itemsize = ITEMSIZE.get(record.dtype or "")
    if traffic(record).bound not in ("memory", None) or not shape or not itemsize:
        return None
    row_bytes = list(shape.values())[-1] * itemsize
    kernels = ptx_kernels(record)
    vector = sum((k.get("counts") or {}).get(key, 0) for k in kernels
                 for key in ("ld_global_v2", "ld_global_v4", "ld_global_v8"))
    if vector or row_bytes % 16:  # some kernel of it loads vectors (a scalar tail kernel is fine)
        return None
    for kernel in kernels:
        counts = kernel.get("counts") or {}
        if counts.get("ld_global_total", 0):
            return Finding("scalar_loads", f"{kernel.get('name')}: {counts['ld_global_total']} global load(s), all "
                           f"scalar ({itemsize} B per thread per load); rows of {row_bytes} B allow 16-byte loads",
                           "load 16 bytes per thread (float4 / ld.global.v4) and give each thread several "
                           "elements: fewer, wider memory transactions in flight", "problem",
                           {"ld_global": counts["ld_global_total"], "row_bytes": row_bytes})
    return None


def wave_quantization(record: Record, ctx: Context) -> Finding | None:
    """Blocks against SMs; only for a row that ran on a GPU (a CPU row's grid ran in the Triton
    interpreter: "125 SMs idle" said nothing about it)."""
    if str(record.device or "").rsplit("/", 1)[-1].startswith("cpu"):
        return None
    geometry = launch(record)
    sms = number(geometry.sm_count) or number(ctx.environment.get("sm_count"))
    blocks = number(geometry.blocks) or (math.prod(geometry.grid) if geometry.grid else None)
    if not sms or not blocks:
        return None
    if blocks < sms:
        return Finding("wave_quantization", f"{int(blocks)} blocks for {int(sms)} SMs: {int(sms - blocks)} SMs idle",
                       "more, smaller blocks (smaller tiles, split-K for a matmul) so every SM has work",
                       "problem", {"blocks": blocks, "sm_count": sms})
    waves, per_sm = number(geometry.waves), number(geometry.blocks_per_sm)
    if waves is None or per_sm is None or waves < 1 or waves / math.ceil(waves) >= TAIL_EFFICIENCY:
        return None
    tail = waves - math.floor(waves)
    return Finding("wave_quantization", f"{waves:.2f} waves of {int(sms * per_sm)} blocks: the last wave fills "
                   f"{100 * tail:.0f}% of the GPU ({100 * waves / math.ceil(waves):.0f}% of the slots used overall)",
                   "a block count that is a multiple of SMs x blocks per SM (tile size), or a persistent "
                   "kernel looping over tiles", "problem", {"waves": waves, "tail": tail})


def shape_alignment(record: Record, ctx: Context) -> Finding | None:
    """A size that is not a multiple of ALIGN, against the same row at the aligned size beside it."""
    shape = record.shape or {}
    odd = {k: v for k, v in shape.items() if isinstance(v, int) and v > ALIGN and v % ALIGN}
    if not odd:
        return None
    aligned = {k: ALIGN * round(v / ALIGN) for k, v in odd.items()}
    want = {**shape, **aligned}
    peer = ctx.same_label_at(record, want)
    mine, theirs = _throughput(record), _throughput(peer) if peer else None
    if peer is None or not mine or not theirs or mine[0] / theirs[0] >= SLOWER:
        return None
    sizes = ", ".join(f"{k}={v}" for k, v in odd.items())
    near = ", ".join(f"{k}={v}" for k, v in aligned.items())
    return Finding("shape_alignment", f"{sizes}: {mine[0]:.3g} {mine[1]} against {theirs[0]:.3g} at {near} "
                   f"({x(mine[0] / theirs[0])}): {sizes} is not a multiple of {ALIGN}, so rows lose 16-byte "
                   "alignment and the edge tiles are partly empty",
                   f"pad to a multiple of {ALIGN} (or of the tile) and slice the result, or choose aligned sizes",
                   "problem", {"ratio": mine[0] / theirs[0], "aligned": aligned, "peer_label": label(peer)})


def _throughput(record: Record | None) -> tuple[float, str] | None:
    if record is None:
        return None
    t = traffic(record)
    if t.tflops and number(t.tflops) and t.bound == "compute":
        return t.tflops, "TFLOP/s"
    if t.gbps and number(t.gbps):
        return t.gbps, "GB/s"
    median = median_ms(record)
    return (1.0 / median, "calls/ms") if median else None
