"""cuda_build.load_cuda's two bindings: what it hands load_inline (nothing added to the `.cu`; the
pybind binding behind torch/extension.h; the library binding registered with TORCH_LIBRARY under
the module's own name), what it returns, and that every shipped binding compiles against the
installed torch headers without torch/extension.h."""

from __future__ import annotations

import re
import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest
import torch

import workbench.kernels
from workbench import cuda_build
from workbench.cuda_build import BINDING_HEADERS, CHECK_HELPERS, library_registration, load_cuda

KERNELS_DIR = Path(workbench.kernels.__file__).parent
# Every kernels/*.py that builds through load_cuda, with the functions it binds.
SHIPPED = {"gelu": ["gelu_naive", "gelu_vec"], "add": ["add_vec"],
           "matmul": ["matmul_naive", "matmul_tiled"], "softmax": ["softmax_rows"],
           "quantize": ["quantize_rows"]}


@pytest.fixture
def captured(monkeypatch, tmp_path):
    """load_inline replaced by a recorder; nvcc, ninja and a CUDA toolkit reported present."""
    calls: list[dict] = []

    def fake_load_inline(**kwargs):
        calls.append(kwargs)
        return "module" if kwargs["is_python_module"] else str(tmp_path / f"{kwargs['name']}.so")

    import torch.utils.cpp_extension as cpp_extension
    monkeypatch.setattr(cpp_extension, "load_inline", fake_load_inline)
    monkeypatch.setattr(cpp_extension, "CUDA_HOME", "/usr/local/cuda")  # as on a CUDA build of torch
    monkeypatch.setattr(cuda_build, "find_nvcc", lambda: "/usr/bin/nvcc")
    monkeypatch.setattr("importlib.util.find_spec", lambda name: object())
    return calls


def write_cu(tmp_path: Path) -> Path:
    cu = tmp_path / "k.cu"
    cu.write_text('extern "C" int k_launch() { return 0; }\n')
    return cu


def test_the_cu_source_reaches_load_inline_unchanged_in_both_bindings(captured, tmp_path):
    cu = write_cu(tmp_path)
    load_cuda("wbt", cu, "int f();", ["f"], tmp_path, binding="pybind")
    with pytest.raises(AttributeError):  # the fake registers nothing: the op lookup fails
        load_cuda("wbt", cu, "int f();", ["f"], tmp_path, binding="library")
    assert [c["cuda_sources"] for c in captured] == [[cu.read_text()]] * 2
    assert all(c["no_implicit_headers"] for c in captured)


def test_pybind_puts_torch_extension_first_and_binds_the_functions(captured, tmp_path):
    assert load_cuda("wbt", write_cu(tmp_path), "int f();", ["f"], tmp_path) == "module"
    (call,) = captured
    assert call["cpp_sources"] == ["#include <torch/extension.h>\nint f();"]
    assert call["functions"] == ["f"] and call["is_python_module"]


def test_library_registers_under_the_module_name_and_returns_the_operators(captured, tmp_path, monkeypatch):
    cu = write_cu(tmp_path)
    name = cuda_build.module_name("wbt", cuda_build.source_bundle(cu), "B", "library", flags=[
        "-O3", f"-I{cu.resolve().parent}"])
    lib = torch.library.Library(name, "DEF")  # what TORCH_LIBRARY(name, m) does when the .so loads
    lib.define("f(Tensor x) -> Tensor")
    lib.impl("f", lambda x: x + 1, "CompositeExplicitAutograd")
    module = load_cuda("wbt", cu, "B", ["f"], tmp_path, binding="library")
    (call,) = captured
    assert call["name"] == name and call["functions"] is None and not call["is_python_module"]
    assert call["cpp_sources"] == ["B\n" + library_registration(name, ["f"])]
    assert module.__file__.endswith(f"{name}.so")
    assert module.f(torch.zeros(2)).tolist() == [1.0, 1.0]


def test_library_registration_text():
    text = library_registration("wb_x_0123", ["a", "b"])
    assert text == ('#include <torch/library.h>\nTORCH_LIBRARY(wb_x_0123, m) {\n'
                    '    m.def("a", &a);\n    m.def("b", &b);\n}\n')


def test_an_unknown_binding_is_refused_by_name(tmp_path):
    with pytest.raises(ValueError, match="binding must be one of pybind, library, got 'ctypes'"):
        load_cuda("wbt", write_cu(tmp_path), "", [], tmp_path, binding="ctypes")


def test_the_shipped_list_covers_every_kernel_file_that_calls_load_cuda():
    callers = {p.stem for p in KERNELS_DIR.glob("*.py") if "load_cuda(" in p.read_text()}
    assert callers == set(SHIPPED)


def shipped_binding(op: str) -> str:
    text = (KERNELS_DIR / f"{op}.py").read_text()
    match = re.search(r'_CPP_BINDING = BINDING_HEADERS \+ r"""(.*?)"""', text, re.S)
    assert match, f"kernels/{op}.py: no BINDING_HEADERS + r\"\"\"...\"\"\" binding"
    assert 'binding="library"' in text
    return BINDING_HEADERS + match.group(1)


def cuda_runtime_include() -> Path | None:
    """Where cuda_runtime.h is: $CUDA_HOME, nvcc's install (through a wrapper script too), or
    /usr/local/cuda, as torch.utils.cpp_extension looks."""
    import os
    homes = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    nvcc = shutil.which("nvcc")
    if nvcc:
        homes.insert(2, str(Path(nvcc).resolve().parent.parent))
        homes += re.findall(r"(/\S+)/bin/nvcc", Path(nvcc).read_text(errors="replace")[:1000])
    return next((Path(h) / "include" for h in homes if h and (Path(h) / "include" / "cuda_runtime.h").is_file()),
                None)


def compile_flags(stub: Path) -> list[str]:
    """The include path load_inline gives the C++ binding. The CPU build of torch lacks the one
    generated header c10/cuda includes (impl/cuda_cmake_macros.h); a stub stands in for it."""
    include = Path(torch.__file__).parent / "include"
    macros = stub / "c10" / "cuda" / "impl" / "cuda_cmake_macros.h"
    macros.parent.mkdir(parents=True)
    macros.write_text("#pragma once\n")
    cuda_include = cuda_runtime_include()
    return ["-isystem", str(include), "-isystem", str(include / "torch" / "csrc" / "api" / "include"),
            "-isystem", str(cuda_include), "-isystem", sysconfig.get_paths()["include"], f"-I{stub}"]


@pytest.mark.slow  # a C++ compiler per binding (~5 s each on 2 cores)
@pytest.mark.parametrize("op", sorted(SHIPPED))
def test_each_shipped_binding_compiles_without_torch_extension_h(op, tmp_path):
    cxx = shutil.which("c++") or shutil.which("g++")
    if cxx is None or cuda_runtime_include() is None:
        pytest.skip("a C++ compiler and the CUDA toolkit (cuda_runtime.h) are needed")
    binding = shipped_binding(op)
    assert "torch/extension.h" not in binding
    source = tmp_path / f"{op}.cpp"
    source.write_text(binding + "\n" + library_registration(f"wb_{op}_test", SHIPPED[op]))
    flags = compile_flags(tmp_path / "stub")
    if not (Path(flags[1]) / "ATen" / "core" / "Tensor.h").is_file():
        pytest.skip("this torch ships no C++ headers")
    proc = subprocess.run([cxx, "-c", str(source), "-o", str(tmp_path / f"{op}.o"), "-std=c++17", "-fPIC",
                           "-DTORCH_EXTENSION_NAME=wbt", *flags], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, "\n".join(line for line in proc.stderr.splitlines() if "error" in line)[:3000]


LIBRARY_CPP = r"""
#include <ATen/core/Tensor.h>
""" + CHECK_HELPERS + r"""
at::Tensor scaled(at::Tensor x, int64_t k) {
    WB_CHECK(x.scalar_type() == at::kFloat, "scaled: float32 only, got %s", c10::toString(x.scalar_type()));
    WB_CHECK(k < 1000, "scaled: k must be < 1000, got %lld (x is %s)", (long long)k, wb_sizes(x).c);
    TORCH_CHECK(k >= 0, "scaled: k must not be negative");
    return x.mul(k);
}
"""


@pytest.mark.slow  # a C++ compile and link (~10 s on 2 cores)
def test_a_library_binding_builds_loads_and_raises_through_torch_ops(tmp_path):
    """What binding="library" does past the compiler, on a C++-only module a CPU can load: the
    link, torch.ops.load_library, the operator lookup under the module's name, TORCH_CHECK's
    message as a RuntimeError."""
    if shutil.which("c++") is None and shutil.which("g++") is None:
        pytest.skip("no C++ compiler")
    from workbench.cuda_build import build_inline

    module = build_inline("wb_scaled_test", LIBRARY_CPP, ["scaled"], "library", tmp_path)
    assert module.scaled(torch.ones(3), 3).tolist() == [3.0, 3.0, 3.0]
    assert Path(module.__file__).is_file()
    with pytest.raises(RuntimeError, match="scaled: float32 only, got Int"):
        module.scaled(torch.ones(3, dtype=torch.int32), 3)
    with pytest.raises(RuntimeError, match=r"scaled: k must be < 1000, got 4096 \(x is \[2, 3\]\)"):
        module.scaled(torch.ones(2, 3), 4096)
    with pytest.raises(RuntimeError, match="scaled: k must not be negative"):
        module.scaled(torch.ones(2, 3), -1)
    again = build_inline("wb_scaled_test", LIBRARY_CPP, ["scaled"], "library", tmp_path)  # a warm worker's next run
    assert again.scaled(torch.ones(2), 2).tolist() == [2.0, 2.0]


def test_no_shipped_binding_hands_torch_check_more_than_one_message_argument():
    """TORCH_CHECK formats extra message arguments through the extension's own std::ostream, which
    crashed the process on the H200 box instead of raising (cuda_build.CHECK_HELPERS): a shipped
    binding passes TORCH_CHECK one string literal, and formats anything else with WB_CHECK."""
    calls = []
    for op in SHIPPED:
        text = shipped_binding(op).replace(CHECK_HELPERS, "")  # WB_CHECK's own TORCH_CHECK takes its buffer
        for match in re.finditer(r"TORCH_CHECK\(", text):
            depth, i = 1, match.end()
            while depth:
                depth += {"(": 1, ")": -1}.get(text[i], 0)
                i += 1
            calls.append((op, text[match.end():i - 1]))
    assert calls
    for op, args in calls:
        message = _split_top_level(args)[1:]
        assert len(message) == 1 and re.fullmatch(r'\s*"[^"]*"\s*', message[0]), (op, args)


def _split_top_level(args: str) -> list[str]:
    parts, depth, start, quoted = [], 0, 0, False
    for i, ch in enumerate(args):
        if ch == '"' and args[i - 1] != "\\":
            quoted = not quoted
        elif not quoted and ch in "([{":
            depth += 1
        elif not quoted and ch in ")]}":
            depth -= 1
        elif not quoted and ch == "," and depth == 0:
            parts.append(args[start:i])
            start = i + 1
    return parts + [args[start:]]


def test_a_cpu_torch_gets_one_clear_unavailable_error_not_an_oserror(tmp_path):
    """load_inline raised `OSError: CUDA_HOME environment variable is not set` on a CPU build of
    torch with nvcc on PATH (a new user's try); load_cuda's docstring promises UnavailableError."""
    if torch.version.cuda is not None:
        pytest.skip("a CUDA build of torch: load_inline can build here")
    from workbench.errors import UnavailableError
    if shutil.which("nvcc") is None:
        pytest.skip("no nvcc: load_cuda stops at that first")
    with pytest.raises(UnavailableError, match="this torch is a CPU build"):
        load_cuda("wbt", write_cu(tmp_path), "int f();", ["f"], tmp_path, binding="library")


def test_the_ptx_pane_compiles_with_the_defines_load_inline_builds_with():
    """A `__half` operator the build refuses (torch's -D__CUDA_NO_HALF_OPERATORS__) compiled in
    the PTX pane; the pane's flags carry torch's own list."""
    from torch.utils.cpp_extension import COMMON_NVCC_FLAGS

    from workbench.ptx.nvcc import BASE_FLAGS, TORCH_NVCC_FLAGS

    assert list(TORCH_NVCC_FLAGS) == list(COMMON_NVCC_FLAGS)
    assert set(TORCH_NVCC_FLAGS) <= set(BASE_FLAGS)
