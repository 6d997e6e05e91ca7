"""The five exercises that rebuild a piece of the engine, and where each piece plugs in.

Each is graded the same way (see ``grading``): the student's functions replace the engine's, fixed
workloads run, and the trace must match the reference engine's event for event. The ``check`` functions
stop a result the engine could not use (a float slot, a block count bigger than the machine) with a
sentence, before it turns into a crash deep inside torch.
"""

from __future__ import annotations

from typing import Any

from nanovllm_teach.engine import block_manager, model_runner
from nanovllm_teach.engine.block_manager import BlockManager
from nanovllm_teach.engine.scheduler import Scheduler
from nanovllm_teach.engine.sequence import Sequence
from nanovllm_teach.exercises.grading import EngineExercise, Piece
from nanovllm_teach.exercises.workloads import (
    CPU_CAPPED, LATE_ARRIVALS, LOW_UTILIZATION, MEMORY_BOUND, SEQ_CAP, SHARED_PREFIXES, TIGHT_CACHE,
)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_schedule(args: tuple[Any, ...], result: Any) -> str | None:
    if not isinstance(result, list) or not all(isinstance(seq, Sequence) for seq in result):
        return f"returned {type(result).__name__} {result!r}: it must return a list of Sequence objects"
    if not result:
        return ("returned an empty list: a decode step must run at least one sequence (when every other one "
                "is preempted, the last one left runs)")
    return None


def _check_bool(args: tuple[Any, ...], result: Any) -> str | None:
    return None if isinstance(result, bool) else f"returned {result!r}: it must return True or False"


def _check_hash(args: tuple[Any, ...], result: Any) -> str | None:
    if not _is_int(result):
        return f"returned {type(result).__name__} {result!r}: a block hash must be an int"
    if result == block_manager.NO_HASH:
        return f"returned {result}, which the block manager reserves for 'no hash' (NO_HASH)"
    return None


def _check_slot(args: tuple[Any, ...], result: Any) -> str | None:
    if not _is_int(result):
        return f"returned {type(result).__name__} {result!r}: a cache slot is an int (use //, not /)"
    return None


def _check_block_bytes(args: tuple[Any, ...], result: Any) -> str | None:
    if not _is_int(result) or result <= 0:
        return f"returned {result!r}: the size of one block must be a positive int (bytes)"
    return None


def _check_num_blocks(args: tuple[Any, ...], result: Any) -> str | None:
    reading, _utilization, block_bytes, _cpu_cap = args
    if not _is_int(result) or result < 0:
        return f"returned {result!r}: the number of blocks must be an int >= 0 (whole blocks: use //)"
    if result * block_bytes > reading.total:
        return (f"returned {result} blocks of {block_bytes} bytes = {result * block_bytes} bytes, more than "
                f"the machine's whole memory ({reading.total} bytes); the grader stops here instead of "
                f"allocating it")
    return None


SCHEDULE_DECODE = EngineExercise(
    "schedule_decode", "Decode scheduling with preemption", "Scheduler._schedule_decode",
    ("schedule_decode",),
    (Piece("schedule_decode", Scheduler, "_schedule_decode", _check_schedule),),
    (TIGHT_CACHE, SEQ_CAP, LATE_ARRIVALS))

CAN_APPEND = EngineExercise(
    "can_append", "Growing a sequence by one token: can_append / may_append", "BlockManager.can_append, may_append",
    ("can_append", "may_append"),
    (Piece("can_append", BlockManager, "can_append", _check_bool), Piece("may_append", BlockManager, "may_append")),
    (TIGHT_CACHE, LATE_ARRIVALS))

BLOCK_HASH = EngineExercise(
    "block_hash", "The prefix-cache hash chain", "block_manager.compute_block_hash",
    ("compute_block_hash",),
    (Piece("compute_block_hash", block_manager, "compute_block_hash", _check_hash),),
    (SHARED_PREFIXES, TIGHT_CACHE))

DECODE_SLOT = EngineExercise(
    "decode_slot", "Where a decode token's K/V goes: the slot mapping", "model_runner.decode_slot",
    ("decode_slot",),
    (Piece("decode_slot", model_runner, "decode_slot", _check_slot),),
    (TIGHT_CACHE, LATE_ARRIVALS))

KV_CACHE_BLOCKS = EngineExercise(
    "kv_cache_blocks", "Sizing the KV cache: bytes per block, blocks per budget",
    "utils.memory.kv_block_bytes, kv_cache_blocks",
    ("kv_block_bytes", "kv_cache_blocks"),
    (Piece("kv_block_bytes", model_runner, "kv_block_bytes", _check_block_bytes),
     Piece("kv_cache_blocks", model_runner, "kv_cache_blocks", _check_num_blocks)),
    (MEMORY_BOUND, CPU_CAPPED, LOW_UTILIZATION))
