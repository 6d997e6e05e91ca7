"""The hand-off from the resources layer to the execution layer: ``ScheduledBatch``, what one step computes.

The scheduler decides; the model runner computes. Between them passes this record and nothing else: for
each sequence of the step, the tokens to compute, where they sit in the sequence, the KV blocks it holds
and how to sample its next token. No live ``Sequence`` crosses the edge, so the execution layer cannot
read (or change) scheduling state, and the record means the same on every tensor-parallel rank: the
workers receive it as JSON (``encode``/``decode``), the very object rank 0 runs.

Positions are absolute: ``token_ids[0]`` is the sequence's token number ``num_cached_tokens`` (from 0);
the K/V of every token before it is already in the cache, in ``block_table``'s blocks. A prefill entry
computes a prompt (or part of it, a *chunk*, when ``context_len < num_tokens``: its sampled token is
dropped); a decode entry computes exactly one token, the newest.

Pure Python (msgspec records), no torch. Emits no events.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

if TYPE_CHECKING:
    from nanovllm_teach.engine.sequence import Sequence


# gc=False (msgspec): the cyclic garbage collector does not track these. One is built per sequence per step
# (512 at saturation), and each tracked allocation brings the next collection nearer: untracked, a saturated
# simulation runs half the collections (benchmarks/bench_step_overhead.py). It holds only numbers and lists
# of numbers, so it can never be part of a reference cycle, which is what gc=False asks.
class ScheduledSeq(msgspec.Struct, frozen=True, gc=False):
    """One sequence's share of a step."""

    seq_id: int
    token_ids: list[int]  # the tokens this step computes
    num_cached_tokens: int  # tokens before them whose K/V is already cached: token_ids[0]'s position
    num_tokens: int  # the sequence's whole length now (prompt and completion so far)
    block_table: list[int]  # the KV blocks it holds, in order (empty in the warm-up, which stores nothing)
    temperature: float
    seed: int | None
    top_k: int = 0  # the filters (``SamplingParams``); the defaults filter nothing
    top_p: float = 1.0
    min_p: float = 0.0
    logprobs: int | None = None  # how many top log-probabilities to return (None: none)

    @property
    def context_len(self) -> int:
        """Tokens the step's attention covers: the cached ones and this step's."""
        return self.num_cached_tokens + len(self.token_ids)

    @property
    def is_prompt_chunk(self) -> bool:
        """Whether the step stops short of the sequence's end (its sampled token means nothing)."""
        return self.context_len < self.num_tokens


class ScheduledBatch(msgspec.Struct, frozen=True):
    """One step: a prefill or a decode of ``seqs``, in the scheduler's order."""

    is_prefill: bool
    seqs: list[ScheduledSeq]

    @classmethod
    def of(cls, seqs: list[Sequence], is_prefill: bool) -> ScheduledBatch:
        """The batch of ``seqs`` as the scheduler has just scheduled them (``num_scheduled_tokens`` each)."""
        return cls(is_prefill, [ScheduledSeq(
            seq.seq_id, seq.token_ids[seq.num_cached_tokens:seq.num_cached_tokens + seq.num_scheduled_tokens],
            seq.num_cached_tokens, seq.num_tokens, list(seq.block_table), seq.temperature, seq.seed,
            seq.top_k, seq.top_p, seq.min_p, seq.num_logprobs)
            for seq in seqs])

    @property
    def seq_ids(self) -> list[int]:
        return [s.seq_id for s in self.seqs]

    @property
    def num_batched_tokens(self) -> int:
        """The tokens the model computes this step."""
        return sum(len(s.token_ids) for s in self.seqs)

    def encode(self) -> bytes:
        return msgspec.json.encode(self)

    @classmethod
    def decode(cls, data: bytes) -> ScheduledBatch:
        return msgspec.json.decode(data, type=cls)


def warmup_batch(max_model_len: int, max_num_batched_tokens: int, max_num_seqs: int) -> tuple[int, int]:
    """The largest prefill step the scheduler can form, ``(num_seqs, seq_len)``: the model runner's warm-up
    runs it (and the simulated runner predicts it). A step holds at most ``max_num_batched_tokens`` tokens,
    a longer prompt being prefilled in chunks, so: as many whole sequences of ``max_model_len`` tokens as
    fit, or one of ``max_num_batched_tokens`` when that is less (a CPU's defaults, 2048 against 4096)."""
    seq_len = min(max_model_len, max_num_batched_tokens)
    return max(1, min(max_num_batched_tokens // seq_len, max_num_seqs)), seq_len
