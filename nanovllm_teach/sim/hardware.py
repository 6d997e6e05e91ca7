"""Execution layer (simulated): the devices a simulated engine can run on, as data.

A ``Device`` is the handful of numbers the step-time model (``sim/cost_model.py``) needs: how many
floating-point operations per second its matrix units do at the engine's dtype (and in FP8, on the GPUs whose
tensor cores have it: Ada Lovelace and Hopper), how many bytes per second
its memory delivers, how much memory it has, and how fast it talks to its peers under tensor parallelism.
The GPU figures are the vendors' public datasheet numbers (dense, i.e. without 2:4 sparsity), each with its
source named; "this CPU" is measured when it is asked for (``measure_this_cpu``), because no datasheet
describes the laptop a learner has.

FP8 peaks are quoted as the vendors print them, with 2:4 sparsity, and halved, as the BF16 ones are; the
GeForce parts' whitepaper rates are those with FP32 accumulate, what vLLM's FP8 GEMMs (CUTLASS
``scaled_mm``) use.

Datasheet peaks are upper bounds no real kernel reaches; how far below them a step runs is the business of
the cost model's named efficiency factors, never of these numbers.

Emits no events.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from nanovllm_teach.i18n import say
from nanovllm_teach.sim.messages import NO_FP8, UNKNOWN_HARDWARE

GIB = 2**30


@dataclass(frozen=True)
class Device:
    name: str
    kind: str  # "gpu" or "cpu": decides CUDA graphs and the CPU cap on the KV cache, as on a real engine
    dtype: str  # what the engine's dtype="auto" picks there: bfloat16 on a GPU, float32 on a CPU
    peak_flops: float  # dense matrix-multiply FLOP/s at ``dtype``
    memory_bandwidth: float  # bytes/s
    memory_bytes: int
    interconnect_bandwidth: float  # bytes/s one way between two devices (NVLink or PCIe)
    interconnect: str
    source: str
    # Dense FP8 (e4m3) matrix-multiply FLOP/s with FP32 accumulate, as vLLM's FP8 GEMMs run; None: no FP8
    # tensor cores (Ampere and older, a CPU).
    fp8_flops: float | None = None

    def describe(self) -> dict[str, float | int | str | None]:
        """Plain values for the trace header."""
        return {"name": self.name, "kind": self.kind, "dtype": self.dtype, "peak_flops": self.peak_flops,
                "fp8_flops": self.fp8_flops, "memory_bandwidth": self.memory_bandwidth,
                "memory_bytes": self.memory_bytes, "interconnect_bandwidth": self.interconnect_bandwidth,
                "interconnect": self.interconnect, "source": self.source}

    def matmul_flops(self, quantization: str | None) -> float:
        """The peak the linear layers' matrix multiplies run at: FP8 for ``quantization="fp8"`` (refused, naming
        the GPUs that have it, on a device without FP8 tensor cores), else the 16-bit (CPU: 32-bit) one."""
        if quantization is None:
            return self.peak_flops
        if self.fp8_flops is None:
            raise ValueError(say(NO_FP8, device=self.name, devices=", ".join(fp8_device_names())))
        return self.fp8_flops


# Memory capacities are taken as GiB: a datasheet's "80 GB" of HBM is what nvidia-smi shows as about 80 GiB
# (79.6 on an H100 80GB, once the driver has its share).
# PCIe 4.0 x16 moves about 32 GB/s each way (PCI-SIG PCIe 4.0 specification: 16 GT/s per lane, 128b/130b).
_PCIE4_X16 = 32e9

DEVICES: dict[str, Device] = {device.name: device for device in (
    Device("h100-sxm", "gpu", "bfloat16", peak_flops=989e12, memory_bandwidth=3.35e12, memory_bytes=80 * GIB,
           interconnect_bandwidth=450e9, interconnect="NVLink 4 (900 GB/s both ways)",
           source="NVIDIA H100 Tensor Core GPU datasheet, H100 SXM: BF16 1,979 TFLOPS with sparsity "
                  "(989 dense), 80 GB HBM3 at 3.35 TB/s, NVLink 900 GB/s; "
                  "https://www.nvidia.com/en-us/data-center/h100/, H100 SXM: \"FP8 Tensor Core 3,958 "
                  "teraFLOPS\" with sparsity (1,979 dense)",
           fp8_flops=1979e12),
    Device("h200", "gpu", "bfloat16", peak_flops=989e12, memory_bandwidth=4.8e12, memory_bytes=141 * GIB,
           interconnect_bandwidth=450e9, interconnect="NVLink 4 (900 GB/s both ways)",
           source="NVIDIA H200 Tensor Core GPU datasheet, H200 SXM: BF16 1,979 TFLOPS with sparsity "
                  "(989 dense), 141 GB HBM3e at 4.8 TB/s, NVLink 900 GB/s; "
                  "https://www.nvidia.com/en-us/data-center/h200/, H200 SXM: \"FP8 Tensor Core 3,958 TFLOPS\" "
                  "with sparsity (1,979 dense)",
           fp8_flops=1979e12),
    Device("a100-80gb", "gpu", "bfloat16", peak_flops=312e12, memory_bandwidth=2.039e12,
           memory_bytes=80 * GIB, interconnect_bandwidth=300e9, interconnect="NVLink 3 (600 GB/s both ways)",
           source="NVIDIA A100 Tensor Core GPU datasheet, A100 80GB SXM: BF16 312 TFLOPS dense, "
                  "80 GB HBM2e at 2,039 GB/s, NVLink 600 GB/s"),
    Device("a100-40gb", "gpu", "bfloat16", peak_flops=312e12, memory_bandwidth=1.555e12,
           memory_bytes=40 * GIB, interconnect_bandwidth=300e9, interconnect="NVLink 3 (600 GB/s both ways)",
           source="NVIDIA A100 Tensor Core GPU datasheet, A100 40GB: BF16 312 TFLOPS dense, "
                  "40 GB HBM2 at 1,555 GB/s, NVLink 600 GB/s"),
    Device("l4", "gpu", "bfloat16", peak_flops=121e12, memory_bandwidth=300e9, memory_bytes=24 * GIB,
           interconnect_bandwidth=_PCIE4_X16, interconnect="PCIe 4.0 x16",
           source="NVIDIA L4 Tensor Core GPU datasheet: BF16 242 TFLOPS with sparsity (121 dense), "
                  "24 GB GDDR6 at 300 GB/s, PCIe Gen4 x16; https://www.nvidia.com/en-us/data-center/l4/: "
                  "\"FP8 Tensor Core 485 teraFLOPs*\" with sparsity (242.5 dense)",
           fp8_flops=242.5e12),
    Device("rtx-4090", "gpu", "bfloat16", peak_flops=165.2e12, memory_bandwidth=1008e9, memory_bytes=24 * GIB,
           interconnect_bandwidth=_PCIE4_X16, interconnect="PCIe 4.0 x16",
           source="NVIDIA Ada Lovelace GPU architecture whitepaper, GeForce RTX 4090: FP16/BF16 tensor "
                  "165.2 TFLOPS dense with FP32 accumulate, 24 GB GDDR6X at 1,008 GB/s; v2.02, Appendix A: "
                  "\"Peak FP8 Tensor TFLOPS with FP32 Accumulate 330.3/660.6\" (dense/sparse)",
           fp8_flops=330.3e12),
    # NVIDIA publishes no TFLOPS figure for the laptop part: 36 SMs (4,608 CUDA cores / 128) at the 2,175 MHz
    # top boost clock, times the 512 dense BF16 FLOPs per SM per clock (FP32 accumulate) that the Ada
    # whitepaper's RTX 4090 figure implies (165.2 TFLOPS / 128 SMs / 2.52 GHz), give 40.1 TFLOPS; FP8 runs at twice
    # the BF16 rate per SM there (330.3 against 165.2 TFLOPS, both with FP32 accumulate): 80.2 TFLOPS.
    Device("rtx-4070-laptop", "gpu", "bfloat16", peak_flops=40.1e12, memory_bandwidth=256e9,
           memory_bytes=8 * GIB, interconnect_bandwidth=_PCIE4_X16, interconnect="PCIe 4.0 x16",
           source="NVIDIA GeForce RTX 4070 Laptop GPU specifications: 4,608 CUDA cores, boost up to "
                  "2,175 MHz, 8 GB GDDR6 on 128 bits at 16 Gbps (256 GB/s); BF16 rate per SM from the "
                  "Ada Lovelace architecture whitepaper, FP8 twice it (the whitepaper's RTX 4090: FP8 330.3, "
                  "BF16 165.2 TFLOPS dense, both with FP32 accumulate)",
           fp8_flops=80.2e12),
)}

CPU_DEVICE_NAME = "this-cpu"



def fp8_device_names() -> list[str]:
    """The datasheet devices with FP8 tensor cores."""
    return [name for name, device in DEVICES.items() if device.fp8_flops is not None]


def attention_backend_on(kind: str) -> str:
    """What ``attention_backend="auto"`` picks on a device of this kind (``"gpu"`` or ``"cpu"``), flash-attn
    assumed installed on a GPU and the C++ decode kernel buildable on a CPU."""
    return "flash_attn" if kind == "gpu" else "cpp"


def device_names() -> list[str]:
    return [*DEVICES, CPU_DEVICE_NAME]


def get_device(name: str) -> Device:
    """A datasheet device by name, or ``"this-cpu"`` (measured now). Unknown names raise ValueError."""
    if name == CPU_DEVICE_NAME:
        return measure_this_cpu()
    if name not in DEVICES:
        raise ValueError(say(UNKNOWN_HARDWARE, name=name, known=", ".join(device_names())))
    return DEVICES[name]


def _total_memory_bytes() -> int:
    meminfo = Path("/proc/meminfo")
    if meminfo.exists():
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def measure_this_cpu(copy_mib: int = 256, repeats: int = 5) -> Device:
    """This machine's CPU as the engine uses it, with torch's current thread count: float32 matrix-multiply
    FLOP/s through the library the engine's linear layers use by default, and memory bandwidth from
    copying a ``copy_mib`` MiB tensor (each copy reads and writes every byte once). Each is the best of
    ``repeats`` runs: a peak is what the machine can do, and on a shared machine a median swings by 2x with
    what else runs that second (measured on 2 busy cores), which would move every prediction with it.
    Takes one to two seconds."""
    import torch  # only this measurement needs torch: the datasheet devices are plain data

    from nanovllm_teach.models.step_cost import matmul_peak_gflops, memory_bandwidth_gbs

    flops = max(matmul_peak_gflops(repeats=1) for _ in range(repeats)) * 1e9
    bandwidth = max(memory_bandwidth_gbs(copy_mib, repeats=1) for _ in range(repeats)) * 1e9
    return Device(CPU_DEVICE_NAME, "cpu", "float32", peak_flops=flops, memory_bandwidth=bandwidth,
                  memory_bytes=_total_memory_bytes(), interconnect_bandwidth=bandwidth,
                  interconnect="shared memory (gloo)",
                  source=f"measured now, best of {repeats}: a float32 1024x1024 matmul as the engine's linear layers "
                         f"run it, with {torch.get_num_threads()} threads, a {copy_mib} MiB tensor copy; /proc/meminfo")
