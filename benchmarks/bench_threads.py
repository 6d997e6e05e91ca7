"""Threads under contention: the engine's default threads against one thread, while another program keeps a
core busy.

The benchmark starts its own competing load: ``--busy`` processes, each a Python busy loop (default 1; 0
measures the idle machine). Then, in alternating order, each arrangement runs in a fresh interpreter (the
OpenMP wait policy is fixed when torch loads, so each needs a process of its own):

- **defaults**: nothing set: the engine's thread rule (``nanovllm_teach/utils/threads.py``) chooses, with
  passive OpenMP waiting;
- **1 thread**: ``OMP_NUM_THREADS=1``;
- **all cores, passive**: ``cpu_threads`` = every usable core, passive waiting (what the rule's wait policy
  alone buys, whatever the count);
- **all cores, spinning**: the same count with torch imported before the engine (``LLM``), so libgomp keeps
  its default of spinning idle threads (what the engine did before the rule).

Each run builds an engine on the model (the shipped one, or with ``--random-model`` the 110 M-parameter
random Qwen3 of ``bench_cpu.py``, whose multiplies are big enough for several threads), warms it up, and
times one request (``--prompt`` tokens in, ``--tokens`` out: ms per output token) and a batch of
``--batch`` such requests (ms per decode step), greedy, ``ignore_eos``. Printed: the medians over
``--repeats`` and each arrangement's ratio to **1 thread**, by wall time; the target is defaults ≤ 1.5x.

Usage::

    python benchmarks/bench_threads.py [--busy 1] [--repeats 3] [--random-model] [--batch 16]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ARRANGEMENTS = ("defaults", "1 thread", "all cores, passive", "all cores, spinning")


def child(args: argparse.Namespace) -> None:
    """One arrangement in this fresh process: print one JSON line of timings."""
    if args.arrangement == "all cores, spinning":
        import torch  # noqa: F401  (before the engine: libgomp keeps its default, spinning)
    from nanovllm_teach import LLM, SamplingParams  # otherwise first: its config.py asks for passive waiting
    from time import perf_counter, process_time

    import torch

    from nanovllm_teach.utils.threads import usable_cores

    kwargs = dict(max_num_seqs=args.batch, max_model_len=1024, num_kvcache_blocks=args.batch * 2)
    if args.arrangement.startswith("all cores"):
        kwargs["cpu_threads"] = usable_cores()
    llm = LLM(args.model, **kwargs)
    params = SamplingParams(temperature=0.0, max_tokens=args.tokens, ignore_eos=True)
    prompt = [[(7 * i + 3 * j) % 500 + 1 for j in range(args.prompt)] for i in range(args.batch)]
    llm.generate([prompt[0][:8]], SamplingParams(temperature=0.0, max_tokens=4, ignore_eos=True), use_tqdm=False)
    times = {}
    for name, prompts in (("one", prompt[:1]), ("batch", prompt)):
        wall, cpu = perf_counter(), process_time()
        llm.generate(prompts, params, use_tqdm=False)
        times[name] = (perf_counter() - wall, process_time() - cpu)
    llm.close()
    print(json.dumps({"threads": torch.get_num_threads(), "policy": os.environ.get("OMP_WAIT_POLICY", "unset"),
                      "one_ms_per_token": 1000 * times["one"][0] / args.tokens,
                      "batch_ms_per_step": 1000 * times["batch"][0] / args.tokens,
                      "one_cpu_s": times["one"][1], "batch_cpu_s": times["batch"][1]}))


def run_one(arrangement: str, args: argparse.Namespace, model: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "OMP_WAIT_POLICY")}
    if arrangement == "1 thread":
        env["OMP_NUM_THREADS"] = "1"
    cmd = [sys.executable, __file__, "--child", arrangement, "--model", str(model), "--batch", str(args.batch),
           "--prompt", str(args.prompt), "--tokens", str(args.tokens)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    if done.returncode != 0:
        sys.exit(f"{arrangement} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    ap.add_argument("--busy", type=int, default=1, help="busy-loop processes competing for the cores (default 1)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--random-model", action="store_true", help="the 110 M-parameter random Qwen3 of bench_cpu.py")
    ap.add_argument("--model", type=Path, default=None)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--prompt", type=int, default=64)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--child", choices=ARRANGEMENTS, default=None, dest="arrangement", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.arrangement is not None:
        child(args)
        return
    from nanovllm_teach import default_model_path

    with tempfile.TemporaryDirectory() as tmp:
        model = args.model or default_model_path()
        if args.random_model:
            sys.path.insert(0, str(Path(__file__).parent))
            from bench_cpu import make_random_model
            model = make_random_model(Path(tmp))
        loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
        try:
            print(f"model {model.name}; {args.busy} busy-loop process(es); {os.cpu_count()} cores; load average "
                  + "/".join(f"{x:.1f}" for x in os.getloadavg()))
            results: dict[str, list[dict]] = {a: [] for a in ARRANGEMENTS}
            for r in range(args.repeats):
                order = ARRANGEMENTS if r % 2 == 0 else ARRANGEMENTS[::-1]
                for arrangement in order:
                    results[arrangement].append(run_one(arrangement, args, model))
        finally:
            for loop in loops:
                loop.kill()
                loop.wait()
    base = {key: statistics.median(r[key] for r in results["1 thread"])
            for key in ("one_ms_per_token", "batch_ms_per_step")}
    print(f"{'arrangement':<22}{'threads':>8}{'policy':>9}{'one req ms/token':>18}{'ratio':>7}"
          f"{f'batch {args.batch} ms/step':>18}{'ratio':>7}")
    for arrangement, runs in results.items():
        one = statistics.median(r["one_ms_per_token"] for r in runs)
        batch = statistics.median(r["batch_ms_per_step"] for r in runs)
        print(f"{arrangement:<22}{'/'.join(sorted({str(r['threads']) for r in runs})):>8}{runs[0]['policy']:>9}"
              f"{one:18.2f}{one / base['one_ms_per_token']:7.2f}{batch:18.2f}{batch / base['batch_ms_per_step']:7.2f}")


if __name__ == "__main__":
    main()
