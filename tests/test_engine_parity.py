"""Greedy generation through the engine is token-identical to transformers' ``generate`` on the same
checkpoint, with each engine feature switched on and off."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch
from transformers import Qwen3ForCausalLM as HFQwen3

from checkpoints import make_random_checkpoint
from nanovllm_teach import LLM, SamplingParams, default_model_path
from nanovllm_teach.trace import TraceRecorder

MAX_TOKENS = 24
SYSTEM_PROMPT_TOKENS = 40  # shared by half the prompts, so the prefix cache has something to find


def _prompts(vocab_size: int, eos: int) -> list[list[int]]:
    rng = random.Random(7)
    ids = [t for t in range(vocab_size) if t != eos]
    shared = rng.choices(ids, k=SYSTEM_PROMPT_TOKENS)
    lengths = [1, 3, 9, 16, 17, 31, 33, 50, 64, 70, 90, 120, 5, 12, 45, 100]
    prompts = [rng.choices(ids, k=n) for n in lengths]
    return [shared + p if i % 2 else p for i, p in enumerate(prompts)]


def _reference(path: Path, prompts: list[list[int]], eos: int) -> list[list[int]]:
    model = HFQwen3.from_pretrained(path, dtype=torch.float32).eval()
    outs = []
    with torch.inference_mode():
        for prompt in prompts:
            generated = model.generate(torch.tensor([prompt]), max_new_tokens=MAX_TOKENS, do_sample=False,
                                       eos_token_id=eos, pad_token_id=eos)
            outs.append(generated[0, len(prompt):].tolist())
    return outs


@pytest.fixture(scope="module", params=["shipped", "random_gqa4_untied"])
def case(request, tmp_path_factory):
    if request.param == "shipped":
        path = default_model_path()
    else:
        path = make_random_checkpoint(tmp_path_factory.mktemp("ckpt"), num_attention_heads=8,
                                      num_key_value_heads=2, head_dim=16, tie_word_embeddings=False, seed=3)
    from transformers import AutoConfig, AutoTokenizer
    eos = AutoTokenizer.from_pretrained(path).eos_token_id
    prompts = _prompts(AutoConfig.from_pretrained(path).vocab_size, eos)
    return path, prompts, _reference(path, prompts, eos)


GREEDY = SamplingParams(temperature=0.0, max_tokens=MAX_TOKENS)

CONFIGS = {
    "defaults": dict(),  # on an x86-64 CPU: the linear layers through oneDNN, decode as one native call
    "enforce_eager": dict(enforce_eager=True),  # decode through the model's Python forward
    "linear_torch": dict(linear_backend="torch"),
    "attention_torch": dict(attention_backend="torch"),
    "block16": dict(kvcache_block_size=16),
    "no_prefix_cache": dict(kvcache_block_size=16, enable_prefix_caching=False),
    "chunked_prefill": dict(kvcache_block_size=16, max_num_batched_tokens=64),
    "preemption": dict(kvcache_block_size=16, num_kvcache_blocks=24),
    "one_seq_at_a_time": dict(max_num_seqs=1),
}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_greedy_matches_transformers(case, name):
    path, prompts, expected = case
    rec = TraceRecorder()
    llm = LLM(path, trace=rec, max_model_len=512, **CONFIGS[name])
    # Two waves: the second finds the first wave's blocks in the prefix cache.
    outs = llm.generate(prompts[:2], GREEDY, use_tqdm=False) + llm.generate(prompts[2:], GREEDY, use_tqdm=False)
    for i, (out, ref) in enumerate(zip(outs, expected)):
        assert out["token_ids"] == ref, f"prompt {i} (len {len(prompts[i])}) diverged under {name}"
    bm = llm.scheduler.block_manager
    assert bm.num_free_blocks == bm.num_blocks, "blocks leaked"
    events = [e.event for e in rec.events]
    decode_modes = {e.stats["mode"] for e in rec.events
                    if e.event == "RUN_MODEL" and e.stats["eager_reason"] != "prefill"}
    if name == "enforce_eager" or "DECODE_COMPILE" not in events:
        assert decode_modes == {"eager"}
    elif name == "defaults":
        assert decode_modes == {"compiled"}  # the native decode step, where a compiler exists
    if name == "preemption":
        assert "PREEMPT" in events
    if name == "chunked_prefill":
        assert any(any(e.stats["chunked"]) for e in rec.events if e.event == "SCHEDULE_PREFILL")
    if name == "no_prefix_cache":
        assert "PREFIX_CACHE_HIT" not in events
    if name == "block16":
        assert "PREFIX_CACHE_HIT" in events
