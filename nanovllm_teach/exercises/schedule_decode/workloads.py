"""The workload only ``schedule_decode`` is graded on besides the shared ones: a cap on sequences per step.

Role: grading (this exercise's own workloads; the shared ones and how they are built: ``step_workloads``).
"""

from __future__ import annotations

from nanovllm_teach.i18n import Text
from nanovllm_teach.runs import Workload
from nanovllm_teach.step_workloads import BASE, ignore_eos, random_prompts

SEQ_CAP = Workload(
    "seq_cap",
    Text(en="7 requests, at most 3 sequences per step: more sequences run than one decode step may take",
         zh="7 个请求，每步最多 3 条序列：运行中的序列比一个解码步能容纳的多"),
    dict(BASE, num_kvcache_blocks=96, max_num_seqs=3),
    random_prompts(1, [6, 11, 4, 9, 13, 5, 8]), ignore_eos([10, 6, 12, 8, 5, 9, 7]))
