"""Orchestration: the recorded scenarios behind the shipped traces in ``traces/``.

Each scenario is a fixed workload (prompts, sampling parameters with per-request seeds, arrival steps)
and the engine settings that make one lesson visible: the seed's two-request walkthrough, forced
preemption, prefix-cache hits, chunked prefill, the CPU benchmark workload, and the same workload under
static and continuous batching. ``record(name, path)`` runs one on the shipped model and writes its trace;
running it again gives the same events, timings and memory readings aside.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from nanovllm_teach.sampling_params import SamplingParams


@dataclass(frozen=True)
class Workload:
    prompts: list[str | list[int]]
    params: list[SamplingParams]
    arrival_steps: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class Scenario:
    name: str
    lesson: str
    settings: dict[str, Any]
    build: Callable[[Any], Workload]  # given the tokenizer
    seed: int = 0


def _chat(tokenizer, user: str, system: str | None = None) -> str:
    messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": user}]
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


SEED_PROMPTS = ["introduce yourself", "list all prime numbers within 100"]


def _seed_walkthrough(tokenizer) -> Workload:
    prompts = [_chat(tokenizer, p) for p in SEED_PROMPTS]
    return Workload(prompts, [SamplingParams(temperature=0.6, max_tokens=256, seed=i) for i in range(2)])


def _mixed_chat(n: int, rng: random.Random) -> list[str]:
    asks = [lambda: "introduce yourself",
            lambda: f"list all prime numbers within {rng.choice(range(10, 101, 10))}",
            lambda: f"count from {(a := rng.randint(1, 20))} to {a + rng.randint(3, 15)}",
            lambda: f"what is {rng.randint(1, 50)} + {rng.randint(1, 50)}",
            lambda: f"repeat {rng.choice(['hello', 'cache', 'block', 'token'])} {rng.randint(2, 6)} times"]
    return [rng.choice(asks)() for _ in range(n)]


def _preemption(tokenizer) -> Workload:
    rng = random.Random(1)
    prompts = [_chat(tokenizer, ask) for ask in _mixed_chat(8, rng)]
    return Workload(prompts, [SamplingParams(temperature=0.0, max_tokens=96) for _ in prompts])


SYSTEM_PROMPT = ("You are the tiny model that ships with nanovllm_teach. You answer briefly. "
                 "You count, add numbers, list prime numbers and repeat words when asked.")


def _prefix_cache(tokenizer) -> Workload:
    rng = random.Random(2)
    prompts = [_chat(tokenizer, ask, SYSTEM_PROMPT) for ask in _mixed_chat(8, rng)]
    # The first request arrives alone; the rest arrive once its blocks are cached and hashed.
    return Workload(prompts, [SamplingParams(temperature=0.0, max_tokens=64) for _ in prompts],
                    arrival_steps=[0] + [2] * 7)


def _chunked_prefill(tokenizer) -> Workload:
    long_system = " ".join([SYSTEM_PROMPT] * 12)
    prompts = [_chat(tokenizer, "list all prime numbers within 50", long_system),
               _chat(tokenizer, "introduce yourself"), _chat(tokenizer, "count from 3 to 9")]
    return Workload(prompts, [SamplingParams(temperature=0.0, max_tokens=64) for _ in prompts])


def bench_workload(num_requests: int, token_ids: Sequence[int], seed: int) -> Workload:
    """nano-vllm's benchmark shape on a CPU scale: prompts of 16–256 ids drawn from ``token_ids``,
    16–256 output tokens each with ``ignore_eos``."""
    rng = random.Random(seed)
    prompts = [[rng.choice(token_ids) for _ in range(rng.randint(16, 256))] for _ in range(num_requests)]
    params = [SamplingParams(temperature=0.0, max_tokens=rng.randint(16, 256), ignore_eos=True)
              for _ in range(num_requests)]
    return Workload(prompts, params)


def plain_token_ids(tokenizer) -> list[int]:
    """Every id of the vocabulary except the added control tokens (<|im_start|>, <|im_end|>, ...)."""
    added = set(tokenizer.get_added_vocab().values())
    return [i for i in range(len(tokenizer)) if i not in added]


def _cpu_benchmark(tokenizer) -> Workload:
    return bench_workload(64, plain_token_ids(tokenizer), seed=0)


def poisson_arrivals(n: int, mean_gap_steps: float, seed: int, at_start: int = 0) -> list[int]:
    """Arrival steps of a Poisson process: ``at_start`` requests at step 0, then exponential gaps."""
    rng = random.Random(seed)
    arrivals, t = [0] * min(at_start, n), 0.0
    while len(arrivals) < n:
        t += rng.expovariate(1 / mean_gap_steps)
        arrivals.append(int(t))
    return arrivals


def _arrivals(tokenizer) -> Workload:
    rng = random.Random(3)
    prompts = [_chat(tokenizer, ask) for ask in _mixed_chat(12, rng)]
    return Workload(prompts, [SamplingParams(temperature=0.0, max_tokens=96) for _ in prompts],
                    poisson_arrivals(12, mean_gap_steps=8, seed=3, at_start=4))


SCENARIOS: dict[str, Scenario] = {s.name: s for s in [
    Scenario("seed_walkthrough", "two requests, one prefill, decode until one finishes early (seed 000, 2.4.3)",
             dict(num_kvcache_blocks=64), _seed_walkthrough),
    Scenario("preemption", "a KV cache too small for everyone: the newest sequences are preempted and recomputed",
             dict(kvcache_block_size=16, num_kvcache_blocks=12), _preemption),
    Scenario("prefix_cache", "a shared system prompt: later requests reuse the first one's KV blocks",
             dict(kvcache_block_size=16, num_kvcache_blocks=128), _prefix_cache),
    Scenario("chunked_prefill", "a prompt longer than the step's token budget is prefilled in chunks",
             dict(kvcache_block_size=16, num_kvcache_blocks=128, max_num_batched_tokens=128), _chunked_prefill),
    Scenario("cpu_benchmark", "the CPU benchmark workload: 64 random requests, continuous batching at scale",
             dict(kvcache_block_size=16, num_kvcache_blocks=2048), _cpu_benchmark),
    Scenario("continuous_arrivals", "requests arriving over time, continuous batching: late arrivals join at once",
             dict(kvcache_block_size=16, num_kvcache_blocks=256), _arrivals),
    Scenario("static_arrivals", "the same arrivals under static batching: late arrivals wait for the batch to drain",
             dict(kvcache_block_size=16, num_kvcache_blocks=256, scheduling_policy="static"), _arrivals),
]}


def record(name: str, path: str | Path, model: str | Path | None = None, console=None) -> list[dict[str, Any]]:
    """Run scenario ``name`` and write its trace to ``path``; returns the generation outputs."""
    from nanovllm_teach.llm import LLM
    from nanovllm_teach.trace.recorder import TraceRecorder

    if name not in SCENARIOS:
        raise ValueError(f"unknown scenario {name!r}; choose from: {', '.join(SCENARIOS)}")
    scenario = SCENARIOS[name]
    recorder = TraceRecorder(path, keep_in_memory=False, sinks=[console] if console else None)
    llm = LLM(model, trace=recorder, trace_metadata={"scenario": name, "lesson": scenario.lesson,
                                                     "workload_seed": scenario.seed}, **scenario.settings)
    try:
        workload = scenario.build(llm.tokenizer)
        return llm.generate(workload.prompts, workload.params, use_tqdm=False,
                            arrival_steps=workload.arrival_steps or None)
    finally:
        llm.close()
