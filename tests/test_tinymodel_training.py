"""The tool that trained the shipped tiny Qwen3: its entry point, tokenizer and batching.

Retraining takes minutes, so these check the cheap pieces the run is built from: the command
in the model card still parses, the answer/prompt split of a conversation is exact, and
batches mask everything but the answers.
"""

import os

os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers is imported: nothing may be downloaded

import random
import subprocess
import sys
from pathlib import Path

import pytest

from nanovllm_teach.tinymodel.corpus import generate_corpus, render
from nanovllm_teach.tinymodel.tokenizer import build_tokenizer, encode_conversation
from nanovllm_teach.tinymodel.training import make_batches

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def conversations():
    return generate_corpus(200, seed=3)


@pytest.fixture(scope="module")
def tokenizer(conversations):
    return build_tokenizer([render(c) for c in conversations], vocab_size=512)


def test_train_command_parses() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "nanovllm_teach.tinymodel.train", "--help"],
        cwd=REPO, capture_output=True, text=True, check=True,
    ).stdout
    assert "--out" in out and "--steps" in out and "Train the tiny Qwen3 checkpoint" in out


def test_train_command_without_out_exits_2() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "nanovllm_teach.tinymodel.train"], cwd=REPO, capture_output=True, text=True
    )
    assert result.returncode == 2 and "--out" in result.stderr


def test_chat_template_matches_corpus_render(conversations, tokenizer) -> None:
    for c in conversations[:20]:
        assert tokenizer.apply_chat_template(c.messages(), tokenize=False) == render(c)


def test_encoding_splits_prompt_and_answer_exactly(conversations, tokenizer) -> None:
    for c in conversations:
        ids, answer_start = encode_conversation(tokenizer, c)
        # The separate encodings join into the encoding of the whole text (minus the final newline
        # after <|im_end|>, which is not trained), and the answer part decodes to the answer.
        whole = tokenizer.encode(render(c).removesuffix("\n"), add_special_tokens=False)
        assert ids == whole
        assert tokenizer.decode(ids[answer_start:], skip_special_tokens=True) == c.assistant


def test_batches_carry_loss_on_answers_only(conversations, tokenizer) -> None:
    examples = [encode_conversation(tokenizer, c) for c in conversations]
    batches = make_batches(examples, batch_size=16, pad_id=tokenizer.pad_token_id, rng=random.Random(0))
    assert sum(len(input_ids) for input_ids, _ in batches) == len(examples)
    answer_tokens = 0
    for input_ids, labels in batches:
        assert input_ids.shape == labels.shape
        carried = labels != -100
        assert (input_ids[carried] == labels[carried]).all()
        answer_tokens += int(carried.sum())
    assert answer_tokens == sum(len(ids) - start for ids, start in examples)
