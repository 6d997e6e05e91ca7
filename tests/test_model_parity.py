"""Our Qwen3 (packed projections, our own layers, our loader) against transformers' Qwen3ForCausalLM."""

from pathlib import Path

import pytest
import torch
from transformers import AutoConfig, Qwen3Config
from transformers import Qwen3ForCausalLM as HFQwen3

from nanovllm_teach.models.qwen3 import Qwen3ForCausalLM
from nanovllm_teach.utils.context import Context, reset_context, set_context
from nanovllm_teach.models.loader import load_model

SHAPES = {
    "gqa4_tied": dict(hidden_size=64, num_attention_heads=8, num_key_value_heads=2, head_dim=16,
                      intermediate_size=96, num_hidden_layers=2, tie_word_embeddings=True, rope_theta=10000.0),
    "mha_untied_bias": dict(hidden_size=96, num_attention_heads=4, num_key_value_heads=4, head_dim=32,
                            intermediate_size=160, num_hidden_layers=3, tie_word_embeddings=False,
                            attention_bias=True, rope_theta=1_000_000.0),
    "wide_head": dict(hidden_size=48, num_attention_heads=2, num_key_value_heads=1, head_dim=64,
                      intermediate_size=64, num_hidden_layers=1, tie_word_embeddings=False, rope_theta=500.0),
}


def _random_checkpoint(tmp_path: Path, shape: dict) -> Path:
    torch.manual_seed(0)
    config = Qwen3Config(vocab_size=320, max_position_embeddings=256, **shape)
    model = HFQwen3(config).float().eval()
    # Random init leaves the norms at 1; perturb them so the q/k norms are really exercised.
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.add_(torch.randn_like(p) * 0.1)
    model.save_pretrained(tmp_path)
    return tmp_path


def _our_logits(path: Path, seqs: list[list[int]]) -> list[torch.Tensor]:
    config = AutoConfig.from_pretrained(path)
    model = Qwen3ForCausalLM(config).float()
    load_model(model, path)
    ids = torch.tensor([t for s in seqs for t in s])
    positions = torch.tensor([p for s in seqs for p in range(len(s))])
    cu = torch.tensor([0] + [sum(map(len, seqs[:i + 1])) for i in range(len(seqs))], dtype=torch.int32)
    set_context(Context(is_prefill=True, cu_seqlens_q=cu, cu_seqlens_k=cu,
                        max_seqlen_q=max(map(len, seqs)), max_seqlen_k=max(map(len, seqs))))
    try:
        with torch.inference_mode():
            logits = model.compute_logits(model(ids, positions))
    finally:
        reset_context()
    return list(logits.split([len(s) for s in seqs]))


def _hf_logits(path: Path, seq: list[int]) -> torch.Tensor:
    model = HFQwen3.from_pretrained(path, dtype=torch.float32).eval()
    with torch.inference_mode():
        return model(torch.tensor([seq])).logits[0]


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_random_configs_match_transformers(tmp_path, name):
    path = _random_checkpoint(tmp_path, SHAPES[name])
    g = torch.Generator().manual_seed(1)
    seqs = [torch.randint(0, 320, (n,), generator=g).tolist() for n in (1, 7, 40)]
    for seq, ours in zip(seqs, _our_logits(path, seqs)):
        torch.testing.assert_close(ours, _hf_logits(path, seq), atol=1e-4, rtol=1e-4)


def test_shipped_checkpoint_matches_transformers():
    import nanovllm_teach
    path = nanovllm_teach.default_model_path()
    seqs = [list(range(5, 30)), [3, 1, 4, 1, 5, 9, 2, 6]]
    for seq, ours in zip(seqs, _our_logits(path, seqs)):
        torch.testing.assert_close(ours, _hf_logits(path, seq), atol=1e-4, rtol=1e-4)


def test_loader_names_missing_weights(tmp_path):
    path = _random_checkpoint(tmp_path, SHAPES["wide_head"])
    config = AutoConfig.from_pretrained(path)
    config.num_hidden_layers = 2  # the checkpoint has only one layer
    with pytest.raises(ValueError, match="layers.1"):
        load_model(Qwen3ForCausalLM(config), path)


@pytest.mark.parametrize("settings", [
    {}, dict(attention_bias=True, tie_word_embeddings=False, head_dim=32, num_key_value_heads=1),
], ids=["shipped", "bias_untied_gqa"])
def test_checkpoint_shapes_are_transformers_own(settings):
    """The shapes ``check_checkpoint`` expects, without importing transformers' modelling code, are exactly
    the tensors of transformers' Qwen3 for the same config."""
    from nanovllm_teach.assets import default_model_path
    from nanovllm_teach.models.qwen3 import checkpoint_shapes

    config = AutoConfig.from_pretrained(default_model_path(), **settings)
    with torch.device("meta"):
        reference = HFQwen3(config)
    assert checkpoint_shapes(config) == {name: tuple(t.shape) for name, t in reference.state_dict().items()}
