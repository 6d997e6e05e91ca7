"""Feedback that teaches without giving the answer: the sequence behind the first differing decision.

Role: grading (the parent, after the verdict's first difference is found). Emits no events.

``seq_context(divergence, reference)`` says what the sequence concerned looked like at that moment, rebuilt
from the reference trace alone (``state_before``: ``trace.state.walk`` up to the differing event): how many
tokens it had, in how many blocks of how many tokens, which blocks. The values, never the formula: the
learner works out from them why the reference did what it did. An exercise whose difference shows in an
event of its own (a slot mapping, a replayed graph) says it itself, in its folder (``EngineExercise.context``),
with ``stats`` and ``state_before``.
"""

from __future__ import annotations

from typing import Any

from nanovllm_teach.i18n import Text, say
from nanovllm_teach.trace.diff import Divergence
from nanovllm_teach.trace.reader import Trace
from nanovllm_teach.trace.state import EngineState, read_settings, walk

SEQ_HAD = Text(en="at the start of step {step}, seq {seq} had the K/V of {tokens} tokens cached in {count} blocks "
                  "of {size} ({blocks})",
               zh="在第 {step} 步开始时，序列 {seq} 已有 {tokens} 个 token 的 K/V 缓存在 {count} 个块中，每块 {size} 个 "
                  "token（{blocks}）")


def stats(event: Any) -> dict[str, Any]:
    """An event's numbers as a dict, whether it was read back from a file or recorded here."""
    numbers = getattr(event, "stats", None)
    if numbers is None:
        return {}
    if isinstance(numbers, dict):
        return numbers
    return {name: getattr(numbers, name) for name in getattr(numbers, "__struct_fields__", ())}


def state_before(reference: Trace, event_i: int, step: int | None) -> tuple[EngineState, list[int]]:
    """The reference's state at the start of ``step`` (None: just before its event number ``event_i``), and
    the seq ids of the last batch scheduled before that event."""
    settings = read_settings(reference.header, reference.events)
    state = EngineState(settings.block_size, settings.enable_prefix_caching)
    batch: list[int] = []
    for event, now in walk((e for e in reference.events if e.i < event_i), settings):
        if step is not None and event.step is not None and event.step >= step:
            if event.event in ("SCHEDULE_DECODE", "SCHEDULE_PREFILL"):
                batch = list(stats(event).get("seq_ids") or [])
            continue
        state = now
        if event.event in ("SCHEDULE_DECODE", "SCHEDULE_PREFILL"):
            batch = list(stats(event).get("seq_ids") or [])
    return state, batch


def seq_context(divergence: Divergence, reference: Trace) -> str | None:
    """The sentence on the sequence behind ``divergence`` (None when there is no sequence to speak of)."""
    if divergence.index is None or divergence.reference is None:
        return None
    state, _ = state_before(reference, divergence.reference.i, divergence.reference.step)
    seq = stats(divergence.reference).get("seq_id")
    if seq is None and divergence.yours is not None:
        seq = stats(divergence.yours).get("seq_id")
    if not isinstance(seq, int) or seq not in state.tables:
        return None
    blocks = state.tables[seq]
    return say(SEQ_HAD, step=divergence.reference.step, seq=seq, tokens=state.computed.get(seq, 0),
               count=len(blocks), size=state.block_size, blocks=blocks)
