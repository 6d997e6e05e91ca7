"""The exercises that rebuild a piece of the engine: which exercise point each replaces, the checks on what
the student's functions return, and the hints.

Each is graded the same way (see ``engine_grading``): the student's functions replace the engine's, fixed
workloads run, and the trace must match the reference engine's event for event. The open-ended one,
``scheduling_policy``, has no single right answer: it is graded by the latency it achieves against first
come, first served (``policy_grading``). The ``check`` functions
stop a result the engine could not use (a float slot, a block count bigger than the machine) with a
sentence, before it turns into a crash deep inside torch. Hints say where to look first, then how; none of
them is the code.
"""

from __future__ import annotations

from typing import Any

from nanovllm_teach.engine import block_manager
from nanovllm_teach.engine.sequence import Sequence
from nanovllm_teach.exercises.engine_grading import EngineExercise
from nanovllm_teach.exercises.pieces import Piece
from nanovllm_teach.exercises.policy_grading import PolicyExercise
from nanovllm_teach.exercises.policy_workloads import POLICY_WORKLOADS
from nanovllm_teach.exercises.workloads import (
    CPU_CAPPED, LATE_ARRIVALS, LOW_UTILIZATION, MEMORY_BOUND, PREFIX_REUSE, SEQ_CAP, SHARED_PREFIXES, TIGHT_CACHE,
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


def _check_index(args: tuple[Any, ...], result: Any) -> str | None:
    (waiting,) = args
    if not _is_int(result) or not 0 <= result < len(waiting):
        return (f"returned {result!r}: it must return the index (an int from 0 to {len(waiting) - 1}) of one of "
                f"the {len(waiting)} waiting sequences")
    return None


def _check_allocation(args: tuple[Any, ...], result: Any) -> str | None:
    bm, seq, num_cached_blocks = args
    table = seq.block_table
    if not isinstance(table, list) or not all(_is_int(b) and 0 <= b < bm.num_blocks for b in table):
        return (f"left seq {seq.seq_id} a block table {table!r}: it must be a list of block ids (ints from 0 to "
                f"{bm.num_blocks - 1})")
    if len(table) != seq.num_blocks or len(set(table)) != len(table):
        return (f"gave seq {seq.seq_id} the block table {table} for its {seq.num_tokens} tokens, which need "
                f"{seq.num_blocks} different blocks of {bm.block_size}")
    if any(bm.blocks[b].ref_count < 1 for b in table):
        return f"gave seq {seq.seq_id} blocks {table} and left some of them with no holder (ref_count 0)"
    if seq.num_cached_tokens != num_cached_blocks * bm.block_size:
        return (f"left seq.num_cached_tokens at {seq.num_cached_tokens!r}, but its {num_cached_blocks} cached "
                f"block(s) already hold the K/V of {num_cached_blocks * bm.block_size} tokens")
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
    ("Two queues' ends matter: which end of scheduler.running do you take the next sequence from, and which "
     "end gives way when blocks run out? Read Scheduler.preempt to see what preempting does.",
     "Loop while running is not empty and you have fewer than max_num_seqs; inside, loop while "
     "can_append(seq) says no: preempt running.pop() if anyone is left, else seq itself (and skip it). "
     "Scheduled sequences go back to the head of running, in order."),
    (Piece("schedule_decode", "schedule_decode", _check_schedule),),
    (TIGHT_CACHE, SEQ_CAP, LATE_ARRIVALS))

CAN_APPEND = EngineExercise(
    "can_append", "Growing a sequence by one token: can_append / may_append", "BlockManager.can_append, may_append",
    ("can_append", "may_append"),
    ("Only the token that starts a new block needs a free block. What tells you that seq's tokens need more "
     "blocks than it holds?",
     "Compare seq.num_blocks with len(seq.block_table). may_append does the same test, then takes a block "
     "with bm._take_free_block(), appends it and emits the event shown in the template."),
    (Piece("can_append", "can_append", _check_bool), Piece("may_append", "may_append")),
    (TIGHT_CACHE, LATE_ARRIVALS))

ALLOCATE = EngineExercise(
    "allocate", "Admitting a sequence: shared prefix blocks and fresh ones", "BlockManager.allocate",
    ("allocate",),
    ("The first num_cached_blocks blocks are in the cache: which dict maps a block's hash to its block, and "
     "which hash does block i have? Each reused block gets one more holder; what must change for a block "
     "that had none (where does a freed block wait)?",
     "Walk i over the cached blocks with h = compute_block_hash(seq.block(i), h), from h = NO_HASH, and look "
     "h up in bm.hash_to_block_id. A hit whose ref_count is 0 moves from bm.free_block_ids to "
     "bm.used_block_ids; every hit's ref_count goes up by 1. The rest come from bm._take_free_block(). Then "
     "the block table (hits + fresh), num_cached_tokens, and the two events."),
    (Piece("allocate", "allocate", _check_allocation),),
    (PREFIX_REUSE, SHARED_PREFIXES, TIGHT_CACHE))

BLOCK_HASH = EngineExercise(
    "block_hash", "The prefix-cache hash chain", "block_manager.compute_block_hash",
    ("compute_block_hash",),
    ("Equal tokens after different prefixes hold different K/V. What must go into the hash besides this "
     "block's tokens?",
     "Feed the hasher the previous block's hash first (as 8 bytes, unless it is NO_HASH), then the token "
     "ids as bytes (array('q', token_ids).tobytes()); return h.intdigest()."),
    (Piece("compute_block_hash", "compute_block_hash", _check_hash),),
    (SHARED_PREFIXES, TIGHT_CACHE))

DECODE_SLOT = EngineExercise(
    "decode_slot", "Where a decode token's K/V goes: the slot mapping", "model_runner.decode_slot",
    ("decode_slot",),
    ("Which position does the newest token have, counting from 0? Which logical block holds that position?",
     "Logical block position // block_size is physical block seq.block_table[that]; the slot is that "
     "block's first slot plus the offset position % block_size."),
    (Piece("decode_slot", "decode_slot", _check_slot),),
    (TIGHT_CACHE, LATE_ARRIVALS))

KV_CACHE_BLOCKS = EngineExercise(
    "kv_cache_blocks", "Sizing the KV cache: bytes per block, blocks per budget",
    "utils.memory.kv_block_bytes, kv_cache_blocks",
    ("kv_block_bytes", "kv_cache_blocks"),
    ("kv_block_bytes: what does attention store per token and per layer, for each KV head? (Two things.) "
     "kv_cache_blocks: start from the share of total memory you may use, then take away what is in use.",
     "What is in use: everything on the device now (used), plus the extra a forward pass needed on top of "
     "what this process holds (peak - current). Make it an int, cap it on a CPU, divide by whole blocks, "
     "and never go below 0."),
    (Piece("kv_block_bytes", "kv_block_bytes", _check_block_bytes),
     Piece("kv_cache_blocks", "kv_cache_blocks", _check_num_blocks)),
    (MEMORY_BOUND, CPU_CAPPED, LOW_UTILIZATION))

SCHEDULING_POLICY = PolicyExercise(
    "scheduling_policy", "Design a scheduling policy: who is admitted next", "scheduler.choose_next",
    ("choose_next",),
    ("Mean TTFT is a sum of waits: while one request's prefill runs, every request behind it waits. Which "
     "requests cost the others the least when they go first? Then look at the steady_stream row: who waits "
     "the longest under your policy, and why does nobody ever let it in?",
     "Admit the waiting sequence with the fewest prompt tokens (num_prompt_tokens) first, and add aging so "
     "that nobody is passed over forever: seq_id grows with arrival order, so the newest seq_id in waiting "
     "minus a sequence's seq_id counts the requests that arrived after it; once that count is large (a few "
     "dozen), let the oldest go first."),
    (Piece("choose_next", "choose_next", _check_index),),
    tuple(POLICY_WORKLOADS.values()))
