"""The events of scheduling and the KV cache's blocks (the resources layer): the batch chosen for prefill or
decode, the prefix-cache hits, the blocks allocated and freed, preemptions, and each sequence's state changes.

Part of the event contract (``events.py`` gathers these records into ``PAYLOADS``); torch-free, msgspec only.
The scheduler and the block manager return their decisions as records and the engine writes these events,
so each is the Scheduler's or the BlockManager's (``actor``) though the LLMEngine emits it.
"""

from typing import Literal

import msgspec
from msgspec import UNSET, UnsetType

from nanovllm_teach.i18n import Text, say
from nanovllm_teach.trace.payload import Count, Field, Ids, Payload, show

SeqStatus = Literal["WAITING", "RUNNING", "FINISHED"]

_QUEUES = "queue length after scheduling"


class SchedulePrefill(Payload, kw_only=True):
    actor = "Scheduler"
    changes_state = decision = True
    told_by = frozenset({"seq_ids", "num_scheduled_tokens"})

    seq_ids: Field(Ids, "the batch, in order")
    num_scheduled_tokens: Field(Ids, "prompt tokens each computes this step", unit="tokens")
    chunked: Field(list[bool], "whether each computes only a chunk of its prompt and continues next step")
    num_batched_tokens: Field(Count, "tokens computed this step", unit="tokens")
    scheduled: Field(Count, "batch size", unit="seqs")
    waiting_len: Field(Count, f"waiting {_QUEUES}", unit="seqs")
    running_len: Field(Count, f"running {_QUEUES}", unit="seqs")

    done = Text(en="scheduled seqs {seq_ids} for prefill ({num_scheduled_tokens} tokens)",
                zh="把序列 {seq_ids} 调度去预填充（各算 {num_scheduled_tokens} 个 token）")


class ScheduleDecode(Payload, kw_only=True):
    actor = "Scheduler"
    changes_state = decision = True
    told_by = frozenset({"seq_ids"})

    seq_ids: Field(Ids, "the batch, in order")
    num_batched_tokens: Field(Count, "tokens computed this step (one per sequence)", unit="tokens")
    scheduled: Field(Count, "batch size", unit="seqs")
    decode_step_index: Field(Count, "decode steps before this one", unit="steps")
    waiting_len: Field(Count, f"waiting {_QUEUES}", unit="seqs")
    running_len: Field(Count, f"running {_QUEUES}", unit="seqs")

    done = Text(en="scheduled seqs {seq_ids} for decode", zh="把序列 {seq_ids} 调度去解码")


class PrefixCacheHit(Payload, kw_only=True):
    actor = "BlockManager"
    changes_state = decision = acts_on_sequence = True
    told_by = frozenset({"seq_id", "block_ids", "num_cached_blocks", "num_cached_tokens"})

    seq_id: Field(Count, "the admitted sequence")
    num_cached_blocks: Field(Count, "prompt blocks found by their hash", unit="blocks")
    num_cached_tokens: Field(Count, "prompt tokens whose K/V need no computing", unit="tokens")
    block_ids: Field(Ids, "the reused blocks")

    done = Text(en="reused the cached blocks {block_ids} for seq {seq_id} ({num_cached_tokens} tokens)",
                zh="为序列 {seq_id} 复用了已缓存的块 {block_ids}（{num_cached_tokens} 个 token）")


class BlockAllocate(Payload, kw_only=True):
    actor = "BlockManager"
    changes_state = decision = acts_on_sequence = True
    told_by = frozenset({"seq_id", "block_ids", "shared_block_ids"})

    seq_id: Field(Count, "the sequence given the blocks")
    block_ids: Field(Ids, "fresh blocks taken from the free list")
    shared_block_ids: Field(Ids, "cached prefix blocks it now shares (one more holder each)") = []
    num_free_blocks: Field(Count, "free blocks after", unit="blocks")

    done = Text(en="allocated blocks {block_ids} to seq {seq_id}", zh="为序列 {seq_id} 分配了块 {block_ids}")
    done_sharing = Text(en="allocated blocks {block_ids} to seq {seq_id} (and shared the cached blocks "
                           "{shared_block_ids})",
                        zh="为序列 {seq_id} 分配了块 {block_ids}（并共享了已缓存的块 {shared_block_ids}）")

    def did(self, reason: str, lang: str | None = None) -> str:
        return say(self.done_sharing if self.shared_block_ids else self.done, lang, seq_id=self.seq_id,
                   block_ids=show(self.block_ids), shared_block_ids=show(self.shared_block_ids))


class BlockFree(Payload, kw_only=True):
    actor = "BlockManager"
    changes_state = decision = acts_on_sequence = True
    told_by = frozenset({"seq_id", "block_ids", "reason"})

    seq_id: Field(Count, "the sequence giving its blocks back")
    block_ids: Field(Ids, "its whole block table")
    freed_block_ids: Field(Ids, "the blocks no sequence holds any more (now free)")
    num_free_blocks: Field(Count, "free blocks after", unit="blocks")

    done = Text(en="freed the blocks {block_ids} of seq {seq_id}", zh="释放了序列 {seq_id} 的块 {block_ids}")
    done_preempting = Text(en="preempted seq {seq_id} (freeing blocks {block_ids})",
                           zh="抢占了序列 {seq_id}（释放块 {block_ids}）")

    def did(self, reason: str, lang: str | None = None) -> str:
        return say(self.done_preempting if reason == "preempted" else self.done, lang, seq_id=self.seq_id,
                   block_ids=show(self.block_ids))


class Preempt(Payload, kw_only=True):
    actor = "Scheduler"
    changes_state = decision = acts_on_sequence = True
    shown_from = "quiet"
    told_by = frozenset({"seq_id"})

    seq_id: Field(Count, "the preempted sequence (recomputed later)")
    freed_blocks: Field(Count, "blocks it gave back", unit="blocks")
    needed_by: Field(Count, "the sequence that needed a block")
    num_tokens: Field(Count, "its length when preempted", unit="tokens")
    num_free_blocks: Field(Count, "free blocks after", unit="blocks")

    done = Text(en="preempted seq {seq_id}", zh="抢占了序列 {seq_id}")


class StateTransition(Payload, kw_only=True):
    actor = "Scheduler"
    changes_state = decision = acts_on_sequence = True
    shown_from = "quiet"
    told_by = frozenset({"seq_id", "from", "to"})

    seq_id: Field(Count, "the sequence")
    from_: Field(SeqStatus, "state before") = msgspec.field(name="from")
    to: Field(SeqStatus, "state after")
    num_completion_tokens: Field(Count, "tokens generated so far", unit="tokens")
    max_tokens: Field(Count, "most completion tokens", unit="tokens")
    token_id: Field(int | UnsetType, "the last sampled token (finishing only)") = UNSET
    finish_reason: Field(str | UnsetType, "eos, length, max_model_len, stop (one of the request's stop strings "
                         "or stop token ids) or aborted (finishing only)") = UNSET

    done = Text(en="moved seq {seq_id} from {from_} to {to}", zh="把序列 {seq_id} 从 {from_} 转到 {to}")
