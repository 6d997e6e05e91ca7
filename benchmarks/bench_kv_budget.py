"""The CPU KV budget at its default against the old fixed cap (``cpu_kvcache_gib=0.25``), on the shipped model
and on a random-weight Qwen3-0.6B-shaped checkpoint made on the fly (28 layers, 596 M parameters, float32).

Workload (the issue's): ``--num-requests`` requests (default 16), prompts and outputs uniform in
``--min-len``..``--max-len`` (16..128), random token ids, greedy, ``ignore_eos``, all submitted at once.
Each engine is built (not timed), warmed up on one short request, then ``generate`` is timed; the two
settings alternate, ``--repeats`` times each, fresh engines every time. Printed per setting: the KV blocks,
what decided them (``limited_by``, ``cap_reason`` of KV_BUDGET_ESTIMATE), the medians of output tokens/s by
wall and by CPU time, the resident memory after the run, and whether the two settings' tokens are identical.

Usage::

    python benchmarks/bench_kv_budget.py [--model shipped|qwen3-0.6b] [--repeats 2] [--num-requests 16]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import tempfile
from pathlib import Path
from time import perf_counter, process_time

from nanovllm_teach import LLM, SamplingParams, default_model_path  # before torch: its OpenMP wait policy
import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

from nanovllm_teach.trace import TraceRecorder
from nanovllm_teach.utils.memory import _current_rss

QWEN3_06B = dict(hidden_size=1024, intermediate_size=3072, num_hidden_layers=28, num_attention_heads=16,
                 num_key_value_heads=8, head_dim=128, max_position_embeddings=40960, tie_word_embeddings=True)


def make_qwen3_06b(folder: Path) -> Path:
    """A random-weight Qwen3-0.6B shape with the shipped tokenizer (its vocabulary: 151,936 rows)."""
    torch.manual_seed(0)
    config = Qwen3Config(vocab_size=151936, **QWEN3_06B)
    model = Qwen3ForCausalLM(config).float()
    model.save_pretrained(folder)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(default_model_path() / name, folder / name)
    return folder


def run(model: Path, settings: dict, prompts: list[list[int]], params: list[SamplingParams]) -> dict:
    rec = TraceRecorder()
    llm = LLM(str(model), trace=rec, **settings)
    kv = next(e for e in rec.events if e.event == "KV_BUDGET_ESTIMATE").stats
    rec.enabled = False
    llm.generate([prompts[0][:8]], SamplingParams(temperature=0.0, max_tokens=2, ignore_eos=True), use_tqdm=False)
    wall, cpu = perf_counter(), process_time()
    outs = llm.generate(prompts, params, use_tqdm=False)
    wall, cpu = perf_counter() - wall, process_time() - cpu
    rss = _current_rss()
    llm.close()
    tokens = sum(p.max_tokens for p in params)
    return dict(blocks=kv["num_blocks"], limited_by=kv["limited_by"], cap_reason=kv.get("cap_reason"),
                tok_s=tokens / wall, tok_cpu_s=tokens / cpu, rss=rss, ids=[o["token_ids"] for o in outs])


def main() -> None:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", choices=("shipped", "qwen3-0.6b"), default="shipped")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--num-requests", type=int, default=16)
    ap.add_argument("--min-len", type=int, default=16)
    ap.add_argument("--max-len", type=int, default=128)
    args = ap.parse_args()
    rng = random.Random(0)
    with tempfile.TemporaryDirectory() as tmp:
        model = default_model_path() if args.model == "shipped" else make_qwen3_06b(Path(tmp))
        prompts = [[rng.randrange(1, 600) for _ in range(rng.randint(args.min_len, args.max_len))]
                   for _ in range(args.num_requests)]
        params = [SamplingParams(temperature=0.0, max_tokens=rng.randint(args.min_len, args.max_len), ignore_eos=True)
                  for _ in prompts]
        print(f"model {args.model}; {args.num_requests} requests, {args.min_len}..{args.max_len} in and out, "
              f"{sum(p.max_tokens for p in params)} output tokens; load average "
              + "/".join(f"{x:.1f}" for x in os.getloadavg()))
        setups = {"default (auto cap)": {}, "cpu_kvcache_gib=0.25 (old default)": {"cpu_kvcache_gib": 0.25}}
        results: dict[str, list[dict]] = {name: [] for name in setups}
        for r in range(args.repeats):
            for name in (list(setups) if r % 2 == 0 else list(setups)[::-1]):
                results[name].append(run(model, setups[name], prompts, params))
                print(f"  repeat {r + 1} {name}: {results[name][-1]['tok_s']:.1f} tok/s", flush=True)
    for name, runs in results.items():
        first = runs[0]
        print(f"{name:<36} {first['blocks']:>5} blocks (limited by {first['limited_by']}: {first['cap_reason']}); "
              f"{statistics.median(r['tok_s'] for r in runs):7.1f} tok/s wall, "
              f"{statistics.median(r['tok_cpu_s'] for r in runs):7.1f} per CPU s; RSS {first['rss'] / 2**30:.2f} GiB")
    a, b = (results[name][0]["ids"] for name in setups)
    print(f"tokens identical between the two: {sum(x == y for x, y in zip(a, b))}/{len(a)}")


if __name__ == "__main__":
    main()
