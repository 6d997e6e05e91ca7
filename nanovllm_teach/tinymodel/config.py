"""The settings of the training run that produced the shipped tiny Qwen3, and its model config.

Not an engine layer: part of the tool that trained the checkpoint in
``nanovllm_teach/assets/qwen3-tiny`` (run by ``python -m nanovllm_teach.tinymodel.train``).
``TrainConfig`` holds every knob of the run; ``build_model_config`` turns it into the
``transformers.Qwen3Config`` that the checkpoint's ``config.json`` is written from.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from transformers import PreTrainedTokenizerFast, Qwen3Config

from nanovllm_teach.tinymodel.corpus import IM_END


@dataclass
class TrainConfig:
    """Every knob of the run. The defaults produce the shipped checkpoint.

    Sizes are powers of two and head counts even: Triton kernels index a head with
    ``tl.arange(0, head_dim)``, which needs a power of two, and tensor parallelism of degree 2
    gives each GPU half of the query and key/value heads.
    """

    seed: int = 0
    tokenizer_vocab_size: int = 1024  # an upper bound: BPE stops once the corpus has no pair left
    hidden_size: int = 256
    intermediate_size: int = 512
    num_hidden_layers: int = 3
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    head_dim: int = 64
    max_position_embeddings: int = 1024
    rope_theta: float = 10000.0
    steps: int = 1500
    batch_size: int = 32
    peak_lr: float = 6e-3
    min_lr: float = 2e-4
    warmup_steps: int = 100
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    eval_seed: int = 12345  # a different seed from training for the fresh evaluation questions


def build_model_config(cfg: TrainConfig, tokenizer: PreTrainedTokenizerFast) -> Qwen3Config:
    """A Qwen3 config for the tiny model. The vocabulary is padded to a multiple of 64, as Qwen does."""
    vocab_size = 64 * math.ceil(len(tokenizer) / 64)
    eos_id = tokenizer.convert_tokens_to_ids(IM_END)
    return Qwen3Config(
        vocab_size=vocab_size,
        hidden_size=cfg.hidden_size,
        intermediate_size=cfg.intermediate_size,
        num_hidden_layers=cfg.num_hidden_layers,
        num_attention_heads=cfg.num_attention_heads,
        num_key_value_heads=cfg.num_key_value_heads,
        head_dim=cfg.head_dim,
        max_position_embeddings=cfg.max_position_embeddings,
        rope_theta=cfg.rope_theta,
        rms_norm_eps=1e-6,
        tie_word_embeddings=True,  # like Qwen3-0.6B: the LM head reuses the embedding matrix
        bos_token_id=None,
        eos_token_id=eos_id,
        pad_token_id=tokenizer.pad_token_id,
        dtype="float32",
        architectures=["Qwen3ForCausalLM"],
    )
