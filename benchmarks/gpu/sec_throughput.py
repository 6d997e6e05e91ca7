"""Section ``throughput``: our engine vs ``transformers``' continuous batching on nano-vllm's bench shape.

nano-vllm's ``bench.py``: 256 requests, prompts of 100..1024 random token ids, 100..1024 output tokens each,
``ignore_eos``; ``--quick`` runs 64 requests of 100..512. Both are warmed up first; throughput is output
tokens / wall seconds. Our run is traced to ``$OUT/gpu_throughput.jsonl`` (decode tensors not detailed), and
its CUDAGRAPH_CAPTURE / CUDAGRAPH_REPLAY counts are read back from that file. ``transformers`` gets a
time limit (what is left of the section's): if it has not finished by then, its throughput counts the
requests it finished.
"""

from __future__ import annotations

import time
from collections import Counter

import torch

from common import Setup, free_gpu, make_bench_workload, verdict
from nanovllm_teach import LLM, SamplingParams
from nanovllm_teach.trace import TraceRecorder, load_trace


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def bench_ours(setup: Setup, prompts: list[list[int]], max_tokens: list[int]) -> float:
    trace = setup.out / "gpu_throughput.jsonl"
    rec = TraceRecorder(trace, keep_in_memory=False, detail_decode_steps=0)
    llm = LLM(setup.need_checkpoint(), trace=rec, device=setup.device, max_model_len=4096 if setup.gpu else 256,
              trace_metadata={"scenario": "gpu_throughput", "lesson": "nano-vllm's bench workload on a GPU"})
    try:
        llm.generate([[5, 6, 7]] * 4, SamplingParams(temperature=0.0, max_tokens=8), use_tqdm=False)
        params = [SamplingParams(temperature=0.0, max_tokens=n, ignore_eos=True) for n in max_tokens]
        sync()
        start = time.perf_counter()
        llm.generate(prompts, params, use_tqdm=False)
        sync()
        seconds = time.perf_counter() - start
    finally:
        llm.close()
        del llm
        free_gpu()
    events = load_trace(trace).events
    capture = [e.stats["batch_sizes"] for e in events if e.event == "CUDAGRAPH_CAPTURE"]
    replays = sum(e.event == "CUDAGRAPH_REPLAY" for e in events)
    eager = Counter(e.stats.get("eager_reason") for e in events if e.event == "RUN_MODEL")
    print(f"ours: {sum(max_tokens) / seconds:.1f} tok/s ({seconds:.2f} s); CUDAGRAPH_CAPTURE "
          f"{len(capture[0]) if capture else 0} buckets, {replays} CUDAGRAPH_REPLAY steps, RUN_MODEL by "
          f"eager_reason {dict(eager)}; trace {trace.name} {trace.stat().st_size:,} bytes")
    return seconds


def bench_hf(setup: Setup, prompts: list[list[int]], max_tokens: list[int], limit_s: float) -> tuple[int, float]:
    """(output tokens of the requests that finished, seconds) for ``transformers`` continuous batching, all of
    it (loading the model too) within ``limit_s``."""
    end = time.perf_counter() + limit_s
    from transformers import AutoModelForCausalLM, GenerationConfig
    dtype = torch.bfloat16 if setup.gpu else torch.float32
    model = AutoModelForCausalLM.from_pretrained(setup.need_checkpoint(), dtype=dtype).to(setup.device).eval()
    config = GenerationConfig(do_sample=False, max_new_tokens=max(max_tokens), eos_token_id=-1)
    if setup.gpu:
        manager = model.init_continuous_batching(generation_config=config)  # its cache sized from free memory
    else:
        # On a CPU "free memory" is the machine's RAM: left to size itself, the cache takes most of it (14 GB
        # on a 24 GB machine) for a stand-in that needs a few blocks.
        from transformers import ContinuousBatchingConfig
        cache = ContinuousBatchingConfig(page_size=16, num_blocks=64, max_batch_tokens=256)
        manager = model.init_continuous_batching(generation_config=config, continuous_batching_config=cache)
    manager.start()
    try:
        def run(batch: list[list[int]], limits: list[int], tag: str, deadline: float) -> int:
            for i, (p, n) in enumerate(zip(batch, limits)):
                manager.add_request(p, request_id=f"{tag}-{i}", max_new_tokens=n)  # EOS -1: the config's
            done, tokens = 0, 0
            while done < len(batch) and time.perf_counter() < deadline:
                result = manager.get_result(timeout=1)
                if result is None:
                    if not manager.is_running():
                        raise RuntimeError("transformers' continuous-batching thread stopped early")
                    continue
                if result.is_finished():
                    if getattr(result, "error", None):
                        raise RuntimeError(f"request {result.request_id} failed: {result.error}")
                    done, tokens = done + 1, tokens + len(result.generated_tokens)
            print(f"transformers {tag}: {done}/{len(batch)} requests finished")
            return tokens

        run([[5, 6, 7]] * 4, [8] * 4, "warmup", end)
        sync()
        start = time.perf_counter()
        tokens = run(prompts, max_tokens, "bench", end)
        sync()
        return tokens, time.perf_counter() - start
    finally:
        manager.stop(block=True)
        del model
        free_gpu()


def run_throughput(setup: Setup) -> str:
    num_requests, lo, hi = {"quick": (64, 100, 512), "full": (256, 100, 1024), "cpu": (2, 4, 8)}[setup.mode]
    prompts, max_tokens = make_bench_workload(num_requests, 0, lo, hi)
    if not setup.gpu:
        prompts = [[t % 4000 + 3 for t in p] for p in prompts]  # inside the tiny stand-in's vocabulary
    print(f"workload: {num_requests} requests, prompt tokens {sum(map(len, prompts))}, output tokens "
          f"{sum(max_tokens)} (lengths {lo}..{hi}, ignore_eos, greedy)")
    ours_s = bench_ours(setup, prompts, max_tokens)
    # What is left of the section's time, less room to stop the manager and print.
    hf_limit = setup.seconds_left() - 15
    if hf_limit < 5:
        return verdict("FAIL", f"ours {sum(max_tokens) / ours_s:.1f} tok/s; no time left for transformers")
    hf_tokens, hf_s = bench_hf(setup, prompts, max_tokens, hf_limit)
    ours_tps, hf_tps = sum(max_tokens) / ours_s, hf_tokens / hf_s
    print(f"transformers: {hf_tps:.1f} tok/s ({hf_tokens} tokens of finished requests in {hf_s:.2f} s)")
    line = (f"ours {ours_tps:.1f} tok/s, transformers continuous batching {hf_tps:.1f} tok/s, "
            f"ratio {ours_tps / hf_tps if hf_tps else float('inf'):.2f}x ({num_requests} requests)")
    return verdict("PASS" if setup.gpu else "SKIP", line if setup.gpu else "no CUDA: CPU stand-in, " + line)
