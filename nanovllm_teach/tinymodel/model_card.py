"""The model card (README.md) of the shipped tiny Qwen3, filled in with what the training run measured.

Not an engine layer: part of the tool that trained the checkpoint in
``nanovllm_teach/assets/qwen3-tiny`` (run by ``python -m nanovllm_teach.tinymodel.train``).
``model_card`` writes the card from the model, tokenizer, ``TrainConfig``, evaluation report and
the ``Timings`` of the run's phases; ``directory_size_mb`` is the checkpoint size it reports.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from transformers import PreTrainedTokenizerFast, Qwen3ForCausalLM

from nanovllm_teach.tinymodel.config import TrainConfig
from nanovllm_teach.tinymodel.corpus import ENDOFTEXT, INTRO_ANSWERS
from nanovllm_teach.tinymodel.evaluation import INTRO_PROMPT, PRIMES_PROMPT, Answer, EvalReport


@dataclass
class Timings:
    """Wall-clock seconds of each phase of the run, measured with ``time.perf_counter``."""

    data: float = 0.0  # corpus generation, tokenizer training, encoding, batching
    train: float = 0.0
    evaluate: float = 0.0

    @property
    def total(self) -> float:
        return self.data + self.train + self.evaluate


def directory_size_mb(directory: Path) -> float:
    """Total size of the files directly in ``directory``, in megabytes (10^6 bytes)."""
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
| weights file | {weights_mb:.1f} MB; whole directory {directory_size_mb(out):.1f} MB |

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

Synthetic single-turn chats from `nanovllm_teach/tinymodel/corpus.py` (random seed {cfg.seed}),
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
