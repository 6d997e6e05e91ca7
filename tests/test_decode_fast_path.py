"""The fast eager decode path: work derived from the batch is done once per step, the fused pieces compute
exactly what transformers computes, and the grouped decode attention equals attention done one sequence at
a time."""

from __future__ import annotations

import random

import pytest
import torch
import torch.nn.functional as F
from transformers import AutoConfig
from transformers.models.qwen3.modeling_qwen3 import Qwen3RMSNorm, apply_rotary_pos_emb

import nanovllm_teach
from nanovllm_teach.layers import attention_torch
from nanovllm_teach.layers.attention_torch import TorchAttentionBackend
from nanovllm_teach.layers.layernorm import RMSNorm
from nanovllm_teach.layers.rotary_embedding import RotaryEmbedding, apply_rotary
from nanovllm_teach.models.qwen3 import Qwen3ForCausalLM
from nanovllm_teach.utils.context import Context
from nanovllm_teach.models.loader import load_model
from nanovllm_teach.models.step_cost import count_ops, decode_step, make_decode_batch


def _shipped_model() -> Qwen3ForCausalLM:
    path = nanovllm_teach.default_model_path()
    model = Qwen3ForCausalLM(AutoConfig.from_pretrained(path)).float().eval()
    load_model(model, path)
    return model


def test_once_per_step_builds_once_per_context():
    calls = []
    ctx = Context()
    for _ in range(3):
        assert ctx.once_per_step("k", lambda: calls.append(1) or len(calls)) == 1
    assert Context().once_per_step("k", lambda: "fresh") == "fresh"  # a new step starts empty
    assert calls == [1]


def test_decode_plan_is_built_once_per_step(monkeypatch):
    model = _shipped_model()
    batch = make_decode_batch(model, [random.Random(0).randint(1, 300) for _ in range(20)], block_size=16)
    built = []
    real = attention_torch.plan_decode
    monkeypatch.setattr(attention_torch, "plan_decode", lambda *a: built.append(1) or real(*a))
    decode_step(model, batch)
    decode_step(model, batch)
    assert len(built) == 2  # one per step, not one per layer (the model has 3)


@pytest.mark.parametrize("num_seqs", [1, 7, 8, 23])
@pytest.mark.parametrize("block_size", [1, 16, 256])
def test_grouped_decode_equals_one_sequence_at_a_time(num_seqs, block_size):
    rng = random.Random(num_seqs * block_size)
    lens = [rng.randint(1, 70) for _ in range(num_seqs)]
    lens[0] = lens[-1]  # ties keep their order
    needed = [-(-n // block_size) for n in lens]
    num_blocks = sum(needed) + 2
    gen = torch.Generator().manual_seed(0)
    k_cache = torch.randn(num_blocks, block_size, 2, 8, generator=gen)
    v_cache = torch.randn(num_blocks, block_size, 2, 8, generator=gen)
    ids = rng.sample(range(num_blocks), sum(needed))
    tables, start = [], 0
    for n in needed:
        tables.append(ids[start:start + n] + [-1] * (max(needed) - n))
        start += n
    q = torch.randn(num_seqs, 4, 8, generator=gen)
    ctx = Context(context_lens=torch.tensor(lens, dtype=torch.int32),
                  block_tables=torch.tensor(tables, dtype=torch.int32))
    out = TorchAttentionBackend().decode(q, k_cache, v_cache, ctx, 0.3)
    for i, n in enumerate(lens):
        k = k_cache[tables[i][:needed[i]]].flatten(0, 1)[:n].transpose(0, 1)
        v = v_cache[tables[i][:needed[i]]].flatten(0, 1)[:n].transpose(0, 1)
        expected = F.scaled_dot_product_attention(q[i].unsqueeze(1), k, v, scale=0.3, enable_gqa=True).squeeze(1)
        torch.testing.assert_close(out[i], expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rms_norm_is_transformers_rms_norm_bitwise(dtype):
    ours, theirs = RMSNorm(64, eps=1e-6).to(dtype), Qwen3RMSNorm(64, eps=1e-6).to(dtype)
    weight = torch.randn(64).to(dtype)
    ours.weight.data.copy_(weight)
    theirs.weight.data.copy_(weight)
    x = torch.randn(5, 3, 64).to(dtype)
    assert torch.equal(ours(x), theirs(x))


def test_rotary_is_transformers_rotary_bitwise():
    head_dim, positions = 64, torch.tensor([0, 3, 17, 255])
    rope = RotaryEmbedding(head_dim, 256, 10000.0)
    q, k = torch.randn(4, 4, head_dim), torch.randn(4, 2, head_dim)
    cos, sin = rope(positions)
    # transformers' layout: (batch, heads, tokens, head_dim) and cos/sin = [cos | cos], [sin | sin].
    half = sin[:, 0, head_dim // 2:]
    hf_cos, hf_sin = cos[:, 0], torch.cat([half, half], dim=-1)
    hf_q, hf_k = apply_rotary_pos_emb(q.transpose(0, 1)[None], k.transpose(0, 1)[None], hf_cos[None], hf_sin[None])
    assert torch.equal(apply_rotary(q, cos, sin), hf_q[0].transpose(0, 1))
    assert torch.equal(apply_rotary(k, cos, sin), hf_k[0].transpose(0, 1))


def test_decode_step_dispatches_few_operations():
    """The set-up is shared and the fused pieces are single operations: at most 60 real (non-view)
    operations per layer at batch 48; set up in every layer, with unfused norms and rotary, it took 143."""
    model = _shipped_model()
    batch = make_decode_batch(model, [random.Random(1).randint(1, 400) for _ in range(48)])
    _, work, _ = count_ops(lambda: decode_step(model, batch))
    assert work <= 60 * len(model.model.layers)
