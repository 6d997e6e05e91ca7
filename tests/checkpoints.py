"""Randomly initialised Qwen3 checkpoints of any shape, with a small byte-level tokenizer, for tests."""

from __future__ import annotations

from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
                 "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def make_random_checkpoint(path: Path, vocab_size: int = 384, seed: int = 0, **shape) -> Path:
    """Save a random Qwen3 (float32) and a byte-level BPE tokenizer whose EOS is ``<|im_end|>``."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(["hello world, count 1 2 3 and list primes", "the quick brown fox"] * 10, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    fast.chat_template = CHAT_TEMPLATE
    defaults = dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                    intermediate_size=128, num_hidden_layers=2, max_position_embeddings=1024,
                    tie_word_embeddings=True)
    torch.manual_seed(seed)
    config = Qwen3Config(vocab_size=vocab_size, eos_token_id=fast.eos_token_id, **{**defaults, **shape})
    Qwen3ForCausalLM(config).float().save_pretrained(path)
    fast.save_pretrained(path)
    return path
