"""The small step workloads a learner's scheduling and block code is run on beside the engine's own: the
exercises grade on them, the build track's chapters on the block manager and the scheduler check on them.

Role: orchestration (course data: fixed ``runs.Workload`` records). Emits no events.

Greedy sampling and ``ignore_eos`` make every request run to its ``max_tokens``, so *when* things happen (who
is preempted, which block a token lands in) does not depend on what the model writes; blocks of 4 tokens and a
few dozen of them make boundaries and preemption come often. A workload only one exercise runs lives in that
exercise's folder, built with ``BASE``, ``random_prompts`` and ``ignore_eos`` from here.
"""

from __future__ import annotations

import random

from nanovllm_teach.i18n import Text
from nanovllm_teach.runs import Workload
from nanovllm_teach.sampling_params import SamplingParams

# Small and CPU-only, the same on every machine so that every machine gives the same schedule.
BASE = dict(device="cpu", enforce_eager=True, max_model_len=128, max_num_batched_tokens=256,
            kvcache_block_size=4)


# The most steps a checked run may take: every reference run needs fewer than a quarter of this, and a
# learner's scheduler that keeps preempting and recomputing is stopped here.
MAX_STEPS = 400


def random_prompts(seed: int, lengths: list[int]) -> list[list[int]]:
    # ids 10-199: plain tokens in any tokenizer this package ships
    rng = random.Random(seed)
    return [[rng.randrange(10, 200) for _ in range(n)] for n in lengths]


def ignore_eos(max_tokens: list[int]) -> list[SamplingParams]:
    return [SamplingParams(temperature=0.0, max_tokens=n, ignore_eos=True) for n in max_tokens]


TIGHT_CACHE = Workload(
    "tight_cache",
    Text(en="6 requests share 24 KV blocks of 4 tokens: blocks run out and sequences are preempted",
         zh="6 个请求共用 24 个 KV 块，每块 4 个 token：块不够用，序列被抢占"),
    dict(BASE, num_kvcache_blocks=24, max_num_seqs=8),
    random_prompts(0, [9, 5, 14, 7, 12, 6]), ignore_eos([16, 20, 12, 18, 14, 22]))

LATE_ARRIVALS = Workload(
    "late_arrivals",
    Text(en="8 requests arriving over 12 steps into 20 blocks: preemption while others join",
         zh="8 个请求在 12 步内陆续到达，共用 20 个块：有请求加入的同时发生抢占"),
    dict(BASE, num_kvcache_blocks=20, max_num_seqs=4),
    random_prompts(2, [7, 10, 3, 12, 8, 5, 9, 6]), ignore_eos([14, 9, 17, 6, 12, 15, 8, 11]),
    arrival_steps=[0, 0, 2, 3, 5, 7, 9, 12])


def _shared_prefix_prompts() -> list[list[int]]:
    """Blocks equal under different prefixes: ``Y`` follows both ``P`` and ``Q``. A and B, prefilled together,
    cache ``Y`` twice; C and D start with ``P, Y`` and must reuse A's blocks, not B's second one (its K/V was
    computed after ``Q``); E shares only ``Q``."""
    p, q, y = [11, 12, 13, 14], [21, 22, 23, 24], [31, 32, 33, 34]
    return [p + y + [41, 42], q + y + [43], p + y + [44, 45, 46], p + y + [41, 47], q + [48, 49, 50]]


SHARED_PREFIXES = Workload(
    "shared_prefixes",
    Text(en="5 requests whose prompts share 4-token blocks, some under different prefixes",
         zh="5 个请求的 prompt 共享 4 个 token 的块，其中一些块跟在不同的前缀之后"),
    dict(BASE, num_kvcache_blocks=64, max_num_seqs=8),
    _shared_prefix_prompts(), ignore_eos([6, 6, 6, 6, 6]), arrival_steps=[0, 0, 2, 2, 3])


def _prefix_reuse_prompts() -> list[list[int]]:
    """A, B and C start with the block ``P`` (A and B also with ``Q``): ``P`` has three holders at once. D
    arrives after all of them finished: its ``P, Q`` are freed blocks that still hold their K/V, taken back
    out of the free list. E has ``Q`` after another prefix, so it shares nothing."""
    p, q, r = [11, 12, 13, 14], [21, 22, 23, 24], [31, 32, 33, 34]
    return [p + q + [41, 42], p + q + [43, 44, 45], p + [46, 47], p + q + [48], r + q + [49, 50]]


PREFIX_REUSE = Workload(
    "prefix_reuse",
    Text(en="5 requests: a block held by 3 sequences at once, and cached blocks found again after their holders "
            "finished",
         zh="5 个请求：一个块同时被 3 条序列持有，已缓存的块在持有者都结束之后又被找回"),
    dict(BASE, num_kvcache_blocks=64, max_num_seqs=8),
    _prefix_reuse_prompts(), ignore_eos([4, 12, 10, 5, 5]), arrival_steps=[0, 1, 1, 30, 30])


SMALL_BUDGET = Workload(
    "small_budget",
    Text(en="4 prompts of 5-30 tokens, 16 tokens per step: long prompts are chunked, others wait",
         zh="4 个 5-30 个 token 的 prompt，每步 16 个 token：长 prompt 被分块，其余的等待"),
    dict(BASE, num_kvcache_blocks=96, max_num_seqs=8, max_num_batched_tokens=16),
    random_prompts(11, [30, 9, 22, 5]), ignore_eos([6, 8, 5, 7]), arrival_steps=[0, 0, 1, 4])


def _common_prefix_prompts() -> list[list[int]]:
    """Three prompts after a 12-token common prefix, then one that shares only its first block."""
    prefix = list(range(60, 72))
    return [prefix + [80, 81, 82], prefix + [90, 91], prefix + [100, 101, 102, 103], prefix[:4] + [110] * 6]


CACHED_UNDER_BUDGET = Workload(
    "cached_under_budget",
    Text(en="prompts sharing a 12-token prefix, 10 tokens per step: only uncached tokens count",
         zh="prompt 共享 12 个 token 的前缀，每步 10 个 token：只有未缓存的 token 计入预算"),
    dict(BASE, num_kvcache_blocks=64, max_num_seqs=8, max_num_batched_tokens=10),
    _common_prefix_prompts(), ignore_eos([5, 5, 5, 5]), arrival_steps=[0, 3, 3, 4])
