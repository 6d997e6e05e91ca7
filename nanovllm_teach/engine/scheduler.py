"""Resources layer: the ``Scheduler`` decides, every step, which sequences run and whether the step is a
prefill or a decode. This is where continuous batching happens. Pure Python, no torch.

``schedule()`` returns the step as a ``ScheduledBatch`` (``engine/batch.py``), plain data for the model
runner, with the decisions it took on the way; ``postprocess(batch, token_ids)`` takes the runner's answer
back and returns what it decided then:

1. Prefill first (``schedule_prefill``): admit sequences from the head of ``waiting`` while the token
   budget, the sequence cap and the free KV blocks allow; who is next is the policy's choice
   (``choose_next``). Only the queue head may be *chunked*: what does not fit waits for the next step.
2. Otherwise decode every running sequence one token (``schedule_decode``); when blocks run out, the newest
   arrivals give way (preemption by recompute: their blocks are freed, they wait to be prefilled again).
3. ``postprocess()`` appends each sampled token and finishes a sequence on EOS (unless ``ignore_eos``),
   ``max_tokens`` or ``max_model_len``, freeing its blocks.

Every decision besides the batch (blocks handed out and taken back, preemptions, finishes) is a plain
record (``engine/decisions.py``) that the method making it returns to its caller, in order, up to
``schedule()`` and ``postprocess()``. ``accepted`` holds every sequence added and not yet finished or
aborted. A ``static`` policy, for comparison, admits a batch together and lets nobody join until all of it
has finished.

Emits no events (the orchestration layer reports the batch and the decisions).
"""

from __future__ import annotations

from collections import deque

from nanovllm_teach.engine.batch import ScheduledBatch
from nanovllm_teach.engine.block_manager import BlockManager
from nanovllm_teach.engine.decisions import Allocated, Decision, Finished, Preempted
from nanovllm_teach.engine.sequence import Sequence, SequenceStatus
from nanovllm_teach.i18n import Text, say

# A learner's policy (the scheduling-policy exercise) returns what it returns: it is checked, not trusted.
BAD_CHOICE = Text(en="choose_next must return an index into the {count} waiting sequences, got {index!r}",
                  zh="choose_next 必须返回 {count} 个等待中序列之一的下标，收到的是 {index!r}")

def choose_next(waiting: deque[Sequence]) -> int:
    """Which waiting sequence is admitted next, as its index in ``waiting`` (which it must not change).

    First come, first served: the head, which is the oldest arrival, or a preempted sequence (put back at
    the head). The scheduling-policy exercise replaces this function; a policy may use anything a sequence
    knows (``seq_id`` grows with arrival order, ``num_tokens``, ``num_prompt_tokens``, ``num_preemptions``).
    """
    return 0


class Scheduler:
    def __init__(self, *, max_num_seqs: int, max_num_batched_tokens: int, max_model_len: int, eos: int,
                 num_kvcache_blocks: int, block_size: int, enable_prefix_caching: bool = True,
                 policy: str = "continuous") -> None:  # continuous or static, checked in settings.py
        self.max_num_seqs = max_num_seqs
        self.max_num_batched_tokens = max_num_batched_tokens
        self.max_model_len = max_model_len
        self.eos = eos
        self.policy = policy
        self.block_manager = BlockManager(num_kvcache_blocks, block_size, enable_prefix_caching)
        self.waiting: deque[Sequence] = deque()
        self.running: deque[Sequence] = deque()
        self.accepted: dict[int, Sequence] = {}

    def is_finished(self) -> bool:
        return not self.accepted

    def add(self, seq: Sequence) -> None:
        self.accepted[seq.seq_id] = seq
        self.waiting.append(seq)

    def schedule(self) -> tuple[ScheduledBatch, list[Decision]]:
        """This step's batch (a prefill if any waiting sequence can be admitted, else a decode) and the
        decisions taken to form it."""
        scheduled, decisions = self.schedule_prefill()
        if scheduled:
            return ScheduledBatch.of(scheduled, is_prefill=True), decisions
        scheduled, decode_decisions = self.schedule_decode()
        return ScheduledBatch.of(scheduled, is_prefill=False), decisions + decode_decisions

    def schedule_prefill(self) -> tuple[list[Sequence], list[Allocated]]:
        """The sequences this prefill computes, each with its ``num_scheduled_tokens`` (none: decode), and
        the blocks the newly admitted ones were given."""
        scheduled: list[Sequence] = []
        allocations: list[Allocated] = []
        max_seqs = self.admission_cap()
        num_batched_tokens = 0
        bm = self.block_manager
        while self.waiting and len(scheduled) < max_seqs:
            seq = self.next_waiting()
            remaining = self.max_num_batched_tokens - num_batched_tokens
            if remaining == 0:
                break
            if seq.block_table:  # the head's prompt is part-way through a chunked prefill
                num_cached_blocks = None
                num_tokens = seq.num_tokens - seq.num_cached_tokens
            else:
                num_cached_blocks = bm.can_allocate(seq)
                if num_cached_blocks == -1:
                    break
                num_tokens = seq.num_tokens - num_cached_blocks * bm.block_size
            if num_tokens > remaining and scheduled:
                break  # only the queue head may be chunked
            if num_cached_blocks is not None:
                allocations.append(bm.allocate(seq, num_cached_blocks))
            seq.num_scheduled_tokens = min(num_tokens, remaining)
            num_batched_tokens += seq.num_scheduled_tokens
            if seq.num_cached_tokens + seq.num_scheduled_tokens == seq.num_tokens:
                seq.status = SequenceStatus.RUNNING
                self.waiting.popleft()
                self.running.append(seq)
            scheduled.append(seq)
        return scheduled, allocations

    def admission_cap(self) -> int:
        """How many sequences this prefill may take: ``max_num_seqs``; under the static policy none while a
        batch is in flight (it drains before anyone joins), except its own chunked head."""
        if self.policy == "static" and self.running:
            return 1 if self.waiting and self.waiting[0].block_table else 0
        return self.max_num_seqs

    def next_waiting(self) -> Sequence:
        """The waiting sequence to consider next, moved to the head of ``waiting``: the policy's choice
        (``choose_next``), unless the head is a chunked prompt, which goes on first (its K/V is half-written)."""
        if not self.waiting[0].block_table:
            index = choose_next(self.waiting)
            if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(self.waiting):
                raise ValueError(say(BAD_CHOICE, count=len(self.waiting), index=index))
            if index:
                seq = self.waiting[index]
                del self.waiting[index]
                self.waiting.appendleft(seq)
        return self.waiting[0]

    def schedule_decode(self) -> tuple[list[Sequence], list[Decision]]:
        """The running sequences that decode one token each this step, preempting when blocks run out; and
        the decisions that took (preemptions with the blocks they gave back, new blocks)."""
        scheduled: list[Sequence] = []
        decisions: list[Decision] = []
        bm = self.block_manager
        while self.running and len(scheduled) < self.max_num_seqs:
            seq = self.running.popleft()
            while not bm.can_append(seq):
                if self.running:
                    decisions += self.preempt(self.running.pop(), needed_by=seq)
                else:
                    decisions += self.preempt(seq, needed_by=seq)
                    break
            else:
                seq.num_scheduled_tokens = 1
                allocated = bm.may_append(seq)
                if allocated is not None:
                    decisions.append(allocated)
                scheduled.append(seq)
        assert scheduled, "decode scheduled nothing: a request larger than the KV cache was admitted"
        self.running.extendleft(reversed(scheduled))
        return scheduled, decisions

    def preempt(self, seq: Sequence, needed_by: Sequence) -> list[Decision]:
        """Give ``seq``'s blocks to others; it will be prefilled again from its tokens (recompute). Returns
        the blocks it gave back and the preemption."""
        freed = self.block_manager.deallocate(seq)
        seq.num_preemptions += 1
        seq.status = SequenceStatus.WAITING
        self.waiting.appendleft(seq)
        return [freed, Preempted(seq.seq_id, needed_by.seq_id, seq.num_tokens)]

    def postprocess(self, batch: ScheduledBatch, token_ids: list[int]) -> list[Decision]:
        """Take the step's results in: new K/V is now cached, sampled tokens are appended, finished
        sequences leave and free their blocks. Returns the finishes, each with the blocks it gave back."""
        bm = self.block_manager
        decisions: list[Decision] = []
        seqs = [self.accepted[s.seq_id] for s in batch.seqs]
        for seq, token_id in zip(seqs, token_ids, strict=True):
            bm.hash_blocks(seq)
            seq.num_cached_tokens += seq.num_scheduled_tokens
            seq.num_scheduled_tokens = 0
            if seq.num_cached_tokens < seq.num_tokens:
                continue  # a chunk of the prompt: its sampled token is meaningless
            seq.append_token(token_id)
            if not seq.ignore_eos and token_id == self.eos:
                decisions += self.finish(seq, "eos")
            elif seq.num_completion_tokens == seq.max_tokens:
                decisions += self.finish(seq, "length")
            elif seq.num_tokens >= self.max_model_len:
                decisions += self.finish(seq, "max_model_len")
        return decisions

    def finish(self, seq: Sequence, reason: str) -> list[Decision]:
        """``seq`` is done (``reason``: eos, length, max_model_len or stop): it leaves the engine, its blocks
        go back. Returns the finish and the blocks it gave back."""
        seq.status, seq.finish_reason = SequenceStatus.FINISHED, reason
        del self.accepted[seq.seq_id]
        self.running.remove(seq)
        return [Finished(seq.seq_id, reason, seq.last_token), self.block_manager.deallocate(seq)]
