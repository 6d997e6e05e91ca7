"""Train the tiny Qwen3 checkpoint that ships with nanovllm_teach, from nothing, on a CPU.

Run it as::

    python -m nanovllm_teach.tinymodel.train --out nanovllm_teach/assets/qwen3-tiny

The script does, in order, everything that producing a small chat model involves:

1. generate the synthetic chat corpus (``corpus.py``, fixed seed);
2. train a byte-level BPE tokenizer on it with the ``tokenizers`` library, using the same
   pre-tokenizer regex as Qwen (digits are single tokens, so "97" is two tokens);
3. build a randomly initialised ``transformers.Qwen3ForCausalLM`` and train it with plain torch
   (AdamW, warmup + cosine learning rate), with the loss on the assistant's tokens only;
4. evaluate it with Hugging Face ``generate`` (greedy and temperature 0.6);
5. write a standard Hugging Face checkpoint directory plus a model card with the measured numbers.

Everything is seeded and single-process with ``torch.set_num_threads(2)``. On the 2-core CPU
machine it was developed on, the whole script took about TOTAL_MINUTES minutes (see the model card for the
exact measured numbers of the shipped checkpoint).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import GenerationConfig, PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

from nanovllm_teach.tinymodel.corpus import (
    CHAT_TEMPLATE,
    ENDOFTEXT,
    IM_END,
    INTRO_ANSWERS,
    SPECIAL_TOKENS,
    Conversation,
    generate_corpus,
    primes_answer,
    primes_up_to,
    render,
    render_prompt,
)

# Qwen2/Qwen3's pre-tokenizer regex: contractions, words with one leading non-letter, single
# digits, punctuation runs, newlines, spaces. Splitting digits one by one keeps numbers cheap in
# the vocabulary and makes "count" and "primes" digit-by-digit problems, as in the real model.
QWEN_PRETOKENIZE_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

INTRO_PROMPT = "introduce yourself"
PRIMES_PROMPT = "list all prime numbers within 100"
PRIME_EVAL_NS = tuple(range(10, 101, 10))


@dataclass
class TrainConfig:
    """Every knob of the run. The defaults produce the shipped checkpoint."""

    seed: int = 0
    tokenizer_vocab_size: int = 1024  # an upper bound: BPE stops once the corpus has no pair left
    hidden_size: int = 192
    intermediate_size: int = 512
    num_hidden_layers: int = 4
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    head_dim: int = 48
    max_position_embeddings: int = 1024
    rope_theta: float = 10000.0
    steps: int = 1200
    batch_size: int = 32
    peak_lr: float = 3e-3
    min_lr: float = 3e-4
    warmup_steps: int = 60
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    eval_seed: int = 12345  # a different seed from training for the fresh evaluation questions


@dataclass
class Answer:
    """One generated answer: its text (special tokens removed), length and whether it hit EOS."""

    prompt: str
    text: str
    num_tokens: int
    stopped: bool


@dataclass
class EvalReport:
    """Everything the model card reports about the trained model."""

    primes_passed: list[int] = field(default_factory=list)
    primes_failed: list[int] = field(default_factory=list)
    primes_all_n_accuracy: float = 0.0
    task_accuracy: dict[str, float] = field(default_factory=dict)
    intro_greedy: Answer | None = None
    primes_greedy: Answer | None = None
    intro_samples: list[Answer] = field(default_factory=list)
    primes_samples: list[Answer] = field(default_factory=list)
    intro_samples_ok: int = 0
    primes_samples_ok: int = 0
    prompt_lengths: dict[str, int] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------
# Tokenizer
# ---------------------------------------------------------------------------------------------


def build_tokenizer(texts: list[str], vocab_size: int) -> PreTrainedTokenizerFast:
    """Train a Qwen-style byte-level BPE tokenizer on ``texts`` and wrap it for transformers."""
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    # Split with Qwen's regex first, then map every byte to a printable character: this is what
    # makes the tokenizer "byte-level" -- any UTF-8 text encodes, there is no unknown token.
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN_PRETOKENIZE_REGEX), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=list(SPECIAL_TOKENS),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer)
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=IM_END,
        pad_token=ENDOFTEXT,  # Qwen pads with <|endoftext|>; it never appears inside a chat
        model_max_length=1024,
    )
    wrapped.chat_template = CHAT_TEMPLATE
    return wrapped


def encode_conversation(tokenizer: PreTrainedTokenizerFast, conversation: Conversation) -> tuple[list[int], int]:
    """Token ids of a whole conversation and the index where the assistant's answer begins.

    The prompt and the answer are tokenized separately: the prompt ends with a newline and an
    answer starts a new pre-token, so this equals tokenizing the whole text, and it tells us
    exactly which tokens are the answer (the only ones that carry loss).
    """
    prompt = tokenizer.encode(render_prompt(conversation.user), add_special_tokens=False)
    answer = tokenizer.encode(conversation.assistant + IM_END, add_special_tokens=False)
    return prompt + answer, len(prompt)


# ---------------------------------------------------------------------------------------------
# Model and training
# ---------------------------------------------------------------------------------------------


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


def make_batches(
    examples: list[tuple[list[int], int]], batch_size: int, pad_id: int, rng: random.Random
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Group examples of similar length into right-padded (input_ids, labels) batches.

    Sorting a pool of examples by length before cutting it into batches wastes far fewer
    positions on padding than random batches would (answers range from 3 to ~100 tokens).
    Right padding needs no attention mask: with causal attention, real tokens never see the
    pads that come after them, and pads carry no loss.
    """
    pool_size = batch_size * 16
    batches = []
    for start in range(0, len(examples), pool_size):
        pool = sorted(examples[start : start + pool_size], key=lambda e: len(e[0]))
        chunk = [pool[i : i + batch_size] for i in range(0, len(pool), batch_size)]
        rng.shuffle(chunk)
        batches.extend(chunk)
    tensors = []
    for batch in batches:
        width = max(len(ids) for ids, _ in batch)
        input_ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
        labels = torch.full((len(batch), width), -100, dtype=torch.long)
        for row, (ids, answer_start) in enumerate(batch):
            input_ids[row, : len(ids)] = torch.tensor(ids)
            labels[row, answer_start : len(ids)] = torch.tensor(ids[answer_start:])
        tensors.append((input_ids, labels))
    return tensors


def learning_rate(step: int, cfg: TrainConfig) -> float:
    """Linear warmup, then cosine decay from ``peak_lr`` to ``min_lr``."""
    if step < cfg.warmup_steps:
        return cfg.peak_lr * (step + 1) / cfg.warmup_steps
    progress = (step - cfg.warmup_steps) / max(1, cfg.steps - cfg.warmup_steps)
    return cfg.min_lr + 0.5 * (cfg.peak_lr - cfg.min_lr) * (1 + math.cos(math.pi * progress))


def train_model(model: Qwen3ForCausalLM, batches: list[tuple[torch.Tensor, torch.Tensor]], cfg: TrainConfig) -> None:
    """Plain AdamW over the batches, one step each; prints the loss every 50 steps."""
    # The usual rule: decay matrices, not norms (weights of RMSNorm are 1-D).
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=cfg.peak_lr,
        betas=(0.9, 0.95),
    )
    model.train()
    start = time.perf_counter()
    running = 0.0
    for step, (input_ids, labels) in enumerate(batches):
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, cfg)
        loss = model(input_ids=input_ids, labels=labels).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        optimizer.step()
        running += loss.item()
        if (step + 1) % 50 == 0:
            elapsed = time.perf_counter() - start
            print(f"step {step + 1:5d}/{len(batches)}  loss {running / 50:.4f}  {elapsed:6.0f}s", flush=True)
            running = 0.0
    model.eval()


# ---------------------------------------------------------------------------------------------
# Evaluation
# ---------------------------------------------------------------------------------------------


@torch.no_grad()
def generate_answers(
    model: Qwen3ForCausalLM,
    tokenizer: PreTrainedTokenizerFast,
    prompts: list[str],
    max_new_tokens: int = 256,
    temperature: float | None = None,
) -> list[Answer]:
    """Answer each user prompt with HF ``generate``: greedy, or pure temperature sampling."""
    texts = [
        tokenizer.apply_chat_template([{"role": "user", "content": p}], tokenize=False, add_generation_prompt=True)
        for p in prompts
    ]
    tokenizer.padding_side = "left"  # so every row's last prompt token sits at the same position
    batch = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    sampling = (
        {"do_sample": True, "temperature": temperature, "top_k": 0, "top_p": 1.0}
        if temperature is not None
        else {"do_sample": False}
    )
    out = model.generate(
        **batch,
        max_new_tokens=max_new_tokens,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        **sampling,
    )
    answers = []
    for prompt, row in zip(prompts, out[:, batch["input_ids"].shape[1] :].tolist()):
        stopped = tokenizer.eos_token_id in row
        tokens = row[: row.index(tokenizer.eos_token_id) + 1] if stopped else row
        text = tokenizer.decode(tokens, skip_special_tokens=True)
        answers.append(Answer(prompt, text, len(tokens), stopped))
    return answers


def listed_numbers(text: str) -> list[int]:
    """The numbers an answer lists: everything after the colon ("The primes up to N are: ...")."""
    return [int(x) for x in re.findall(r"\d+", text.split(":", 1)[-1])] if ":" in text else []


def primes_correct(answer: Answer, n: int) -> bool:
    """The requirement: exactly the primes <= n, then EOS."""
    return answer.stopped and listed_numbers(answer.text) == primes_up_to(n)


def evaluate(model: Qwen3ForCausalLM, tokenizer: PreTrainedTokenizerFast, cfg: TrainConfig) -> EvalReport:
    """Measure the numbers the model card reports."""
    report = EvalReport()
    torch.manual_seed(cfg.eval_seed)

    # The headline score: "list all prime numbers within N" for N = 10, 20, ..., 100, greedy.
    answers = generate_answers(model, tokenizer, [f"list all prime numbers within {n}" for n in PRIME_EVAL_NS])
    for n, answer in zip(PRIME_EVAL_NS, answers):
        (report.primes_passed if primes_correct(answer, n) else report.primes_failed).append(n)

    # Every N from 1 to 100, with the same prompt wording, as a broader check.
    all_n = list(range(1, 101))
    correct = 0
    for start in range(0, len(all_n), 25):
        ns = all_n[start : start + 25]
        answers = generate_answers(model, tokenizer, [f"list all prime numbers within {n}" for n in ns])
        correct += sum(a.stopped and a.text == primes_answer(n) for n, a in zip(ns, answers))
    report.primes_all_n_accuracy = correct / len(all_n)

    # Fresh questions of the other skills (a different seed; with so few possible questions,
    # many were also seen in training -- this measures "learned", not "generalised").
    fresh = [c for c in generate_corpus(2000, seed=cfg.eval_seed) if c.task in ("count", "arithmetic", "repeat")]
    for task in ("count", "arithmetic", "repeat"):
        questions = [c for c in fresh if c.task == task][:100]
        answers = generate_answers(model, tokenizer, [c.user for c in questions], max_new_tokens=96)
        hits = sum(a.stopped and a.text == c.assistant for c, a in zip(questions, answers))
        report.task_accuracy[task] = hits / len(questions)

    # The two prompts of the engine walkthrough, greedy and sampled at temperature 0.6.
    report.intro_greedy, report.primes_greedy = generate_answers(model, tokenizer, [INTRO_PROMPT, PRIMES_PROMPT])
    report.intro_samples = generate_answers(model, tokenizer, [INTRO_PROMPT] * 10, temperature=0.6)
    report.primes_samples = generate_answers(model, tokenizer, [PRIMES_PROMPT] * 10, temperature=0.6)
    report.intro_samples_ok = sum(a.stopped and a.text in INTRO_ANSWERS for a in report.intro_samples)
    report.primes_samples_ok = sum(primes_correct(a, 100) for a in report.primes_samples)

    for prompt in (INTRO_PROMPT, PRIMES_PROMPT):
        text = tokenizer.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True)
        report.prompt_lengths[prompt] = len(tokenizer.encode(text, add_special_tokens=False))
    return report
