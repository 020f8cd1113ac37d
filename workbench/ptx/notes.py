"""Notes on one kernel in the lecture's terms, from its static counts and assembler resources.

Each note is one line a student can act on: vector width of the global loads, elements per
thread (thread coarsening), warp reductions, tensor cores, spills, shared memory.
"""

from __future__ import annotations

from dataclasses import dataclass

from workbench.ptx.counts import Summary

VECTOR_LOAD_BYTES = 16  # one ld.global.v4.b32: the widest load a thread issues on sm_90


@dataclass(frozen=True)
class NoteContext:
    """What the notes know about the launch beyond the PTX.

    itemsize: bytes per element of the op's dtype (None: unknown); threads: threads per block
    (None: unknown); block_elems: elements one program handles (BLOCK_SIZE, None when there is
    no single such constexpr); expect_tensor_cores: the kernel has a dot (Triton TTIR `tt.dot`,
    or a matmul-like op), so no tensor-core instruction is worth a note.
    """

    itemsize: int | None = None
    threads: int | None = None
    block_elems: int | None = None
    expect_tensor_cores: bool = False


def elements_per_thread(summary: Summary, itemsize: int | None) -> int | None:
    """Elements each thread stores, from the static st.global bytes (one output tensor assumed).

    Stores outside loops: their bytes / itemsize (per thread). Stores inside a loop: the bytes
    stored in one iteration of the innermost storing loop / itemsize. None when unknown.
    """
    if not itemsize or not summary.st_bytes:
        return None
    stored = summary.st_bytes_per_iteration if summary.st_bytes_per_iteration is not None else summary.st_bytes
    return max(stored // itemsize, 1)


def kernel_notes(summary: Summary, *, registers: int | None = None, spills: int | None = None,
                 shared_bytes: int | None = None, ctx: NoteContext = NoteContext()) -> list[str]:
    """Notes for one kernel, in a stable order (loads, coarsening, reductions, tensor cores, memory)."""
    c = summary.counts
    notes: list[str] = []
    if c.get("ld_global_total", 0):
        if summary.widest_ld_bytes >= VECTOR_LOAD_BYTES:
            notes.append(f"16-byte vector loads (ld.global.v4): {summary.widest_ld_opcode}")
        elif c.get("ld_global_v2", 0) or c.get("ld_global_v4", 0):
            notes.append(f"{summary.widest_ld_bytes}-byte vector loads ({summary.widest_ld_opcode}): "
                         "less than 16 bytes per thread; check alignment/contiguity")
        else:
            notes.append(f"scalar loads ({summary.widest_ld_opcode}): check alignment/contiguity")
    n = elements_per_thread(summary, ctx.itemsize)
    if n and n > 1:
        notes.append(_coarsening_note(n, summary, ctx))
    if summary.shfl_reduce:
        notes.append(f"warp reduction through shfl.sync ({summary.shfl_reduce} butterfly/down/up shuffles)")
    elif c.get("shfl_sync", 0):
        notes.append(f"shfl.sync.idx: a value broadcast within a warp ({c['shfl_sync']}), no warp reduction")
    fp8 = c.get("wgmma_fp8", 0) or c.get("mma_fp8", 0)
    if c.get("wgmma", 0):
        notes.append(f"tensor cores: wgmma (Hopper), {c['wgmma']} wgmma instructions"
                     + (f", {fp8} fp8 MMA (e4m3/e5m2 operands)" if fp8 else ""))
    elif c.get("mma", 0):
        notes.append(f"tensor cores: mma.sync (Ampere-style), {c['mma']} mma instructions"
                     + (f", {fp8} fp8 MMA (e4m3/e5m2 operands)" if fp8 else ""))
    elif c.get("tcgen05_mma", 0):
        notes.append("tensor cores: tcgen05.mma (Blackwell)")
    elif ctx.expect_tensor_cores:
        notes.append("no tensor-core instructions: check dtype and fp32 precision")
    if c.get("cp_async_bulk_tensor", 0):
        notes.append("TMA: cp.async.bulk.tensor copies tiles global -> shared")
    elif c.get("cp_async", 0):
        notes.append("cp.async: asynchronous global -> shared copies (software pipelining)")
    if spills:
        notes.append(f"spills to local memory: {spills} bytes")
    if shared_bytes:
        notes.append(f"shared memory: {shared_bytes} bytes")
    return notes


def _coarsening_note(n: int, summary: Summary, ctx: NoteContext) -> str:
    in_loop = summary.st_bytes_per_iteration is not None
    how = (f"st.global {summary.st_bytes_per_iteration} B per loop iteration" if in_loop
           else f"st.global {summary.st_bytes} B per thread") + f" / {ctx.itemsize} B per element"
    if ctx.block_elems and ctx.threads:
        expect = ctx.block_elems // ctx.threads if ctx.block_elems >= ctx.threads else 1
        how += f"; BLOCK {ctx.block_elems} / {ctx.threads} threads = {expect}"
    per = " per loop iteration" if in_loop else ""
    return f"{n} elements per thread{per}: thread coarsening ({how})"
