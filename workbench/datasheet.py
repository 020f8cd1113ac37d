"""Physical peaks per device: the datasheet figures that bound every measured number (MEASUREMENT.md
rule 11). Torch-free: the front end (--doctor) and the engine read the same table.

Each entry: memory bandwidth (HBM or GDDR, GB/s = 1e9 bytes/s) and DENSE FLOP/s per dtype
(TFLOP/s = 1e12): bf16 / fp16 / tf32 / fp8 (e4m3 and e5m2, one rate) on tensor cores, fp32 and fp64 on CUDA cores (non-tensor),
fp64 on tensor cores where the part has them. NVIDIA prints tensor figures "with sparsity" (2:4)
for Hopper, Ada and Blackwell; those are halved here (a dense kernel cannot reach the sparse rate)
and the entry says so. A figure the datasheet does not print is None (never guessed): the engine
then bounds that figure by the measured reference times REFERENCE_MARGIN and says so.

Sources: the `source` of each entry names NVIDIA's datasheet or whitepaper; `seen_at` is the
public copy of its table that was read when the figure was entered. Not here: H100 NVL and H200 NVL
(no copy of their datasheet tables was found to confirm them), GH200, B100, B300.

Device names are matched as torch (`get_device_properties().name`) and NVML report them, e.g.
"NVIDIA H200", "NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe", "NVIDIA A100-SXM4-80GB",
"NVIDIA A100 80GB PCIe", "NVIDIA GeForce RTX 4090", "Tesla V100-SXM2-32GB" (`peaks_for`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

# A figure more than this much above its datasheet peak is a measurement error. Why 5%: the printed
# figures are rounded (4.8 TB/s, 989 TFLOPS), CUDA events resolve ~0.5 us, and the cost model's
# FLOP count is a convention (one FMA = 2 FLOPs, as NVIDIA counts); a correct kernel never gets
# near +5%, while a timing error (a kernel not waited for, an input already in L2) lands far above.
PEAK_MARGIN = 1.05
# Where the device (or one figure) has no datasheet entry, the bound is the measured reference
# (copy, cuBLAS) times this: a Triton matmul beat cuBLAS by up to 1.13x on the H200, and the copy
# reaches ~88% of HBM peak, so 1.5x never fails a right kernel and still catches a 2x error.
REFERENCE_MARGIN = 1.5

TFLOPS_KEYS = ("bfloat16", "float16", "tf32", "float32", "float64", "float64_tensor", "float8")


@dataclass(frozen=True)
class Peaks:
    """One device's datasheet peaks. memory_gbps: GB/s; the *_tflops: dense TFLOP/s (None where the
    datasheet prints none); patterns: regular expressions fully matching the normalised name."""

    device: str
    patterns: tuple[str, ...]
    memory_gbps: float
    memory: str
    bfloat16_tflops: float | None
    float16_tflops: float | None
    tf32_tflops: float | None
    float32_tflops: float | None
    float64_tflops: float | None
    float64_tensor_tflops: float | None
    source: str
    seen_at: str
    notes: tuple[str, ...] = field(default=())
    # Dense fp8 (e4m3 / e5m2) tensor-core TFLOP/s, fp32 accumulate; None where the datasheet
    # prints none (parts before sm_89 have no fp8 tensor cores).
    float8_tflops: float | None = None

    def tflops(self, key: str) -> float | None:
        """Peak TFLOP/s for a compute key ("bfloat16", "float16", "tf32", "float32", "float64", "float8");
        float64 is the faster of the vector and tensor-core figures. Raises KeyError otherwise."""
        if key == "float64":
            figures = [v for v in (self.float64_tflops, self.float64_tensor_tflops) if v is not None]
            return max(figures) if figures else None
        if key not in TFLOPS_KEYS:
            raise KeyError(f"{key!r} is not one of {TFLOPS_KEYS}")
        return getattr(self, f"{key}_tflops")

    def record(self) -> dict:
        """The `environment.datasheet` record of a results document (CONTRACTS.md)."""
        return {"device": self.device, "hbm_gbps": self.memory_gbps, "memory": self.memory,
                "matmul_tflops": {k: getattr(self, f"{k}_tflops") for k in TFLOPS_KEYS},
                "dense": True, "margin": PEAK_MARGIN, "source": self.source, "seen_at": self.seen_at,
                "notes": list(self.notes)}


_SPARSE = "tensor figures printed with sparsity, halved to dense"
_HOPPER = ("NVIDIA H100 Tensor Core GPU datasheet "
           "(https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet)")
_AMPERE = ("NVIDIA A100 Tensor Core GPU datasheet "
           "(https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
           "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf)")
_A100_SEEN = "https://www.thundercompute.com/blog/nvidia-a100-specs-full-guide; https://glennklockwood.com/garden/processors/A100"
_A100_FLOPS: dict[str, Any] = dict(bfloat16_tflops=312.0, float16_tflops=312.0, tf32_tflops=156.0, float32_tflops=19.5,
                   float64_tflops=9.7, float64_tensor_tflops=19.5)

PEAKS: tuple[Peaks, ...] = (
    Peaks("H200 SXM", (r"h200( sxm5?)?( 141gb)?( hbm3e)?",), 4800.0, "141 GB HBM3e",
          989.5, 989.5, 494.5, 67.0, 34.0, 67.0,
          "NVIDIA H200 Tensor Core GPU datasheet (https://www.nvidia.com/en-us/data-center/h200/)",
          "https://itkb.uw.cz/2026/06/nvidia-h200-vs-b300-precisions-cores.html; https://glennklockwood.com/garden/processors/h100",
          (_SPARSE, "same GH100 compute as H100 SXM: BF16/FP16 1979*, TF32 989*, FP8 3958*"), float8_tflops=1979.0),
    Peaks("H100 SXM", (r"h100 80gb hbm3", r"h100 sxm5?( 80gb)?( hbm3)?"), 3350.0, "80 GB HBM3",
          989.5, 989.5, 494.5, 67.0, 34.0, 67.0, _HOPPER,
          "https://archive-lib.hpctech.co.jp/gpuproduct/nvidia-h100.html",
          (_SPARSE, "BF16/FP16 1979*, TF32 989*, FP8 3958*"), float8_tflops=1979.0),
    Peaks("H100 PCIe", (r"h100 pcie( 80gb)?",), 2000.0, "80 GB HBM2e",
          756.5, 756.5, 378.0, 51.0, 26.0, 51.0, _HOPPER,
          "https://archive-lib.hpctech.co.jp/gpuproduct/nvidia-h100.html",
          (_SPARSE, "BF16/FP16 1513*, TF32 756*, FP8 3026*"), float8_tflops=1513.0),
    Peaks("A100 SXM4 80GB", (r"a100 sxm4? 80gb",), 2039.0, "80 GB HBM2e", **_A100_FLOPS, source=_AMPERE,
          seen_at=_A100_SEEN),
    Peaks("A100 SXM4 40GB", (r"a100 sxm4? 40gb",), 1555.0, "40 GB HBM2", **_A100_FLOPS, source=_AMPERE,
          seen_at=_A100_SEEN),
    Peaks("A100 PCIe 80GB", (r"a100 80gb pcie", r"a100 pcie 80gb"), 1935.0, "80 GB HBM2e", **_A100_FLOPS,
          source=_AMPERE, seen_at=_A100_SEEN),
    Peaks("A100 PCIe 40GB", (r"a100 pcie 40gb", r"a100 40gb pcie"), 1555.0, "40 GB HBM2", **_A100_FLOPS,
          source=_AMPERE, seen_at=_A100_SEEN),
    Peaks("B200", (r"b200",), 8000.0, "180-192 GB HBM3e", 2250.0, 2250.0, 1100.0, 75.0, 37.0, 37.0,
          "NVIDIA HGX B200 specifications, individual Blackwell GPU (https://www.nvidia.com/en-us/data-center/hgx/)",
          "https://glennklockwood.com/garden/processors/B200; https://zdszero.github.io/Computer/Artificial_Intelligence/Hardware.html",
          (_SPARSE, "FP16/BF16 4.5 PF*, TF32 2.2 PF*",
           "memory: 8 TB/s (B200 192 GB); the later HGX B200 table prints 7.7 TB/s (180 GB): "
           "the higher figure bounds both")),
    Peaks("L4", (r"l4",), 300.0, "24 GB GDDR6", 121.0, 121.0, 60.0, 30.3, None, None,
          "NVIDIA L4 Tensor Core GPU datasheet (https://www.nvidia.com/en-us/data-center/l4/)",
          "https://store.sourcecode.com/en-us/bg-bucket-compare/125/9820; https://grokipedia.com/page/NVIDIA_L4_vs_L40S",
          (_SPARSE, "BF16/FP16 242*, TF32 120*", "FP64 not on the datasheet")),
    Peaks("L40S", (r"l40s",), 864.0, "48 GB GDDR6", 362.05, 362.05, 183.0, 91.6, None, None,
          "NVIDIA L40S datasheet (https://www.nvidia.com/en-us/data-center/l40s/)",
          "https://www.mullet.se/product.html?product_id=355414",
          ("dense figures as printed (BF16/FP16 362.05, 733* with sparsity)", "FP64 not on the datasheet")),
    Peaks("L40", (r"l40",), 864.0, "48 GB GDDR6", 181.05, 181.05, 90.5, 90.5, None, None,
          "NVIDIA L40 datasheet (https://www.nvidia.com/en-us/data-center/l40/)",
          "https://www.mullet.se/product.html?product_id=355414",
          ("dense figures as printed (BF16/FP16 181.05, 362.1* with sparsity)", "FP64 not on the datasheet")),
    Peaks("RTX 4090", (r"rtx 4090",), 1008.0, "24 GB GDDR6X", 165.2, 330.3, 82.6, 82.6, None, None,
          "NVIDIA Ada GPU Architecture whitepaper, appendix table "
          "(https://images.nvidia.com/aem-dam/Solutions/geforce/ada/nvidia-ada-gpu-architecture.pdf)",
          "https://waredb.com/processor/nvidia-geforce-rtx-4090; https://github.com/JustAResearcher/gpu-unlock-ada",
          ("FP16 330.3 is the whitepaper's FP16-accumulate figure (not in the copies read here, which show "
           "the FP32-accumulate 165.2 that cuBLAS and Triton run at, and a stock card measured at 165.6); "
           "as a bound the higher figure never fails a right kernel", "FP64 not in the table")),
    Peaks("A40", (r"a40",), 696.0, "48 GB GDDR6", 149.7, 149.7, 74.8, 37.4, None, None,
          "NVIDIA A40 datasheet (https://www.nvidia.com/en-us/data-center/a40/)",
          "https://www.ecer.com/corp/details-uuuedqa-p1bsay9-multi-display-setups-supported-by-48gb-gddr6-ecc-memory-nvidia-a40-gpu-and-vga-outputs.html",
          ("dense figures as printed", "FP64 not on the datasheet")),
    Peaks("A10", (r"a10",), 600.0, "24 GB GDDR6", 125.0, 125.0, 62.5, 31.2, None, None,
          "NVIDIA A10 Tensor Core GPU datasheet (https://www.nvidia.com/en-us/data-center/products/a10-gpu/)",
          "https://sysrqmts.com/ru/gpus/compare/nvidia-a10-pcie-vs-nvidia-quadro-rtx-4000",
          ("dense figures as printed (BF16/FP16 125, 250* with sparsity)", "FP64 not on the datasheet")),
    Peaks("V100 SXM2", (r"v100 sxm2( 16gb| 32gb)?",), 900.0, "16/32 GB HBM2", None, 125.0, None, 15.7, 7.8, None,
          "NVIDIA Tesla V100 datasheet (https://www.nvidia.com/en-us/data-center/v100/)",
          "https://grokipedia.opelly.me/articles/nvidia-tesla-v100; https://developer.nvidia.com/programming-tensor-cores-cuda-9-0",
          ("Volta: no BF16 or TF32 tensor cores; FP16 125 is mixed precision (FP32 accumulate)",)),
    Peaks("T4", (r"t4",), 320.0, "16 GB GDDR6", None, 65.0, None, 8.1, None, None,
          "NVIDIA T4 datasheet (https://www.nvidia.com/en-us/data-center/tesla-t4/)",
          "https://sysrqmts.com/gpus/compare/nvidia-a100-sxm4-40-gb-vs-nvidia-tesla-t4",
          ("Turing: no BF16 or TF32 tensor cores; FP16 65 is mixed precision", "FP64 not on the datasheet")),
)

_PREFIXES = ("nvidia ", "tesla ", "geforce ")


def normalise(device_name: str) -> str:
    """Lower case, '-' and '_' as spaces, single spaces, vendor/brand prefixes dropped:
    "NVIDIA A100-SXM4-80GB" -> "a100 sxm4 80gb", "Tesla V100-SXM2-16GB" -> "v100 sxm2 16gb"."""
    name = " ".join(re.sub(r"[-_]", " ", device_name.lower()).split())
    changed = True
    while changed:
        changed = False
        for prefix in _PREFIXES:
            if name.startswith(prefix):
                name, changed = name[len(prefix):], True
    return name


def peaks_for(device_name: str | None) -> Peaks | None:
    """The datasheet entry whose pattern fully matches the device name, or None (no entry: the CPU,
    an unlisted GPU, a variant such as "H200 NVL" or "RTX 4090 D" that is not in the table)."""
    if not device_name:
        return None
    name = normalise(device_name)
    return next((p for p in PEAKS if any(re.fullmatch(pattern, name) for pattern in p.patterns)), None)


def known_devices() -> list[str]:
    """The table's device names, for messages ("no datasheet entry for X; known: ...")."""
    return [p.device for p in PEAKS]
