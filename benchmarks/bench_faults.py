"""Fault-injection benchmark: hundreds of ``KeyboardInterrupt``s at random moments of random workloads.

Each trial draws a workload (1–5 requests, prompts of 1–48 random token ids, half of them sharing a
two-block prefix, 1–24 greedy tokens each) on a deliberately tight engine (12 KV blocks of 8 tokens, 16
tokens per step, 4 sequences per batch: chunked prefill, prefix-cache hits and preemption all happen), runs
it once uninterrupted for the expected tokens, then injects ``--faults-per-workload`` faults, one run each:

- where: at a random line the engine executes (``sys.settrace`` counting lines of the engine's own modules,
  ``tests/faults.py``'s ``ENGINE_FILES``: ``llm.py``, ``workload/arrivals.py``, the shell ``frontend.py`` and
  ``request_checks.py``, ``llm_engine.py``, ``teaching.py``, ``transaction.py``, ``scheduler.py``,
  ``block_manager.py``, ``decisions.py``, ``sequence.py``, ``batch.py``, ``runner.py``, ``model_runner.py``), or from a trace sink at a random event (``TraceRecorder(sinks=[...])``);
- how the engine is driven: ``generate()`` (after the interrupt the engine must be empty with every KV block
  free, and a new ``generate()`` must give the expected tokens) or a hand-written ``add_request``/``step()``
  loop that re-runs the interrupted call (the bookkeeping must be consistent right after the interrupt,
  and the loop must end with the expected tokens and every block free).

It prints how many faults were injected, how many landed (a fault drawn past the run's last line does not),
and how many left the engine correct; it exits 1 if any did not. The fault machinery is ``tests/faults.py``.

    python benchmarks/bench_faults.py --faults 500
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from checkpoints import make_random_checkpoint  # noqa: E402
from faults import InjectedFault, LineFault, NoFault, SinkFault, assert_empty, step_loop  # noqa: E402

from nanovllm_teach import LLM, SamplingParams  # noqa: E402
from nanovllm_teach.trace import TraceRecorder  # noqa: E402

SETTINGS = dict(kvcache_block_size=8, num_kvcache_blocks=12, max_num_batched_tokens=16, max_model_len=128,
                max_num_seqs=4)


def draw_workload(rng: random.Random) -> tuple[list[list[int]], list[SamplingParams]]:
    shared = [rng.randrange(384) for _ in range(16)]
    prompts = [(shared if rng.random() < 0.5 else []) + [rng.randrange(384) for _ in range(rng.randint(1, 32))]
               for _ in range(rng.randint(1, 5))]
    params = [SamplingParams(temperature=0, max_tokens=rng.randint(1, 24), ignore_eos=True) for _ in prompts]
    return prompts, params


def tokens(llm: LLM, prompts, params) -> list[list[int]]:
    return [out["token_ids"] for out in llm.generate(prompts, params, use_tqdm=False)]


def one_fault(llm: LLM, sink: SinkFault, prompts, params, want, kind: str, mode: str, num_lines: int,
              num_events: int, rng: random.Random) -> bool:
    """Inject one fault; returns whether it landed. Raises if the engine was left wrong."""
    fault = LineFault(rng.randint(1, num_lines)) if kind == "line" else None
    sink.arm(rng.randint(1, num_events) if kind == "sink" else None)
    try:
        if mode == "generate":
            try:
                with fault or NoFault():
                    got = tokens(llm, prompts, params)
            except InjectedFault:
                sink.disarm()
                assert_empty(llm)
                got = tokens(llm, prompts, params)
        else:
            got, _ = step_loop(llm, prompts, params, fault=fault)
    finally:
        sink.disarm()
    assert got == want, "the tokens differ from an uninterrupted run"
    assert_empty(llm)
    return (fault.where if fault is not None else sink.where) is not None


def main() -> int:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    parser.add_argument("--faults", type=int, default=500, help="faults to inject (default 500)")
    parser.add_argument("--faults-per-workload", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    sink = SinkFault()
    with tempfile.TemporaryDirectory() as tmp:
        checkpoint = make_random_checkpoint(Path(tmp), tie_word_embeddings=False, initializer_range=0.3, seed=5)
        llm = LLM(checkpoint, trace=TraceRecorder(keep_in_memory=False, sinks=[sink]), **SETTINGS)
        injected, landed, failures = Counter(), Counter(), []
        start = time.perf_counter()
        while sum(injected.values()) < args.faults:
            prompts, params = draw_workload(rng)
            sink.arm(None)
            with LineFault() as counter:
                want = tokens(llm, prompts, params)
            num_events = sink.count
            for _ in range(min(args.faults_per_workload, args.faults - sum(injected.values()))):
                kind, mode = rng.choice(["line", "sink"]), rng.choice(["generate", "step loop"])
                label = f"{kind} / {mode}"
                try:
                    hit = one_fault(llm, sink, prompts, params, want, kind, mode, counter.count, num_events, rng)
                except (Exception, InjectedFault):  # a wrong state, wrong tokens, or an error after the fault
                    failures.append(traceback.format_exc(limit=3))
                    llm = LLM(checkpoint, trace=TraceRecorder(keep_in_memory=False, sinks=[sink]), **SETTINGS)
                    hit = True
                injected[label] += 1
                landed[label] += hit
        seconds = time.perf_counter() - start
    total, total_landed = sum(injected.values()), sum(landed.values())
    print(f"faults injected: {total} ({total_landed} landed inside a run) in {seconds:.0f} s")
    for label in sorted(injected):
        print(f"  {label:22s} {injected[label]:4d} injected, {landed[label]:4d} landed")
    print(f"engine left correct after {total - len(failures)}/{total} faults "
          f"(empty with every block free, or resumed to the uninterrupted tokens)")
    for failure in failures[:5]:
        print(failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
