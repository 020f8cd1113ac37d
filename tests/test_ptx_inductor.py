"""Inductor kernel collection, the parts that run without a GPU: kernel names and sources from
generated code, the Triton-cache fallback choosing the autotuner's config, and the record assembled
from collected kernels (the collection itself is exercised by the GPU evidence stage `ptx`)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from types import SimpleNamespace

import pytest

from workbench.ptx import extract
from workbench.ptx.inductor import (InductorKernel, _compiled_from_autotuner, from_cache_folder,
                                    kernel_sources)
from workbench.ptx.record import TritonArtifacts
from workbench.registry import discover
from workbench.triton_support import HAVE_TRITON

GENERATED = '''
# kernel path: /tmp/torchinductor/ab/cab.py
triton_poi_fused_add_mul_tanh_0 = async_compile.triton('triton_poi_fused_add_mul_tanh_0', \'\'\'
import triton
import triton.language as tl

@triton.jit
def triton_poi_fused_add_mul_tanh_0(in_ptr0, out_ptr0, xnumel, XBLOCK : tl.constexpr):
    xoffset = tl.program_id(0) * XBLOCK
\'\'\', device_str='cuda')

triton_per_fused__softmax_1 = async_compile.triton('triton_per_fused__softmax_1', \'\'\'
def triton_per_fused__softmax_1(in_ptr0, out_ptr0, xnumel, r0_numel):
    pass
\'\'\', device_str='cuda')
async_compile.wait(globals())
'''


def test_kernel_names_and_sources_from_generated_code():
    found = kernel_sources([GENERATED])
    assert list(found) == ["triton_poi_fused_add_mul_tanh_0", "triton_per_fused__softmax_1"]
    assert "def triton_poi_fused_add_mul_tanh_0(" in found["triton_poi_fused_add_mul_tanh_0"]


def _fake_compile(root, name, hash_, ptx):
    folder = root / hash_[:8]
    folder.mkdir(parents=True)
    (folder / f"{name}.json").write_text(json.dumps({"hash": hash_, "name": name, "shared": 0, "num_warps": 4}))
    (folder / f"{name}.ptx").write_text(ptx)
    return folder


def test_cache_folder_picks_the_autotuners_config(tmp_path):
    name = "triton_poi_fused_0"
    _fake_compile(tmp_path, name, "aaaa1111", "// config A")
    _fake_compile(tmp_path, name, "bbbb2222", "// config B")
    kept = from_cache_folder(tmp_path, name, want_hash="aaaa1111")
    assert kept.asm["ptx"] == "// config A" and "the one the autotuner kept" in kept.notes[0]
    assert from_cache_folder(tmp_path, "absent") is None


def test_autotuner_inspection_prefers_ir_then_hash():
    compiled = SimpleNamespace(asm={"ptx": "x"})
    assert _compiled_from_autotuner(SimpleNamespace(launchers=[SimpleNamespace(bin=compiled)])) == (
        compiled, "autotuner launcher")
    static = SimpleNamespace(compile_results=[SimpleNamespace(kernel=SimpleNamespace(hash="cafe"))])
    assert _compiled_from_autotuner(static)[0] == "cafe"
    assert _compiled_from_autotuner(SimpleNamespace()) is None


@dataclass(frozen=True)
class _GpuMachine:
    has_cuda: bool = True


@pytest.mark.skipif(not HAVE_TRITON, reason="Triton is not installed")
def test_inductor_record_from_collected_kernels(monkeypatch):
    """The record of a `compiled` impl, with kernel collection replaced by a real AOT kernel."""
    from workbench.ptx import triton_aot as aot
    from workbench.ptx.triton_aot import interpreter_active
    if interpreter_active():
        pytest.skip("this process runs Triton interpreted")
    op = discover().op("gelu")
    triton_impl = op.get_impl("triton")
    spec = op.make_spec({"M": 64, "N": 64})
    build = aot.build_source(triton_impl.backend.kernel_source(triton_impl, spec, triton_impl.resolve_params({})),
                             aot.resolve_target("sm_90"))
    art = TritonArtifacts.from_compiled(aot.aot_compile(build))
    kernels = [InductorKernel("triton_poi_fused_add_mul_tanh_0", "def triton_poi...", art, "autotuner launcher")]
    monkeypatch.setattr("workbench.ptx.inductor.inductor_kernels", lambda *a, **k: (kernels, []))
    monkeypatch.setattr("workbench.ptx.extractors.default_target", lambda has_cuda: "sm_90")
    monkeypatch.setattr(op, "make_inputs", lambda *a, **k: ())  # no CUDA tensors here
    record, texts = extract.ptx_record(op, "compiled", spec, machine=_GpuMachine())
    assert record["source"] == "inductor" and record["target"] == "sm_90"
    (kernel,) = record["kernels"]
    assert kernel["name"] == "triton_poi_fused_add_mul_tanh_0" and kernel["found_by"] == "autotuner launcher"
    assert kernel["counts"]["ld_global_v4"] > 0
    assert texts["triton_poi_fused_add_mul_tanh_0"]["source"] == "def triton_poi..."
