"""Orchestration: the recorded scenarios behind the shipped traces in ``traces/``.

Each scenario is a fixed ``Workload`` (engine settings, prompts, sampling parameters with per-request
seeds, arrival steps) that makes one lesson visible: the two-request walkthrough, forced preemption,
prefix-cache hits, chunked prefill, the CPU benchmark workload, and the same workload under static and
continuous batching. ``record(name, path)`` runs one on the shipped model through ``runs.record_run`` and
writes its trace; running it again gives the same events, timings and memory readings aside.

Each scenario's lesson is written in both languages (``LESSONS``). A trace's header carries it as
``lesson`` in English, which every reader of a trace can show as it is; ``trace_lesson(header)`` gives it
in the chosen language where a learner reads it (the HTML report), so the shipped traces stay as they were
recorded.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any, Sequence

from nanovllm_teach.i18n import Text, say
from nanovllm_teach.runs import Chat, Workload, record_run
from nanovllm_teach.sampling_params import SamplingParams

UNKNOWN_SCENARIO = Text(en="unknown scenario {name!r}; choose from: {names}", zh="没有场景 {name!r}；可选：{names}")

# The walkthrough's two prompts, as in the reference nano-vllm run (Qwen3-0.6B on a GPU). The shipped model
# answers the first in about 26 tokens and the second in about 85: at 64 tokens, one request finishes on
# EOS and the other is cut at max_tokens, so the batch falls from 2 to 1 and then the run ends on the cut.
WALKTHROUGH_PROMPTS = ["introduce yourself", "list all prime numbers within 100"]
WALKTHROUGH_MAX_TOKENS = 64
WALKTHROUGH_TEMPERATURE = 0.6


def walkthrough_params(temperature: float = WALKTHROUGH_TEMPERATURE, max_tokens: int = WALKTHROUGH_MAX_TOKENS,
                       seed: int = 0) -> list[SamplingParams]:
    """The walkthrough's sampling parameters: per-request seeds ``seed``, ``seed + 1``."""
    return [SamplingParams(temperature=temperature, max_tokens=max_tokens, seed=seed + i)
            for i in range(len(WALKTHROUGH_PROMPTS))]


def _mixed_chat(n: int, rng: random.Random, system: str | None = None) -> list[Chat]:
    asks = [lambda: "introduce yourself",
            lambda: f"list all prime numbers within {rng.choice(range(10, 101, 10))}",
            lambda: f"count from {(a := rng.randint(1, 20))} to {a + rng.randint(3, 15)}",
            lambda: f"what is {rng.randint(1, 50)} + {rng.randint(1, 50)}",
            lambda: f"repeat {rng.choice(['hello', 'cache', 'block', 'token'])} {rng.randint(2, 6)} times"]
    return [Chat(rng.choice(asks)(), system) for _ in range(n)]


def _greedy(n: int, max_tokens: int) -> list[SamplingParams]:
    return [SamplingParams(temperature=0.0, max_tokens=max_tokens) for _ in range(n)]


SYSTEM_PROMPT = ("You are the tiny model that ships with nanovllm_teach. You answer briefly. "
                 "You count, add numbers, list prime numbers and repeat words when asked.")


def bench_workload(num_requests: int, token_ids: Sequence[int], seed: int, **settings: Any) -> Workload:
    """nano-vllm's benchmark shape on a CPU scale: prompts of 16–256 ids drawn from ``token_ids``,
    16–256 output tokens each with ``ignore_eos``."""
    rng = random.Random(seed)
    prompts = [[rng.choice(token_ids) for _ in range(rng.randint(16, 256))] for _ in range(num_requests)]
    params = [SamplingParams(temperature=0.0, max_tokens=rng.randint(16, 256), ignore_eos=True)
              for _ in range(num_requests)]
    return Workload(f"bench_{num_requests}", f"{num_requests} random requests (nano-vllm's benchmark shape)",
                    settings, prompts, params)


def plain_token_ids(tokenizer: Any) -> list[int]:
    """Every id of the vocabulary except the added control tokens (<|im_start|>, <|im_end|>, ...)."""
    added = set(tokenizer.get_added_vocab().values())
    return [i for i in range(len(tokenizer)) if i not in added]


# The shipped tokenizer's plain tokens: ids 0-2 are its control tokens, 3-636 are text (in Qwen3's own
# vocabulary too, whose control tokens come after 151,642). ``plain_token_ids`` finds them for any tokenizer.
SHIPPED_PLAIN_IDS = range(3, 637)


def poisson_arrivals(n: int, mean_gap_steps: float, seed: int, at_start: int = 0) -> list[int]:
    """Arrival steps of a Poisson process: ``at_start`` requests at step 0, then exponential gaps."""
    rng = random.Random(seed)
    arrivals, t = [0] * min(at_start, n), 0.0
    while len(arrivals) < n:
        t += rng.expovariate(1 / mean_gap_steps)
        arrivals.append(int(t))
    return arrivals


LESSONS: dict[str, Text] = {
    "walkthrough": Text(
        en="two requests, one prefill, decode until one finishes on EOS, then the other is cut at max_tokens",
        zh="两个请求：一步预填充，然后解码，直到其中一个遇到 EOS 结束，另一个在 max_tokens 处被截断"),
    "preemption": Text(
        en="a KV cache too small for everyone: the newest sequences are preempted and recomputed",
        zh="KV 缓存装不下所有序列：最新的序列被抢占，之后重计算"),
    "prefix_cache": Text(
        en="a shared system prompt: later requests reuse the first one's KV blocks",
        zh="共用同一段 system prompt：后到的请求复用第一个请求的 KV 块"),
    "chunked_prefill": Text(
        en="a prompt longer than the step's token budget is prefilled in chunks",
        zh="prompt 比一步的 token 预算还长，于是分块预填充"),
    "cpu_benchmark": Text(
        en="the CPU benchmark workload: 64 random requests, continuous batching at scale",
        zh="CPU 基准测试的工作负载：64 个随机请求，成规模的连续批处理"),
    "continuous_arrivals": Text(
        en="requests arriving over time, continuous batching: late arrivals join at once",
        zh="请求陆续到达，连续批处理：后到的请求立即加入"),
    "static_arrivals": Text(
        en="the same arrivals under static batching: late arrivals wait for the batch to drain",
        zh="同样的到达过程，换成静态批处理：后到的请求要等当前 batch 全部跑完"),
}


def lesson(name: str, lang: str | None = None) -> str:
    """Scenario ``name``'s lesson in ``lang`` (None: the chosen language)."""
    if name not in LESSONS:
        raise ValueError(say(UNKNOWN_SCENARIO, lang, name=name, names=", ".join(LESSONS)))
    return say(LESSONS[name], lang)


def trace_lesson(header: dict[str, Any], lang: str | None = None) -> str | None:
    """The lesson a trace's header carries, in ``lang``: the scenario's own words when the header holds a
    shipped scenario's English lesson, else the header's text as it is (a run of one's own, another
    version's words); None without one."""
    text = header.get("lesson")
    scenario = LESSONS.get(str(header.get("scenario")))
    if scenario is not None and text == scenario.en:
        return say(scenario, lang)
    return None if text is None else str(text)


def _scenarios() -> list[Workload]:
    long_system = " ".join([SYSTEM_PROMPT] * 12)
    chunked = [Chat("list all prime numbers within 50", long_system), Chat("introduce yourself"),
               Chat("count from 3 to 9")]
    arrivals = _mixed_chat(12, random.Random(3))
    arrival_steps = poisson_arrivals(12, mean_gap_steps=8, seed=3, at_start=4)
    bench = bench_workload(64, SHIPPED_PLAIN_IDS, seed=0)
    return [
        Workload("walkthrough", LESSONS["walkthrough"].en, dict(num_kvcache_blocks=64),
                 [Chat(p) for p in WALKTHROUGH_PROMPTS], walkthrough_params()),
        Workload("preemption", LESSONS["preemption"].en, dict(kvcache_block_size=16, num_kvcache_blocks=12),
                 _mixed_chat(8, random.Random(1)), _greedy(8, 96)),
        # The first request arrives alone; the rest arrive once its blocks are cached and hashed.
        Workload("prefix_cache", LESSONS["prefix_cache"].en, dict(kvcache_block_size=16, num_kvcache_blocks=128),
                 _mixed_chat(8, random.Random(2), SYSTEM_PROMPT), _greedy(8, 64), arrival_steps=[0] + [2] * 7),
        Workload("chunked_prefill", LESSONS["chunked_prefill"].en,
                 dict(kvcache_block_size=16, num_kvcache_blocks=128, max_num_batched_tokens=128),
                 chunked, _greedy(3, 64)),
        Workload("cpu_benchmark", LESSONS["cpu_benchmark"].en, dict(kvcache_block_size=16, num_kvcache_blocks=2048),
                 bench.prompts, bench.params),
        Workload("continuous_arrivals", LESSONS["continuous_arrivals"].en,
                 dict(kvcache_block_size=16, num_kvcache_blocks=256), arrivals, _greedy(12, 96), arrival_steps),
        Workload("static_arrivals", LESSONS["static_arrivals"].en,
                 dict(kvcache_block_size=16, num_kvcache_blocks=256, scheduling_policy="static"),
                 arrivals, _greedy(12, 96), arrival_steps),
    ]


SCENARIOS: dict[str, Workload] = {w.name: w for w in _scenarios()}


def record(name: str, path: str | Path, model: str | Path | None = None, console=None) -> list[dict[str, Any]]:
    """Run scenario ``name`` and write its trace to ``path``; returns the generation outputs."""
    from nanovllm_teach.trace.recorder import TraceRecorder

    if name not in SCENARIOS:
        raise ValueError(say(UNKNOWN_SCENARIO, name=name, names=", ".join(SCENARIOS)))
    scenario = SCENARIOS[name]
    recorder = TraceRecorder(path, keep_in_memory=False, sinks=[console] if console else None)
    return record_run(scenario, recorder, model, metadata={"scenario": name, "lesson": scenario.description})
