"""The build-it-yourself track's chapters 6-10: the engine around the model (the KV cache, paging, the block
manager, the scheduler, the step loop).

Role: teaching (the track). Pure data; emits no events.

Chapter 6's contiguous cache has no counterpart in the engine, which pages its cache from the start: its
solutions are the track's own (``track/contiguous_cache.py``), and its check compares the learner's functions
with the engine's paged attention on the same keys and values. From chapter 7 on, every seam is the engine's.
"""

from __future__ import annotations

from nanovllm_teach.i18n import Text
from nanovllm_teach.track.seams import PACKAGE, Chapter, Seam

ENGINE_CHAPTERS: tuple[Chapter, ...] = (
    Chapter(6, "kvcache", Text(en="A contiguous KV cache and decode", zh="连续 KV 缓存与解码"),
            f"{PACKAGE}/layers/contiguous_cache.py", (
                Seam("nanovllm_teach.track.contiguous_cache:store_contiguous", Text(
                    en="k, v: (batch, kv_heads, head_dim), the new token of each sequence; k_cache, v_cache: "
                       "(batch, max_len, kv_heads, head_dim), row i is sequence i's cache; positions: (batch,) "
                       "int64. Write k[i] and v[i] at position positions[i] of row i, in place. Return None.",
                    zh="k、v：(batch, kv_heads, head_dim)，每条序列的新 token；k_cache、v_cache：(batch, max_len, "
                       "kv_heads, head_dim)，第 i 行是第 i 条序列的缓存；positions：(batch,) 的 int64。把 k[i]、v[i] "
                       "原地写到第 i 行的第 positions[i] 个位置。返回 None。")),
                Seam("nanovllm_teach.track.contiguous_cache:decode_contiguous", Text(
                    en="q: (batch, heads, head_dim), one new token per sequence, whose K/V is already stored; the "
                       "caches as above; context_lens: (batch,) int32, how many positions of row i are written, "
                       "the new token's included. Each query attends (softmax(q k^T * scale) v, GQA as in chapter "
                       "3) over positions 0..context_lens[i] - 1 of its own row: every key its sequence wrote, "
                       "and not the unused rest of the row. Return (batch, heads, head_dim).",
                    zh="q：(batch, heads, head_dim)，每条序列一个新 token，它的 K/V 已经存好；缓存同上；context_lens："
                       "(batch,) 的 int32，第 i 行已写了多少个位置（包括新 token）。每个查询在自己那一行的第 0.."
                       "context_lens[i] - 1 个位置上做注意力（softmax(q k^T * scale) v，GQA 同第 3 章）：这条序列写过"
                       "的每一个键都要读，行里没用到的部分不读。返回 (batch, heads, head_dim)。")),
            ), notebook="21_build_kv_cache", checked_beside=True),
    Chapter(7, "paged", Text(en="The paged KV cache", zh="分页 KV 缓存"),
            f"{PACKAGE}/layers/paged_attention.py", (
                Seam("nanovllm_teach.layers.attention_torch:TorchAttentionBackend.store_kvcache", Text(
                    en="k, v: (tokens, kv_heads, head_dim), the step's new rows; k_cache, v_cache: (num_blocks, "
                       "block_size, kv_heads, head_dim); slot_mapping: (tokens,) int64. Token t's rows go to slot "
                       "slot_mapping[t], which is offset slot % block_size of block slot // block_size; a slot "
                       "of -1 (a token whose K/V is cached already) writes nothing. In place; return None.",
                    zh="k、v：(tokens, kv_heads, head_dim)，本 step 新算出的行；k_cache、v_cache：(num_blocks, "
                       "block_size, kv_heads, head_dim)；slot_mapping：(tokens,) 的 int64。第 t 个 token 的行写到槽位 "
                       "slot_mapping[t]，即第 slot // block_size 个块的第 slot % block_size 个位置；槽位为 -1（K/V "
                       "已经缓存的 token）时什么也不写。原地写入；返回 None。")),
                Seam("nanovllm_teach.layers.attention_torch:TorchAttentionBackend.decode", Text(
                    en="q: (batch, heads, head_dim), one query per sequence; k_cache, v_cache as above; "
                       "ctx.context_lens: (batch,) int32, how many keys sequence i has; ctx.block_tables: (batch, "
                       "width) int32, its blocks in order, -1 past its last. Key j of sequence i lies in block "
                       "block_tables[i, j // block_size] at offset j % block_size. Attend over all its keys "
                       "(GQA as in chapter 3). Return (batch, heads, head_dim).",
                    zh="q：(batch, heads, head_dim)，每条序列一个查询；k_cache、v_cache 同上；ctx.context_lens：(batch,) "
                       "的 int32，第 i 条序列有多少个键；ctx.block_tables：(batch, width) 的 int32，按顺序列出它的块，"
                       "最后一块之后是 -1。第 i 条序列的第 j 个键在第 block_tables[i, j // block_size] 个块的第 "
                       "j % block_size 个位置。在它所有的键上做注意力（GQA 同第 3 章）。返回 (batch, heads, head_dim)。")),
            ), notebook="22_build_paged_cache", checked_beside=True),
    Chapter(8, "blocks", Text(en="The block manager: prefix hashing and reference counts",
                              zh="块管理器（block manager）：前缀哈希与引用计数"),
            f"{PACKAGE}/engine/block_manager.py", (
                Seam("nanovllm_teach.engine.block_manager:compute_block_hash", Text(
                    en="The chained hash of one full block: xxhash.xxh64 over the previous block's hash as 8 "
                       "little-endian bytes (left out when prefix_hash is NO_HASH, the first block), then the "
                       "token ids as int64 (array('q', token_ids).tobytes()). Return its intdigest().",
                    zh="一个满块的链式哈希：用 xxhash.xxh64 先哈希前一个块的哈希值（8 个小端字节；prefix_hash 为 NO_HASH，"
                       "即第一个块时省略），再哈希这些 token id 的 int64 字节（array('q', token_ids).tobytes()）。返回它的 "
                       "intdigest()。")),
                Seam("nanovllm_teach.engine.block_manager:BlockManager._cached_prefix", Text(
                    en="The ids of the blocks that already hold seq's leading full blocks: with prefix caching on, "
                       "hash block i of seq (seq.block(i)) chained on block i - 1's hash, look it up in "
                       "self.hash_to_block_id, stop at the first miss or at a block whose token_ids differ (a "
                       "collision). Never the block of the last token: (seq.num_tokens - 1) // block_size blocks "
                       "at most, so that one position is computed and gives logits.",
                    zh="已经存有 seq 开头那些满块的块 id：开启前缀缓存时，把 seq 的第 i 块（seq.block(i)）接在第 i - 1 块的"
                       "哈希之后算哈希，在 self.hash_to_block_id 里查找，遇到第一个查不到的块、或 token_ids 不同的块（哈希"
                       "碰撞）就停。最后一个 token 所在的块永远不算：最多 (seq.num_tokens - 1) // block_size 块，这样至少"
                       "要计算一个位置，才有 logits。")),
                Seam("nanovllm_teach.engine.block_manager:BlockManager.can_allocate", Text(
                    en="How many leading blocks of seq are cached (0 or more) if seq fits in the free blocks now, "
                       "else -1. A cached block nobody holds (ref_count 0) still has to leave the free list.",
                    zh="如果 seq 现在能放进空闲块，返回它开头有多少块已缓存（0 或更多），否则返回 -1。没有持有者"
                       "（ref_count 为 0）的已缓存块也仍要从空闲列表中取出。")),
                Seam("nanovllm_teach.engine.block_manager:BlockManager.allocate", Text(
                    en="Fill seq.block_table: its first num_cached_blocks cached blocks shared (ref_count + 1; "
                       "one nobody held leaves the free list), the rest fresh from self.take_free_block(). Set "
                       "seq.num_cached_tokens. Return Allocated(seq_id, fresh ids, shared ids, num_cached_tokens, "
                       "free blocks after).",
                    zh="填写 seq.block_table：前 num_cached_blocks 个已缓存的块共享（ref_count 加一；原本没人持有的块要"
                       "离开空闲列表），其余用 self.take_free_block() 取新块。设置 seq.num_cached_tokens。返回 "
                       "Allocated(seq_id, 新块 id, 共享块 id, num_cached_tokens, 之后的空闲块数)。")),
                Seam("nanovllm_teach.engine.block_manager:BlockManager.deallocate", Text(
                    en="seq lets go of its blocks (seq.block_table replaced by a new empty list first, never "
                       "cleared in place: the step's checkpoint keeps the old list), last block first: each "
                       "ref_count - 1, and a block nobody holds any more goes to the end of the free list, its "
                       "hash kept. Return Freed(seq_id, its whole block table, the freed ids, free blocks after).",
                    zh="seq 放下它的块（先把 seq.block_table 换成一个新的空列表，不要原地清空：这一步的检查点还留着"
                       "旧列表），从最后一块开始：每块 ref_count 减一，没人再持有的块放到空闲列表末尾，保留它的哈希。"
                       "返回 Freed(seq_id, 它整个块表, 被释放的块 id, 之后的空闲块数)。")),
                Seam("nanovllm_teach.engine.block_manager:BlockManager.may_append", Text(
                    en="Before a decode step: when seq's newest token starts a new block (seq.num_blocks > "
                       "len(seq.block_table)), append a fresh block and return Allocated(seq_id, [it], [], 0, free "
                       "blocks after); else None.",
                    zh="解码 step 之前：如果 seq 最新的 token 开始了一个新块（seq.num_blocks > len(seq.block_table)），"
                       "追加一个新块并返回 Allocated(seq_id, [它], [], 0, 之后的空闲块数)；否则返回 None。")),
                Seam("nanovllm_teach.engine.block_manager:BlockManager.hash_blocks", Text(
                    en="After a step computed seq.num_scheduled_tokens more K/V rows after its num_cached_tokens: "
                       "name every block that just became full (with prefix caching on) by its chained hash, keep "
                       "its token_ids and enter it in self.hash_to_block_id; a block already named stays as it is.",
                    zh="一个 step 在 seq 的 num_cached_tokens 之后又算了 seq.num_scheduled_tokens 行 K/V 之后：（开启前缀"
                       "缓存时）给每个刚刚填满的块按链式哈希命名，记下它的 token_ids，并登记到 self.hash_to_block_id；"
                       "已经命名的块保持不变。")),
            ), notebook="23_build_block_manager", checked_beside=True),
    Chapter(9, "scheduler", Text(en="The scheduler: prefill first, chunked prefill, preemption",
                                 zh="调度器（scheduler）：预填充优先、分块预填充与抢占"),
            f"{PACKAGE}/engine/scheduler.py", (
                Seam("nanovllm_teach.engine.scheduler:Scheduler.schedule_prefill", Text(
                    en="Admit from the head of self.waiting (self.next_waiting()) while the token budget "
                       "(max_num_batched_tokens), self.admission_cap() sequences and the free blocks allow; a "
                       "sequence's uncached tokens count. Only the queue head may be chunked: it takes what is left "
                       "of the budget; anyone else that does not fit waits. A sequence whose whole prompt is now "
                       "scheduled becomes RUNNING and moves to self.running. Set num_scheduled_tokens. Return (the "
                       "scheduled sequences, the Allocated records).",
                    zh="从 self.waiting 的队头（self.next_waiting()）开始接纳序列，只要 token 预算（max_num_batched_tokens）、"
                       "self.admission_cap() 条序列和空闲块都还允许；计入的是序列未缓存的 token。只有队头可以分块：它拿走"
                       "预算剩下的部分；其他放不下的序列等待。整个 prompt 都已排上的序列变为 RUNNING 并移入 self.running。"
                       "设置 num_scheduled_tokens。返回 (排上的序列, Allocated 记录)。")),
                Seam("nanovllm_teach.engine.scheduler:Scheduler.schedule_decode", Text(
                    en="Every running sequence, in order, up to max_num_seqs, decodes one token "
                       "(num_scheduled_tokens = 1, a new block through may_append when it needs one). When blocks "
                       "run out, preempt the newest running sequence (the end of self.running), or the sequence "
                       "itself when it is the only one left. The scheduled go back to the front of self.running in "
                       "order. Return (the scheduled, the decisions in order).",
                    zh="每条运行中的序列按顺序（最多 max_num_seqs 条）解码一个 token（num_scheduled_tokens = 1，需要新块时"
                       "通过 may_append 取）。块不够时抢占最新的运行中序列（self.running 的末尾），只剩它自己时就抢占它"
                       "自己。排上的序列按原顺序放回 self.running 的前面。返回 (排上的序列, 依次做出的决策)。")),
                Seam("nanovllm_teach.engine.scheduler:Scheduler.preempt", Text(
                    en="Preemption by recompute: seq's blocks go back (deallocate), num_preemptions + 1, it waits "
                       "again at the head of self.waiting. Return [the Freed record, Preempted(seq_id, "
                       "needed_by's seq_id, seq.num_tokens)].",
                    zh="以重计算（recompute）实现的抢占：seq 的块归还（deallocate），num_preemptions 加一，它回到 self.waiting 的队头重新"
                       "等待。返回 [Freed 记录, Preempted(seq_id, needed_by 的 seq_id, seq.num_tokens)]。")),
                Seam("nanovllm_teach.engine.scheduler:Scheduler.postprocess", Text(
                    en="For each sequence of the batch with its sampled token: hash its newly full blocks, count its "
                       "scheduled tokens as cached; a chunk of a prompt stops there. Otherwise append the token and "
                       "finish it (self.finish) on eos (unless ignore_eos), on max_tokens, or at max_model_len. "
                       "Return the decisions of the finishes.",
                    zh="对批次中的每条序列及其采样得到的 token：给它刚填满的块算哈希，把排上的 token 计为已缓存；如果只是 "
                       "prompt 的一个分块就到此为止。否则追加这个 token，并在遇到 eos（除非 ignore_eos）、达到 max_tokens "
                       "或 max_model_len 时结束它（self.finish）。返回这些结束所做的决策。")),
            ), notebook="24_build_scheduler", checked_beside=True),
    Chapter(10, "loop", Text(en="The model runner's inputs and the engine loop",
                             zh="模型运行器（model runner）的输入与引擎循环"),
            f"{PACKAGE}/engine/loop.py", (
                Seam("nanovllm_teach.engine.model_runner:ModelRunner.prepare_prefill", Text(
                    en="seqs: the prefill's ScheduledSeqs (token_ids: the tokens it computes now, after "
                       "num_cached_tokens cached ones; block_table). Lay them out with "
                       "prefill_layout.prefill_layout; block tables (self._block_tables) only when some keys are "
                       "cached (cu_seqlens_k ends past cu_seqlens_q). set_context(Context(is_prefill=True, ...)) "
                       "with int32 cu_seqlens, their longest spans and the int64 slot_mapping. Return (input_ids, "
                       "positions), int64 tensors on self's device (self._tensor).",
                    zh="seqs：预填充的 ScheduledSeq（token_ids：在 num_cached_tokens 个已缓存 token 之后本次要算的 token；"
                       "block_table）。用 prefill_layout.prefill_layout 排好它们；只有部分键已缓存时（cu_seqlens_k 的末尾"
                       "超过 cu_seqlens_q 的）才需要块表（self._block_tables）。用 set_context(Context(is_prefill=True, ...))"
                       " 发布 int32 的 cu_seqlens、它们最长的跨度和 int64 的 slot_mapping。返回 (input_ids, positions)，"
                       "self 所在设备上的 int64 张量（self._tensor）。")),
                Seam("nanovllm_teach.engine.model_runner:ModelRunner.prepare_decode", Text(
                    en="seqs: one new token each (token_ids[0], at position num_cached_tokens, stored in "
                       "decode_slot(seq, block_size)). set_context(Context(is_prefill=False, slot_mapping, "
                       "context_lens: num_tokens as int32, block_tables: padded with -1, int32)). Return "
                       "(input_ids, positions), int64. (The engine's own writes them into buffers kept from step to "
                       "step, self.static_decode_inputs, when it has them; fresh tensors are right too.)",
                    zh="seqs：每条一个新 token（token_ids[0]，位置为 num_cached_tokens，存入 decode_slot(seq, block_size)）。"
                       "用 set_context(Context(is_prefill=False, slot_mapping, context_lens：int32 的 num_tokens，"
                       "block_tables：用 -1 补齐的 int32)) 发布它们。返回 int64 的 (input_ids, positions)。（引擎自己的"
                       "实现在有 self.static_decode_inputs 时把它们写进跨 step 复用的缓冲区；新建张量也是对的。）")),
                Seam("nanovllm_teach.engine.llm_engine:LLMEngine.add_request", Text(
                    en="Queue one request: a prompt as text (encoded with self.tokenizer, no special tokens) or "
                       "as token ids; self.new_sequence, then self.add_sequence. Return its seq_id.",
                    zh="排入一个请求：prompt 是文本（用 self.tokenizer 编码，不加特殊 token）或 token id；先 "
                       "self.new_sequence，再 self.add_sequence。返回它的 seq_id。")),
                Seam("nanovllm_teach.engine.llm_engine:LLMEngine.is_finished", Text(
                    en="Whether no request is waiting or running (the scheduler knows).",
                    zh="是否已没有等待中或运行中的请求（调度器知道）。")),
                Seam("nanovllm_teach.engine.llm_engine:LLMEngine.step", Text(
                    en="One iteration: refuse (RuntimeError) when nothing waits or runs; count the step "
                       "(self.num_steps), run self._run_step() (schedule, run the model, postprocess, report) "
                       "inside self.rec.at_step(self.num_steps), keep it as self.last_step, and return (its "
                       "finished, its num_tokens). If it raises, undo the step: transaction.checkpoint before, "
                       "self.teaching.rolled_back(transaction.rollback(...)), then raise again.",
                    zh="一次迭代：没有等待或运行中的请求时拒绝（RuntimeError）；给 step 计数（self.num_steps），在 "
                       "self.rec.at_step(self.num_steps) 之内运行 self._run_step()（调度、运行模型、后处理、报告），保存为 "
                       "self.last_step，并返回 (它的 finished, 它的 num_tokens)。如果出错就撤销这个 step：事先 "
                       "transaction.checkpoint，出错时 self.teaching.rolled_back(transaction.rollback(...))，再重新抛出。")),
                Seam("nanovllm_teach.engine.llm_engine:LLMEngine.generate", Text(
                    en="nano-vllm's generate: one SamplingParams for all prompts or one each; add every prompt "
                       "(self.add_request), then step until self.is_finished(), all inside "
                       "self.generating(len(prompts)). Return the Sequences in prompt order "
                       "(self.scheduler.accepted[seq_id], taken before they finish).",
                    zh="nano-vllm 的 generate：所有 prompt 共用一个 SamplingParams，或每个一个；先加入每个 prompt"
                       "（self.add_request），再一直 step 到 self.is_finished()，全部在 self.generating(len(prompts)) 之内。"
                       "按 prompt 的顺序返回 Sequence（在它们结束之前从 self.scheduler.accepted[seq_id] 取出）。")),
            ), notebook="25_build_engine_loop", checked_beside=True),
)
