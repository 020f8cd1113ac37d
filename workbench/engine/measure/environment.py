"""The environment record (MEASUREMENT.md rule 10) and the device facts the engine needs.

Sources: torch.cuda.get_device_properties (name, SM count, L2 size, memory, threads per SM),
NVML through nvidia-ml-py (driver version), torch.version.cuda (from the worker), the packages'
versions. device_info runs in a worker (it imports torch); environment_record in the parent.
Nothing here changes a device setting. On CPU the GPU fields are None.
"""

from __future__ import annotations

import functools
import importlib.metadata
import platform
from dataclasses import dataclass


@dataclass(frozen=True)
class DeviceInfo:
    """name: "NVIDIA H200" or "cpu"; sm_count, l2_bytes, memory_bytes, max_threads_per_sm,
    max_blocks_per_sm, regs_per_sm, smem_per_sm_bytes: None where unknown (CPU);
    driver: NVIDIA driver version; pci_bus_id: for NVML ("0000:19:00.0")."""

    name: str
    sm_count: int | None = None
    l2_bytes: int | None = None
    memory_bytes: int | None = None
    max_threads_per_sm: int | None = None
    max_blocks_per_sm: int | None = None
    regs_per_sm: int | None = None
    smem_per_sm_bytes: int | None = None
    driver: str | None = None
    pci_bus_id: str | None = None

    @property
    def cache_key(self) -> str:
        """Key of this device in the ceilings cache: name and driver."""
        return f"{self.name} | driver {self.driver or 'unknown'}"


def host_memory_bytes() -> int | None:
    try:
        import os
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def device_info(device: str) -> DeviceInfo:
    """Facts about a torch device string ("cpu", "cuda:0"); CUDA queries initialise CUDA."""
    if not device.startswith("cuda"):
        return DeviceInfo(name="cpu", memory_bytes=host_memory_bytes(), driver=None)
    import torch

    index = torch.device(device).index or 0
    props = torch.cuda.get_device_properties(index)
    return DeviceInfo(
        name=props.name, sm_count=props.multi_processor_count,
        l2_bytes=getattr(props, "L2_cache_size", None), memory_bytes=props.total_memory,
        max_threads_per_sm=getattr(props, "max_threads_per_multi_processor", None),
        max_blocks_per_sm=getattr(props, "max_blocks_per_multi_processor", None),
        regs_per_sm=getattr(props, "regs_per_multiprocessor", None),
        smem_per_sm_bytes=getattr(props, "shared_memory_per_multiprocessor", None),
        driver=driver_version(), pci_bus_id=_pci_bus_id(props))


def _pci_bus_id(props) -> str | None:
    bus = getattr(props, "pci_bus_id", None)
    if bus is None:
        return None
    return f"{getattr(props, 'pci_domain_id', 0):08x}:{bus:02x}:{getattr(props, 'pci_device_id', 0):02x}.0"


@functools.lru_cache(maxsize=1)
def driver_version() -> str | None:
    """The NVIDIA driver version from NVML, or None (no driver, no nvidia-ml-py)."""
    try:
        import pynvml

        pynvml.nvmlInit()
        version = pynvml.nvmlSystemGetDriverVersion()
        return version.decode() if isinstance(version, bytes) else str(version)
    except Exception:  # NVML missing or no driver: the field is simply unknown
        return None


def package_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def environment_record(info: DeviceInfo, cuda_version: str | None = None) -> dict:
    """The `environment` of a results document, without ceilings/datasheet (plan adds them).
    cuda_version: torch.version.cuda as the worker reports it (the parent does not import
    torch; its version comes from the package metadata)."""
    on_gpu = info.name != "cpu"
    torch_version = package_version("torch")
    return {
        "device": info.name, "sm_count": info.sm_count, "l2_bytes": info.l2_bytes,
        "driver": info.driver, "cuda": cuda_version if on_gpu else None,
        "torch": torch_version.split("+")[0] if torch_version else None,
        "triton": package_version("triton"), "python": platform.python_version(),
    }
