"""The simulated engine decides exactly as the real one: the real engine runs the shipped model on CPU, then
the same workload, with the real run's output lengths, goes through the same engine with
``runner="simulated"``; every scheduling decision (who runs each step, which blocks, preemptions,
prefix-cache hits) must agree, as ``diff_decisions`` sees them, ignoring times."""

from __future__ import annotations

import random

from nanovllm_teach import LLM, SamplingParams
from nanovllm_teach.assets import default_model_path
from nanovllm_teach.workload.requests import Request
from nanovllm_teach.trace import DECISION_EVENTS, Trace, TraceRecorder, diff_decisions

SETTINGS = dict(kvcache_block_size=16, num_kvcache_blocks=14, max_num_batched_tokens=96, max_num_seqs=6,
                max_model_len=256)


def test_scheduling_decisions_match_the_real_engine():
    rng = random.Random(5)
    system = [rng.randrange(3, 640) for _ in range(40)]  # a shared prefix of two and a half blocks
    prompts = [system + [rng.randrange(3, 640) for _ in range(rng.randint(5, 40))] for _ in range(10)]
    max_tokens = [rng.randint(10, 60) for _ in prompts]
    real_rec = TraceRecorder()
    llm = LLM(trace=real_rec, **SETTINGS)
    try:
        outputs = llm.generate(prompts, [SamplingParams(temperature=0, max_tokens=n) for n in max_tokens],
                               use_tqdm=False)
    finally:
        llm.close()
    real = Trace.from_recorder(real_rec)
    assert real.events_named("PREEMPT") and real.events_named("PREFIX_CACHE_HIT")  # the workload exercises both

    sim_rec = TraceRecorder()
    sim = LLM(default_model_path(), runner="simulated", hardware="l4", trace=sim_rec, **SETTINGS)
    workload = [Request(0.0, prompt, len(out["token_ids"]), max_tokens=n)
                for prompt, out, n in zip(prompts, outputs, max_tokens)]
    sim.run_workload(workload)
    sim.close()
    simulated = Trace.from_recorder(sim_rec)
    assert diff_decisions(simulated, real) is None
    decisions = [e for e in real.events if e.event in DECISION_EVENTS]
    assert len(decisions) == len([e for e in simulated.events if e.event in DECISION_EVENTS]) > 100

    # The comparison can fail: one request's answer a token shorter changes what follows.
    workload[3] = Request(0.0, workload[3].prompt_token_ids, workload[3].output_len - 1, max_tokens=max_tokens[3])
    other_rec = TraceRecorder()
    LLM(default_model_path(), runner="simulated", hardware="l4", trace=other_rec, **SETTINGS).run_workload(workload)
    assert diff_decisions(Trace.from_recorder(other_rec), real) is not None
