"""Exercise ``prepare_prefill``: a prefill batch's positions, ``cu_seqlens`` and slot mapping, with cached prefixes.

Beside this definition: ``template.py`` to start from, ``solution.py`` the reference. The learner's
``prefill_layout`` takes and returns plain lists; ``ModelRunner.prepare_prefill`` makes the engine's own
tensors from what it returns, so a wrong list shows in the ``PREPARE_PREFILL_TENSORS`` event and then in
what the model computes.
"""

from __future__ import annotations

from typing import Any

from nanovllm_teach.exercises.engine_grading import EngineExercise, Piece
from nanovllm_teach.exercises.worker import is_int
from nanovllm_teach.i18n import Text, say
from nanovllm_teach.step_workloads import CACHED_UNDER_BUDGET, SMALL_BUDGET
from nanovllm_teach.trace.diff import DECISION_EVENTS

ORDER = 80  # the course's order (``nanovllm-teach exercises``): the model runner, after the block manager

NAMES = ("positions", "cu_seqlens_q", "cu_seqlens_k", "slot_mapping")

# What the check says, after "your prefill_layout " / "你的 prefill_layout " in the verdict.
NOT_FOUR_LISTS = Text(en="returned {value}: it must return four lists of ints (positions, cu_seqlens_q, "
                         "cu_seqlens_k, slot_mapping)",
                      zh="返回了 {value}：它必须返回四个由 int 组成的 list（positions、cu_seqlens_q、cu_seqlens_k、"
                         "slot_mapping）")
WRONG_LENGTH = Text(en="returned {name} with {got} entries for {seqs} sequences computing {tokens} new tokens: it "
                       "needs {want}",
                    zh="返回的 {name} 有 {got} 项，而这 {seqs} 个序列共计算 {tokens} 个新 token：它需要 {want} 项")
SLOT_OUTSIDE = Text(en="put a token's K/V in slot {slot}, outside every block the batch holds (blocks {blocks} of "
                       "{size} slots)",
                    zh="把一个 token 的 K/V 放进了槽位 {slot}，它不在这个 batch 持有的任何块中（块 {blocks}，每块 "
                       "{size} 个槽位）")


def _check_layout(args: tuple[Any, ...], result: Any) -> str | None:
    num_cached, num_new, tables, block_size = args
    if not isinstance(result, (list, tuple)) or len(result) != 4 or not all(
            isinstance(part, list) and all(is_int(v) for v in part) for part in result):
        return say(NOT_FOUR_LISTS, value=repr(result)[:200])
    tokens, seqs = sum(num_new), len(num_new)
    stored = sum(new for new, table in zip(num_new, tables) if table)
    for name, part, want in zip(NAMES, result, (tokens, seqs + 1, seqs + 1, stored)):
        if len(part) != want:
            return say(WRONG_LENGTH, name=name, got=len(part), seqs=seqs, tokens=tokens, want=want)
    held = sorted({block for table in tables for block in table})
    for slot in result[3]:
        if slot < 0 or slot // block_size not in held:
            return say(SLOT_OUTSIDE, slot=slot, blocks=held, size=block_size)
    return None


TITLE = Text(en="Laying out a prefill batch: positions, cu_seqlens and the slot mapping",
             zh="安排预填充 batch：位置、cu_seqlens 与槽位映射")
# Hints from the gentlest to the strongest; none of them is the code.
HINTS = (
    Text(en="Walk the sequences in order. Where does each one's first new token sit in its sequence, given what "
            "is cached? Which of the two cumulative sums counts the cached tokens, and why? And which slot holds "
            "position p, given its block table?",
         zh="按顺序遍历各个序列。已缓存的 token 考虑在内，每个序列的第一个新 token 在序列中的哪个位置？两个累加和中"
            "哪一个要算上已缓存的 token，为什么？给定块表，位置 p 在哪个槽位？"),
    Text(en="For each sequence: start = num_cached_tokens[i], end = start + num_new_tokens[i]; positions get "
            "range(start, end); cu_seqlens_q grows by the new tokens, cu_seqlens_k by end (all its tokens); "
            "if its block table is not empty, each p in range(start, end) goes to slot "
            "table[p // block_size] * block_size + p % block_size.",
         zh="对每个序列：start = num_cached_tokens[i]，end = start + num_new_tokens[i]；positions 追加 "
            "range(start, end)；cu_seqlens_q 增加新 token 的个数，cu_seqlens_k 增加 end（它的全部 token）；"
            "块表不为空时，range(start, end) 中的每个 p 存到槽位 "
            "table[p // block_size] * block_size + p % block_size。"),
)


EXERCISE = EngineExercise(
    "prepare_prefill", TITLE, "prefill_layout.prefill_layout (ModelRunner.prepare_prefill)",
    ("prefill_layout",),
    HINTS,
    (Piece("prefill_layout", "nanovllm_teach.engine.prefill_layout:prefill_layout", _check_layout,
           wire=("list[int]", "list[int]", "list[list[int]]", "int"),
           same_answer=("nanovllm_teach.utils.kv_slots:token_slot",)),),
    (CACHED_UNDER_BUDGET, SMALL_BUDGET),
    ("PREPARE_PREFILL_TENSORS",) + DECISION_EVENTS)
