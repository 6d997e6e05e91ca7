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
            )),
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
            )),
)
