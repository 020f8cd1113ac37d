"""The line-information parsers on small texts written the way Triton, nvcc and nvdisasm print them."""

from __future__ import annotations

from workbench.ptx.irlocs import llir_line_frames, mlir_line_frames, trailing_loc
from workbench.ptx.launch_diff import diff_kernels, line_summary, specialisation_summary, ttir_specialisation
from workbench.ptx.lineinfo import (Frame, kernel_file, parse_sass_ptx_lines, ptx_line_frames, same_file,
                                    sass_addresses)
from workbench.ptx.source_map import build_source_map, stages_of

TRITON_PTX = """\
.visible .entry k(
)
{
\t.loc\t1 10 0                         // k.py:10:0
\tmov.u32 \t%r1, %tid.x;
\t.loc\t2 191 40                        // standard.py:191:40 @[ k.py:12:19 ]
\tshfl.sync.bfly.b32 \t%r2, %r1, 16, 31, -1;
$L__tmp1:
\t.loc\t2 170 27                        // standard.py:170:27 @[ standard.py:191:40 @[ k.py:12:19 ] ]
\tmax.f32 \t%r3, %r1, %r2;
\t.loc\t1 0 5
\tret;
}
\t.file\t1 "/src/k.py"
\t.file\t2 "/site/triton/language/standard.py"
"""

NVCC_PTX = """\
\t.file\t1 "/src/g.cu"
\t.file\t2 "/cuda/include/cuda_fp16.hpp"
.visible .entry other(
)
{
\t.loc\t1 3 1
\tret;
}
.visible .entry g(
)
{
\t.loc\t1 20 9
\tld.global.v4.f32 \t{%f1, %f2, %f3, %f4}, [%rd1];
\t.loc\t1 12 73, function_name $L__info_string0, inlined_at 1 25 9
\tmov.f32 \t%f5, %f1;
\t.loc\t2 708 1, function_name $L__info_string1, inlined_at 1 12 73
\tcvt.f32.f16 \t%f6, %rs1;
}
"""


def test_triton_inlining_chain_from_the_comment():
    frames = ptx_line_frames(TRITON_PTX)
    assert frames[5] == (Frame("/src/k.py", 10),)
    assert frames[7] == (Frame("/site/triton/language/standard.py", 191), Frame("k.py", 12))
    assert frames[10][-1] == Frame("k.py", 12) and len(frames[10]) == 3
    assert 12 not in frames  # `.loc 1 0 5`: no line
    assert kernel_file(frames) == "/src/k.py"
    assert same_file("k.py", "/src/k.py") and not same_file("/a/k.py", "/b/k.py")


def test_nvcc_inlined_at_chain_is_rebuilt_from_earlier_locs():
    frames = ptx_line_frames(NVCC_PTX)
    assert frames[13] == (Frame("/src/g.cu", 20),)
    assert frames[17] == (Frame("/cuda/include/cuda_fp16.hpp", 708), Frame("/src/g.cu", 12), Frame("/src/g.cu", 25))


def test_source_map_of_the_second_entry_counts_from_its_first_line():
    mapping, file = build_source_map(NVCC_PTX, ptx_first_line=9, ptx_last_line=18)
    assert file == "/src/g.cu"
    by_line = {e["source_line"]: e for e in mapping}
    assert by_line[20]["ptx_lines"] == [5] and by_line[20]["counts"]["ld_global_v4"] == 1
    assert by_line[12]["ptx_lines"] == [7, 9] and by_line[25]["ptx_lines"] == [7, 9]
    assert 3 not in by_line  # the other entry's line
    assert by_line[20]["sass_lines"] == [] and "ttir_lines" not in by_line[20]


NVDISASM_GP = """\
.text.k:
\t//## File ".nv_debug_ptx_txt", line 5
        /*0000*/                   S2R R0, SR_TID.X ;
\t//## File ".nv_debug_ptx_txt", line 7
        /*0010*/                   SHFL.BFLY PT, R2, R0, 0x10, 0x1f ;
\t//## File "/elsewhere.py", line 3
        /*0020*/                   EXIT ;
"""
CUOBJDUMP_SASS = """\
        /*0000*/                   S2R R0, SR_TID.X ;
        /*0010*/                   SHFL.BFLY PT, R2, R0, 0x10, 0x1f ;
        /*0020*/                   EXIT ;"""


def test_sass_lines_reach_source_through_the_ptx_lines():
    table = parse_sass_ptx_lines(NVDISASM_GP)
    assert table == {"k": {0x0: 5, 0x10: 7}}
    assert sass_addresses(CUOBJDUMP_SASS) == {0x0: 1, 0x10: 2, 0x20: 3}
    mapping, _ = build_source_map(TRITON_PTX, sass=CUOBJDUMP_SASS, sass_to_ptx=table["k"])
    by_line = {e["source_line"]: e for e in mapping}
    assert by_line[10]["sass_lines"] == [1] and by_line[12]["sass_lines"] == [2]
    assert by_line[12]["sass_counts"] == {"SHFL": 1} and by_line[12]["counts"]["shfl_sync"] == 1


TTIR = """\
#loc = loc("/src/k.py":10:0)
module {
  tt.func public @k(%x_ptr: !tt.ptr<f32> {tt.divisibility = 16 : i32} loc("x_ptr"(#loc)), %n: i32 loc("n"(#loc))) attributes {noinline = false} {
    %0 = tt.get_program_id x : i32 loc(#loc2)
    %1 = arith.maxnumf %a, %b : f32 loc(#loc6)
    %2 = arith.addf %a, %b : f32 loc("/src/k.py":14:3)
    %3 = arith.mulf %a, %b : f32 loc(#loc7)
    %4 = arith.subf %a, %b : f32 loc(unknown)
  } loc(#loc)
} loc(#loc)
#loc2 = loc("/src/k.py":11:24)
#loc3 = loc("/site/standard.py":191:40)
#loc4 = loc("/src/k.py":12:19)
#loc5 = loc("x"(#loc4))
#loc6 = loc(callsite(#loc3 at #loc5))
#loc7 = loc(fused[#loc2, #loc4])
"""


def test_mlir_locations_follow_aliases_callsites_and_fused():
    frames = mlir_line_frames(TTIR)
    assert frames[4] == (Frame("/src/k.py", 11),)
    assert frames[5] == (Frame("/site/standard.py", 191), Frame("/src/k.py", 12))
    assert frames[6] == (Frame("/src/k.py", 14),)
    assert frames[7] == (Frame("/src/k.py", 11),)
    assert 8 not in frames and frames[9] == (Frame("/src/k.py", 10),)
    assert trailing_loc('  %0 = op "a(b" loc("f.py":1:2)') == '"f.py":1:2' and trailing_loc("x = f(y)") is None


def test_ttir_signature_says_which_specialisation_this_is():
    assert ttir_specialisation(TTIR) == {"x_ptr": {"type": "!tt.ptr<f32>", "divisibility": 16},
                                         "n": {"type": "i32", "divisibility": None}}
    assert ttir_specialisation("no function here") == {}


LLIR = """\
define ptx_kernel void @k(ptr addrspace(1) %0) !dbg !4 {
  %2 = tail call i32 @llvm.nvvm.read.ptx.sreg.tid.x(), !dbg !7
  %3 = tail call float @llvm.maxnum.f32(float %a, float %b), !dbg !15
  ret void, !dbg !9
}
!1 = !DIFile(filename: "k.py", directory: "/src")
!4 = distinct !DISubprogram(name: "k", linkageName: "k", scope: !1, file: !1, line: 10, unit: !0)
!7 = !DILocation(line: 11, column: 24, scope: !4)
!15 = !DILocation(line: 170, column: 27, scope: !16, inlinedAt: !18)
!16 = distinct !DILexicalBlockFile(scope: !4, file: !17, discriminator: 0)
!17 = !DIFile(filename: "standard.py", directory: "/site")
!18 = !DILocation(line: 12, column: 19, scope: !20)
!20 = distinct !DILexicalBlockFile(scope: !4, file: !1, discriminator: 0)
"""


def test_llvm_locations_follow_inlined_at_and_scope_files():
    frames = llir_line_frames(LLIR)
    assert frames[2] == (Frame("/src/k.py", 11),)
    assert frames[3] == (Frame("/site/standard.py", 170), Frame("/src/k.py", 12))
    assert 1 not in frames and 4 not in frames  # the define line; !9 is not defined


def test_diff_of_two_specialisations_is_line_by_line():
    odd = {"specialisation": {"n": {"type": "i32", "divisibility": None}}, "counts": {"ld_global": 8},
           "source_map": [{"source_line": 5, "counts": {"ld_global": 8}}, {"source_line": 6, "counts": {}}]}
    even = {"specialisation": {"n": {"type": "i32", "divisibility": 16}}, "counts": {"ld_global_v4": 2},
            "source_map": [{"source_line": 5, "counts": {"ld_global_v4": 2}}, {"source_line": 6, "counts": {}}]}
    diff = diff_kernels(odd, even)
    assert diff["specialisation"] == [{"arg": "n", "a": odd["specialisation"]["n"], "b": even["specialisation"]["n"]}]
    assert diff["counts"] == {"ld_global": [8, 0], "ld_global_v4": [0, 2]}
    assert [e["source_line"] for e in diff["lines"]] == [5]
    assert line_summary(diff["lines"][0]["changed"]) == "ld_global 8→0, ld_global_v4 0→2"
    assert specialisation_summary(diff) == "÷16 only in b: n"
    assert diff_kernels(odd, odd) == {"specialisation": [], "counts": {}, "lines": []}


def test_stages_in_compile_order():
    assert stages_of({"sass": "x", "ptx": "y", "source": "z", "ttir": "", "llir": None}) == ["source", "ptx", "sass"]
