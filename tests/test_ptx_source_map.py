"""Source maps end to end on CPU: Triton ahead-of-time for sm_90 and nvcc -lineinfo for the `.cu`.

Each test finds the source line by its text (`tl.load(`, `tl.max(`) in the file the record names,
then checks what the map says that line compiled to, in the PTX and SASS texts the pane shows.
"""

from __future__ import annotations

import pytest

from workbench.kernel_source import TritonSource
from workbench.machine import find_nvcc
from workbench.ptx.extract import ptx_record
from workbench.ptx.launch_diff import diff_records
from workbench.ptx.tools import find_tool
from workbench.ptx.triton_aot import interpreter_active
from workbench.registry import discover
from workbench.triton_support import HAVE_TRITON, triton

needs_compiled_triton = pytest.mark.skipif(not HAVE_TRITON or interpreter_active(),
                                           reason="needs Triton, compiled (not TRITON_INTERPRET=1)")
needs_nvcc = pytest.mark.skipif(find_nvcc() is None, reason="nvcc not found")
needs_nvdisasm = pytest.mark.skipif(find_tool("nvdisasm") is None or find_tool("cuobjdump") is None,
                                    reason="nvdisasm/cuobjdump not found")


# Triton 3.9 puts the vector load of gelu.py's `x = tl.load(...)` (line 124) on a later line in its
# debug locations (`.loc 1 127 9` in the PTX; Triton 3.6: 124), so the source map, which follows
# Triton's locations, finds no 16-byte load on the tl.load line. Strict: it must pass again once
# the map (workbench/ptx/irlocs.py, lineinfo.py) accounts for it.
TRITON_39_LOAD_LOCS = pytest.mark.xfail(
    HAVE_TRITON and tuple(int(p) for p in triton.__version__.split(".")[:2]) >= (3, 9),
    reason="Triton 3.9 debug locations move tl.load's PTX off its source line", strict=True)


@pytest.fixture(scope="module")
def registry():
    return discover()


def _compile(registry, op_name, impl, shape, dtype="float32", cache_dir=None):
    op = registry.op(op_name)
    return ptx_record(op, impl, op.make_spec(shape, dtype), target="sm_90", cache_dir=cache_dir)


def _line_of(texts: dict, needle: str, after: int = 0) -> int:
    """1-based line of the first source line after line `after` containing `needle`."""
    lines = texts["source"].splitlines()
    return next(i for i, line in enumerate(lines, 1) if i > after and needle in line)


def _entry(kernel: dict, source_line: int) -> dict:
    return next(e for e in kernel["source_map"] if e["source_line"] == source_line)


def _picked(text: str, lines: list[int]) -> list[str]:
    rows = text.splitlines()
    return [rows[i - 1] for i in lines]


@pytest.fixture(scope="module")
def gelu_triton(registry):
    return _compile(registry, "gelu", "triton", {"M": 1024, "N": 1024})


@TRITON_39_LOAD_LOCS
@needs_compiled_triton
def test_gelu_triton_load_line_maps_to_vector_loads_and_store_line_to_vector_stores(gelu_triton):
    record, texts = gelu_triton
    (kernel,) = record["kernels"]
    t = texts[kernel["name"]]
    kernel_def = _line_of(t, "def _gelu_kernel(")
    load, store = _entry(kernel, _line_of(t, "tl.load(", kernel_def)), _entry(kernel, _line_of(t, "tl.store(", kernel_def))
    loads = [row for row in _picked(t["ptx"], load["ptx_lines"]) if "ld.global" in row]
    stores = [row for row in _picked(t["ptx"], store["ptx_lines"]) if "st.global" in row]
    assert loads and all("ld.global.v4" in row for row in loads), loads
    assert stores and all("st.global.v4" in row for row in stores), stores
    assert load["counts"]["ld_global_v4"] == kernel["counts"]["ld_global_v4"] and "st_global_total" not in load["counts"]
    assert store["counts"]["st_global_v4"] == kernel["counts"]["st_global_v4"]
    # and back: every ld.global of the kernel sits on the tl.load line
    every_load = [i for i, row in enumerate(t["ptx"].splitlines(), 1) if "ld.global" in row]
    assert set(every_load) <= set(load["ptx_lines"])
    assert kernel["source_file"].endswith("gelu.py")


@TRITON_39_LOAD_LOCS
@needs_compiled_triton
@needs_nvdisasm
def test_gelu_triton_sass_lines_follow_the_ptx(gelu_triton):
    record, texts = gelu_triton
    (kernel,) = record["kernels"]
    t = texts[kernel["name"]]
    load = _entry(kernel, _line_of(t, "tl.load(", _line_of(t, "def _gelu_kernel(")))
    store = _entry(kernel, _line_of(t, "tl.store(", _line_of(t, "def _gelu_kernel(")))
    assert any("LDG.E.128" in row for row in _picked(t["sass"], load["sass_lines"]))
    assert any("STG.E.128" in row for row in _picked(t["sass"], store["sass_lines"]))
    assert load["sass_counts"]["LDG"] == kernel["sass_counts"]["LDG"]


@needs_compiled_triton
def test_softmax_triton_max_line_maps_to_shuffles(registry):
    record, texts = _compile(registry, "softmax", "triton", {"M": 64, "N": 1024})
    (kernel,) = record["kernels"]
    t = texts[kernel["name"]]
    line = _line_of(t, "tl.max(", _line_of(t, "def _softmax_kernel("))
    entry = _entry(kernel, line)
    assert any(row.strip().startswith("shfl.sync") for row in _picked(t["ptx"], entry["ptx_lines"]))
    assert entry["counts"]["shfl_sync"] > 0  # reached through standard.py's inlined reduce
    if entry["sass_lines"]:
        assert any("SHFL" in row for row in _picked(t["sass"], entry["sass_lines"]))


@needs_nvcc
def test_cuda_gelu_loop_body_maps_to_its_loads(registry):
    record, texts = _compile(registry, "gelu", "cuda", {"M": 64, "N": 1024})
    kernel = next(k for k in record["kernels"] if "4, 1>" in k["name"])  # float, VEC=4, UNROLL=1
    t = texts[kernel["name"]]
    load = _entry(kernel, _line_of(t, "p[u] = in_p[i];"))
    store = _entry(kernel, _line_of(t, "out_p[i] = p[u];"))
    assert any("ld.global" in row and ".v4" in row for row in _picked(t["ptx"], load["ptx_lines"]))
    assert load["counts"]["ld_global_v4"] > 0 and store["counts"]["st_global_v4"] > 0
    assert kernel["stages"] == ["source", "ptx", "sass"] and kernel["source_file"].endswith("gelu.cu")
    if find_tool("nvdisasm"):
        assert any("LDG.E.128" in row for row in _picked(t["sass"], load["sass_lines"]))


@needs_nvcc
def test_a_cuda_module_is_parsed_once_for_all_its_kernels(registry, monkeypatch, tmp_path):
    """softmax.cu instantiates 46 kernels; each parsed the whole module's PTX again (194 s on the
    2-core CPU, a TUI row past its timeout on the H200). The map must be what a kernel parsed
    on its own gives."""
    import workbench.ptx.attach as attach
    import workbench.ptx.source_map as source_map
    from workbench.ptx.lineinfo import ptx_line_frames
    from workbench.ptx.nvcc import compile_cu, match_kernels

    calls = []
    counted = lambda ptx: calls.append(1) or ptx_line_frames(ptx)  # noqa: E731
    monkeypatch.setattr(attach, "ptx_line_frames", counted)
    monkeypatch.setattr(source_map, "ptx_line_frames", counted)
    # a cache of its own: a record cached by another test is read, not made (extractors.cuda_record)
    record, texts = _compile(registry, "gelu", "cuda", {"M": 64, "N": 1024}, cache_dir=tmp_path)
    assert len(record["kernels"]) > 1 and len(calls) == 1
    impl = registry.op("gelu").get_impl("cuda")
    source = impl.backend.kernel_source(impl, registry.op("gelu").make_spec({"M": 64, "N": 1024}, "float32"), {}, None)
    out = compile_cu(source.path, "sm_90", source.extra_nvcc_flags)
    kernels, _ = match_kernels(out.ptx, source.kernels, "float32")
    for k, entry in zip(kernels, record["kernels"]):
        alone, _file = source_map.build_source_map(out.ptx, ptx_first_line=k.entry.first_line,
                                                   ptx_last_line=k.entry.last_line)
        assert [(e["source_line"], e["ptx_lines"]) for e in entry["source_map"]] == \
            [(e["source_line"], e["ptx_lines"]) for e in alone]


@needs_compiled_triton
def test_every_triton_impl_has_every_stage_and_a_map(registry):
    seen = 0
    for op in registry.ops.values():
        for impl in op.impls.values():
            if not isinstance(impl.source, TritonSource):
                continue
            dtypes = [d for d in op.dtypes if impl.supports(d)]
            spec = op.make_spec(op.test_specs[0] if op.test_specs else None, dtypes[0])
            record, texts = ptx_record(op, impl, spec, target="sm_90")
            kernel = record["kernels"][0]
            want = ["source", "ttir", "ttgir", "llir", "ptx"] + (["sass"] if find_tool("cuobjdump") else [])
            assert kernel["stages"] == want, (op.name, impl.name, kernel["stages"])
            assert any(e["ptx_lines"] for e in kernel["source_map"]), (op.name, impl.name)
            assert all(e.get("ttir_lines") is not None for e in kernel["source_map"])
            seen += 1
    assert seen >= 3


@needs_compiled_triton
def test_bf16_matmul_dot_line_maps_to_wgmma_on_sm90(registry):
    record, texts = _compile(registry, "matmul", "triton", {"M": 256, "N": 256, "K": 256}, "bfloat16")
    (kernel,) = record["kernels"]
    t = texts[kernel["name"]]
    entry = _entry(kernel, _line_of(t, "tl.dot(", _line_of(t, f"def {kernel['name']}(")))
    assert entry["counts"].get("wgmma", 0) > 0, entry["counts"]
    if find_tool("nvdisasm"):
        assert entry["sass_counts"].get("HGMMA", 0) > 0, entry["sass_counts"]


@TRITON_39_LOAD_LOCS
@needs_compiled_triton
def test_softmax_1000_against_1024_columns_the_lectures_case(registry):
    """1000 columns: no divisibility on n_cols and the strides, scalar loads on the tl.load line;
    1024: divisible, 16-byte loads. The diff names both."""
    (odd, odd_texts), (even, _) = (_compile(registry, "softmax", "triton", {"M": 64, "N": n}) for n in (1000, 1024))
    diff = diff_records(odd, even)
    kernel = diff["kernels"]["_softmax_kernel"]
    args = {d["arg"]: (d["a"]["divisibility"], d["b"]["divisibility"]) for d in kernel["specialisation"]}
    assert args["n_cols"] == (None, 16) and args["x_row_stride"] == (None, 16)
    t = odd_texts["_softmax_kernel"]
    load_line = _line_of(t, "tl.load(", _line_of(t, "def _softmax_kernel("))
    changed = next(e["changed"] for e in kernel["lines"] if e["source_line"] == load_line)
    assert changed["ld_global_v4"][0] == 0 < changed["ld_global_v4"][1]
    assert changed["ld_global"][0] > 0 == changed["ld_global"][1]
    assert diff["source"] == ["aot", "aot"] and diff["config"] == {}


@TRITON_39_LOAD_LOCS
@needs_compiled_triton
def test_ir_gpu_stage_logic_runs_on_cpu(tmp_path):
    """benchmarks/stages/ir.py without a GPU: the ahead-of-time and nvcc cases pass their own
    checks, Inductor's is skipped, and every case wrote its JSON."""
    import json

    from benchmarks.stages import ir

    rows = ir.run(True, tmp_path)
    verdicts = {row["case"]: row["verdict"] for row in rows}
    for case in ("matmul_dot", "softmax 1000 vs 1024", "gelu_triton"):
        assert verdicts[case] == "ok", (case, verdicts[case])
    if find_nvcc() is not None:
        assert verdicts["gelu_cuda"] == "ok", verdicts["gelu_cuda"]
    written = {p.stem for p in (tmp_path / "ir").glob("*.json")}
    assert written == {case.__name__ for case in ir.CASES}
    diff = json.loads((tmp_path / "ir" / "softmax_1000_vs_1024.json").read_text())["diff_1000_vs_1024"]
    assert any(d["arg"] == "n_cols" for d in diff["specialisation"])
