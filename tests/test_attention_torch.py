"""The torch attention backend's per-step plans: the K/V store planned once per step (slot -1 skipped), the
grouped decode with the query heads of one K/V head attended together equal to attention one sequence at a
time, prefill equal to the attention written out, and the query and key norms done in one normalisation
equal to each norm on its own heads, bitwise."""

from __future__ import annotations

import random

import pytest
import torch
from transformers import AutoConfig

import nanovllm_teach
from nanovllm_teach.layers import attention_torch
from nanovllm_teach.layers.attention_torch import TorchAttentionBackend, plan_decode
from nanovllm_teach.layers.layernorm import RMSNorm, rms_norm_heads
from nanovllm_teach.layers.rotary_embedding import apply_rotary
from nanovllm_teach.models.qwen3 import Qwen3ForCausalLM
from nanovllm_teach.utils.context import Context, reset_context, set_context
from nanovllm_teach.models.loader import load_model
from paged_cache import random_paged_cache


def _one_sequence(q, k_cache, v_cache, table, length, scale):
    """Attention of one query over one sequence's rows, written out: softmax(q k^T * scale) v, per head."""
    k = k_cache[table].flatten(0, 1)[:length]
    v = v_cache[table].flatten(0, 1)[:length]
    group = q.size(0) // k.size(1)
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)  # (length, heads, dim)
    weights = torch.softmax(torch.einsum("hd,lhd->hl", q.double(), k.double()) * scale, dim=-1)
    return torch.einsum("hl,lhd->hd", weights, v.double()).float()


@pytest.mark.parametrize("num_seqs", [1, 9, 16, 70])
@pytest.mark.parametrize("heads,kv_heads", [(4, 4), (4, 2), (8, 2)])
def test_grouped_decode_equals_one_sequence_at_a_time(num_seqs, heads, kv_heads):
    rng = random.Random(num_seqs)
    lens = [rng.randint(1, 90) for _ in range(num_seqs)]
    k_cache, v_cache, tables = random_paged_cache(lens, 16, kv_heads, 8, seed=num_seqs)
    q = torch.randn(num_seqs, heads, 8, generator=torch.Generator().manual_seed(1))
    ctx = Context(context_lens=torch.tensor(lens, dtype=torch.int32), block_tables=torch.tensor(tables, dtype=torch.int32))
    out = TorchAttentionBackend().decode(q, k_cache, v_cache, ctx, 0.3)
    for i, n in enumerate(lens):
        table = [b for b in tables[i] if b >= 0]
        torch.testing.assert_close(out[i], _one_sequence(q[i], k_cache, v_cache, table, n, 0.3), rtol=1e-5, atol=1e-5)


def test_decode_groups_have_similar_lengths_and_cover_every_slot_once():
    lens = list(range(1, 71))
    random.Random(0).shuffle(lens)
    _, _, tables = random_paged_cache(lens, 16, 2, 8, seed=0)
    ctx = Context(context_lens=torch.tensor(lens, dtype=torch.int32), block_tables=torch.tensor(tables, dtype=torch.int32))
    plan = plan_decode(ctx, 16, torch.float32)
    assert len(plan.groups) == attention_torch.MAX_DECODE_GROUPS
    sorted_lens = sorted(lens)
    expected = []
    for group in plan.groups:
        assert group.length == max(sorted_lens[group.start:group.stop])  # padded to its own longest only
        for r in range(group.start, group.stop):
            seq = int(plan.order[r])
            expected += [tables[seq][p // 16] * 16 + p % 16 if p < lens[seq] else 0 for p in range(group.length)]
    assert plan.slots.tolist() == expected


def test_store_is_planned_once_per_step_and_skips_minus_one(monkeypatch):
    built = []
    real = attention_torch.plan_store
    monkeypatch.setattr(attention_torch, "plan_store", lambda slots: built.append(1) or real(slots))
    backend = TorchAttentionBackend()
    caches = [(torch.zeros(3, 4, 2, 8), torch.zeros(3, 4, 2, 8)) for _ in range(3)]
    slot_mapping = torch.tensor([5, -1, 0, 11, -1])
    k, v = torch.randn(5, 2, 8), torch.randn(5, 2, 8)
    set_context(Context(is_prefill=True, slot_mapping=slot_mapping))
    try:
        for k_cache, v_cache in caches:  # three layers of one step
            backend.store_kvcache(k, v, k_cache, v_cache, slot_mapping)
    finally:
        reset_context()
    assert len(built) == 1
    for k_cache, v_cache in caches:
        expected_k, expected_v = torch.zeros(12, 2, 8), torch.zeros(12, 2, 8)
        for row, slot in enumerate(slot_mapping.tolist()):
            if slot >= 0:
                expected_k[slot], expected_v[slot] = k[row], v[row]
        assert torch.equal(k_cache.flatten(0, 1), expected_k) and torch.equal(v_cache.flatten(0, 1), expected_v)


@pytest.mark.parametrize("cached_prefix", [False, True])
def test_prefill_equals_attention_written_out(cached_prefix):
    """Causal prefill within each sequence, with or without a cached prefix read back through the blocks."""
    lens_k, block = [7, 20, 33], 8
    lens_q = [3, 20, 10] if cached_prefix else lens_k
    k_cache, v_cache, tables = random_paged_cache(lens_k, block, 2, 16, seed=3)
    gen = torch.Generator().manual_seed(4)
    q = torch.randn(sum(lens_q), 4, 16, generator=gen)
    k = torch.randn(sum(lens_k), 2, 16, generator=gen)  # read only without a cached prefix
    cu_q = torch.tensor([0] + [sum(lens_q[:i + 1]) for i in range(3)], dtype=torch.int32)
    cu_k = torch.tensor([0] + [sum(lens_k[:i + 1]) for i in range(3)], dtype=torch.int32)
    if not cached_prefix:  # the whole context is this step's: put it where the reference reads it
        for i, n in enumerate(lens_k):
            rows = k[cu_k[i]:cu_k[i + 1]]
            for p in range(n):
                k_cache[tables[i][p // block], p % block] = rows[p]
                v_cache[tables[i][p // block], p % block] = rows[p]
    ctx = Context(is_prefill=True, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k,
                  block_tables=torch.tensor(tables, dtype=torch.int32) if cached_prefix else None)
    out = TorchAttentionBackend().prefill(q, k, k, k_cache, v_cache, ctx, 0.25)
    for i in range(3):
        table = [b for b in tables[i] if b >= 0]
        for j in range(lens_q[i]):
            seen = lens_k[i] - lens_q[i] + j + 1  # query j sees the keys up to its own position
            expected = _one_sequence(q[cu_q[i] + j], k_cache, v_cache, table, seen, 0.25)
            torch.testing.assert_close(out[cu_q[i] + j], expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rms_norm_heads_is_each_norm_on_its_heads_bitwise(dtype):
    q_norm, k_norm = RMSNorm(64, eps=1e-6).to(dtype), RMSNorm(64, eps=1e-6).to(dtype)
    q_norm.weight.data.copy_(torch.randn(64))
    k_norm.weight.data.copy_(torch.randn(64))
    x = torch.randn(5, 4 + 2 + 2, 64).to(dtype)[:, :6]  # the q and k heads of a fused projection: a view
    out = rms_norm_heads(x, [q_norm, k_norm], [4, 2])
    assert torch.equal(out[:, :4], q_norm(x[:, :4])) and torch.equal(out[:, 4:], k_norm(x[:, 4:]))


def test_projection_is_norms_then_rotary_per_tensor_bitwise():
    path = nanovllm_teach.default_model_path()
    model = Qwen3ForCausalLM(AutoConfig.from_pretrained(path)).float().eval()
    load_model(model, path)
    attn = model.model.layers[0].self_attn
    hidden = torch.randn(6, model.model.embed_tokens.weight.size(1))
    rope = model.model.rotary_emb(torch.tensor([0, 1, 5, 9, 100, 700]))
    q, k, v = attn.project(rope, hidden)
    q_size, kv_size = attn.num_heads * attn.head_dim, attn.num_kv_heads * attn.head_dim
    q_ref, k_ref, v_ref = attn.qkv_proj(hidden).split([q_size, kv_size, kv_size], dim=-1)
    assert torch.equal(q, apply_rotary(attn.q_norm(q_ref.view(6, attn.num_heads, -1)), *rope))
    assert torch.equal(k, apply_rotary(attn.k_norm(k_ref.view(6, attn.num_kv_heads, -1)), *rope))
    assert torch.equal(v, v_ref.view(6, attn.num_kv_heads, -1))
