"""Exercise ``kv_cache_blocks``: sizing the KV cache: bytes per block, blocks per budget.

Beside this definition: ``template.py`` to start from, ``solution.py`` the reference.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from nanovllm_teach.exercises.engine_grading import EngineExercise, Piece
from nanovllm_teach.exercises.kv_cache_blocks.wire import MemoryNumbers
from nanovllm_teach.exercises.kv_cache_blocks.workloads import CPU_CAPPED, LOW_UTILIZATION, MEMORY_BOUND
from nanovllm_teach.exercises.worker import is_int
from nanovllm_teach.i18n import Text, say
from nanovllm_teach.trace.diff import DECISION_EVENTS

ORDER = 100  # the course's order (``nanovllm-teach exercises``): after the slots the cache holds


# What the checks say, after "your kv_block_bytes " / "你的 kv_block_bytes " (and kv_cache_blocks) in the verdict.
NOT_BLOCK_BYTES = Text(en="returned {value!r}: the size of one block must be a positive int (bytes)",
                       zh="返回了 {value!r}：一个块的大小必须是正的 int（以字节计）")
NOT_NUM_BLOCKS = Text(en="returned {value!r}: the number of blocks must be an int >= 0 (whole blocks: use //)",
                      zh="返回了 {value!r}：块数必须是 >= 0 的 int（只算整块：用 //）")
MORE_THAN_MEMORY = Text(en="returned {blocks} blocks of {block_bytes} bytes = {total} bytes, more than the machine's "
                           "whole memory ({memory} bytes); the grader stops here instead of allocating it",
                        zh="返回了 {blocks} 个块，每块 {block_bytes} 字节，共 {total} 字节，比整台机器的内存"
                           "（{memory} 字节）还多；评分器在这里停下，不去分配它")


def _check_block_bytes(args: tuple[Any, ...], result: Any) -> str | None:
    if not is_int(result) or result <= 0:
        return say(NOT_BLOCK_BYTES, value=result)
    return None


def _check_num_blocks(args: tuple[Any, ...], result: Any) -> str | None:
    reading, _utilization, block_bytes, _cpu_cap = args
    if not is_int(result) or result < 0:
        return say(NOT_NUM_BLOCKS, value=result)
    if result * block_bytes > reading.total:
        return say(MORE_THAN_MEMORY, blocks=result, block_bytes=block_bytes, total=result * block_bytes,
                   memory=reading.total)
    return None


def _memory_numbers(args: tuple[Any, ...]) -> tuple[Any, ...]:
    reading, *rest = args
    return (MemoryNumbers(**asdict(reading)), *rest)


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
    (Piece("kv_block_bytes", "nanovllm_teach.engine.model_runner:kv_block_bytes", _check_block_bytes,
           wire=("int", "int", "int", "int", "int"),
           same_answer=("nanovllm_teach.sim.budget:kv_block_bytes_per_rank",  # the simulator's sizes of a block
                        "nanovllm_teach.sim.cost_model:ModelShape.kv_bytes_per_token")),
     Piece("kv_cache_blocks", "nanovllm_teach.utils.memory:kv_cache_blocks", _check_num_blocks,
           wire=("nanovllm_teach.exercises.kv_cache_blocks.wire:MemoryNumbers", "float", "int", "int|None"),
           encode=_memory_numbers)),
    (MEMORY_BOUND, CPU_CAPPED, LOW_UTILIZATION),
    ("KV_BUDGET_ESTIMATE", "ENGINE_READY") + DECISION_EVENTS)
