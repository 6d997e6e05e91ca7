"""The workloads ``scheduling_policy`` is graded on: requests arriving in (simulated) time.

They run on the simulated engine (``runner="simulated"``): the real scheduler and block manager make every
decision, and the model's step times are predicted for Qwen3-0.6B on an NVIDIA L4 (the shipped shape and
device), so a run takes milliseconds and gives the same numbers on every machine. Prompts of many
lengths share a prefill token budget of 2048 per step: who is admitted first decides who waits.

- ``long_prompts_first``: one burst, the four long prompts in front. First come, first served makes the
  eight short ones wait behind them.
- ``mixed_bursts``: three bursts, each with long prompts at its start, in its middle and at its end; the
  order of arrival is no guide (last come, first served is no better than first come).
- ``steady_stream``: a burst with four long prompts, then a steady stream of short ones. A policy that
  always takes the shortest prompt keeps the long ones waiting for as long as short ones keep coming.

Token ids are drawn from ``random.Random(seed)`` per workload; the simulated model ends each answer after
its ``output_len`` tokens, so what happens depends only on the policy.

Emits no events (the engine it runs does).
"""

from __future__ import annotations

import random

from nanovllm_teach.i18n import Text
from nanovllm_teach.runs import TimedWorkload
from nanovllm_teach.workload.requests import Request

MODEL = "qwen3-0.6b"
HARDWARE = "l4"
SETTINGS = dict(runner="simulated", hardware=HARDWARE, max_num_batched_tokens=2048, max_num_seqs=64,
                kvcache_block_size=256, max_model_len=4096)


def _requests(seed: int, arrivals: list[float], prompt_lens: list[int], output_lens: tuple[int, int]) -> list[Request]:
    rng = random.Random(seed)
    return [Request(t, [rng.randrange(10, 150_000) for _ in range(n)], rng.randint(*output_lens))
            for t, n in zip(arrivals, prompt_lens)]


def _short(rng: random.Random, n: int, lo: int = 40, hi: int = 160) -> list[int]:
    return [rng.randint(lo, hi) for _ in range(n)]


def _long_prompts_first() -> TimedWorkload:
    lens = [1500, 1800, 1200, 1600, 60, 90, 40, 120, 80, 50, 70, 100]
    return TimedWorkload("long_prompts_first",
                         Text(en="one burst of 12 requests, the 4 long prompts (1200-1800 tokens) in front of 8 short "
                                 "ones",
                              zh="一波突发的 12 个请求，4 个 1200-1800 个 token 的长 prompt 排在 8 个短 prompt 前面"),
                         _requests(1, [0.0] * len(lens), lens, (20, 60)), MODEL, dict(SETTINGS))


def _mixed_bursts() -> TimedWorkload:
    rng = random.Random(2)
    lens: list[int] = []
    arrivals: list[float] = []
    for burst in range(3):
        one = [1400, *_short(rng, 5), 1700, *_short(rng, 5), 1500]
        lens += one
        arrivals += [0.25 * burst] * len(one)
    return TimedWorkload("mixed_bursts",
                         Text(en="3 bursts of 13 requests, 0.25 s apart, each with long prompts at its start, middle "
                                 "and end",
                              zh="3 波突发，每波 13 个请求，相隔 0.25 秒，每波的开头、中间和末尾都有长 prompt"),
                         _requests(2, arrivals, lens, (20, 60)), MODEL, dict(SETTINGS))


def _steady_stream() -> TimedWorkload:
    rng = random.Random(3)
    lens = [1700, 1900, 1500, 1800, *_short(rng, 86, 50, 200)]
    arrivals = [0.0] * 16 + [0.004 * (i + 1) for i in range(len(lens) - 16)]
    return TimedWorkload("steady_stream",
                         Text(en="a burst of 16 (4 long prompts first), then a short prompt every 4 ms for 0.3 s",
                              zh="先是一波 16 个请求，4 个长 prompt 在最前；然后 0.3 秒内每 4 ms 来一个短 prompt"),
                         _requests(3, arrivals, lens, (10, 30)), MODEL, dict(SETTINGS))


LONG_PROMPTS_FIRST = _long_prompts_first()
MIXED_BURSTS = _mixed_bursts()
STEADY_STREAM = _steady_stream()

POLICY_WORKLOADS: dict[str, TimedWorkload] = {w.name: w for w in [LONG_PROMPTS_FIRST, MIXED_BURSTS, STEADY_STREAM]}
