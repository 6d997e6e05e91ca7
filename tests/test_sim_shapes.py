"""Shapes from any dense decoder's config.json (Qwen3, Qwen2/2.5, Llama 2/3, Mistral), the shipped ones with
their published parameter counts, mixtures of experts refused with the reason, and the real engine's refusal
of what it cannot run, which names the simulator."""

from __future__ import annotations

import json

import pytest

from nanovllm_teach import LLM
from nanovllm_teach.config import Config
from nanovllm_teach.settings import Settings
from nanovllm_teach.sim.cost_model import ModelShape, load_shape
from nanovllm_teach.workload.requests import AtOnce, Fixed, make_workload

MISTRAL_7B = {"model_type": "mistral", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
              "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 32000, "head_dim": None,
              "max_position_embeddings": 32768, "sliding_window": 4096, "tie_word_embeddings": False,
              "eos_token_id": 2, "rms_norm_eps": 1e-05, "rope_theta": 10000.0}
LLAMA_2_7B = {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
              "num_attention_heads": 32, "num_key_value_heads": 32, "vocab_size": 32000,
              "max_position_embeddings": 4096, "eos_token_id": 2}


@pytest.mark.parametrize("config, billions, head_dim, kv_heads", [
    (MISTRAL_7B, 7.24, 128, 8),  # published: 7.24 B
    (LLAMA_2_7B, 6.74, 128, 32),  # published: 6.74 B; no grouped-query attention
])
def test_shapes_of_other_dense_decoders(config, billions, head_dim, kv_heads):
    shape = ModelShape.from_config(config, "m")
    assert shape.num_params / 1e9 == pytest.approx(billions, abs=0.01)
    assert (shape.head_dim, shape.num_kv_heads, shape.qk_norm) == (head_dim, kv_heads, False)


def test_shipped_shapes_beside_qwen3s_have_their_published_sizes():
    assert load_shape("llama-3.1-8b").num_params == 8_030_261_248
    assert load_shape("llama-3.1-70b").num_params / 1e9 == pytest.approx(70.55, abs=0.01)
    qwen25 = load_shape("qwen2.5-7b")
    assert qwen25.qkv_bias and qwen25.num_params / 1e9 == pytest.approx(7.62, abs=0.01)
    assert load_shape("qwen3-8b").qk_norm


@pytest.mark.parametrize("extra, match", [
    ({"model_type": "mixtral", "num_local_experts": 8}, "mixture-of-experts"),
    ({"model_type": "qwen3_moe", "num_experts": 128}, "mixture-of-experts"),
    ({"model_type": "gpt2"}, "dense decoders"),
    ({"hidden_size": "4096"}, "no positive int hidden_size"),
])
def test_what_is_not_a_known_dense_decoder_is_refused_with_the_reason(extra, match):
    with pytest.raises(ValueError, match=match):
        ModelShape.from_config({**MISTRAL_7B, **extra}, "m")


def test_a_llama_folder_runs_simulated_and_the_real_engine_says_where_it_would(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(MISTRAL_7B | {"model_type": "llama", "sliding_window": None}))
    llm = LLM(str(tmp_path), runner="simulated", hardware="a100-80gb", max_model_len=1024)
    result = llm.run_workload(make_workload(3, AtOnce(), Fixed(8), Fixed(4), vocab_size=32000))
    assert result.output_tokens == 12 and llm.config.hf_config.model_type == "llama"
    with pytest.raises(ValueError, match="runs only Qwen3.*simulate"):
        Config.resolve(str(tmp_path), Settings())
