"""The simulated engine decides exactly as the real one: the real engine runs the shipped model on CPU, then
the same workload, with the real run's output lengths, goes through the real Scheduler on a SimulatedRunner;
every scheduling decision (who runs each step, which blocks, preemptions, prefix-cache hits) must agree,
as ``nanovllm-teach diff`` sees them, ignoring times."""

from __future__ import annotations

import random

from nanovllm_teach import LLM, SamplingParams
from nanovllm_teach.assets import default_model_path
from nanovllm_teach.sim.cost_model import load_shape
from nanovllm_teach.sim.driver import simulate
from nanovllm_teach.sim.hardware import DEVICES
from nanovllm_teach.sim.runner import SimulatedRunner
from nanovllm_teach.sim.workload import Request
from nanovllm_teach.trace.diff import VOLATILE, diff_traces
from nanovllm_teach.trace.reader import Trace
from nanovllm_teach.trace.recorder import TraceRecorder
from nanovllm_teach.trace.schema import TraceEvent

DECISIONS = ("SCHEDULE_PREFILL", "SCHEDULE_DECODE", "PREEMPT", "PREFIX_CACHE_HIT", "BLOCK_ALLOCATE", "BLOCK_FREE",
             "STATE_TRANSITION")
SETTINGS = dict(kvcache_block_size=16, num_kvcache_blocks=14, max_num_batched_tokens=96, max_num_seqs=6,
                max_model_len=256)


def _decisions(rec: TraceRecorder) -> Trace:
    kept = [e for e in rec.events if e.event in DECISIONS]
    return Trace({}, [TraceEvent(i, 0, e.event, e.phase, e.step, e.reason, e.stats) for i, e in enumerate(kept)])


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
    real = _decisions(real_rec)
    assert real.events_named("PREEMPT") and real.events_named("PREFIX_CACHE_HIT")  # the workload exercises both

    sim_rec = TraceRecorder()
    sim_rec.open({})
    s = SETTINGS
    runner = SimulatedRunner(load_shape(default_model_path()), DEVICES["l4"], block_size=s["kvcache_block_size"],
                             num_kvcache_blocks=s["num_kvcache_blocks"],
                             max_num_batched_tokens=s["max_num_batched_tokens"], max_num_seqs=s["max_num_seqs"],
                             max_model_len=s["max_model_len"], recorder=sim_rec)
    workload = [Request(0.0, prompt, len(out["token_ids"]), max_tokens=n)
                for prompt, out, n in zip(prompts, outputs, max_tokens)]
    # A request the real model ended at max_tokens gets EOS there in the simulation: it finishes in the same
    # step, for another reason, so the finishing transitions are compared without their reason and token.
    simulate(runner, workload, recorder=sim_rec)
    sim = _decisions(sim_rec)
    ignore = VOLATILE | {"reason", "STATE_TRANSITION.token_id", "STATE_TRANSITION.finish_reason"}
    assert diff_traces(sim, real, ignore=ignore) is None
    assert len(sim.events) == len(real.events)
