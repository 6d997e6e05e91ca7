"""Train the tiny Qwen3 checkpoint that ships with nanovllm_teach, from nothing, on a CPU.

Run it as::

    python -m nanovllm_teach.tinymodel.train --out nanovllm_teach/assets/qwen3-tiny

Not an engine layer: this is the tool that trained the shipped checkpoint. ``main`` does, in
order, everything that producing a small chat model involves, one module of this package each:

1. generate the synthetic chat corpus (``corpus.py``, fixed seed);
2. train a byte-level BPE tokenizer on it with the ``tokenizers`` library, with Qwen's
   pre-tokenizer regex except that numbers stay whole, so "97" is one token (``tokenizer.py``);
3. build a randomly initialised ``transformers.Qwen3ForCausalLM`` from the run's settings
   (``config.py``) and train it with plain torch (AdamW, warmup + cosine learning rate), with the
   loss on the assistant's tokens only (``training.py``);
4. evaluate it with Hugging Face ``generate``, greedy and temperature 0.6 (``evaluation.py``);
5. write a standard Hugging Face checkpoint directory (``checkpoint.py``) plus a model card with
   the measured numbers (``model_card.py``).

Everything is seeded and single-process with ``torch.set_num_threads(2)``; two runs give
bit-identical weights. On the 2-core CPU machine it was developed on, the whole script took
8.2 minutes (7.9 of them training), and 9.3 minutes in a run that shared the CPU with other
work; the model card has the measured numbers of the shipped checkpoint. Pass ``--steps 200``
for a quick trial run.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time
from dataclasses import asdict
from pathlib import Path

# OpenMP threads that wait by spinning are fastest on an idle machine, but when other processes
# share the two cores a spinning thread steals the core its partner needs and every step becomes
# ~10x slower. Sleeping waiters cost little when idle and keep a busy machine usable. The setting
# is read when torch loads OpenMP, so it must come before the first ``import torch``.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402
from transformers import Qwen3ForCausalLM  # noqa: E402

from nanovllm_teach.tinymodel.checkpoint import write_checkpoint  # noqa: E402
from nanovllm_teach.tinymodel.config import TrainConfig, build_model_config  # noqa: E402
from nanovllm_teach.tinymodel.corpus import generate_corpus, render  # noqa: E402
from nanovllm_teach.tinymodel.evaluation import EvalReport, evaluate  # noqa: E402
from nanovllm_teach.tinymodel.model_card import Timings, directory_size_mb  # noqa: E402
from nanovllm_teach.tinymodel.tokenizer import build_tokenizer, encode_conversation  # noqa: E402
from nanovllm_teach.tinymodel.training import make_batches, train_model  # noqa: E402


def seed_everything(seed: int) -> None:
    """Fix every source of randomness the run uses, and the thread count that affects float sums."""
    random.seed(seed)
    torch.manual_seed(seed)
    torch.set_num_threads(2)
    torch.use_deterministic_algorithms(True)


def main(argv: list[str] | None = None) -> EvalReport:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
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
    print(f"wrote {args.out} ({directory_size_mb(args.out):.1f} MB) in {timings.total / 60:.1f} minutes")
    return report


if __name__ == "__main__":
    main()
