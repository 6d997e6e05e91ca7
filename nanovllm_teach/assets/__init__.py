"""The small Qwen3 checkpoint the package ships (``qwen3-tiny/``), so a first run needs no download."""

from __future__ import annotations

from pathlib import Path

DEFAULT_MODEL_DIR = Path(__file__).resolve().parent / "qwen3-tiny"


def default_model_path() -> Path:
    """Directory of the shipped checkpoint (Hugging Face layout: config, safetensors, tokenizer)."""
    return DEFAULT_MODEL_DIR
