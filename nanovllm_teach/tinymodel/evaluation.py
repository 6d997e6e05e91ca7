"""Evaluation of the trained tiny Qwen3 with Hugging Face ``generate``: the numbers of its model card.

Not an engine layer: part of the tool that trained the checkpoint in
``nanovllm_teach/assets/qwen3-tiny`` (run by ``python -m nanovllm_teach.tinymodel.train``).
``evaluate`` asks the model for primes up to N, fresh counting, arithmetic and repeating
questions, and the two prompts of the engine walkthrough, greedy and at temperature 0.6, and
collects the results in an ``EvalReport``. It uses transformers' own ``generate``, not the
engine, so the scores do not depend on the code the model is meant to demonstrate.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import torch
from transformers import PreTrainedTokenizerFast, Qwen3ForCausalLM

from nanovllm_teach.tinymodel.config import TrainConfig
from nanovllm_teach.tinymodel.corpus import INTRO_ANSWERS, generate_corpus, primes_answer, primes_up_to

# The two prompts of the engine walkthrough, and the N of the headline primes score.
INTRO_PROMPT = "introduce yourself"
PRIMES_PROMPT = "list all prime numbers within 100"
PRIME_EVAL_NS = tuple(range(10, 101, 10))


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
