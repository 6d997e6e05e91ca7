"""Train the tiny Qwen3 checkpoint that ships with nanovllm_teach, from nothing, on a CPU.

Run it as::

    python -m nanovllm_teach.tinymodel.train --out nanovllm_teach/assets/qwen3-tiny

The script does, in order, everything that producing a small chat model involves:

1. generate the synthetic chat corpus (``corpus.py``, fixed seed);
2. train a byte-level BPE tokenizer on it with the ``tokenizers`` library, with Qwen's
   pre-tokenizer regex except that numbers stay whole (so "97" is one token);
3. build a randomly initialised ``transformers.Qwen3ForCausalLM`` and train it with plain torch
   (AdamW, warmup + cosine learning rate), with the loss on the assistant's tokens only;
4. evaluate it with Hugging Face ``generate`` (greedy and temperature 0.6);
5. write a standard Hugging Face checkpoint directory plus a model card with the measured numbers.

Everything is seeded and single-process with ``torch.set_num_threads(2)``; two runs give
bit-identical weights. On the 2-core CPU machine it was developed on, the whole script took
8.2 minutes (7.9 of them training), and 9.3 minutes in a run that shared the CPU with other
work; the model card has the measured numbers of the shipped checkpoint. Pass ``--steps 200``
for a quick trial run.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

# OpenMP threads that wait by spinning are fastest on an idle machine, but when other processes
# share the two cores a spinning thread steals the core its partner needs and every step becomes
# ~10x slower. Sleeping waiters cost little when idle and keep a busy machine usable. The setting
# is read when torch loads OpenMP, so it must come before the first ``import torch``.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers  # noqa: E402
from transformers import GenerationConfig, PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM  # noqa: E402

from nanovllm_teach.tinymodel.corpus import (  # noqa: E402
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

# Qwen's pre-tokenizer regex (contractions, words with one leading non-letter, numbers,
# punctuation runs, newlines, spaces) with one change: Qwen splits numbers into single digits,
# we allow runs of up to three digits, as GPT-4's and Llama 3's tokenizers do. BPE then makes
# every number the corpus uses one token, and a model this small learns "count to B" and "primes
# up to N" far faster when the stopping test compares two tokens instead of two digit sequences.
PRETOKENIZE_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

INTRO_PROMPT = "introduce yourself"
PRIMES_PROMPT = "list all prime numbers within 100"
PRIME_EVAL_NS = tuple(range(10, 101, 10))


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
    # Split with the regex first, then map every byte to a printable character: this is what
    # makes the tokenizer "byte-level" -- any UTF-8 text encodes, there is no unknown token.
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated"),
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
    positions on padding than random batches would (conversations range from about 10 to 105
    tokens). Right padding needs no attention mask: with causal attention, real tokens never
    see the pads that come after them, and pads carry no loss.
    """
    # Four batches per pool: bigger pools pad less but make each batch nearly all one task
    # (length follows the task), and in trials such one-task batches learned more slowly.
    pool_size = batch_size * 4
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


# ---------------------------------------------------------------------------------------------
# Writing the checkpoint
# ---------------------------------------------------------------------------------------------


@dataclass
class Timings:
    """Wall-clock seconds of each phase of the run, measured with ``time.perf_counter``."""

    data: float = 0.0  # corpus generation, tokenizer training, encoding, batching
    train: float = 0.0
    evaluate: float = 0.0

    @property
    def total(self) -> float:
        return self.data + self.train + self.evaluate


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


def _size_mb(directory: Path) -> float:
    return sum(f.stat().st_size for f in directory.iterdir() if f.is_file()) / 1e6


def model_card(
    model: Qwen3ForCausalLM,
    tokenizer: PreTrainedTokenizerFast,
    cfg: TrainConfig,
    report: EvalReport,
    timings: Timings,
    out: Path,
) -> str:
    """The README.md of the checkpoint, filled in with what this run measured."""
    c = model.config
    n_params = sum(p.numel() for p in model.parameters())
    weights_mb = (out / "model.safetensors").stat().st_size / 1e6
    failed = ", ".join(map(str, report.primes_failed)) or "none"
    acc = report.task_accuracy
    intro_len = report.prompt_lengths[INTRO_PROMPT]
    primes_len = report.prompt_lengths[PRIMES_PROMPT]

    def quote(answer: Answer) -> str:
        ending = "the last one `<|im_end|>`" if answer.stopped else "no `<|im_end|>` within the limit"
        return f"> {answer.text}\n\n({answer.num_tokens} tokens, {ending})"

    # Show a sample that differs from the greedy answer when there is one: that is what
    # sampling adds.
    intro_sample = next(
        (a for a in report.intro_samples if a.text != report.intro_greedy.text), report.intro_samples[0]
    )

    return f"""---
license: mit
library_name: transformers
pipeline_tag: text-generation
tags: [qwen3, tiny, teaching, nanovllm_teach]
---

# qwen3-tiny

A **{n_params / 1e6:.2f} M-parameter Qwen3 model** trained from scratch in a few minutes on a 2-core
CPU, shipped inside `nanovllm_teach` so that the inference engine has a real model to run
without downloading anything. It is a standard Hugging Face checkpoint: it loads with
`AutoConfig`, `AutoTokenizer` and `Qwen3ForCausalLM.from_pretrained`, offline, without
`trust_remote_code`.

It is not a useful assistant. It knows five tiny skills, and answers them in Qwen's chat format,
ending every answer with `<|im_end|>` -- which is all an inference engine needs to show
batching, prefill, decode, KV caching and stopping on real token streams.

Reproduce it with `python -m nanovllm_teach.tinymodel.train --out nanovllm_teach/assets/qwen3-tiny`
(seeded; `torch.set_num_threads(2)`).

## Model

| | |
|---|---|
| architecture | `Qwen3ForCausalLM` (`model_type` `qwen3`), float32 |
| parameters | {n_params:,} (embedding tied with the LM head) |
| layers | {c.num_hidden_layers} |
| hidden size | {c.hidden_size} |
| MLP intermediate size | {c.intermediate_size} (SwiGLU) |
| attention heads | {c.num_attention_heads} query heads, {c.num_key_value_heads} key/value heads (GQA), head_dim {c.head_dim} |
| positions | RoPE, theta {cfg.rope_theta:g}, max_position_embeddings {c.max_position_embeddings} |
| vocabulary | {len(tokenizer)} tokens used, embedding padded to {c.vocab_size} |
| weights file | {weights_mb:.1f} MB; whole directory {_size_mb(out):.1f} MB |

Head counts are even, so tensor parallelism of degree 2 splits the heads evenly.

## Tokenizer and chat template

Byte-level BPE trained with the `tokenizers` library on the training corpus. The pre-tokenizer
regex is Qwen's except that a number is split into runs of up to three digits rather than single
digits (as in GPT-4's and Llama 3's tokenizers), so every number in the corpus is one token. The
special tokens are Qwen's: `<|endoftext|>` (id {tokenizer.convert_tokens_to_ids(ENDOFTEXT)}, used for padding),
`<|im_start|>`, and `<|im_end|>` (id {tokenizer.eos_token_id}), the EOS token in `tokenizer_config.json`,
`config.json` and `generation_config.json`. Being byte-level, it encodes any text; words outside
the corpus just become many small tokens. The chat template is Qwen's ChatML:

```
<|im_start|>user
introduce yourself<|im_end|>
<|im_start|>assistant
```

After the template, "{INTRO_PROMPT}" is **{intro_len} tokens** and "{PRIMES_PROMPT}" is
**{primes_len} tokens**.

## Training data

Synthetic single-turn chats from `nanovllm_teach/tinymodel/corpus.py` (seed {cfg.seed}),
{cfg.steps * cfg.batch_size:,} conversations in all ({cfg.steps} steps of {cfg.batch_size}):

- introducing itself ("introduce yourself", "who are you", "tell me about yourself", ...;
  {len(INTRO_ANSWERS)} phrasings of the answer),
- counting ("count from 3 to 9" -> "Counting from 3 to 9: 3, 4, 5, 6, 7, 8, 9."), spans of up to
  15 numbers below 106,
- arithmetic ("what is 12 + 7"): sums of numbers up to 20, differences of numbers up to 30,
  products up to 10 x 10,
- primes ("list all prime numbers within N", "list the primes up to N", ...) for N from 1 to 100,
- repeating one of 20 short words ("repeat hello 3 times") 1 to 10 times.

## Training

Random initialisation, then AdamW (betas 0.9/0.95, weight decay {cfg.weight_decay}), learning rate
warmed up over {cfg.warmup_steps} steps to {cfg.peak_lr:g} and cosine-decayed to {cfg.min_lr:g},
gradient clipping {cfg.grad_clip}, loss on the assistant's tokens only.

Measured on the 2-core CPU it was built on: data and tokenizer {timings.data:.0f} s, training
{timings.train:.0f} s, evaluation {timings.evaluate:.0f} s -- **{timings.total / 60:.1f} minutes in total**.

## Evaluation (measured by the training script)

- **Primes, greedy, "list all prime numbers within N", N = 10, 20, ..., 100: {len(report.primes_passed)}/10**
  list exactly the primes up to N and stop with `<|im_end|>` (failed: {failed}).
- Same prompt for every N from 1 to 100, exact answer: {report.primes_all_n_accuracy:.0%}.
- Greedy exact-answer accuracy on 100 freshly drawn questions each: counting {acc['count']:.0%},
  arithmetic {acc['arithmetic']:.0%}, repeating {acc['repeat']:.0%}.
- Temperature 0.6 (pure temperature sampling, 10 samples each): "{INTRO_PROMPT}" gave one of the
  trained introductions {report.intro_samples_ok}/10 times; "{PRIMES_PROMPT}" gave exactly the 25
  primes {report.primes_samples_ok}/10 times.

Greedy answer to "{INTRO_PROMPT}":

{quote(report.intro_greedy)}

Greedy answer to "{PRIMES_PROMPT}":

{quote(report.primes_greedy)}

A temperature-0.6 sample of each (a different introduction from the greedy one, where
the ten samples had one):

{quote(intro_sample)}

{quote(report.primes_samples[0])}

## What it can and cannot do

It can answer the five kinds of question above, phrased roughly as in the corpus, and stop.
The introduction ({report.intro_greedy.num_tokens} tokens) is much shorter than the list of primes up to 100
({report.primes_greedy.num_tokens} tokens), so when both are in one batch the introduction finishes first.

It cannot do anything else, and it does not know that it cannot. A question it has not seen
("what is the capital of France?", "write a poem") usually gets its introduction or a garbled
piece of one. Outside the trained ranges the answers are wrong but fluent: primes above 100,
counting spans longer than 15, larger operands, words it has never repeated. Arithmetic is
memorised facts, not an algorithm, and some facts are wrong (see the accuracy above). It has
never seen a system prompt or a second turn. Use it to watch an inference engine work, not to
judge the quality of one.
"""


# ---------------------------------------------------------------------------------------------
# Entry point
# ---------------------------------------------------------------------------------------------


def seed_everything(seed: int) -> None:
    """Fix every source of randomness the run uses, and the thread count that affects float sums."""
    random.seed(seed)
    torch.manual_seed(seed)
    torch.set_num_threads(2)
    torch.use_deterministic_algorithms(True)


def main(argv: list[str] | None = None) -> EvalReport:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="checkpoint directory to write")
    parser.add_argument("--steps", type=int, default=TrainConfig.steps, help="optimizer steps (shorter for trials)")
    parser.add_argument("--seed", type=int, default=TrainConfig.seed)
    args = parser.parse_args(argv)
    cfg = TrainConfig(steps=args.steps, seed=args.seed)
    seed_everything(cfg.seed)
    timings = Timings()

    start = time.perf_counter()
    conversations = generate_corpus(cfg.steps * cfg.batch_size, seed=cfg.seed)
    tokenizer = build_tokenizer([render(c) for c in conversations], cfg.tokenizer_vocab_size)
    sample = conversations[0]
    rendered = tokenizer.apply_chat_template(sample.messages(), tokenize=False)
    assert rendered == render(sample), "the Jinja chat template and corpus.render disagree"
    examples = [encode_conversation(tokenizer, c) for c in conversations]
    batches = make_batches(examples, cfg.batch_size, tokenizer.pad_token_id, random.Random(cfg.seed))
    model = Qwen3ForCausalLM(build_model_config(cfg, tokenizer))
    n_params = sum(p.numel() for p in model.parameters())
    longest = max(len(ids) for ids, _ in examples)
    print(f"vocab {len(tokenizer)}, {n_params:,} parameters, {len(batches)} batches, longest {longest} tokens", flush=True)
    timings.data = time.perf_counter() - start

    start = time.perf_counter()
    train_model(model, batches, cfg)
    timings.train = time.perf_counter() - start

    start = time.perf_counter()
    report = evaluate(model, tokenizer, cfg)
    timings.evaluate = time.perf_counter() - start

    write_checkpoint(args.out, model, tokenizer, cfg, report, timings)
    print(json.dumps({"config": asdict(cfg), "timings_s": asdict(timings) | {"total": timings.total}}, indent=2))
    print(f"primes within N=10..100 (greedy): {len(report.primes_passed)}/10, failed: {report.primes_failed}")
    print(f"primes within N=1..100 exact: {report.primes_all_n_accuracy:.0%}; other tasks: {report.task_accuracy}")
    print(f"T=0.6: intro ok {report.intro_samples_ok}/10, primes-100 ok {report.primes_samples_ok}/10")
    print(f"prompt tokens after the chat template: {report.prompt_lengths}")
    for answer in (report.intro_greedy, report.primes_greedy, report.intro_samples[0], report.primes_samples[0]):
        print(f"[{answer.prompt}] ({answer.num_tokens} tokens, eos={answer.stopped}) {answer.text}")
    print(f"wrote {args.out} ({_size_mb(args.out):.1f} MB) in {timings.total / 60:.1f} minutes")
    return report


if __name__ == "__main__":
    main()
