"""Exercise ``block_hash``: the chained prefix-cache hash.

Beside this definition: ``template.py`` to start from, ``solution.py`` the reference.
"""

from __future__ import annotations

from typing import Any

from nanovllm_teach.engine.block_manager import NO_HASH
from nanovllm_teach.exercises.engine_grading import EngineExercise, Piece
from nanovllm_teach.exercises.worker import is_int
from nanovllm_teach.i18n import Text, say
from nanovllm_teach.step_workloads import SHARED_PREFIXES, TIGHT_CACHE

ORDER = 70  # the course's order (``nanovllm-teach exercises``): after allocate, whose prefix cache it names


# What the check says, after "your compute_block_hash " / "你的 compute_block_hash " in the verdict.
NOT_AN_INT = Text(en="returned {type} {value!r}: a block hash must be an int",
                  zh="返回了 {type} {value!r}：块的哈希必须是 int")
RESERVED = Text(en="returned {value}, which the block manager reserves for 'no hash' (NO_HASH)",
                zh="返回了 {value}，而块管理器把这个值留作“没有哈希”的标记（NO_HASH）")


def _check_hash(args: tuple[Any, ...], result: Any) -> str | None:
    if not is_int(result):
        return say(NOT_AN_INT, type=type(result).__name__, value=result)
    if result == NO_HASH:
        return say(RESERVED, value=result)
    return None


TITLE = Text(en='The prefix-cache hash chain',
             zh='前缀缓存的哈希链')
# Hints from the gentlest to the strongest; none of them is the code.
HINTS = (
    Text(en=('Equal tokens after different prefixes hold different K/V. What must go into the hash '
             "besides this block's tokens?"),
         zh=('同样的 token 跟在不同的前缀后面，存的是不同的 K/V。除了这个块自己的 token，'
             '哈希里还必须放进什么？')),
    Text(en=("Feed the hasher the previous block's hash first (as 8 bytes, unless it is NO_HASH), "
             "then the token ids as bytes (array('q', token_ids).tobytes()); return h.intdigest()."),
         zh=('先把上一个块的哈希喂给哈希器（8 个字节，除非它是 NO_HASH），再喂 token id '
             "的字节（array('q', token_ids).tobytes()）；返回 h.intdigest()。")),
)


EXERCISE = EngineExercise(
    "block_hash", TITLE, "block_manager.compute_block_hash",
    ("compute_block_hash",),
    HINTS,
    (Piece("compute_block_hash", "nanovllm_teach.engine.block_manager:compute_block_hash", _check_hash,
           wire=("list[int]", "int")),),
    (SHARED_PREFIXES, TIGHT_CACHE))
