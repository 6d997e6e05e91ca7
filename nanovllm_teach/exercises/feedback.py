"""Feedback that teaches without giving the answer: the sequence behind the first differing decision.

Role: grading (the parent, after the verdict's first difference is found). Emits no events.

``seq_context(divergence, reference)`` says what the sequence concerned looked like at that moment, rebuilt
from the reference trace alone (``trace.state.walk`` up to the differing event): how many tokens it had,
in how many blocks of how many tokens, which blocks. For a wrong slot mapping it names the first sequence
of the batch whose slot differs, its length and block table as the model runner saw them, and the two
slots; for a replayed CUDA graph, the size of the batch. The values, never the formula: the learner works
out from them why the reference did what it did.
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
SLOT_OF = Text(en="seq {seq} (number {position} in the decode batch) had {tokens} tokens and the block table "
                  "{blocks}, with blocks of {size} tokens: you stored its newest token's K/V in slot {yours}, the "
                  "reference in slot {reference}",
               zh="序列 {seq}（解码 batch 中的第 {position} 条）有 {tokens} 个 token，块表为 "
                  "{blocks}，每块 {size} 个 token：你把它最新 token 的 K/V 存进了槽位 {yours}，参考实现存进了槽位 "
                  "{reference}")

BATCH_OF = Text(en="that step's decode batch had {count} sequences", zh="那一步的解码 batch 有 {count} 条序列")


def _stats(event: Any) -> dict[str, Any]:
    stats = getattr(event, "stats", None)
    if stats is None:
        return {}
    if isinstance(stats, dict):
        return stats
    return {name: getattr(stats, name) for name in getattr(stats, "__struct_fields__", ())}


def _state_before(reference: Trace, event_i: int, step: int | None) -> tuple[EngineState, list[int]]:
    """The reference's state at the start of ``step`` (None: just before its event number ``event_i``), and
    the seq ids of the last batch scheduled before that event."""
    settings = read_settings(reference.header, reference.events)
    state = EngineState(settings.block_size, settings.enable_prefix_caching)
    batch: list[int] = []
    for event, now in walk((e for e in reference.events if e.i < event_i), settings):
        if step is not None and event.step is not None and event.step >= step:
            if event.event in ("SCHEDULE_DECODE", "SCHEDULE_PREFILL"):
                batch = list(_stats(event).get("seq_ids") or [])
            continue
        state = now
        if event.event in ("SCHEDULE_DECODE", "SCHEDULE_PREFILL"):
            batch = list(_stats(event).get("seq_ids") or [])
    return state, batch


def _slot_context(divergence: Divergence, reference: Trace, size: int, batch: list[int]) -> str | None:
    mine, ref = _stats(divergence.yours), _stats(divergence.reference)
    slots, reference_slots = mine.get("slot_mapping"), ref.get("slot_mapping")
    if not isinstance(slots, list) or not isinstance(reference_slots, list):
        return None
    k = next((k for k, (a, b) in enumerate(zip(slots, reference_slots)) if a != b), None)
    lengths, tables = ref.get("context_lens") or [], ref.get("block_tables") or []
    if k is None or k >= len(lengths) or k >= len(tables):
        return None
    blocks = [b for b in tables[k] if b != -1]
    return say(SLOT_OF, seq=batch[k] if k < len(batch) else "?", position=k + 1, tokens=lengths[k], blocks=blocks,
               size=size, yours=slots[k], reference=reference_slots[k])


def seq_context(divergence: Divergence, reference: Trace) -> str | None:
    """The sentence on the sequence behind ``divergence`` (None when there is no sequence to speak of)."""
    if divergence.index is None or divergence.reference is None:
        return None
    if divergence.event == "PREPARE_DECODE_TENSORS":
        state, batch = _state_before(reference, divergence.reference.i, None)
        return _slot_context(divergence, reference, state.block_size, batch)
    state, _ = _state_before(reference, divergence.reference.i, divergence.reference.step)
    if divergence.event == "CUDAGRAPH_REPLAY" and isinstance(_stats(divergence.reference).get("batch_size"), int):
        return say(BATCH_OF, count=_stats(divergence.reference)["batch_size"])
    seq = _stats(divergence.reference).get("seq_id")
    if seq is None and divergence.yours is not None:
        seq = _stats(divergence.yours).get("seq_id")
    if not isinstance(seq, int) or seq not in state.tables:
        return None
    blocks = state.tables[seq]
    return say(SEQ_HAD, step=divergence.reference.step, seq=seq, tokens=state.computed.get(seq, 0),
               count=len(blocks), size=state.block_size, blocks=blocks)
