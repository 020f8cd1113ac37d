"""Each kernels/*.cu compiles alone with `nvcc -ptx -arch=sm_90` (only __global__ kernels and plain
extern "C" launchers, no torch headers: DESIGN.md), and its PTX holds every kernel that an
implementation declares in its CudaSource."""

from __future__ import annotations

import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import workbench.kernels
from op_cases import shipped_impls, shipped_ops
from workbench.kernel_source import CudaSource
from workbench.machine import find_nvcc
from workbench.registry import discover

KERNELS_DIR = Path(workbench.kernels.__file__).parent
CU_FILES = sorted(KERNELS_DIR.glob("*.cu"))
NVCC = find_nvcc()
REGISTRY = discover()


def declared_kernels(cu: Path) -> set[str]:
    return {kernel for op in shipped_ops(REGISTRY) for impl in shipped_impls(op)
            if isinstance(impl.source, CudaSource) and impl.source.path.resolve() == cu.resolve()
            for kernel in impl.source.kernels}


@pytest.fixture(scope="module")
def ptx(tmp_path_factory) -> dict[str, subprocess.CompletedProcess]:
    """nvcc -ptx of every .cu, as many at a time as there are cores: name -> (process, ptx text)."""
    if NVCC is None:
        pytest.skip("nvcc not found (CUDA toolkit not installed)")
    out = tmp_path_factory.mktemp("ptx")

    def compile_one(cu: Path):
        target = out / f"{cu.stem}.ptx"
        proc = subprocess.run([NVCC, "-ptx", "-arch=sm_90", "-O3", str(cu), "-o", str(target)],
                              capture_output=True, text=True, timeout=300)
        return proc, target.read_text() if target.exists() else ""

    with ThreadPoolExecutor() as pool:
        return dict(zip((cu.name for cu in CU_FILES), pool.map(compile_one, CU_FILES)))


def test_every_cuda_impl_source_is_a_shipped_cu_file():
    declared = {impl.source.path.resolve() for op in shipped_ops(REGISTRY) for impl in shipped_impls(op)
                if isinstance(impl.source, CudaSource)}
    assert declared and declared <= {cu.resolve() for cu in CU_FILES}


@pytest.mark.parametrize("cu", CU_FILES, ids=lambda p: p.name)
def test_cu_file_has_no_torch_headers(cu: Path):
    includes = re.findall(r"#include\s*[<\"]([^>\"]+)", cu.read_text())
    assert not [h for h in includes if h.split("/")[0] in ("torch", "ATen", "c10")], includes


@pytest.mark.parametrize("cu", CU_FILES, ids=lambda p: p.name)
def test_cu_file_compiles_alone_to_sm90_ptx(cu: Path, ptx):
    proc, text = ptx[cu.name]
    assert proc.returncode == 0, proc.stderr[-3000:]
    entries = re.findall(r"\.entry\s+(\S+?)\(", text)
    for kernel in declared_kernels(cu):
        assert any(kernel in entry for entry in entries), f"{kernel} not among {entries}"
