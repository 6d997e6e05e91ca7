"""The workloads only ``kv_cache_blocks`` is graded on: one fixed memory reading, three budgets.

Role: grading (this exercise's own workloads; the shared ones and how they are built: ``step_workloads``).
"""

from __future__ import annotations

from nanovllm_teach.i18n import Text
from nanovllm_teach.runs import Workload
from nanovllm_teach.step_workloads import BASE, ignore_eos, random_prompts

# The machine's memory reading replaced with a fixed one (bytes), so the number of blocks comes out the same
# everywhere: a few hundred of the shipped model's 12 KiB blocks, a few MB.
_READING = dict(device="cpu", total=20_000_000, free=12_000_000, used=8_000_000, peak=4_200_000,
                current=3_000_000)

MEMORY_BOUND = Workload(
    "memory_bound",
    Text(en="KV cache sized from a fixed memory reading at utilization 0.9 (the memory is the limit)",
         zh="按一份固定的内存读数、利用率 0.9 来确定 KV 缓存的大小：限制来自内存"),
    dict(BASE, gpu_memory_utilization=0.9, cpu_kvcache_gib=1.0, max_num_seqs=8),
    random_prompts(3, [8, 13, 6, 10]), ignore_eos([12, 10, 14, 9]), memory=_READING)

CPU_CAPPED = Workload(
    "cpu_capped",
    Text(en="the same reading, but the CPU cap (cpu_kvcache_gib) is smaller than what memory allows",
         zh="同一份读数，但 CPU 上限 cpu_kvcache_gib 比内存所允许的小"),
    dict(BASE, gpu_memory_utilization=0.9, cpu_kvcache_gib=3_000_000 / 2**30, max_num_seqs=8),
    random_prompts(4, [8, 13, 6, 10]), ignore_eos([12, 10, 14, 9]), memory=_READING)

LOW_UTILIZATION = Workload(
    "low_utilization",
    Text(en="the same reading at utilization 0.6: a smaller share of the memory for the cache",
         zh="同一份读数，利用率 0.6：留给缓存的内存份额更小"),
    dict(BASE, gpu_memory_utilization=0.6, cpu_kvcache_gib=1.0, max_num_seqs=8),
    random_prompts(5, [8, 13, 6, 10]), ignore_eos([12, 10, 14, 9]), memory=_READING)
