"""The workloads only ``postprocess`` is graded on: requests that finish for each of their reasons.

Role: grading (this exercise's own workloads; the shared ones and how they are built: ``step_workloads``).
"""

from __future__ import annotations

import random

from nanovllm_teach.i18n import Text
from nanovllm_teach.runs import Workload
from nanovllm_teach.sampling_params import SamplingParams
from nanovllm_teach.step_workloads import BASE, ignore_eos, random_prompts


def _finish_prompts() -> list[list[int]]:
    """Prompts on which the shipped model samples EOS after a few to a few dozen tokens, greedily."""
    rng = random.Random(7)
    drawn = [[rng.randrange(10, 200) for _ in range(rng.randrange(4, 20))] for _ in range(13)]
    return [drawn[4], drawn[6], drawn[7], drawn[8], drawn[12], drawn[6], drawn[7]]


FINISH_REASONS = Workload(
    "finish_reasons",
    Text(en="7 requests ending on EOS, on max_tokens, and with ignore_eos going past an EOS",
         zh="7 个请求：有的因 EOS 结束，有的因 max_tokens 结束，有的带 ignore_eos 越过 EOS 继续生成"),
    dict(BASE, num_kvcache_blocks=96, max_num_seqs=8),
    _finish_prompts(),
    [SamplingParams(temperature=0.0, max_tokens=n, ignore_eos=flag)
     for n, flag in zip([40, 40, 40, 10, 12, 24, 40], [False] * 5 + [True] * 2)])

MODEL_LEN = Workload(
    "model_len",
    Text(en="3 requests that outgrow max_model_len=32 before their max_tokens, one prompt in chunks",
         zh="3 个请求在达到 max_tokens 之前就超出了 max_model_len=32，其中一个 prompt 分块计算"),
    dict(BASE, max_model_len=32, num_kvcache_blocks=64, max_num_seqs=8, max_num_batched_tokens=20),
    random_prompts(13, [24, 28, 9]), ignore_eos([20, 20, 30]))
