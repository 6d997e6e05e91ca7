"""Sampling benchmark: what top-k / top-p / min-p and logprobs cost the sampler, as ratios to the plain draw.

One decode step's sampling for a batch of rows of a real vocabulary (Qwen3's 151,936 tokens), float32 on
the CPU, with logits shaped like a language model's (a few likely tokens, a long tail: Gumbel-distributed
scores scaled so the most likely token holds a few tens of percent). Each variant is timed in rounds that
alternate with the plain draw (temperature 1, no filter), and its median time is printed as a ratio to the
plain draw's, so a busy machine slows both alike. ``top_p (whole row)`` forces the path that sorts every
row (``TOP_P_CANDIDATES`` set to the vocabulary size): what top-p costs without looking at the most likely
candidates first. The script first checks that both paths keep the same tokens.

Usage::

    python benchmarks/bench_sampling.py [--rows 8] [--vocab 151936] [--rounds 7] [--threads 1]

Results are in ``benchmarks/RESULTS.md`` ("Sampling filters (bench_sampling.py)").
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Callable

import torch

from nanovllm_teach.layers import sampler as sampler_module
from nanovllm_teach.layers.sampler import Sampler, SamplingFilters, keep_mask


def _filters(rows: int, top_k: int = 0, top_p: float = 1.0, min_p: float = 0.0) -> SamplingFilters:
    return SamplingFilters(torch.full((rows,), top_k), torch.full((rows,), top_p), torch.full((rows,), min_p))


def _timed(call: Callable[[], object]) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=8)
    parser.add_argument("--vocab", type=int, default=151_936)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    generator = torch.Generator().manual_seed(0)
    gumbel = -torch.log(-torch.log(torch.rand(args.rows, args.vocab, generator=generator)))
    logits = gumbel * 2.5
    temperatures = torch.ones(args.rows)
    seeds = [None] * args.rows
    sampler = Sampler()
    whole_row = args.vocab
    saved_candidates = sampler_module.TOP_P_CANDIDATES

    def whole_row_top_p() -> object:
        saved, sampler_module.TOP_P_CANDIDATES = sampler_module.TOP_P_CANDIDATES, whole_row
        try:
            return sampler.sample(logits, temperatures, seeds, _filters(args.rows, top_p=0.95))
        finally:
            sampler_module.TOP_P_CANDIDATES = saved

    variants: dict[str, Callable[[], object]] = {
        "top_k=20": lambda: sampler.sample(logits, temperatures, seeds, _filters(args.rows, top_k=20)),
        "top_p=0.95": lambda: sampler.sample(logits, temperatures, seeds, _filters(args.rows, top_p=0.95)),
        "top_p=0.95 (whole row)": whole_row_top_p,
        "min_p=0.05": lambda: sampler.sample(logits, temperatures, seeds, _filters(args.rows, min_p=0.05)),
        "top_k=20 top_p=0.95 min_p=0.05": lambda: sampler.sample(
            logits, temperatures, seeds, _filters(args.rows, 20, 0.95, 0.05)),
        "logprobs=5": lambda: sampler.sample(logits, temperatures, seeds, None, [5] * args.rows),
    }
    plain = lambda: sampler.sample(logits, temperatures, seeds)  # noqa: E731
    scaled, filters = logits, _filters(args.rows, top_p=0.95)
    first_candidates = keep_mask(scaled, filters)
    sampler_module.TOP_P_CANDIDATES = whole_row
    try:
        if not torch.equal(first_candidates, keep_mask(scaled, filters)):
            raise SystemExit("top_p: looking at the most likely candidates first kept other tokens than whole rows")
    finally:
        sampler_module.TOP_P_CANDIDATES = saved_candidates
    print("top_p: the most likely candidates first and whole rows keep the same tokens")
    top_mass = logits.softmax(-1).amax(-1).mean()
    print(f"{args.rows} rows x {args.vocab} tokens, {args.threads} thread(s); most likely token's probability "
          f"{float(top_mass):.2f} on average; {args.rounds} rounds, medians")
    plain_times: list[float] = []
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(args.rounds):
        for name, call in variants.items():
            plain_times.append(_timed(plain))
            times[name].append(_timed(call))
    base = statistics.median(plain_times)
    print(f"{'plain draw (temperature 1)':34s} {base * 1e3:8.2f} ms   1.00x")
    for name, samples in times.items():
        median = statistics.median(samples)
        print(f"{name:34s} {median * 1e3:8.2f} ms {median / base:6.2f}x")


if __name__ == "__main__":
    main()
