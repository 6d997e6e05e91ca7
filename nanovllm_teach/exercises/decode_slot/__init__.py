"""Exercise ``decode_slot``: where a decode token's K/V goes, the slot mapping.

Beside this definition: ``template.py`` to start from, ``solution.py`` the reference.
"""

from __future__ import annotations

from typing import Any

from nanovllm_teach.exercises.engine_grading import EngineExercise, Piece
from nanovllm_teach.exercises.verdict import state_before, stats
from nanovllm_teach.exercises.worker import is_int
from nanovllm_teach.i18n import Text, say
from nanovllm_teach.step_workloads import LATE_ARRIVALS, TIGHT_CACHE
from nanovllm_teach.trace.diff import DECISION_EVENTS, Divergence
from nanovllm_teach.trace.reader import Trace

ORDER = 90  # the course's order (``nanovllm-teach exercises``): after the model runner's prefill layout


# What the check says, after "your decode_slot " / "你的 decode_slot " in the verdict.
NOT_A_SLOT = Text(en="returned {type} {value!r}: a cache slot is an int (use //, not /)",
                  zh="返回了 {type} {value!r}：缓存槽位必须是 int（用 //，不要用 /）")


def _check_slot(args: tuple[Any, ...], result: Any) -> str | None:
    if not is_int(result):
        return say(NOT_A_SLOT, type=type(result).__name__, value=result)
    return None


SLOT_OF = Text(en="seq {seq} (number {position} in the decode batch) had {tokens} tokens and the block table "
                  "{blocks}, with blocks of {size} tokens: you stored its newest token's K/V in slot {yours}, the "
                  "reference in slot {reference}",
               zh="序列 {seq}（解码 batch 中的第 {position} 条）有 {tokens} 个 token，块表为 "
                  "{blocks}，每块 {size} 个 token：你把它最新 token 的 K/V 存进了槽位 {yours}，参考实现存进了槽位 "
                  "{reference}")


def _slot_context(divergence: Divergence, reference: Trace) -> str | None:
    """The first sequence of the batch whose slot differs, its length and block table as the model runner saw
    them, and the two slots: the values, never the formula."""
    if divergence.event != "PREPARE_DECODE_TENSORS" or divergence.reference is None:
        return None
    state, batch = state_before(reference, divergence.reference.i, None)
    mine, ref = stats(divergence.yours), stats(divergence.reference)
    slots, reference_slots = mine.get("slot_mapping"), ref.get("slot_mapping")
    if not isinstance(slots, list) or not isinstance(reference_slots, list):
        return None
    k = next((k for k, (a, b) in enumerate(zip(slots, reference_slots)) if a != b), None)
    lengths, tables = ref.get("context_lens") or [], ref.get("block_tables") or []
    if k is None or k >= len(lengths) or k >= len(tables):
        return None
    blocks = [b for b in tables[k] if b != -1]
    return say(SLOT_OF, seq=batch[k] if k < len(batch) else "?", position=k + 1, tokens=lengths[k], blocks=blocks,
               size=state.block_size, yours=slots[k], reference=reference_slots[k])


TITLE = Text(en="Where a decode token's K/V goes: the slot mapping",
             zh='解码 token 的 K/V 放在哪里：槽位映射')
# Hints from the gentlest to the strongest; none of them is the code.
HINTS = (
    Text(en=('Which position does the newest token have, counting from 0? Which logical block holds '
             'that position?'),
         zh='最新的 token 在序列中的位置是多少（从 0 数起）？哪个逻辑块包含这个位置？'),
    Text(en=('Logical block position // block_size is physical block seq.block_table[that]; the slot '
             "is that block's first slot plus the offset position % block_size."),
         zh=('逻辑块 position // block_size 对应物理块 seq.block_table[该逻辑块]；'
             '槽位是这个物理块的第一个槽位加上偏移 position % block_size。')),
)


EXERCISE = EngineExercise(
    "decode_slot", TITLE, "model_runner.decode_slot",
    ("decode_slot",),
    HINTS,
    (Piece("decode_slot", "nanovllm_teach.engine.model_runner:decode_slot", _check_slot,
           wire=("nanovllm_teach.engine.batch:ScheduledSeq", "int"),
           same_answer=("nanovllm_teach.utils.kv_slots:token_slot",)),),
    (TIGHT_CACHE, LATE_ARRIVALS),
    ("PREPARE_DECODE_TENSORS",) + DECISION_EVENTS,
    _slot_context)
