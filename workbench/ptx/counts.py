"""Static instruction counts of PTX, per kernel, in the keys of CONTRACTS.md ("Results" -> `ptx`).

Loads and stores are keyed by opcode + state space + vector width, dots as underscores, every
other qualifier dropped: `ld.global.nc.v4.f32` -> `ld_global_v4`, `ld.global.f32` -> `ld_global`,
`st.global.v2.b32` -> `st_global_v2`, `ld.shared::cta.b32` -> `ld_shared`; with totals
`ld_global_total`, `st_global_total`, `ld_shared_total`, `st_shared_total`. Other keys are matched
by instruction prefix (PREFIX_KEYS). Counts are static: instructions in the text, not executed ones.

The parser copes with what nvcc and Triton emit: predicates (`@%p1 ld...`, `@!%p2 ...`), labels
(`$L__BB0_2:`), `//` and `/* */` comments, `{ ... }` scopes of inline asm (Triton's
`// begin inline asm` blocks) and vector operands in braces (`{ %r1, %r2 }`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterator

# Instruction prefix -> count key. Order matters: the first matching prefix wins.
PREFIX_KEYS: tuple[tuple[str, str], ...] = (
    ("shfl.sync", "shfl_sync"),
    ("bar.sync", "bar_sync"),
    ("barrier.sync", "bar_sync"),
    ("cp.async.bulk.tensor", "cp_async_bulk_tensor"),
    ("cp.async", "cp_async"),
    ("ldmatrix", "ldmatrix"),
    ("stmatrix", "stmatrix"),      # extra key (only when present)
    ("wgmma", "wgmma"),
    ("mma", "mma"),
    ("tcgen05.mma", "tcgen05_mma"),  # extra key (Blackwell; only when present)
)
# FP64 work (extra keys, only when present): arithmetic with an .f64 type, and conversions to
# or from f64 (`cvt.f64.f32`). A float32 kernel with these computes in double precision (the
# lecture's cuda_naive GeLU: double literals promote the expression).
FP64_ARITH = frozenset({"add", "sub", "mul", "fma", "mad", "div", "rcp", "sqrt", "rsqrt", "neg", "abs",
                        "min", "max", "ex2", "lg2", "sin", "cos", "tanh", "copysign"})
LOAD_STORE_SPACES = ("global", "shared", "local")
VECTOR_WIDTHS = ("v2", "v4", "v8")
# Always present, so tables have stable columns; anything else appears only when non-zero.
BASE_KEYS: tuple[str, ...] = tuple(
    f"{op}_{space}{suffix}"
    for op in ("ld", "st") for space in ("global", "shared")
    for suffix in ("", "_v2", "_v4", "_total")
) + ("shfl_sync", "bar_sync", "cp_async_bulk_tensor", "cp_async", "ldmatrix", "mma", "wgmma")

_COMMENT_BLOCK = re.compile(r"/\*.*?\*/")
# An fp8 tensor-core instruction: `wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3`,
# `mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32` (the operand types e4m3 / e5m2).
_FP8_MMA = re.compile(r"\.(e4m3|e5m2)(\.|$)")
_LABEL = re.compile(r"^([A-Za-z_$%][\w$]*):(?!:)\s*")
_PREDICATE = re.compile(r"^@!?%?[\w$]+\s+")
_TYPE_BITS = re.compile(r"^(?:[bsuf]|bf|e4m3|e5m2)(\d+)(x(\d+))?$")
_ENTRY = re.compile(r"^\s*(?:\.visible\s+|\.weak\s+|\.extern\s+)*\.(entry|func)\s+(?:\([^)]*\)\s*)?([\w$]+)")


@dataclass(frozen=True)
class Instruction:
    """One PTX instruction: 1-based line number, opcode (`ld.global.v4.b32`), the statement text."""

    line: int
    opcode: str
    text: str
    predicated: bool = False


def strip_comments(line: str) -> str:
    return _COMMENT_BLOCK.sub(" ", line).split("//", 1)[0]


def iter_statements(text: str) -> Iterator[tuple[int, str]]:
    """(1-based line, statement) for every `;`-separated statement, scope braces and labels removed."""
    for line_no, raw in enumerate(text.splitlines(), start=1):
        for stmt in strip_comments(raw).split(";"):
            stmt = stmt.strip()
            while True:  # scope braces and labels may stack: `{ $L1: @%p bra ...`
                before = stmt
                stmt = stmt.lstrip("{}").strip()
                stmt = _LABEL.sub("", stmt)
                if stmt == before:
                    break
            if stmt:
                yield line_no, stmt


def iter_instructions(text: str) -> Iterator[Instruction]:
    """Every instruction in `text` (directives such as `.reg`, `.loc`, `.param` skipped)."""
    for line_no, stmt in iter_statements(text):
        predicated = stmt.startswith("@")
        stmt = _PREDICATE.sub("", stmt)
        if not stmt or stmt.startswith(".") or stmt.startswith("@"):
            continue
        opcode = stmt.split(None, 1)[0]
        yield Instruction(line_no, opcode, stmt, predicated)


def load_store_key(opcode: str) -> str | None:
    """`ld.global.nc.v4.f32` -> `ld_global_v4`; None for ld.param/const and other opcodes."""
    parts = opcode.split(".")
    if parts[0] not in ("ld", "st", "ldu"):
        return None
    op = "ld" if parts[0] == "ldu" else parts[0]
    spaces = [p.split("::")[0] for p in parts[1:] if p.split("::")[0] in (*LOAD_STORE_SPACES, "param", "const")]
    if not spaces:
        space = "generic"
    elif spaces[0] in LOAD_STORE_SPACES:
        space = spaces[0]
    else:
        return None
    vec = next((p for p in parts[1:] if p in VECTOR_WIDTHS), "")
    return f"{op}_{space}" + (f"_{vec}" if vec else "")


def prefix_key(opcode: str) -> str | None:
    for prefix, key in PREFIX_KEYS:
        if opcode == prefix or opcode.startswith(prefix + "."):
            return key
    return None


def access_bytes(opcode: str) -> int:
    """Bytes one thread moves with a load/store: vector width x element type (`v4.b32` -> 16)."""
    parts = opcode.split(".")
    width = next((int(p[1:]) for p in parts if p in VECTOR_WIDTHS), 1)
    bits = 32
    for part in reversed(parts):
        m = _TYPE_BITS.match(part)
        if m:
            bits = int(m.group(1)) * int(m.group(3) or 1)
            break
    return width * max(bits // 8, 1)


def fp64_key(opcode: str) -> str | None:
    """`fma.rn.f64` -> fp64_arith, `cvt.f64.f32` -> fp64_cvt, others None."""
    parts = opcode.split(".")
    if "f64" not in parts[1:]:
        return None
    if parts[0] == "cvt":
        return "fp64_cvt"
    return "fp64_arith" if parts[0] in FP64_ARITH else None


def count_instructions(text: str) -> dict[str, int]:
    """Static counts of one kernel's PTX (or any PTX snippet) in the CONTRACTS keys.

    Every key of BASE_KEYS is present; extra keys (`ld_global_v8`, `ld_local`, `stmatrix`,
    `fp64_arith`, `fp64_cvt`, `wgmma_fp8` and `mma_fp8`: the wgmma / mma instructions with fp8
    operands, counted in `wgmma` / `mma` too, ...) only when non-zero.
    """
    counts = dict.fromkeys(BASE_KEYS, 0)
    for ins in iter_instructions(text):
        key = load_store_key(ins.opcode) or prefix_key(ins.opcode) or fp64_key(ins.opcode)
        if key is None:
            continue
        counts[key] = counts.get(key, 0) + 1
        if key in ("wgmma", "mma") and _FP8_MMA.search(ins.opcode):  # extra key: fp8 operands (sm_89+)
            counts[f"{key}_fp8"] = counts.get(f"{key}_fp8", 0) + 1
        if key.startswith(("ld_", "st_")):
            total = "_".join(key.split("_")[:2]) + "_total"
            counts[total] = counts.get(total, 0) + 1
    return counts


@dataclass(frozen=True)
class KernelText:
    """One `.entry` (or `.func`) of a PTX module: its name, kind, 1-based line span and text."""

    name: str
    kind: str
    first_line: int
    last_line: int
    text: str


def split_kernels(ptx: str, kinds: tuple[str, ...] = ("entry",)) -> list[KernelText]:
    """The kernels (`.entry`, and `.func` if asked) of a PTX module, in order.

    A body runs from its header to the `}` that balances the first `{` (operand braces such as
    `{ %r1, %r2 }` balance within their line, so counting per line is exact).
    """
    lines = ptx.splitlines()
    found: list[KernelText] = []
    i = 0
    while i < len(lines):
        m = _ENTRY.match(lines[i])
        if not m or m.group(1) not in kinds:
            i += 1
            continue
        depth, opened, j = 0, False, i
        while j < len(lines):
            code = strip_comments(lines[j])
            depth += code.count("{") - code.count("}")
            opened = opened or "{" in code
            if opened and depth <= 0:
                break
            if not opened and code.rstrip().endswith(";"):  # a declaration without a body
                break
            j += 1
        j = min(j, len(lines) - 1)
        found.append(KernelText(m.group(2), m.group(1), i + 1, j + 1, "\n".join(lines[i:j + 1])))
        i = j + 1
    return found


@dataclass(frozen=True)
class Summary:
    """What the notes need beyond counts, from one kernel's PTX.

    ld_bytes / st_bytes: per thread, summed over every static ld.global / st.global;
    widest_ld_bytes / widest_st_bytes: the widest single access; has_loop: a branch to an
    earlier label; st_bytes_per_iteration: st.global bytes in one iteration of the innermost loop
    holding the widest store (None when every store is outside loops: st_bytes is then per
    thread);
    shfl_reduce / shfl_idx: butterfly/up/down shuffles (reductions) vs idx (broadcasts).
    """

    counts: dict[str, int]
    ld_bytes: int = 0
    st_bytes: int = 0
    widest_ld_bytes: int = 0
    widest_st_bytes: int = 0
    widest_ld_opcode: str = ""
    has_loop: bool = False
    st_bytes_per_iteration: int | None = None
    shfl_reduce: int = 0
    shfl_idx: int = 0
    loops: tuple[tuple[int, int], ...] = field(default_factory=tuple)


def _labels(text: str) -> dict[str, int]:
    labels: dict[str, int] = {}
    for line_no, raw in enumerate(text.splitlines(), start=1):
        m = _LABEL.match(strip_comments(raw).strip())
        if m:
            labels[m.group(1)] = line_no
    return labels


def loop_ranges(text: str) -> list[tuple[int, int]]:
    """(first, last) 1-based lines of each loop: a label and a later branch back to it."""
    labels = _labels(text)
    loops = []
    for ins in iter_instructions(text):
        if ins.opcode.split(".")[0] == "bra":
            target = ins.text.split(None, 1)[-1].strip()
            if labels.get(target, 10**9) <= ins.line:
                loops.append((labels[target], ins.line))
    return loops


def summarize(text: str) -> Summary:
    """Counts plus global-access widths, loops and shuffle kinds for one kernel's PTX."""
    loops = loop_ranges(text)
    ld_bytes = st_bytes = widest_ld = widest_st = shfl_reduce = shfl_idx = 0
    widest_ld_op = ""
    stores: list[tuple[int, int]] = []
    for ins in iter_instructions(text):
        key = load_store_key(ins.opcode)
        if key and key.startswith("ld_global"):
            n = access_bytes(ins.opcode)
            ld_bytes += n
            if n > widest_ld:
                widest_ld, widest_ld_op = n, ins.opcode
        elif key and key.startswith("st_global"):
            n = access_bytes(ins.opcode)
            st_bytes += n
            widest_st = max(widest_st, n)
            stores.append((ins.line, n))
        elif ins.opcode.startswith("shfl.sync."):
            mode = ins.opcode.split(".")[2]
            shfl_idx += mode == "idx"
            shfl_reduce += mode in ("bfly", "down", "up")
    per_iteration = None
    in_loops = [(n, line) for line, n in stores if any(a <= line <= b for a, b in loops)]
    if in_loops:
        _, widest_line = max(in_loops, key=lambda t: (t[0], -t[1]))  # the first widest store in a loop
        first, last = min(((b - a, a, b) for a, b in loops if a <= widest_line <= b))[1:]
        per_iteration = sum(n for line, n in stores if first <= line <= last)
    return Summary(count_instructions(text), ld_bytes, st_bytes, widest_ld, widest_st, widest_ld_op,
                   bool(loops), per_iteration, shfl_reduce, shfl_idx, tuple(loops))
