"""Named accelerators: memory, memory bandwidth and dense bf16 / fp8 tensor FLOP/s, each row with its source.

Figures are the vendors' published ones. NVIDIA data sheets quote tensor FLOP/s *with* 2:4 sparsity; the dense
figure used here is half of it (said per row). Bandwidth is in bytes/s (decimal TB/s).

Memory: an engine sizes its pools against what CUDA reports (vLLM and SGLang read torch.cuda.mem_get_info /
the device's total), which is neither the data sheet's "80GB" read as 80e9 nor as 80 GiB: an H100 "80GB"
reports 81,559 MiB (79.6 GiB, 85.5e9 bytes), an A100 "80GB" 81,920 MiB, an H200 "141GB" 143,771 MiB. Where the
reported total is published (nvidia-smi / cudaGetDeviceProperties output quoted in a public issue, cited per
row) `memory_bytes` is that total; elsewhere it is the nominal size read as GiB, and the row says so.
A figure a vendor does not publish is None, and whatever needs it says so instead of guessing.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from archprobe.errors import ArchprobeError

GB = 10 ** 9
GiB = 2 ** 30
TB = 10 ** 12
TF = 10 ** 12


class DeviceError(ArchprobeError):
    pass


@dataclass(frozen=True)
class Device:
    name: str
    label: str
    memory_bytes: int
    bandwidth_bytes_per_s: float
    bf16_flops: float | None
    fp8_flops: float | None
    source: str
    memory_note: str = ""

    def to_dict(self) -> dict:
        return {"name": self.name, "label": self.label, "memory_bytes": self.memory_bytes,
                "bandwidth_bytes_per_s": self.bandwidth_bytes_per_s, "bf16_flops_per_s": self.bf16_flops,
                "fp8_flops_per_s": self.fp8_flops, "source": self.source,
                "memory_note": self.memory_note}


_NV_SPARSE = "; tensor FLOP/s: the data sheet's with-sparsity figure / 2"
_ROWS = [
    # name, label, memory GiB, bandwidth TB/s, bf16 TF dense, fp8 TF dense, source
    ("h100", "NVIDIA H100 SXM 80GB", 80, 3.35, 989, 1979,
     "NVIDIA H100 data sheet, nvidia.com/en-us/data-center/h100 (SXM: 80GB, 3.35TB/s, BF16 1,979 / FP8 3,958 "
     "TFLOPS with sparsity)" + _NV_SPARSE),
    ("h100-pcie", "NVIDIA H100 PCIe 80GB", 80, 2.0, 756, 1513,
     "NVIDIA H100 data sheet, nvidia.com/en-us/data-center/h100 (PCIe: 80GB, 2TB/s, BF16 1,513 / FP8 3,026 "
     "TFLOPS with sparsity)" + _NV_SPARSE),
    ("h100-nvl", "NVIDIA H100 NVL 94GB", 94, 3.9, 835, 1671,
     "NVIDIA H100 data sheet, nvidia.com/en-us/data-center/h100 (NVL: 94GB, 3.9TB/s, BF16 1,671 / FP8 3,341 "
     "TFLOPS with sparsity)" + _NV_SPARSE),
    ("h200", "NVIDIA H200 SXM 141GB", 141, 4.8, 989, 1979,
     "NVIDIA H200 data sheet, nvidia.com/en-us/data-center/h200 (SXM: 141GB HBM3e, 4.8TB/s, BF16 1,979 / FP8 "
     "3,958 TFLOPS with sparsity)" + _NV_SPARSE),
    ("h200-nvl", "NVIDIA H200 NVL 141GB", 141, 4.8, 835, 1671,
     "NVIDIA H200 data sheet, nvidia.com/en-us/data-center/h200 (NVL: 141GB, 4.8TB/s, BF16 1,671 / FP8 3,341 "
     "TFLOPS with sparsity)" + _NV_SPARSE),
    ("h20", "NVIDIA H20 96GB", 96, 4.0, 148, 296,
     "NVIDIA H20 product brief as reported by resellers (96GB HBM3, 4.0TB/s, FP16/BF16 148 TFLOPS dense, "
     "FP8 296 TFLOPS dense); no public nvidia.com data sheet"),
    ("b200", "NVIDIA B200 (HGX) 180GB", 180, 8.0, 2250, 4500,
     "NVIDIA HGX B200 spec, nvidia.com/en-us/data-center/hgx (8 GPUs: 1.44TB, 64TB/s, FP16/BF16 36 PF / FP8 "
     "72 PF with sparsity), per GPU = / 8" + _NV_SPARSE),
    ("b300", "NVIDIA B300 (HGX) 288GB", 288, 8.0, 2250, 4500,
     "NVIDIA HGX B300 spec, nvidia.com/en-us/data-center/hgx (8 GPUs: 2.3TB, up to 8TB/s per GPU, FP16/BF16 "
     "36 PF / FP8 72 PF with sparsity), per GPU = / 8" + _NV_SPARSE),
    ("gb200", "NVIDIA GB200 (NVL72 GPU) 186GB", 186, 8.0, 2500, 5000,
     "NVIDIA GB200 NVL72 spec, nvidia.com/en-us/data-center/gb200-nvl72 (72 GPUs: 13.4TB HBM3e, 576TB/s, "
     "FP16/BF16 360 PF / FP8 720 PF with sparsity), per GPU = / 72" + _NV_SPARSE),
    ("gb300", "NVIDIA GB300 (NVL72 GPU) 288GB", 288, 8.0, 2500, 5000,
     "NVIDIA GB300 NVL72 spec, nvidia.com/en-us/data-center/gb300-nvl72 (72 GPUs: up to 20TB HBM3e, 576TB/s, "
     "FP8 720 PF with sparsity; 288GB HBM3e per Blackwell Ultra GPU), per GPU = / 72" + _NV_SPARSE),
    ("a100-40gb", "NVIDIA A100 SXM 40GB", 40, 1.555, 312, None,
     "NVIDIA A100 data sheet, nvidia.com/en-us/data-center/a100 (40GB HBM2: 1,555GB/s, BF16 312 TFLOPS dense; "
     "no FP8)"),
    ("a100-80gb", "NVIDIA A100 SXM 80GB", 80, 2.039, 312, None,
     "NVIDIA A100 data sheet, nvidia.com/en-us/data-center/a100 (80GB HBM2e SXM: 2,039GB/s, BF16 312 TFLOPS "
     "dense; no FP8)"),
    ("l40s", "NVIDIA L40S 48GB", 48, 0.864, 362, 733,
     "NVIDIA L40S data sheet, nvidia.com/en-us/data-center/l40s (48GB GDDR6, 864GB/s, BF16 733 / FP8 1,466 "
     "TFLOPS with sparsity)" + _NV_SPARSE),
    ("rtx4090", "NVIDIA GeForce RTX 4090 24GB", 24, 1.008, 165.2, 330.3,
     "NVIDIA Ada Lovelace architecture whitepaper, RTX 4090 column (24GB GDDR6X, 1,008GB/s, BF16 165.2 / FP8 "
     "330.3 TFLOPS dense with FP32 accumulate)"),
    ("rtx5090", "NVIDIA GeForce RTX 5090 32GB", 32, 1.792, 419.2, 838.4,
     "NVIDIA GeForce RTX 5090 spec, nvidia.com (32GB GDDR7, 1,792GB/s, 3,352 AI TOPS = FP4 with sparsity); "
     "FP16 tensor 838.4 / FP8 1,676.8 TFLOPS with sparsity as listed, dense = / 2"),
    ("mi300x", "AMD Instinct MI300X 192GB", 192, 5.3, 1307.4, 2614.9,
     "AMD Instinct MI300X data sheet, amd.com/en/products/accelerators/instinct/mi300/mi300x.html (192GB HBM3, "
     "5.3TB/s, BF16 1,307.4 / FP8 2,614.9 TFLOPS dense)"),
    ("mi325x", "AMD Instinct MI325X 256GB", 256, 6.0, 1307.4, 2614.9,
     "AMD Instinct MI325X data sheet, amd.com/en/products/accelerators/instinct/mi300/mi325x.html (256GB HBM3E, "
     "6TB/s, BF16 1,307.4 / FP8 2,614.9 TFLOPS dense)"),
    ("mi355x", "AMD Instinct MI355X 288GB", 288, 8.0, 2516.6, 5033.2,
     "AMD Instinct MI355X data sheet, amd.com/en/products/accelerators/instinct/mi350/mi355x.html (288GB HBM3E, "
     "8TB/s, BF16 2.5 / FP8 5.0 PFLOPS dense)"),
    ("m2-ultra-192gb", "Apple M2 Ultra 192GB unified", 192, 0.8, None, None,
     "Apple Mac Studio (2023) tech specs, apple.com (M2 Ultra: up to 192GB unified memory, 800GB/s); Apple "
     "publishes no tensor FLOP/s"),
    ("m3-ultra-512gb", "Apple M3 Ultra 512GB unified", 512, 0.819, None, None,
     "Apple Mac Studio (2025) tech specs, apple.com (M3 Ultra: up to 512GB unified memory, 819GB/s); Apple "
     "publishes no tensor FLOP/s"),
    ("m3-ultra-256gb", "Apple M3 Ultra 256GB unified", 256, 0.819, None, None,
     "Apple Mac Studio (2025) tech specs, apple.com (M3 Ultra: 96/256/512GB unified memory, 819GB/s)"),
    ("m4-max-128gb", "Apple M4 Max 128GB unified", 128, 0.546, None, None,
     "Apple MacBook Pro (2024) tech specs, apple.com (M4 Max: up to 128GB unified memory, 546GB/s)"),
]

MiB = 2 ** 20
_MODAL = "nvidia-smi totals quoted in modal-labs/modal-client#2797"
# the memory CUDA reports, in MiB, with where it is quoted; rows without one use the nominal size as GiB
CUDA_TOTAL_MIB = {
    "h100": (81559, _MODAL + " (H100: 81559MiB)"),
    "a100-80gb": (81920, _MODAL + " (A100 80GB: 81920MiB)"),
    "a100-40gb": (40960, _MODAL + " (A100 40GB: 40960MiB)"),
    "l40s": (46068, _MODAL + " (L40S: 46068MiB)"),
    "h200": (143771, "vllm-project/recipes#381 (8x H200, ~143,771 MiB per GPU)"),
    "b200": (182630, "pytorch/ao#4002 (cudaGetDeviceProperties on a B200: Total Global Memory 178.35 GB, "
                     "i.e. GiB = 182,630 MiB)"),
}


def _memory(name: str, nominal: float) -> tuple[int, str]:
    if name in CUDA_TOTAL_MIB:
        mib, src = CUDA_TOTAL_MIB[name]
        return mib * MiB, f"{mib:,} MiB as CUDA reports it ({src}); the data sheet says {nominal:g}GB"
    return int(nominal * GiB), (f"{nominal:g} GiB: the data sheet's {nominal:g}GB read as GiB (no reported total "
                                "found; CUDA usually reports a little less)")


def _device(name, label, mem, bw, bf16, fp8, src) -> Device:
    memory, note = _memory(name, mem)
    return Device(name, label, memory, bw * TB, bf16 * TF if bf16 else None, fp8 * TF if fp8 else None,
                  f"{src}; memory: {note}", note)


DEVICES: dict[str, Device] = {row[0]: _device(*row) for row in _ROWS}
ALIASES = {"h100-sxm": "h100", "h100-80gb": "h100", "h200-sxm": "h200", "h200-141gb": "h200", "a100": "a100-80gb",
           "rtx-4090": "rtx4090", "4090": "rtx4090", "rtx-5090": "rtx5090", "5090": "rtx5090", "b200-180gb": "b200",
           "b300-288gb": "b300", "m2-ultra": "m2-ultra-192gb", "m3-ultra": "m3-ultra-512gb", "m4-max": "m4-max-128gb"}


def _key(name: str) -> str:
    return "-".join(str(name).strip().lower().replace("_", "-").replace(" ", "-").split("-")).replace("--", "-")


def device(name: str) -> Device:
    """The named device, or a DeviceError listing the close names."""
    key = _key(name)
    key = ALIASES.get(key, key)
    if key in DEVICES:
        return DEVICES[key]
    names = sorted([*DEVICES, *ALIASES])
    close = difflib.get_close_matches(key, names, n=5, cutoff=0.4)
    shown = str(name)[:40].encode("ascii", "replace").decode()
    raise DeviceError(f"unknown device {shown!r}" + (f"; close: {', '.join(close)}" if close else ""),
                      hint="archprobe memory --list-gpus shows every name; or give --budget 8x80GB")
