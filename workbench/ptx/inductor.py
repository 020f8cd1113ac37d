"""The Triton kernels torch.compile (Inductor) generated for a `compiled` implementation.

Inductor generates Triton only for a CUDA device (it does not cross-compile), so this needs a GPU.
The implementation is built and run once inside a fresh Inductor/Triton cache (so the kernels
are compiled now, in this process: `compile_threads=1`), with `run_and_get_code` capturing the
generated module's source. Kernel names (`triton_poi_fused_add_mul_tanh_0`) come from that source;
each kernel's compiled form comes from the loaded module's autotuner (the config that won), or
else from the fresh Triton cache folder (`{name}.ptx`, `.cubin`, `.json`). Configuration is set
through `torch._inductor.config`, never through environment variables.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from workbench.ptx.record import TritonArtifacts

NO_GPU_NOTE = "Inductor does not cross-compile: needs a CUDA device"
_KERNEL_DEF = re.compile(r"""(\w+)\s*=\s*async_compile\.triton\(\s*['"](\w+)['"]\s*,\s*(?:r?'''(.*?)'''|r?\"\"\"(.*?)\"\"\")""",
                         re.DOTALL)


@dataclass
class InductorKernel:
    """One generated kernel: its Triton source, artifacts, and how they were found."""

    name: str
    source: str | None
    artifacts: TritonArtifacts | None
    found_by: str


def kernel_sources(codes: list[str]) -> dict[str, str | None]:
    """Kernel name -> its Triton source, from Inductor's generated module source(s)."""
    found: dict[str, str | None] = {}
    for code in codes:
        for m in _KERNEL_DEF.finditer(code):
            found[m.group(2)] = m.group(3) if m.group(3) is not None else m.group(4)
    return found


def from_cache_folder(root: Path, name: str, want_hash: str | None = None) -> TritonArtifacts | None:
    """Artifacts of `name` from a Triton cache tree: the compile whose metadata hash is
    `want_hash` (the config the autotuner kept), else the newest `{name}.json`."""
    import json
    hits = sorted(root.rglob(f"{name}.json"), key=lambda p: p.stat().st_mtime)
    if not hits:
        return None
    chosen = hits[-1]
    if want_hash:
        for path in hits:
            try:
                if json.loads(path.read_text()).get("hash") == want_hash:
                    chosen = path
            except (OSError, ValueError):
                continue
    art = TritonArtifacts.from_cache_files(chosen.parent, name)
    if len(hits) > 1:
        which = "the one the autotuner kept" if want_hash and art.metadata.get("hash") == want_hash else "the newest"
        art.notes.append(f"{name}: {len(hits)} compiled configs in the cache (autotuning), showing {which}")
    return art


def _loaded_modules() -> list[Any]:
    from torch._inductor.codecache import PyCodeCache
    mods = list(getattr(PyCodeCache, "modules", []) or [])
    mods += list((getattr(PyCodeCache, "modules_no_attr", {}) or {}).values())
    return mods


def _compiled_from_autotuner(tuner: Any) -> tuple[Any, str] | None:
    """(a CompiledKernel with `.asm`, or the compile hash of the kernel kept) from a CachingAutotuner.

    With Inductor's static CUDA launcher the kept kernel no longer holds its IR, only its hash
    (`StaticallyLaunchedCudaKernel.hash`), which names the compile in the Triton cache.
    """
    for launcher in getattr(tuner, "launchers", None) or []:
        binary = getattr(launcher, "bin", None)
        if binary is not None and hasattr(binary, "asm"):
            return binary, "autotuner launcher"
    for result in getattr(tuner, "compile_results", None) or []:
        kernel = getattr(result, "kernel", None)
        if kernel is not None and hasattr(kernel, "asm"):
            return kernel, "autotuner compile result"
        if isinstance(getattr(kernel, "hash", None), str):
            return kernel.hash, "static launcher hash -> Triton cache folder"
    return None


def _artifacts(name: str, cache_root: Path) -> tuple[TritonArtifacts | None, str]:
    for module in _loaded_modules():
        tuner = getattr(module, name, None)
        got = _compiled_from_autotuner(tuner) if tuner is not None else None
        if got is None:
            continue
        obj, how = got
        if isinstance(obj, str):
            return from_cache_folder(cache_root, name, want_hash=obj), how
        return TritonArtifacts.from_compiled(obj), how
    art = from_cache_folder(cache_root, name)
    return art, "Triton cache folder (newest)" if art else "not found"


def inductor_kernels(fn_builder: Any, inputs: tuple, *, device: str = "cuda") -> tuple[list[InductorKernel], list[str]]:
    """Build (`fn_builder()` -> the compiled callable) and run once on `inputs`, on a GPU; return
    the generated kernels and notes. Raises RuntimeError without a CUDA device."""
    import torch
    import torch._inductor.config as inductor_config
    from torch._inductor import utils as inductor_utils

    if not torch.cuda.is_available():
        raise RuntimeError(NO_GPU_NOTE)
    tmp = Path(tempfile.mkdtemp(prefix="wb-inductor-"))
    notes: list[str] = []
    try:
        with ExitStack() as stack:
            stack.enter_context(inductor_utils.fresh_cache(dir=str(tmp), delete=False))  # torch >= 2.7
            stack.enter_context(inductor_config.patch(compile_threads=1))
            fn = fn_builder()
            _, codes = inductor_utils.run_and_get_code(fn, *inputs)
            torch.cuda.synchronize()
            sources = kernel_sources(codes)
            kernels = []
            for name, source in sources.items():
                art, how = _artifacts(name, tmp)
                kernels.append(InductorKernel(name, source, art, how))
        if not sources:
            notes.append("Inductor generated no Triton kernel (library calls or a cache hit without code)")
        return kernels, notes
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def summarize_sources(kernels: list[InductorKernel]) -> Mapping[str, str]:
    """Kernel name -> how its artifacts were found (for the record's notes)."""
    return {k.name: k.found_by for k in kernels}
