"""Exercise ``kv_cache_blocks``: sizing the KV cache: bytes per block, blocks per budget.

Beside this definition: ``template.py`` to start from, ``solution.py`` the reference.
"""

from __future__ import annotations

from typing import Any

from nanovllm_teach.exercises.engine_grading import EngineExercise
from nanovllm_teach.exercises.pieces import Piece, is_int
from nanovllm_teach.exercises.workloads import CPU_CAPPED, LOW_UTILIZATION, MEMORY_BOUND
from nanovllm_teach.i18n import Text
from nanovllm_teach.trace.diff import DECISION_EVENTS


def _check_block_bytes(args: tuple[Any, ...], result: Any) -> str | None:
    if not is_int(result) or result <= 0:
        return f"returned {result!r}: the size of one block must be a positive int (bytes)"
    return None


def _check_num_blocks(args: tuple[Any, ...], result: Any) -> str | None:
    reading, _utilization, block_bytes, _cpu_cap = args
    if not is_int(result) or result < 0:
        return f"returned {result!r}: the number of blocks must be an int >= 0 (whole blocks: use //)"
    if result * block_bytes > reading.total:
        return (f"returned {result} blocks of {block_bytes} bytes = {result * block_bytes} bytes, more than "
                f"the machine's whole memory ({reading.total} bytes); the grader stops here instead of "
                f"allocating it")
    return None


TITLE = Text(en='Sizing the KV cache: bytes per block, blocks per budget',
             zh='确定 KV 缓存的大小：每块字节数，预算内的块数')
# Hints from the gentlest to the strongest; none of them is the code.
HINTS = (
    Text(en=('kv_block_bytes: what does attention store per token and per layer, for each KV head? '
             '(Two things.) kv_cache_blocks: start from the share of total memory you may use, then '
             'take away what is in use.'),
         zh=('kv_block_bytes：对每个 token、每一层、每个 KV 头，注意力要存什么？（两样东西。）'
             'kv_cache_blocks：从允许使用的那部分总内存出发，再减去已经占用的。')),
    Text(en=('What is in use: everything on the device now (used), plus the extra a forward pass '
             'needed on top of what this process holds (peak - current). Make it an int, cap it on a '
             'CPU, divide by whole blocks, and never go below 0.'),
         zh=('已经占用的：设备上此刻用掉的全部（used），'
             '加上一次前向传播在本进程当前占用之上额外需要的部分（peak - current）。把它取整成 int，'
             '在 CPU 上加上限，按整块相除，并且绝不小于 0。')),
)


EXERCISE = EngineExercise(
    "kv_cache_blocks", TITLE,
    "utils.memory.kv_block_bytes, kv_cache_blocks",
    ("kv_block_bytes", "kv_cache_blocks"),
    HINTS,
    (Piece("kv_block_bytes", "nanovllm_teach.engine.model_runner:kv_block_bytes", _check_block_bytes),
     Piece("kv_cache_blocks", "nanovllm_teach.utils.memory:kv_cache_blocks", _check_num_blocks)),
    (MEMORY_BOUND, CPU_CAPPED, LOW_UTILIZATION),
    ("KV_BUDGET_ESTIMATE", "ENGINE_READY") + DECISION_EVENTS)
