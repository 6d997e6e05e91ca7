"""Sections that run whole engines on the random checkpoint: ``checkpoint``, ``greedy``, ``graphs``, ``tp``,
``flash``.

- ``greedy``: greedy tokens of the torch and triton backends vs ``transformers`` ``generate``, fp32.
- ``graphs``: CUDA graphs vs eager, exact tokens in fp32, in waves of 1, 3, 17, 33, 100 and 300 requests,
  with prompts longer than a step's token budget (chunked prefill) and a KV cache too small for the
  300-request wave (preemption). The graph run's trace is saved as ``$OUT/gpu_cudagraph.jsonl``.
- ``tp``: tensor parallelism over 2 GPUs vs 1 (skipped with one GPU); ``flash``: the flash-attn backend
  (skipped when flash-attn does not import).

fp32 runs should be token-identical; where they are not, every generated token is scored under the fp32
``transformers`` reference fed *our* tokens (``margin = max logit - logit of our token``): a run whose
margins are all within the tolerance took the other side of a near-tie, not a wrong token.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import torch

from common import (QWEN3_0_6B, TINY, Setup, first_difference, free_gpu, greedy_margins, hf_reference,
                    random_prompts, verdict, write_checkpoint)
from nanovllm_teach import LLM, SamplingParams
from nanovllm_teach.trace import TraceRecorder, load_trace

TOLERANCE = {"float32": 1e-3, "bfloat16": 0.15}


def run_checkpoint(setup: Setup) -> str:
    if (setup.checkpoint / "config.json").is_file():
        return verdict("PASS", f"reusing {setup.checkpoint}")
    setup.work.mkdir(parents=True, exist_ok=True)
    shape = QWEN3_0_6B if setup.gpu else TINY
    write_checkpoint(setup.checkpoint, shape, torch.bfloat16 if setup.gpu else torch.float32, setup.device)
    return verdict("PASS", f"random Qwen3 checkpoint (hidden {shape['hidden_size']}, {shape['num_hidden_layers']} "
                           f"layers, vocab {shape['vocab_size']}) written to {setup.checkpoint}")


def generate(setup: Setup, prompts: list[list[int]], max_tokens: int, recorder: Any = None,
             **settings: Any) -> list[list[int]]:
    llm = LLM(setup.need_checkpoint(), trace=recorder, device=setup.device, **settings)
    try:
        greedy = SamplingParams(temperature=0.0, max_tokens=max_tokens, ignore_eos=True)
        return [out["token_ids"] for out in llm.generate(prompts, greedy, use_tqdm=False)]
    finally:
        llm.close()
        del llm
        free_gpu()


def judge(name: str, ours: list[list[int]], ref: list[list[int]], hf, prompts: list[list[int]],
          tol: float) -> tuple[bool, str]:
    """Identical, or every differing token within ``tol`` of the reference's best logit."""
    diffs = [(i, first_difference(a, b)) for i, (a, b) in enumerate(zip(ours, ref)) if a != b]
    if not diffs:
        return True, f"{name}: {len(ref)}/{len(ref)} prompts token-identical"
    worst = max(max(greedy_margins(hf, prompts[i], ours[i])) for i, _ in diffs)
    where = ", ".join(f"prompt {i} @ token {j}" for i, j in diffs)
    ok = worst <= tol
    return ok, (f"{name}: {len(ref) - len(diffs)}/{len(ref)} identical, max margin {worst:.2e} (tol {tol:g}: "
                f"{'near-ties' if ok else 'WRONG TOKENS'}); first differences {where}")


def engine_settings(setup: Setup) -> dict[str, Any]:
    if setup.gpu:
        return dict(kvcache_block_size=256, max_model_len=2048, max_num_batched_tokens=4096, max_num_seqs=8,
                    num_kvcache_blocks=64)
    return dict(kvcache_block_size=16, max_model_len=256, max_num_batched_tokens=256, max_num_seqs=8,
                num_kvcache_blocks=64)


def greedy_prompts(setup: Setup) -> list[list[int]]:
    rng = random.Random(1)
    block = engine_settings(setup)["kvcache_block_size"]
    vocab = (QWEN3_0_6B if setup.gpu else TINY)["vocab_size"]
    lengths = [block - 5, 2 * block + 40, 1] if setup.gpu else [block - 3, 2 * block + 5, 1]
    return [p[:n] for p, n in zip(random_prompts(rng, len(lengths), max(lengths), max(lengths), vocab), lengths)]


def reference_model(setup: Setup):
    from transformers import AutoModelForCausalLM
    return AutoModelForCausalLM.from_pretrained(setup.need_checkpoint(), dtype=torch.float32).to(setup.device).eval()


def run_greedy(setup: Setup) -> str:
    prompts = greedy_prompts(setup)
    max_tokens = {"quick": 16, "full": 48, "cpu": 6}[setup.mode]
    print(f"prompts of {[len(p) for p in prompts]} tokens, {max_tokens} new tokens each, fp32")
    hf = reference_model(setup)
    ref = hf_reference(hf, prompts, max_tokens, eos=-1)
    results = []
    for backend in ("torch", "triton"):
        ours = generate(setup, prompts, max_tokens, attention_backend=backend, dtype="float32",
                        **engine_settings(setup))
        results.append(judge(f"{backend} vs transformers", ours, ref, hf, prompts, TOLERANCE["float32"]))
        print(results[-1][1])
    line = "; ".join(text for _, text in results)
    return verdict("PASS" if all(ok for ok, _ in results) else "FAIL", line)


def graph_waves(setup: Setup) -> tuple[list[list[list[int]]], dict[str, Any], int]:
    """Waves of 1, 3, 17, 33, 100, 300 requests; two prompts in the larger waves exceed a step's budget."""
    rng = random.Random(2)
    if setup.gpu:
        sizes, (lo, hi), long_len = (1, 3, 17, 33, 100, 300), (16, 400), 1500
        settings = dict(kvcache_block_size=256, max_model_len=2048, max_num_batched_tokens=1024, max_num_seqs=300,
                        num_kvcache_blocks=120)  # the 300-request wave needs over 400 blocks: preemption
        max_tokens = 16 if setup.mode == "quick" else 40
    else:
        sizes, (lo, hi), long_len = (1, 3, 17), (4, 30), 100
        settings = dict(kvcache_block_size=16, max_model_len=256, max_num_batched_tokens=64, max_num_seqs=17,
                        num_kvcache_blocks=24)
        max_tokens = 6
    vocab = (QWEN3_0_6B if setup.gpu else TINY)["vocab_size"]
    waves = []
    for n in sizes:
        wave = random_prompts(rng, n, lo, hi, vocab)
        if n >= 17:
            wave[0] = random_prompts(rng, 1, long_len, long_len, vocab)[0]
            wave[-1] = random_prompts(rng, 1, long_len, long_len, vocab)[0]
        waves.append(wave)
    return waves, settings, max_tokens


def run_graphs(setup: Setup) -> str:
    waves, settings, max_tokens = graph_waves(setup)
    backend = "triton" if setup.gpu else "torch"  # the CPU stand-in: the interpreter is too slow for 17 requests
    print(f"waves of {[len(w) for w in waves]} requests, {max_tokens} new tokens each, {backend}, fp32, {settings}")
    trace_path = setup.out / "gpu_cudagraph.jsonl"
    tokens: dict[bool, list[list[list[int]]]] = {}
    for eager in (True, False):
        rec = (TraceRecorder(detail_decode_steps=0) if eager else
               TraceRecorder(trace_path, keep_in_memory=False, detail_decode_steps=3, detail_max_elements=512))
        llm = LLM(setup.need_checkpoint(), trace=rec, device=setup.device, attention_backend=backend,
                  dtype="float32", enforce_eager=eager, trace_metadata={
                      "scenario": "gpu_cudagraph", "lesson": "decode steps replay CUDA graphs; prefill, "
                      "batches above the largest graph and enforce_eager run eagerly"}, **settings)
        greedy = SamplingParams(temperature=0.0, max_tokens=max_tokens, ignore_eos=True)
        try:
            tokens[eager] = [[o["token_ids"] for o in llm.generate(w, greedy, use_tqdm=False)] for w in waves]
        finally:
            llm.close()
            del llm
            free_gpu()
    events = load_trace(trace_path).events
    replays = [e for e in events if e.event == "CUDAGRAPH_REPLAY"]
    eager_why = Counter(e.stats.get("eager_reason") for e in events if e.event == "RUN_MODEL")
    preempted = sum(e.event == "PREEMPT" for e in events)
    print(f"graph run: {len(replays)} CUDAGRAPH_REPLAY steps, RUN_MODEL by eager_reason {dict(eager_why)}, "
          f"{preempted} PREEMPT events; trace {trace_path} ({trace_path.stat().st_size:,} bytes)")
    same = [a == b for a, b in zip(tokens[True], tokens[False])]
    for wave, ok in zip(waves, same):
        print(f"  wave of {len(wave):>3}: {'identical' if ok else 'DIFFERENT'}")
    summary = (f"{sum(same)}/{len(same)} waves token-identical (graphs vs eager), {len(replays)} replays, "
               f"{preempted} preemptions, eager steps {dict(eager_why)}")
    if not setup.gpu:
        return verdict("SKIP" if all(same) else "FAIL", "no CUDA: ran eager vs eager as a stand-in; " + summary)
    problems = [] if all(same) else ["tokens differ"]
    problems += [] if replays else ["no graph replayed"]
    problems += [] if preempted else ["no preemption happened"]
    return verdict("FAIL" if problems else "PASS", summary + ("; " + ", ".join(problems) if problems else ""))


def run_tp(setup: Setup) -> str:
    count = torch.cuda.device_count() if setup.gpu else 0
    if count < 2:
        return verdict("SKIP", f"tensor_parallel_size=2 needs 2 GPUs, this machine has {count}")
    prompts = greedy_prompts(setup)
    max_tokens = 16
    hf = reference_model(setup)
    ref = hf_reference(hf, prompts, max_tokens, eos=-1)
    ours = generate(setup, prompts, max_tokens, attention_backend="triton", dtype="float32", tensor_parallel_size=2,
                    **engine_settings(setup))
    ok, line = judge("TP=2 vs transformers", ours, ref, hf, prompts, TOLERANCE["float32"])
    return verdict("PASS" if ok else "FAIL", line)


def run_flash(setup: Setup) -> str:
    try:
        import flash_attn
    except Exception as exc:  # ImportError, or a build that does not load against this torch
        return verdict("SKIP", f"flash_attn does not import ({type(exc).__name__}: {exc})")
    if not setup.gpu:
        return verdict("SKIP", "flash-attn runs on CUDA GPUs only")
    prompts = greedy_prompts(setup)
    max_tokens = 16
    hf = reference_model(setup)
    ref = hf_reference(hf, prompts, max_tokens, eos=-1)
    ours = generate(setup, prompts, max_tokens, attention_backend="flash_attn", dtype="bfloat16",
                    **engine_settings(setup))
    ok, line = judge(f"flash_attn {flash_attn.__version__} bf16 vs transformers fp32", ours, ref, hf, prompts,
                     TOLERANCE["bfloat16"])
    return verdict("PASS" if ok else "FAIL", line)
