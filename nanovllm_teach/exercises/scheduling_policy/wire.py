"""What a scheduling policy sees of a waiting sequence, as it crosses into the sandbox (``Piece.wire`` names it).

Role: grading, the records both sides of the sandbox's edge share; the worker imports this module on the
grading copy of the package to rebuild the policy's argument. Emits no events.
"""

from __future__ import annotations

import msgspec


class WaitingSeq(msgspec.Struct, frozen=True):
    """The facts the template names of a waiting sequence, not the live ``Sequence``."""

    seq_id: int
    num_prompt_tokens: int
    num_tokens: int
    num_preemptions: int
