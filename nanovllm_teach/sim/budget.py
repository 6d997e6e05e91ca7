"""Orchestration (simulated): what a simulation will hold, estimated from its settings before anything is drawn
or built, and a refusal (ValueError, one line) when it cannot fit.

Two memories are at stake:

- the simulated device's: a KV cache of ``num_kvcache_blocks`` blocks must fit in its memory, whatever was
  asked for (``kv_blocks_that_fit``; the simulated runner refuses more too);
- this machine's: the simulation holds every request's token ids (in the workload and in the engine's
  sequence), a Python object for every KV block, and per request a few small records. ``host_bytes``
  adds them up from the settings alone; ``check_host_memory`` refuses a run whose estimate is more than
  this machine has available.

The per-item sizes are measured on CPython 3.12 (a list slot is 8 bytes; token id ints are shared from one
pool, ``workload/requests.py``): a ``BlockManager`` of 1,000,000 blocks takes 257 MB; a request of 100 prompt
tokens about 0.84 kB as a ``Request`` and 1.16 kB as a ``Sequence``.

Emits no events.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from nanovllm_teach.engine.batch import warmup_batch
from nanovllm_teach.i18n import say
from nanovllm_teach.sim.cost_model import DTYPE_BYTES, ModelShape, StepCostModel
from nanovllm_teach.sim.hardware import Device
from nanovllm_teach.sim.messages import (HOST_MEMORY_EXCEEDED, HOST_PART_BLOCKS, HOST_PART_PREFIXES, HOST_PART_REQUESTS,
                                         KV_BLOCKS_CANNOT_FIT, NO_ROOM_FOR_KV_CACHE)

# What a GPU process holds before the model: the CUDA context, library workspaces and allocator slack. No
# datasheet gives it; a fresh PyTorch process on a GPU shows a few hundred MiB in nvidia-smi.
GPU_RUNTIME_BYTES = 512 * 2**20

# A Python process with torch and the engine imported, and the engine's own start-up: about 360 MB of RSS
# measured for a 200-request simulation; rounded up.
PROCESS_BYTES = 512 * 2**20
BLOCK_BYTES = 300  # a Block, its slot in the block list, the free deque and the used set
TOKEN_BYTES = 8  # one list slot
REQUEST_BYTES = 2048  # Request, Sequence, SamplingParams, RequestTimes and their dict entries, beyond token lists
# What the simulation leaves of the available memory for everything else on the machine.
HOST_SHARE = 0.8


def kv_block_bytes_per_rank(shape: ModelShape, dtype_bytes: int, tensor_parallel_size: int, block_size: int) -> int:
    """One KV block on one rank: a key and a value row per token, layer and the rank's KV heads."""
    return (2 * shape.num_layers * block_size * (shape.num_kv_heads // tensor_parallel_size) * shape.head_dim
            * dtype_bytes)


def kv_blocks_that_fit(shape: ModelShape, device: Device, tensor_parallel_size: int, block_size: int) -> int:
    """How many KV blocks one rank of ``device`` could hold if nothing else were in its memory."""
    return device.memory_bytes // kv_block_bytes_per_rank(shape, DTYPE_BYTES[device.dtype], tensor_parallel_size,
                                                          block_size)


def check_kv_blocks(shape: ModelShape, device: Device, tensor_parallel_size: int, block_size: int,
                    num_blocks: int) -> None:
    """Refuse a KV cache that the device's memory could not hold even empty of weights."""
    most = kv_blocks_that_fit(shape, device, tensor_parallel_size, block_size)
    if num_blocks > most:
        raise ValueError(say(KV_BLOCKS_CANNOT_FIT, num_blocks=num_blocks, device=device.name, most=most,
                             block_size=block_size, model=shape.name, tp=tensor_parallel_size))


def weight_bytes(cost_model: StepCostModel) -> int:
    """One rank's weights in memory (tied embeddings stored once): the linear layers' at their quantized size
    (``linear_weight_bytes``), the rest (embedding, LM head, norms) in the device's dtype."""
    shape = cost_model.shape
    linear = shape.num_layers * shape.linear_params_per_layer
    return ((linear * cost_model.linear_weight_bytes + (shape.num_params - linear) * cost_model.dtype_bytes)
            // cost_model.tp)


def estimated_kv_blocks(cost_model: StepCostModel, utilization: float, max_model_len: int,
                        max_num_batched_tokens: int, max_num_seqs: int, block_size: int) -> int:
    """Before anything is built, the KV blocks the simulated runner will find room for on a datasheet device
    (the same sum as its sizing: ``utilization`` of the memory, less the runtime, the weights and the warm-up's
    activations); a device that has no room for one block is refused."""
    device, shape, tp = cost_model.device, cost_model.shape, cost_model.tp
    num_seqs, seq_len = warmup_batch(max_model_len, max_num_batched_tokens, max_num_seqs)
    needed = (GPU_RUNTIME_BYTES if device.kind == "gpu" else 0) + weight_bytes(cost_model) \
        + cost_model.activation_peak_bytes(num_seqs * seq_len, num_seqs)
    per_block = kv_block_bytes_per_rank(shape, cost_model.dtype_bytes, tp, block_size)
    room = int(device.memory_bytes * utilization - needed)
    if room < per_block:
        raise ValueError(say(NO_ROOM_FOR_KV_CACHE, model=shape.name, device=device.name, tp=tp, num_seqs=num_seqs,
                             seq_len=seq_len, needed_gib=needed / 2**30,
                             allowed_gib=utilization * device.memory_bytes / 2**30, block_size=block_size,
                             block_gib=per_block / 2**30))
    return room // per_block


@dataclass(frozen=True)
class HostEstimate:
    """The estimate's parts, in bytes."""

    process: int
    requests: int
    prefixes: int
    blocks: int

    @property
    def total(self) -> int:
        return self.process + self.requests + self.prefixes + self.blocks


def host_bytes(num_requests: int, mean_prompt_len: float, mean_output_len: float, num_blocks: int,
               prefix_tokens: int = 0) -> HostEstimate:
    """This machine's memory for a simulation: prompts held twice (the workload's and the sequence's ids), the
    answer's ids once, a record per request, an object per KV block, the shared prefixes' ids once."""
    per_request = TOKEN_BYTES * (2 * mean_prompt_len + mean_output_len) + REQUEST_BYTES
    return HostEstimate(PROCESS_BYTES, int(num_requests * per_request), TOKEN_BYTES * prefix_tokens,
                        BLOCK_BYTES * num_blocks)


def available_bytes() -> int:
    """What this machine has available now (``MemAvailable`` of /proc/meminfo; elsewhere, physical memory)."""
    meminfo = Path("/proc/meminfo")
    if meminfo.exists():
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def check_host_memory(estimate: HostEstimate, available: int | None = None) -> None:
    """Refuse a simulation whose estimate is more than ``HOST_SHARE`` of what this machine has available."""
    available = available_bytes() if available is None else available
    if estimate.total > HOST_SHARE * available:
        parts = ", ".join(f"{say(part)} {value / 2**30:.3g} GiB" for part, value in (
            (HOST_PART_REQUESTS, estimate.requests), (HOST_PART_PREFIXES, estimate.prefixes),
            (HOST_PART_BLOCKS, estimate.blocks)) if value)
        raise ValueError(say(HOST_MEMORY_EXCEEDED, total_gib=estimate.total / 2**30, parts=parts,
                             share_gib=HOST_SHARE * available / 2**30, available_gib=available / 2**30))
