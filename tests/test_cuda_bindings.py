"""The torch bindings of the shipped CUDA kernels, checked without a GPU.

A binding (the C++ that kernels/<op>.py hands to load_inline) is compiled only on a machine that
can build CUDA, so a mistake in it showed only there. Two checks here:
- every launcher a binding declares `extern "C"` has the parameter types the `.cu` file defines
  it with: C linkage carries no types, so a mismatch links and passes the wrong arguments;
- the binding, with its operator registration, compiles (`g++ -fsyntax-only`) against this
  torch's headers and the CUDA toolkit's `cuda_runtime.h` (nvcc's).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

import workbench.kernels
from workbench.cuda_build import library_registration
from workbench.machine import find_nvcc

KERNELS = Path(workbench.kernels.__file__).parent
LOAD = re.compile(r'load_cuda\(\s*"(\w+)",\s*CU_FILE,\s*_CPP_BINDING,\s*\[([^\]]*)\][^)]*binding="(\w+)"')
LAUNCHER = re.compile(r'extern\s+"C"\s+([\w\s\*]+?)\s*\b(\w+)\s*\(([^)]*)\)\s*([;{])')
QUALIFIERS = {"const", "volatile", "unsigned", "signed", "__restrict__", "struct"}


def _bindings() -> list[tuple[str, str, list[str], str]]:
    """(op module, load_cuda's name prefix, functions, binding kind) of every kernels/<op>.py that
    builds a CUDA module with a binding."""
    out = []
    for path in sorted(KERNELS.glob("*.py")):
        for prefix, functions, kind in LOAD.findall(path.read_text()):
            out.append((path.stem, prefix, re.findall(r'"(\w+)"', functions), kind))
    return out


BINDINGS = _bindings()


def _module(stem: str):
    import importlib

    return importlib.import_module(f"workbench.kernels.{stem}")


def _types(params: str, named: bool) -> tuple[str, ...]:
    """`const void* x, int64_t n` -> ("const void*", "int64_t"); named: the definition's
    parameters carry names (dropped), a declaration's do not."""
    out = []
    for param in (p.strip() for p in params.split(",")):
        if not param or param == "void":
            continue
        tokens = re.findall(r"[A-Za-z_]\w*|\*|&", param)
        if named and len(tokens) > 1 and re.fullmatch(r"[A-Za-z_]\w*", tokens[-1]) and tokens[-1] not in QUALIFIERS:
            tokens = tokens[:-1]
        tokens = [t for t in tokens if t != "__restrict__"]
        out.append(" ".join(tokens).replace(" *", "*").replace(" &", "&"))
    return tuple(out)


def _launchers(text: str, ending: str, named: bool) -> dict[str, tuple[str, tuple[str, ...]]]:
    return {name: (" ".join(ret.split()), _types(params, named))
            for ret, name, params, end in LAUNCHER.findall(text) if end == ending and "__global__" not in ret}


def test_the_shipped_bindings_are_found():
    assert {stem for stem, *_ in BINDINGS} >= {"add", "gelu", "matmul", "softmax"}


@pytest.mark.parametrize("stem, prefix, functions, kind", BINDINGS, ids=[b[0] for b in BINDINGS])
def test_each_declared_launcher_matches_its_definition_in_the_cu_file(stem, prefix, functions, kind):
    module = _module(stem)
    declared = _launchers(module._CPP_BINDING, ";", named=False)
    defined = _launchers(Path(module.CU_FILE).read_text(), "{", named=True)
    assert declared, f"{stem}: no extern \"C\" launcher declared in its binding"
    for name, (ret, types) in declared.items():
        assert name in defined, f"{stem}: the binding declares {name}, which {Path(module.CU_FILE).name} does not define"
        assert defined[name] == (ret, types), (f"{stem}: {name} declared as {ret}({', '.join(types)}), defined as "
                                              f"{defined[name][0]}({', '.join(defined[name][1])})")


def test_a_mismatch_is_seen():
    """The parser the check above relies on: names dropped, types kept, a changed type differs."""
    declared = _launchers('extern "C" cudaError_t f(const void*, int64_t, cudaStream_t);', ";", named=False)
    defined = _launchers('extern "C" cudaError_t f(const void* x, int64_t n, cudaStream_t s) {', "{", named=True)
    assert declared == defined == {"f": ("cudaError_t", ("const void*", "int64_t", "cudaStream_t"))}
    other = _launchers('extern "C" cudaError_t f(const void* x, int n, cudaStream_t s) {', "{", named=True)
    assert other != declared


def _cuda_include() -> Path | None:
    """The folder of cuda_runtime.h, as nvcc itself names it (`nvcc -dryrun`: INCLUDES; nvcc may
    be a wrapper script far from the toolkit)."""
    nvcc = find_nvcc()
    if nvcc is None:
        return None
    try:
        dry = subprocess.run([str(nvcc), "-dryrun", "-c", "-x", "cu", "/dev/null", "-o", "/dev/null"],
                             capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    for folder in re.findall(r'-I"?([^"\s]+)', "".join(line for line in dry.stderr.splitlines() if "INCLUDES=" in line)):
        if (Path(folder) / "cuda_runtime.h").is_file():
            return Path(folder)
    return None


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not found")
@pytest.mark.skipif(_cuda_include() is None, reason="no CUDA toolkit headers (nvcc's include/cuda_runtime.h)")
@pytest.mark.parametrize("stem, prefix, functions, kind", BINDINGS, ids=[b[0] for b in BINDINGS])
def test_each_binding_compiles_against_torchs_headers(stem, prefix, functions, kind, tmp_path):
    from torch.utils.cpp_extension import include_paths

    if kind != "library":
        pytest.skip(f"{stem}: a pybind binding (load_inline adds the module itself)")
    # a CPU build of torch ships the c10/cuda headers but not the one CMake writes for a CUDA build
    stub = tmp_path / "stub" / "c10" / "cuda" / "impl"
    stub.mkdir(parents=True)
    (stub / "cuda_cmake_macros.h").write_text("#pragma once\n")
    source = tmp_path / f"{prefix}.cpp"
    source.write_text(_module(stem)._CPP_BINDING + "\n" + library_registration(prefix, functions))
    includes = [tmp_path / "stub", *include_paths(), _cuda_include()]
    done = subprocess.run(["g++", "-fsyntax-only", "-std=c++17", "-w", *[f"-I{p}" for p in includes], str(source)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{stem}'s binding does not compile:\n{done.stderr[-3000:]}"
