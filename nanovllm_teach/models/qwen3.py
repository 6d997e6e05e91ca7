"""Execution layer: Qwen3 written on our own layers, as nano-vllm writes it.

The model takes a *flattened* batch — all tokens of all scheduled sequences in one 1-D tensor, with
their absolute positions — and returns one hidden state per token. Sequence boundaries, KV-cache slots
and block tables reach the attention layers through the step's ``Context``, so nothing here knows
whether it is serving one request or a hundred.

``packed_modules_mapping`` tells the checkpoint loader which Hugging Face tensors are packed into which
of our parameters (q/k/v into ``qkv_proj``, gate/up into ``gate_up_proj``).
"""

from __future__ import annotations

import torch
from torch import nn

from nanovllm_teach.i18n import Text, say
from nanovllm_teach.layers.activation import SiluAndMul
from nanovllm_teach.layers.attention import Attention
from nanovllm_teach.layers.embed_head import ParallelLMHead, VocabParallelEmbedding
from nanovllm_teach.layers.layernorm import RMSNorm, rms_norm_heads
from nanovllm_teach.layers.linear import MergedColumnParallelLinear, QKVParallelLinear, RowParallelLinear
from nanovllm_teach.layers.rotary_embedding import RotaryEmbedding, apply_rotary, rope_theta_of

# A checkpoint's config.json is the user's: the model says which activation it cannot run.
UNSUPPORTED_ACTIVATION = Text(en="unsupported hidden_act {hidden_act!r}: Qwen3 uses 'silu'",
                              zh="不支持的 hidden_act {hidden_act!r}：Qwen3 用的是 'silu'")


def head_dim_of(config) -> int:
    """A Qwen3 config's head size: ``head_dim`` when it names one, else the hidden size split over the heads."""
    return getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads


class Qwen3Attention(nn.Module):
    def __init__(self, config) -> None:
        super().__init__()
        self.head_dim = head_dim_of(config)
        self.qkv_proj = QKVParallelLinear(config.hidden_size, self.head_dim, config.num_attention_heads,
                                          config.num_key_value_heads, bias=config.attention_bias)
        self.num_heads = self.qkv_proj.num_heads
        self.num_kv_heads = self.qkv_proj.num_kv_heads
        self.o_proj = RowParallelLinear(config.num_attention_heads * self.head_dim, config.hidden_size,
                                        bias=config.attention_bias)
        self.attn = Attention(self.num_heads, self.head_dim, self.head_dim ** -0.5, self.num_kv_heads)
        # Qwen3 normalises every query and key head before RoPE (Qwen2 had a bias instead).
        self.q_norm = RMSNorm(self.head_dim, eps=config.rms_norm_eps)
        self.k_norm = RMSNorm(self.head_dim, eps=config.rms_norm_eps)

    def project(self, rope: tuple[torch.Tensor, torch.Tensor],
                hidden_states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Queries, keys and values of every token, normalised and rotated: (tokens, heads, head_dim).
        ``rope``: this step's cos/sin rows, looked up once by the model for every layer."""
        heads = [self.num_heads, self.num_kv_heads]
        qkv = self.qkv_proj(hidden_states).view(-1, self.num_heads + 2 * self.num_kv_heads, self.head_dim)
        # The query and key heads sit side by side in the projection's output: normalised together (their
        # norms differ only in their weights) and rotated together (by the same angles).
        qk, v = qkv.split([sum(heads), self.num_kv_heads], dim=1)
        q, k = apply_rotary(rms_norm_heads(qk, [self.q_norm, self.k_norm], heads), *rope).split(heads, dim=1)
        return q, k, v

    def forward(self, rope: tuple[torch.Tensor, torch.Tensor], hidden_states: torch.Tensor) -> torch.Tensor:
        return self.o_proj(self.attn(*self.project(rope, hidden_states)).flatten(1, -1))


class Qwen3MLP(nn.Module):
    def __init__(self, config) -> None:
        super().__init__()
        if config.hidden_act != "silu":
            raise ValueError(say(UNSUPPORTED_ACTIVATION, hidden_act=config.hidden_act))
        self.gate_up_proj = MergedColumnParallelLinear(config.hidden_size, [config.intermediate_size] * 2)
        self.down_proj = RowParallelLinear(config.intermediate_size, config.hidden_size)
        self.act_fn = SiluAndMul()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(self.act_fn(self.gate_up_proj(x)))


class Qwen3DecoderLayer(nn.Module):
    def __init__(self, config) -> None:
        super().__init__()
        self.self_attn = Qwen3Attention(config)
        self.mlp = Qwen3MLP(config)
        self.input_layernorm = RMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, eps=config.rms_norm_eps)

    def forward(self, rope: tuple[torch.Tensor, torch.Tensor], hidden_states: torch.Tensor,
                residual: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        if residual is None:
            residual = hidden_states
            hidden_states = self.input_layernorm(hidden_states)
        else:
            hidden_states, residual = self.input_layernorm(hidden_states, residual)
        hidden_states = self.self_attn(rope, hidden_states)
        hidden_states, residual = self.post_attention_layernorm(hidden_states, residual)
        return self.mlp(hidden_states), residual


class Qwen3Model(nn.Module):
    def __init__(self, config) -> None:
        super().__init__()
        self.embed_tokens = VocabParallelEmbedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(Qwen3DecoderLayer(config) for _ in range(config.num_hidden_layers))
        self.norm = RMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        head_dim = head_dim_of(config)
        # One table for every layer: they all rotate by the same angles.
        self.rotary_emb = RotaryEmbedding(head_dim, config.max_position_embeddings, rope_theta_of(config))

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        hidden_states = self.embed_tokens(input_ids)
        rope = self.rotary_emb(positions)
        residual = None
        for layer in self.layers:
            hidden_states, residual = layer(rope, hidden_states, residual)
        hidden_states, _ = self.norm(hidden_states, residual)
        return hidden_states


class Qwen3ForCausalLM(nn.Module):
    packed_modules_mapping = {
        "q_proj": ("qkv_proj", "q"),
        "k_proj": ("qkv_proj", "k"),
        "v_proj": ("qkv_proj", "v"),
        "gate_proj": ("gate_up_proj", 0),
        "up_proj": ("gate_up_proj", 1),
    }

    def __init__(self, config) -> None:
        super().__init__()
        self.model = Qwen3Model(config)
        self.lm_head = ParallelLMHead(config.vocab_size, config.hidden_size)
        if config.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids, positions)

    def compute_logits(self, hidden_states: torch.Tensor) -> torch.Tensor | None:
        return self.lm_head(hidden_states)


def checkpoint_shapes(config) -> dict[str, tuple[int, ...]]:
    """Every tensor a Hugging Face Qwen3 checkpoint of this ``config`` holds, by name, with its shape: what
    ``models/loader.py`` checks a checkpoint's headers against before anything is built. (The test suite
    checks these against transformers' own Qwen3 model.)"""
    hidden, vocab = config.hidden_size, config.vocab_size
    head_dim = head_dim_of(config)
    q, kv, inter = config.num_attention_heads * head_dim, config.num_key_value_heads * head_dim, \
        config.intermediate_size
    shapes: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (vocab, hidden), "model.norm.weight": (hidden,),
                                          "lm_head.weight": (vocab, hidden)}
    projections = {"self_attn.q_proj": (q, hidden), "self_attn.k_proj": (kv, hidden),
                   "self_attn.v_proj": (kv, hidden), "self_attn.o_proj": (hidden, q),
                   "mlp.gate_proj": (inter, hidden), "mlp.up_proj": (inter, hidden), "mlp.down_proj": (hidden, inter)}
    for i in range(config.num_hidden_layers):
        layer = f"model.layers.{i}"
        for name, shape in projections.items():
            shapes[f"{layer}.{name}.weight"] = shape
            if config.attention_bias and name.startswith("self_attn"):
                shapes[f"{layer}.{name}.bias"] = shape[:1]
        for name, size in (("self_attn.q_norm", head_dim), ("self_attn.k_norm", head_dim),
                           ("input_layernorm", hidden), ("post_attention_layernorm", hidden)):
            shapes[f"{layer}.{name}.weight"] = (size,)
    return shapes
