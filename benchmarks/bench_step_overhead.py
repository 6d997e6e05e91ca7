"""The engine's per-step Python cost at large batches, against an older revision of the package, alternating.

A step is the orchestration (``LLMEngine.step``: the checkpoint, the scheduler, the TEACHING reports, the
postprocess) around one call of the runner. This script measures the step's CPU time *minus* the runner's
(``time.process_time`` around ``Runner.run``), so what is left is the Python of the resources and
orchestration layers, the part this benchmark is about, whatever the runner costs. Three workloads, all
submitted at once (a queue of waiting requests behind a full batch, as at saturation), ``ignore_eos``:

- ``sim-256`` and ``sim-512``: Llama-3.1-8B on a simulated H100 (``runner="simulated"``: the real scheduler
  and block manager, no model), 1,024 requests with prompts of 64–1,024 and answers of 32–512 random tokens
  (``random.Random(0)``), ``max_num_seqs`` 256 or 512, 8,192 batched tokens;
- ``tiny-256``: the shipped model on this CPU, 256 requests of 64 random prompt tokens and 64 answer tokens,
  ``max_num_seqs`` 256 (the model's time, subtracted, dominates its steps).

Each workload runs in a fresh process, once with the package of this checkout and once with ``--against``'s
(``git archive`` of that revision), ``--rounds`` times, the order alternating. Printed per workload: the
microseconds of Python per step of each (the median over rounds), their ratio (new / old), the cyclic garbage
collector's collections during the run (every generation; what runs them is the tracked objects the steps
allocate), and whether both ran the same number of steps and produced the same tokens (they must: exit 1 otherwise); then the load
average. CPU time is less swayed by other processes than the wall clock, not immune: read ratios.

Usage: ``python benchmarks/bench_step_overhead.py --against REV [--rounds 3] [--workloads sim-256,...]``.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import io
import json
import os
import random
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORKLOADS = ("sim-256", "sim-512", "tiny-256")


def _workload(name: str) -> tuple[dict, list[list[int]], list[int]]:
    """The ``LLM`` arguments, the prompts and the answer lengths of workload ``name``."""
    rng = random.Random(0)
    if name.startswith("sim-"):
        llm_args = dict(model="llama-3.1-8b", runner="simulated", hardware="h100-sxm",
                        max_num_seqs=int(name.removeprefix("sim-")), max_num_batched_tokens=8192,
                        max_model_len=2048)
        prompts = [[rng.randrange(1000, 100_000) for _ in range(rng.randint(64, 1024))] for _ in range(1024)]
        return llm_args, prompts, [rng.randint(32, 512) for _ in prompts]
    prompts = [[rng.randrange(10, 600) for _ in range(64)] for _ in range(256)]
    return dict(max_num_seqs=256), prompts, [64] * len(prompts)


def child(name: str) -> None:
    """Run workload ``name`` with whichever package ``PYTHONPATH`` gives; print one JSON line."""
    from nanovllm_teach import LLM, SamplingParams

    llm_args, prompts, answer_lens = _workload(name)
    llm = LLM(llm_args.pop("model", None), **llm_args)
    params = [SamplingParams(temperature=0.0, max_tokens=n, ignore_eos=True) for n in answer_lens]
    llm.generate(prompts[:2], params[:2], use_tqdm=False)  # imports and first calls, not measured
    runner_s = 0.0
    run = llm.model_runner.run

    def timed_run(batch):
        nonlocal runner_s
        start = time.process_time()
        try:
            return run(batch)
        finally:
            runner_s += time.process_time() - start

    llm.model_runner.run = timed_run
    steps_before = llm.num_steps
    collections_before = sum(generation["collections"] for generation in gc.get_stats())
    start = time.process_time()
    outputs = llm.generate(prompts, params, use_tqdm=False)
    total_s = time.process_time() - start
    collections = sum(generation["collections"] for generation in gc.get_stats()) - collections_before
    tokens = hashlib.sha256(json.dumps([out["token_ids"] for out in outputs]).encode()).hexdigest()
    steps = llm.num_steps - steps_before
    print(json.dumps(dict(steps=steps, python_us_per_step=(total_s - runner_s) / steps * 1e6, tokens=tokens,
                          collections=collections)))
    llm.close()


def _run_child(package_root: Path, name: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(package_root), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, __file__, "--child", name], env=env, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"{name} with the package in {package_root} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--against", help="the older revision to compare with (a git commit or branch)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--child", choices=WORKLOADS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return
    names = args.workloads.split(",")
    if args.against is None or not set(names) <= set(WORKLOADS) or args.rounds < 1:
        parser.error(f"--against REV is needed, --rounds at least 1, and --workloads takes some of "
                     f"{','.join(WORKLOADS)}")
    archived = subprocess.run(["git", "-C", str(ROOT), "archive", args.against, "nanovllm_teach"], capture_output=True)
    if archived.returncode:
        parser.error(f"git archive {args.against} failed: {archived.stderr.decode().strip()}")
    with tempfile.TemporaryDirectory() as old_root:
        with tarfile.open(fileobj=io.BytesIO(archived.stdout)) as tar:
            tar.extractall(old_root, filter="data")
        roots = {"old": Path(old_root), "new": ROOT}
        same = True
        for name in names:
            runs: dict[str, list[dict]] = {"old": [], "new": []}
            for i in range(args.rounds):
                for which in (("old", "new") if i % 2 == 0 else ("new", "old")):
                    runs[which].append(_run_child(roots[which], name))
            old_us, new_us = (statistics.median(r["python_us_per_step"] for r in runs[w]) for w in ("old", "new"))
            old_gc, new_gc = (statistics.median(r["collections"] for r in runs[w]) for w in ("old", "new"))
            agree = len({(r["steps"], r["tokens"]) for r in runs["old"] + runs["new"]}) == 1
            same &= agree
            print(f"{name}: {runs['new'][0]['steps']} steps; Python per step {old_us:,.0f} us at {args.against}, "
                  f"{new_us:,.0f} us now: new / old {new_us / old_us:.2f}; garbage collections {old_gc:.0f} against "
                  f"{new_gc:.0f}; same steps and tokens: {agree}")
    print(f"load average {'/'.join(f'{x:.1f}' for x in os.getloadavg())}")
    sys.exit(0 if same else 1)


if __name__ == "__main__":
    main()
