"""Execution layer: memory readings for the KV-cache budget, on a GPU or in system RAM.

The budget formula is the same on both (nano-vllm's ``allocate_kv_cache``)::

    available = total * utilization - used - peak + current

``used`` is what the whole device (or machine) uses now, ``current`` what this process holds now and
``peak`` the most it held since ``reset_peak`` (the model runner resets it just before the warm-up), so
``peak - current`` is the transient room a forward pass needs on top of what stays allocated.
``kv_cache_blocks`` turns that into a block count (capped on a CPU), ``kv_block_bytes`` says what one block
costs.

On a CPU the cache is also capped, because system RAM is shared with everything else on the machine: at
``cpu_kvcache_gib`` when it is set, else by ``auto_cpu_kv_cap``, sized from the machine and the model as
vLLM's CPU build sizes its cache from a share of memory: ``CPU_KV_SHARE`` of the memory available when the
engine starts, and never more than the limits can fill (``max_num_seqs`` sequences of ``max_model_len``
tokens), so a tiny model does not take gigabytes it can never use and a real checkpoint gets hundreds of
blocks, not the handful a fixed quarter of a GiB left Qwen3-0.6B (4 blocks of 256 tokens).

Where the peak comes from (``reset_peak`` returns its name, the WARMUP event's ``peak_source``):

- on a GPU, ``torch.cuda.max_memory_allocated``: tensors only, reset by ``torch.cuda.reset_peak_memory_stats``;
- on Linux, ``VmHWM after reset``: the resident-set high-water mark of ``/proc/self/status``, which writing
  ``5`` to ``/proc/self/clear_refs`` resets to the current size, so it is the warm-up's own peak;
- where that reset is refused, the high-water mark of the process's whole life (``VmHWM (process lifetime)``,
  or ``ru_maxrss`` without ``/proc``): an earlier engine in the same process may have set it.
"""

from __future__ import annotations

import math
import mmap
import os
import resource
import sys
from dataclasses import asdict, dataclass
from typing import Any
from pathlib import Path

import torch


@dataclass(frozen=True)
class MemoryReading:
    device: str
    total: int
    free: int
    used: int
    peak: int
    current: int

    def available(self, utilization: float) -> int:
        return int(self.total * utilization - self.used - self.peak + self.current)

    def as_stats(self) -> dict[str, int | str]:
        return asdict(self)


def _meminfo() -> dict[str, int]:
    values: dict[str, int] = {}
    for line in Path("/proc/meminfo").read_text().splitlines():
        key, rest = line.split(":", 1)
        values[key] = int(rest.split()[0]) * 1024
    return values


def _current_rss() -> int:
    statm = Path("/proc/self/statm")
    if statm.exists():
        return int(statm.read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    return _peak_rss()


def _peak_rss() -> int:
    """The resident high-water mark: since the last reset where Linux allows one, else the process's life."""
    hwm = _status_field("VmHWM")
    if hwm is not None:
        return hwm
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # bytes on macOS, KiB on Linux


def _status_field(name: str) -> int | None:
    """A ``kB`` field of ``/proc/self/status`` in bytes (None where there is no such file or field)."""
    try:
        text = Path("/proc/self/status").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith(name + ":"):
            return int(line.split()[1]) * 1024
    return None


def reset_peak(device: torch.device) -> str:
    """Start a new peak-memory window on ``device``; returns where ``read_memory``'s ``peak`` will come from."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        return "torch.cuda.max_memory_allocated"
    if _status_field("VmHWM") is None:
        return "ru_maxrss"
    try:
        Path("/proc/self/clear_refs").write_text("5")  # Linux: VmHWM := the current resident size
    except OSError:
        return "VmHWM (process lifetime)"
    return "VmHWM after reset"


def read_memory(device: torch.device) -> MemoryReading:
    if device.type == "cuda":
        free, total = torch.cuda.mem_get_info(device)
        stats = torch.cuda.memory_stats(device)
        return MemoryReading(str(device), total, free, total - free,
                             stats["allocated_bytes.all.peak"], stats["allocated_bytes.all.current"])
    if Path("/proc/meminfo").exists():
        info = _meminfo()
        total, free = info["MemTotal"], info.get("MemAvailable", info["MemFree"])
    else:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        free = total - _current_rss()
    return MemoryReading("cpu", total, free, total - free, _peak_rss(), _current_rss())


def zeros_committed_on_write(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """A CPU tensor of zeros in an anonymous memory mapping: the operating system hands out zero pages and
    commits each only when it is first written, so a KV cache sized for the limits costs the memory of the
    blocks actually used, not of its size (``torch.zeros`` would write, and so commit, every page)."""
    nbytes = math.prod(shape) * torch.tensor([], dtype=dtype).element_size()
    return torch.frombuffer(mmap.mmap(-1, nbytes), dtype=dtype).view(shape)  # the tensor keeps the mapping alive


CPU_KV_SHARE = 0.25  # of the memory available at start-up: weights, activations and other programs need the rest


def auto_cpu_kv_cap(block_bytes: int, max_blocks: int, available: int | None) -> tuple[int, str]:
    """The CPU cap when ``cpu_kvcache_gib`` is not set, and why: ``CPU_KV_SHARE`` of ``available`` bytes (None:
    not known, as for a simulated device), at most ``max_blocks`` blocks (what the limits can fill)."""
    most = max_blocks * block_bytes
    if available is not None and available * CPU_KV_SHARE < most:
        share = int(available * CPU_KV_SHARE)
        return share, f"{CPU_KV_SHARE:g} of the {available / 2**30:.1f} GiB available at start-up"
    return most, f"what the limits can fill: {max_blocks} blocks (max_num_seqs x max_model_len)"


def kv_block_bytes(num_layers: int, block_size: int, num_kv_heads: int, head_dim: int, dtype_bytes: int) -> int:
    """Bytes one KV block takes: a key *and* a value vector per token, head and layer."""
    return 2 * num_layers * block_size * num_kv_heads * head_dim * dtype_bytes


def kv_cache_budget(reading: MemoryReading, utilization: float, cpu_cap_bytes: int | None = None) -> int:
    """Bytes the KV cache may take: what the reading leaves at ``utilization``, capped on a CPU (whose RAM
    the rest of the machine shares) at ``cpu_cap_bytes``. Negative when nothing is left."""
    budget = reading.available(utilization)
    return budget if cpu_cap_bytes is None else min(budget, cpu_cap_bytes)


def kv_cache_blocks(reading: MemoryReading, utilization: float, block_bytes: int,
                    cpu_cap_bytes: int | None = None) -> int:
    """How many whole KV blocks of ``block_bytes`` fit in the budget (0 when nothing is left)."""
    return max(kv_cache_budget(reading, utilization, cpu_cap_bytes), 0) // block_bytes


@dataclass(frozen=True)
class KvSizing:
    """One rank's KV cache sized from a memory reading, and why it has that size (KV_BUDGET_ESTIMATE)."""

    reading: MemoryReading
    utilization: float
    block_bytes: int
    cap_bytes: int | None  # the CPU cap (None on a GPU)
    room: int  # bytes the reading leaves at ``utilization``, before the cap
    budget: int  # bytes the cache may take, the cap applied
    estimated_num_blocks: int
    explicit: int | None  # num_kvcache_blocks, when it was given

    @property
    def num_blocks(self) -> int:
        return self.explicit or self.estimated_num_blocks

    @property
    def limited_by(self) -> str:
        if self.explicit is not None:
            return "num_kvcache_blocks"
        return "cpu_kvcache_gib" if self.cap_bytes is not None and self.cap_bytes < self.room else "memory"

    @property
    def reason(self) -> str:
        return "size_kv_cache_cpu_cap" if self.limited_by == "cpu_kvcache_gib" else "size_kv_cache_from_memory"

    def stats(self, num_blocks: int) -> dict[str, Any]:
        """KV_BUDGET_ESTIMATE's fields for a cache of ``num_blocks`` (the group's, under tensor parallelism)."""
        return {**self.reading.as_stats(), "utilization": self.utilization, "budget": self.budget,
                "block_bytes": self.block_bytes, "uncapped_num_blocks": max(self.room, 0) // self.block_bytes,
                "cap_bytes": self.cap_bytes, "limited_by": self.limited_by,
                "estimated_num_blocks": self.estimated_num_blocks, "num_blocks": num_blocks,
                "explicit": self.explicit is not None}


def size_kv_cache(reading: MemoryReading, utilization: float, block_bytes: int, cap_bytes: int | None,
                  explicit: int | None) -> KvSizing:
    """The KV cache this reading allows (``kv_cache_blocks``), or the ``explicit`` number asked for."""
    return KvSizing(reading, utilization, block_bytes, cap_bytes, reading.available(utilization),
                    kv_cache_budget(reading, utilization, cap_bytes),
                    kv_cache_blocks(reading, utilization, block_bytes, cap_bytes), explicit)
