"""The native decode step against the eager one, and both against the machine's floor.

Two engines on the same model in this process: **native** (the defaults: every decode step one call into
the compiled C++ step, ``nanovllm_teach/engine/compiled_decode.py``) and **eager** (``enforce_eager=True``:
the model's Python forward). Their runs alternate (native, eager, eager, native, ...), ``--repeats`` each:

- **one request**: a ``--prompt``-token prompt, ``--tokens`` output tokens, greedy, ``ignore_eos``: wall
  milliseconds per output token of the whole ``generate`` call;
- **batch**: ``--batch`` such requests at once: milliseconds per decode step, the time spent in the model
  runner's ``run`` for decode steps (preparing the inputs, the forward, sampling) over their number.

The **floor** of a decode step is the bytes it must read (``models/step_cost.py``: every weight once, every
cached K/V row once) over the rate this process reads a buffer of that size (a sum over it, the best of
several) at the same thread count. Printed: medians, native/eager ratios, each figure over the floor, the
CPU seconds beside the wall ones, whether the two engines' tokens are identical, and the start-up of each
engine (the native one's DECODE_COMPILE seconds: its build the first time on a machine, else a load).

Usage::

    python benchmarks/bench_decode_step.py [--repeats 5] [--batch 32] [--threads N] [--model PATH]
"""

from __future__ import annotations

import argparse
import os
import statistics
from pathlib import Path
from time import perf_counter, process_time

from nanovllm_teach import LLM, SamplingParams, default_model_path  # before torch: its OpenMP wait policy
import torch

from nanovllm_teach.models import step_cost
from nanovllm_teach.trace import TraceRecorder


def read_rate_gbs(nbytes: int, repeats: int = 50) -> float:
    """GB/s this process reads a buffer of ``nbytes`` (summed, the best of ``repeats``), on torch's threads."""
    buf = torch.rand(max(nbytes // 4, 1024))
    buf.sum()
    best = min(_timed(lambda: buf.sum()) for _ in range(repeats))
    return buf.numel() * 4 / best / 1e9


def _timed(fn) -> float:
    start = perf_counter()
    fn()
    return perf_counter() - start


class DecodeClock:
    """Wall and CPU seconds inside the model runner's ``run`` for decode steps, and how many there were."""

    def __init__(self, llm: LLM) -> None:
        runner = llm.model_runner
        run = runner.run
        self.wall = self.cpu = 0.0
        self.steps = 0

        def timed(batch):
            if batch.is_prefill:
                return run(batch)
            wall, cpu = perf_counter(), process_time()
            out = run(batch)
            self.wall += perf_counter() - wall
            self.cpu += process_time() - cpu
            self.steps += 1
            return out

        runner.run = timed

    def reset(self) -> None:
        self.wall = self.cpu = 0.0
        self.steps = 0


def main() -> None:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=Path, default=default_model_path())
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=None, help="cpu_threads of both engines (default: the rule)")
    args = ap.parse_args()
    kwargs = dict(max_num_seqs=args.batch, max_model_len=1024, num_kvcache_blocks=args.batch * 2,
                  **({} if args.threads is None else {"cpu_threads": args.threads}))
    engines, startup = {}, {}
    for name, extra in (("native", {}), ("eager", {"enforce_eager": True})):
        rec = TraceRecorder()
        start = perf_counter()
        engines[name] = LLM(str(args.model), trace=rec, **kwargs, **extra)
        startup[name] = perf_counter() - start
        rec.enabled = False
        compiles = [e.stats["seconds"] for e in rec.events if e.event == "DECODE_COMPILE"]
        if name == "native" and not compiles:
            raise SystemExit("the native decode step cannot run here (no compiler?): nothing to compare")
        startup[name + " compile"] = compiles[0] if compiles else 0.0
    clocks = {name: DecodeClock(llm) for name, llm in engines.items()}
    vocab = engines["native"].model_runner.config.hf_config.vocab_size
    prompts = [[(11 * i + 7 * j) % (vocab - 1) + 1 for j in range(args.prompt)] for i in range(args.batch)]
    params = SamplingParams(temperature=0.0, max_tokens=args.tokens, ignore_eos=True)
    for llm in engines.values():  # warm both up
        llm.generate(prompts[:2], SamplingParams(temperature=0.0, max_tokens=4, ignore_eos=True), use_tqdm=False)

    one = {name: [] for name in engines}
    batch = {name: [] for name in engines}
    tokens = {}
    for r in range(args.repeats):
        for name in (("native", "eager") if r % 2 == 0 else ("eager", "native")):
            llm, clock = engines[name], clocks[name]
            fresh = [[(t + r) % (vocab - 1) + 1 for t in p] for p in prompts]  # no prefix-cache hits across repeats
            wall, cpu = perf_counter(), process_time()
            out = llm.generate(fresh[:1], params, use_tqdm=False)
            one[name].append(((perf_counter() - wall) / args.tokens, (process_time() - cpu) / args.tokens))
            clock.reset()
            outs = llm.generate(fresh, params, use_tqdm=False)
            batch[name].append((clock.wall / clock.steps, clock.cpu / clock.steps))
            tokens.setdefault(r, {})[name] = [o["token_ids"] for o in out + outs]

    model = engines["native"].model_runner.model
    threads = torch.get_num_threads()
    floors = {}
    middle = args.prompt + args.tokens // 2  # the average context of a run's decode steps
    for label, lens in (("one", [middle]), ("batch", [middle] * args.batch)):
        nbytes = step_cost.decode_bytes(model, lens)
        floors[label] = (nbytes, nbytes / (read_rate_gbs(int(nbytes)) * 1e9))
    identical = sum(t["native"] == t["eager"] for t in tokens.values())
    policy = os.environ.get("OMP_WAIT_POLICY", "unset")
    load = "/".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"model {args.model.name}; {threads} thread(s), OMP_WAIT_POLICY={policy}; load average {load}; "
          f"{args.repeats} alternating repeats, medians")
    print(f"start-up: native {startup['native']:.2f} s (of which the native step {startup['native compile']:.2f} s), "
          f"eager {startup['eager']:.2f} s")
    for label, data, what in (("one request", one, "ms/token"), (f"batch {args.batch}", batch, "ms/step")):
        key = "one" if label == "one request" else "batch"
        nbytes, floor = floors[key]
        med = {name: (statistics.median(w for w, _ in runs) * 1e3, statistics.median(c for _, c in runs) * 1e3)
               for name, runs in data.items()}
        print(f"{label:<12} native {med['native'][0]:7.3f} {what} (CPU {med['native'][1]:.3f}), eager "
              f"{med['eager'][0]:7.3f} (CPU {med['eager'][1]:.3f}); native/eager "
              f"{med['native'][0] / med['eager'][0]:.2f} wall, {med['native'][1] / med['eager'][1]:.2f} CPU; "
              f"floor {floor * 1e3:.3f} ms ({nbytes / 1e6:.1f} MB read): native "
              f"{med['native'][0] / 1e3 / floor:.1f}x it, eager {med['eager'][0] / 1e3 / floor:.1f}x")
    print(f"tokens identical native vs eager: {identical}/{len(tokens)} repeats")
    for llm in engines.values():
        llm.close()


if __name__ == "__main__":
    main()
