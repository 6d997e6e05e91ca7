"""Writing the trained tiny Qwen3 as a standard Hugging Face checkpoint directory.

Not an engine layer: part of the tool that trained the checkpoint in
``nanovllm_teach/assets/qwen3-tiny`` (run by ``python -m nanovllm_teach.tinymodel.train``).
``write_checkpoint`` saves the config, generation config, safetensors weights, the two standard
tokenizer files and the model card, so the directory loads offline with transformers' ``Auto*``
classes.
"""

from __future__ import annotations

import json
from pathlib import Path

from transformers import GenerationConfig, PreTrainedTokenizerFast, Qwen3ForCausalLM

from nanovllm_teach.tinymodel.config import TrainConfig
from nanovllm_teach.tinymodel.corpus import CHAT_TEMPLATE, ENDOFTEXT, IM_END
from nanovllm_teach.tinymodel.evaluation import EvalReport
from nanovllm_teach.tinymodel.model_card import Timings, model_card


def write_checkpoint(
    out: Path,
    model: Qwen3ForCausalLM,
    tokenizer: PreTrainedTokenizerFast,
    cfg: TrainConfig,
    report: EvalReport,
    timings: Timings,
) -> None:
    """Write the Hugging Face checkpoint directory: config, weights, tokenizer, model card."""
    out.mkdir(parents=True, exist_ok=True)
    # Greedy is the default: engines and tests pass their own sampling parameters.
    model.generation_config = GenerationConfig(
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, max_new_tokens=256
    )
    model.save_pretrained(out, safe_serialization=True)

    tokenizer.save_pretrained(out)
    # Keep exactly the two standard tokenizer files, with the chat template inside
    # tokenizer_config.json where every transformers version looks for it.
    for extra in ("chat_template.jinja", "special_tokens_map.json", "added_tokens.json"):
        (out / extra).unlink(missing_ok=True)
    tokenizer_config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": None,
        "eos_token": IM_END,
        "pad_token": ENDOFTEXT,
        "unk_token": None,
        "model_max_length": cfg.max_position_embeddings,
        "clean_up_tokenization_spaces": False,
        "chat_template": CHAT_TEMPLATE,
    }
    (out / "tokenizer_config.json").write_text(json.dumps(tokenizer_config, indent=2) + "\n")
    (out / "README.md").write_text(model_card(model, tokenizer, cfg, report, timings, out))
