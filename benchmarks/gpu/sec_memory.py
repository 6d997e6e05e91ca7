"""Section ``memory``: at ``gpu_memory_utilization=0.9`` the engine stays within 90% of the device.

The engine starts with its defaults (512 sequences, 16384 tokens per step, bf16), then runs its two
worst cases: a decode batch of ``max_num_seqs`` sampling at temperature 1 (the sampler's float32 copies of
512 x 151936 logits) and a prefill of the whole step budget. Peak device use = what the device used when
the engine was ready, minus what torch's allocator had reserved then, plus the allocator's peak reserve
since. After ``close()`` the memory must come back.
"""

from __future__ import annotations

import random

import torch

from common import Setup, free_gpu, random_prompts, verdict
from nanovllm_teach import LLM, SamplingParams
from nanovllm_teach.trace import TraceRecorder

UTILIZATION = 0.9
SLACK = 256 * 2**20  # allocator rounding and cuBLAS workspaces


def gib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB"


def run_memory(setup: Setup) -> str:
    if not setup.gpu:
        return verdict("SKIP", "no CUDA: device memory statistics need a GPU")
    path = setup.need_checkpoint()
    free_gpu()
    base_free, total = torch.cuda.mem_get_info()
    base_allocated = torch.cuda.memory_allocated()
    rec = TraceRecorder(detail_decode_steps=0)
    llm = LLM(path, trace=rec, gpu_memory_utilization=UTILIZATION, max_model_len=4096)
    startup = {e.event: e.stats for e in rec.events if e.phase == "init"}
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    ready_used = total - torch.cuda.mem_get_info()[0]
    ready_reserved = torch.cuda.memory_reserved()
    rng = random.Random(3)
    vocab = llm.config.hf_config.vocab_size
    n = llm.config.max_num_seqs
    hot = SamplingParams(temperature=1.0, max_tokens=4, ignore_eos=True)
    llm.generate(random_prompts(rng, n, 8, 8, vocab), hot, use_tqdm=False)
    budget_tokens = llm.config.max_num_batched_tokens
    per_prompt = min(llm.config.max_model_len - 8, budget_tokens)
    llm.generate(random_prompts(rng, budget_tokens // per_prompt, per_prompt, per_prompt, vocab),
                 SamplingParams(temperature=1.0, max_tokens=2, ignore_eos=True), use_tqdm=False)
    torch.cuda.synchronize()
    peak_used = ready_used - ready_reserved + torch.cuda.max_memory_reserved()
    replays = sum(e.event == "CUDAGRAPH_REPLAY" and e.stats["batch_size"] == n for e in rec.events)
    llm.close()
    del llm, rec
    free_gpu()
    after_free = torch.cuda.mem_get_info()[0]
    after_allocated = torch.cuda.memory_allocated()

    kv, warmup, capture = startup["KV_BUDGET_ESTIMATE"], startup["WARMUP"], startup.get("CUDAGRAPH_CAPTURE", {})
    print(f"device {gib(total)}, limit {UTILIZATION} x total = {gib(int(UTILIZATION * total))}")
    print(f"warm-up: {warmup['num_seqs']} x {warmup['seq_len']} tokens, {warmup['sample_rows']} sampled rows, "
          f"peak {gib(warmup['peak_bytes'])} ({warmup['peak_source']})")
    kv_bytes = kv["num_blocks"] * kv["block_bytes"]
    print(f"KV cache: {kv['num_blocks']} blocks of {kv['block_bytes']} bytes = {gib(kv_bytes)}"
          f", limited by {kv['limited_by']}; graph pool reserved {gib(kv['graph_reserve_bytes'] or 0)}, "
          f"capture took {gib(capture.get('memory_bytes', 0))}")
    print(f"engine ready: device used {gib(ready_used)}; peak during the worst cases {gib(peak_used)} "
          f"({replays} decode steps of {n} sequences replayed a graph)")
    print(f"after close: free {gib(after_free)} (before the engine {gib(base_free)}), "
          f"allocated {gib(after_allocated)} (before {gib(base_allocated)})")
    problems = []
    if peak_used > UTILIZATION * total + SLACK:
        problems.append(f"peak {gib(peak_used)} is over {UTILIZATION} x total")
    if after_allocated > base_allocated + 64 * 2**20 or after_free < base_free - 1024 * 2**20:
        problems.append("memory did not come back after close()")
    line = (f"peak {gib(peak_used)} of a {gib(int(UTILIZATION * total))} limit at decode {n} x vocab {vocab} "
            f"(temperature 1) and a {budget_tokens}-token prefill; after close {gib(base_free - after_free)} not back")
    return verdict("FAIL" if problems else "PASS", line + ("; " + "; ".join(problems) if problems else ""))
