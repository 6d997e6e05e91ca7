"""Reference solution of ``postprocess``: taking in one step's sampled tokens."""

from __future__ import annotations

from nanovllm_teach.engine.batch import ScheduledBatch
from nanovllm_teach.engine.decisions import Decision
from nanovllm_teach.engine.scheduler import Scheduler


def postprocess(scheduler: Scheduler, batch: ScheduledBatch, token_ids: list[int]) -> list[Decision]:
    bm = scheduler.block_manager
    decisions: list[Decision] = []  # what finish decided: the engine reports it
    seqs = [scheduler.accepted[entry.seq_id] for entry in batch.seqs]
    for seq, token_id in zip(seqs, token_ids):
        bm.hash_blocks(seq)  # reads num_scheduled_tokens: before the counts change
        seq.num_cached_tokens += seq.num_scheduled_tokens
        seq.num_scheduled_tokens = 0
        if seq.num_cached_tokens < seq.num_tokens:
            continue  # a chunk of the prompt
        seq.append_token(token_id)
        # The order matters: an ignore_eos request that samples EOS on its last allowed token ends on length.
        if not seq.ignore_eos and token_id == scheduler.eos:
            decisions += scheduler.finish(seq, "eos")
        elif seq.num_completion_tokens == seq.max_tokens:
            decisions += scheduler.finish(seq, "length")
        elif seq.num_tokens >= scheduler.max_model_len:
            decisions += scheduler.finish(seq, "max_model_len")
    return decisions
