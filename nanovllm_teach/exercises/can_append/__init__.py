"""Exercise ``can_append``: can a sequence grow by one token, and its new block.

Beside this definition: ``template.py`` to start from, ``solution.py`` the reference.
"""

from __future__ import annotations

from typing import Any

from nanovllm_teach.exercises.engine_grading import EngineExercise, Piece
from nanovllm_teach.exercises.snapshots import StateWire
from nanovllm_teach.i18n import Text, say
from nanovllm_teach.step_workloads import LATE_ARRIVALS, TIGHT_CACHE

ORDER = 50  # the course's order (``nanovllm-teach exercises``): after admission's question


# What the check says, after "your can_append " / "你的 can_append " in the verdict.
NOT_A_BOOL = Text(en="returned {value!r}: it must return True or False",
                  zh="返回了 {value!r}：它必须返回 True 或 False")


def _check_bool(args: tuple[Any, ...], result: Any) -> str | None:
    return None if isinstance(result, bool) else say(NOT_A_BOOL, value=result)


TITLE = Text(en='Growing a sequence by one token: can_append / may_append',
             zh='序列增长一个 token：can_append / may_append')
# Hints from the gentlest to the strongest; none of them is the code.
HINTS = (
    Text(en=("Only the token that starts a new block needs a free block. What tells you that seq's "
             'tokens need more blocks than it holds?'),
         zh=('只有开启一个新块的那个 token 才需要一个空闲块。什么能告诉你，seq 的 token '
             '需要的块比它持有的多？')),
    Text(en=('Compare seq.num_blocks with len(seq.block_table). may_append does the same test, then '
             'takes a block with bm.take_free_block(), appends it and returns the Allocated record of '
             'it (None when no block was needed).'),
         zh=('比较 seq.num_blocks 和 len(seq.block_table)。may_append 做同样的判断，然后用 '
             'bm.take_free_block() 取一个块，追加到块表，并返回它的 Allocated 记录（不需要新块时返回 '
             'None）。')),
)


EXERCISE = EngineExercise(
    "can_append", TITLE, "BlockManager.can_append, may_append",
    ("can_append", "may_append"),
    HINTS,
    (Piece("can_append", "nanovllm_teach.engine.block_manager:BlockManager.can_append", _check_bool,
           state=StateWire("block_manager", ("seq",))),
     Piece("may_append", "nanovllm_teach.engine.block_manager:BlockManager.may_append",
           state=StateWire("block_manager", ("seq",)))),
    (TIGHT_CACHE, LATE_ARRIVALS))
