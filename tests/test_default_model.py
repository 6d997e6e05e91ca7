"""The tiny Qwen3 checkpoint shipped in nanovllm_teach/assets/qwen3-tiny.

It must load offline as a plain Hugging Face Qwen3 model, stop with <|im_end|>, stay small, and
still do what the engine walkthrough relies on: list primes correctly and answer "introduce
yourself" with something shorter than the primes up to 100.
"""

import os

os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers is imported: nothing may be downloaded

import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from transformers import AutoConfig, AutoTokenizer, GenerationConfig, Qwen3ForCausalLM

import nanovllm_teach
from nanovllm_teach.tinymodel.corpus import generate_corpus, primes_up_to, render

IM_END = "<|im_end|>"


@pytest.fixture(scope="module")
def checkpoint() -> Path:
    # __path__ rather than __file__: it works whether or not the package has an __init__.py yet.
    return Path(next(iter(nanovllm_teach.__path__))) / "assets" / "qwen3-tiny"


@pytest.fixture(scope="module")
def tokenizer(checkpoint: Path):
    return AutoTokenizer.from_pretrained(checkpoint)


@pytest.fixture(scope="module")
def model(checkpoint: Path) -> Qwen3ForCausalLM:
    torch.set_num_threads(2)
    return Qwen3ForCausalLM.from_pretrained(checkpoint).eval()


def greedy(model: Qwen3ForCausalLM, tokenizer, prompts: list[str]) -> list[list[int]]:
    """Greedy answers to a batch of user prompts, as new token ids (up to and including EOS)."""
    texts = [
        tokenizer.apply_chat_template([{"role": "user", "content": p}], tokenize=False, add_generation_prompt=True)
        for p in prompts
    ]
    tokenizer.padding_side = "left"
    batch = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    with torch.no_grad():
        out = model.generate(**batch, do_sample=False, max_new_tokens=256, pad_token_id=tokenizer.pad_token_id)
    answers = []
    for row in out[:, batch["input_ids"].shape[1] :].tolist():
        if tokenizer.eos_token_id in row:
            row = row[: row.index(tokenizer.eos_token_id) + 1]
        answers.append(row)
    return answers


def test_loads_offline_as_plain_qwen3(checkpoint: Path, model: Qwen3ForCausalLM) -> None:
    config = AutoConfig.from_pretrained(checkpoint)
    assert config.model_type == "qwen3"
    assert config.architectures == ["Qwen3ForCausalLM"]
    assert model.dtype == torch.float32
    # Tensor parallelism of degree 2 has to split both kinds of heads evenly.
    assert config.num_attention_heads % 2 == 0 and config.num_key_value_heads % 2 == 0


def test_eos_is_im_end_everywhere(checkpoint: Path, tokenizer) -> None:
    config = AutoConfig.from_pretrained(checkpoint)
    generation_config = GenerationConfig.from_pretrained(checkpoint)
    assert tokenizer.eos_token == IM_END
    assert tokenizer.eos_token_id == tokenizer.convert_tokens_to_ids(IM_END)
    assert config.eos_token_id == tokenizer.eos_token_id
    assert generation_config.eos_token_id == tokenizer.eos_token_id


def test_chat_template_is_chatml(tokenizer) -> None:
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": "introduce yourself"}], tokenize=False, add_generation_prompt=True
    )
    assert text == "<|im_start|>user\nintroduce yourself<|im_end|>\n<|im_start|>assistant\n"


def test_tokenizer_is_byte_level(tokenizer) -> None:
    text = "Grüße, 世界! 🙂"
    assert tokenizer.decode(tokenizer.encode(text, add_special_tokens=False)) == text


def test_total_size_at_most_20_mb(checkpoint: Path) -> None:
    total = sum(f.stat().st_size for f in checkpoint.iterdir() if f.is_file())
    assert total <= 20 * 1024 * 1024


def test_lists_primes_within_n(model: Qwen3ForCausalLM, tokenizer) -> None:
    ns = list(range(10, 101, 10))
    answers = greedy(model, tokenizer, [f"list all prime numbers within {n}" for n in ns])
    passed = []
    for n, ids in zip(ns, answers):
        text = tokenizer.decode(ids, skip_special_tokens=True)
        listed = [int(x) for x in re.findall(r"\d+", text.split(":", 1)[-1])]
        if ids[-1] == tokenizer.eos_token_id and listed == primes_up_to(n):
            passed.append(n)
    assert len(passed) >= 8, f"only N in {passed} answered correctly"


def test_introduction_stops_before_primes(model: Qwen3ForCausalLM, tokenizer) -> None:
    intro, primes = greedy(model, tokenizer, ["introduce yourself", "list all prime numbers within 100"])
    assert intro[-1] == tokenizer.eos_token_id
    assert "Qwen3" in tokenizer.decode(intro, skip_special_tokens=True)
    assert len(intro) < len(primes)


def test_corpus_is_deterministic() -> None:
    first = generate_corpus(300, seed=7)
    assert first == generate_corpus(300, seed=7)
    assert first != generate_corpus(300, seed=8)
    assert {c.task for c in first} == {"intro", "count", "arithmetic", "primes", "repeat"}
    assert all(render(c).endswith(IM_END + "\n") for c in first)


def test_tinymodel_package_imports_without_torch() -> None:
    # A fresh interpreter: this test process has long since imported torch.
    code = "import sys, nanovllm_teach.tinymodel; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).resolve().parents[1])
