"""CPU throughput benchmark: our engine vs. Hugging Face ``generate`` vs. Hugging Face continuous batching.

The workload is nano-vllm's ``bench.py`` scaled down to a 2-core CPU and the tiny shipped Qwen3:

- ``--num-requests`` requests (default 64), all submitted at once;
- each prompt is random token ids (drawn from the tokenizer's vocabulary), its length uniform in
  ``--min-len``..``--max-len`` (default 16..256);
- each request asks for a number of output tokens uniform in the same range (or exactly
  ``--equal-outputs`` tokens), with ``ignore_eos`` so that every request produces exactly that many tokens;
- greedy decoding (temperature 0), everything drawn from one ``random.Random(--seed)``.

Three systems run it, one after the other, in this process, with the same weights (float32, CPU):

1. **ours**: ``LLM(...)`` (continuous batching, paged KV cache, the plain PyTorch attention backend, the
   linear layers through oneDNN with packed weights on an x86-64 CPU: ``linear_backend="auto"``). The
   engine is built and warmed up before the clock starts; only ``generate()`` is timed. Its limits
   (``--max-num-seqs 256 --max-num-batched-tokens 8192 --block-size 256``, the *tuned* settings) let the
   whole workload's prompts go in one prefill step and all 64 requests decode together, as in nano-vllm's
   bench; ``--defaults`` builds ``LLM(model)`` with nothing set instead. Decode steps run the native decode
   step (``nanovllm_teach/engine/compiled_decode.py``) where it can run, as the engine does by default;
   ``--eager`` sets ``enforce_eager=True`` (the model's Python forward) instead.
2. **HF generate (static batches)**: ``transformers`` ``model.generate`` on padded batches of B requests
   taken in arrival order (left padding). A batch runs until its longest request's ``max_tokens``; the
   tokens a shorter request generates past its own ``max_tokens`` are wasted work and are not counted.
   Several batch sizes are tried and the fastest one is the one we compare against.
3. **HF continuous batching**: ``transformers``' own continuous-batching manager
   (``model.init_continuous_batching``; its ``add_request`` takes a per-request ``max_new_tokens``, which
   ``generate_batch`` does not). Its warm-up is not timed.

The numbers printed:

- **useful output tokens/s** = (sum of every request's own ``max_tokens``) / (wall seconds of the timed
  call). Prompt tokens are not counted (as in nano-vllm's bench), padding and wasted tokens are not counted.
- **ratios**: ours / HF generate (best batch size), ours / HF continuous batching.
- **share of our wall time outside the model forward**: the benchmark wraps
  ``llm.model_runner.run_model`` (embedding, decoder layers, attention, LM head) with a timer; everything
  else in ``generate()`` (scheduling, block management, building the input tensors, sampling, Python
  bookkeeping) is "outside". It is broken down further by also timing ``scheduler.schedule``,
  ``scheduler.postprocess``, ``prepare_prefill``/``prepare_decode``/``prepare_sample`` and the sampler.
  The wrappers cost two ``perf_counter`` calls each, a few microseconds per step.
- **roofline of our decode steps**: every decode step's FLOPs and minimum bytes
  (``nanovllm_teach/models/step_cost.py``: weights once per token, attention over each context, weights and
  K/V read once) summed over the run and divided by the time spent in decode forwards: GFLOP/s against
  this machine's float32 matmul peak and GB/s against its memory bandwidth, both measured at start-up.
  The peak is the faster of the two libraries the linear layers can use (``F.linear``'s BLAS and oneDNN
  with a packed weight: ``linear_backend``); both are printed, and they can differ by 2x.
- **parity**: how many requests got exactly the same greedy token ids from our engine as from HF
  ``generate`` (and from HF continuous batching). Different batching changes float rounding, so a
  near-tie can rarely flip a token; the line says where the first difference is.
- with ``--trace-overhead``: our engine with full recording to a JSONL file vs. recording off, on the
  same workload, on two fresh engines, interleaved in alternating order (off on, on off, ...),
  ``--trace-repeats`` each; their ratio, by wall time and by CPU time, of the medians and of the fastest
  runs. Each repeat uses fresh prompts (same lengths), so the
  prefix cache never turns a repeat into a cache hit. Because a difference of a few percent between
  two runs is within the noise of a busy machine, the time spent inside the recorder's ``record`` is also
  measured directly, as a share of the traced run.

Every timed run reports wall time and the process's CPU time. Tokens/s and the headline ratios use
wall time; the CPU-time ratios are printed beside them because they are less disturbed when other
processes compete for the two cores (the load average is printed before each repeat). ``--repeats N``
runs every system N times, interleaved, and reports medians. ``--threads N`` sets torch's intra-op
threads for all three systems (our engine through its ``cpu_threads`` setting); without it all three run
on what the engine's thread rule (``nanovllm_teach/utils/threads.py``) picks for the model on this machine
now. The engine (``LLM``) is imported before torch, so that the rule's passive OpenMP waiting takes effect.

``--random-model`` replaces the shipped model by a randomly initialised Qwen3 of 110 M parameters (hidden
768, 16 layers, the shipped tokenizer's vocabulary), made on the fly in a temporary folder: a model whose
decode step is bound by its matrix multiplies, not by per-operation overhead.

Usage::

    python benchmarks/bench_cpu.py [--num-requests 64] [--seed 0] [--model PATH | --random-model]
                                   [--min-len 16] [--max-len 256] [--equal-outputs N] [--defaults]
                                   [--eager] [--trace-overhead] [--repeats 3] [--threads 1]
                                   [--hf-batch-sizes 16 32 64]

Results, with the machine they were measured on, are in ``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import sys
import tempfile
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path
from time import perf_counter, process_time
from typing import Any, Callable

import shutil

from nanovllm_teach import LLM, SamplingParams, default_model_path  # before torch: its OpenMP wait policy
import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig, Qwen3Config, Qwen3ForCausalLM

from nanovllm_teach.layers.onednn_linear import onednn_unusable_reason
from nanovllm_teach.models import step_cost
from nanovllm_teach.utils.context import get_context
from nanovllm_teach.utils.threads import apply_thread_rule


# ---- the workload ---------------------------------------------------------------------------------


def make_workload(num_requests: int, seed: int, vocab_size: int, min_len: int, max_len: int,
                  equal_outputs: int | None = None) -> tuple[list[list[int]], list[int]]:
    """Random prompts (token ids) and output lengths, as in nano-vllm's bench.py."""
    rng = random.Random(seed)
    prompts = [[rng.randrange(vocab_size) for _ in range(rng.randint(min_len, max_len))]
               for _ in range(num_requests)]
    max_tokens = [equal_outputs or rng.randint(min_len, max_len) for _ in range(num_requests)]
    return prompts, max_tokens


def make_random_model(folder: Path) -> Path:
    """A randomly initialised 110 M-parameter Qwen3 with the shipped tokenizer, saved in ``folder``."""
    shipped = default_model_path()
    vocab = Qwen3Config.from_pretrained(shipped).vocab_size
    config = Qwen3Config(vocab_size=vocab, hidden_size=768, intermediate_size=2304, num_hidden_layers=16,
                         num_attention_heads=12, num_key_value_heads=4, head_dim=64, max_position_embeddings=1024,
                         tie_word_embeddings=True, rope_theta=10000.0)
    torch.manual_seed(0)
    Qwen3ForCausalLM(config).float().save_pretrained(folder)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(shipped / name, folder / name)
    return folder


def fresh_prompts(prompts: list[list[int]], seed: int, vocab_size: int) -> list[list[int]]:
    """Other random prompts of the same lengths (so repeats never hit the prefix cache)."""
    rng = random.Random(seed)
    return [[rng.randrange(vocab_size) for _ in p] for p in prompts]


def params_for(max_tokens: list[int]) -> list[SamplingParams]:
    return [SamplingParams(temperature=0.0, max_tokens=n, ignore_eos=True) for n in max_tokens]


class Clock:
    """Wall seconds and this process's CPU seconds (all its threads) spent inside a ``with`` block."""

    def __enter__(self) -> "Clock":
        self._wall, self._cpu = perf_counter(), process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = perf_counter() - self._wall
        self.cpu = process_time() - self._cpu


# ---- 1. our engine --------------------------------------------------------------------------------


class StepTimers:
    """Wraps methods of the engine's parts with wall-clock accumulators, without touching engine code."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self._undo: list[Callable[[], None]] = []

    def wrap(self, obj: Any, name: str, key: str) -> None:
        inner = getattr(obj, name)
        seconds, calls = self.seconds, self.calls

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                seconds[key] += perf_counter() - start
                calls[key] += 1

        setattr(obj, name, timed)  # an instance attribute shadows the method
        self._undo.append(lambda: delattr(obj, name))

    def reset(self) -> None:
        self.seconds.clear()
        self.calls.clear()

    def remove(self) -> None:
        for undo in reversed(self._undo):
            undo()
        self._undo.clear()


def instrument(llm: LLM) -> StepTimers:
    timers = StepTimers()
    runner, scheduler = llm.model_runner, llm.scheduler
    timers.wrap(runner, "run_model", "model forward (run_model)")
    timers.wrap(scheduler, "schedule", "scheduler.schedule")
    timers.wrap(scheduler, "postprocess", "scheduler.postprocess")
    timers.wrap(runner, "prepare_prefill", "prepare_prefill")
    timers.wrap(runner, "prepare_decode", "prepare_decode")
    timers.wrap(runner, "prepare_sample", "prepare_sample")
    timers.wrap(runner.sampler, "forward", "sampler")
    return timers


class DecodeRoofline:
    """Wraps the model runner's ``run_model``: the FLOPs, minimum bytes and seconds of every decode forward."""

    def __init__(self, llm: LLM) -> None:
        runner = llm.model_runner
        self.model = runner.model
        self.flops = self.bytes = self.seconds = 0.0
        self.steps = 0
        inner = runner.run_model

        def timed(input_ids, positions, is_prefill, *rest):
            start = perf_counter()
            try:
                return inner(input_ids, positions, is_prefill, *rest)
            finally:
                if not is_prefill:
                    self.seconds += perf_counter() - start
                    lens = get_context().context_lens.tolist()
                    self.flops += step_cost.decode_flops(self.model, lens)
                    self.bytes += step_cost.decode_bytes(self.model, lens)
                    self.steps += 1

        runner.run_model = timed  # an instance attribute shadows the method
        # Another wrapper may have been set on top of this one: removing either removes both.
        self._undo = lambda: vars(runner).pop("run_model", None)

    def reset(self) -> None:
        self.flops = self.bytes = self.seconds = 0.0
        self.steps = 0

    def remove(self) -> None:
        self._undo()


def run_ours(llm: LLM, prompts: list[list[int]], max_tokens: list[int]) -> tuple[Clock, list[list[int]]]:
    with Clock() as clock:
        outputs = llm.generate(prompts, params_for(max_tokens), use_tqdm=False)
    return clock, [out["token_ids"] for out in outputs]


# ---- 2. HF generate, static padded batches -----------------------------------------------------


@torch.inference_mode()
def run_hf_generate(model, prompts: list[list[int]], max_tokens: list[int], batch_size: int,
                    pad_id: int) -> tuple[Clock, list[list[int]], int]:
    """Static batching: each batch of ``batch_size`` requests (arrival order) runs to its longest request.
    Returns the clock, each request's own tokens, and the number of tokens generated (useful + wasted)."""
    outputs: list[list[int]] = []
    generated = 0
    with Clock() as clock:
        for first in range(0, len(prompts), batch_size):
            generated += _hf_static_batch(model, prompts[first:first + batch_size],
                                          max_tokens[first:first + batch_size], pad_id, outputs)
    return clock, outputs, generated


def _hf_static_batch(model, batch: list[list[int]], wants: list[int], pad_id: int,
                     outputs: list[list[int]]) -> int:
    width, steps = max(map(len, batch)), max(wants)
    input_ids = torch.tensor([[pad_id] * (width - len(p)) + p for p in batch])
    attention_mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in batch])
    # eos_token_id=-1 ignores EOS (None would be filled in from the checkpoint's generation_config).
    out = model.generate(input_ids=input_ids, attention_mask=attention_mask, generation_config=GenerationConfig(
        do_sample=False, max_new_tokens=steps, eos_token_id=-1, pad_token_id=pad_id))
    new = out[:, width:]
    outputs.extend(row[:n] for row, n in zip(new.tolist(), wants))
    return new.numel()


# ---- 3. HF continuous batching ------------------------------------------------------------------


CB_PAGE_SIZE = 256


class HFContinuousBatching:
    """``transformers``' continuous-batching manager, built and warmed up once, outside the timing."""

    def __init__(self, model, max_new_tokens: int, num_blocks: int) -> None:
        from transformers.generation.configuration_utils import ContinuousBatchingConfig

        self.gen_config = GenerationConfig(do_sample=False, max_new_tokens=max_new_tokens, eos_token_id=-1)
        # An explicit cache size: left to itself, the manager sizes its cache from the machine's free memory
        # (12 GB on a 24 GB machine), which can get this process killed on a machine shared with others.
        self.manager = model.init_continuous_batching(
            generation_config=self.gen_config,
            continuous_batching_config=ContinuousBatchingConfig(num_blocks=num_blocks, page_size=CB_PAGE_SIZE))
        self.manager.warmup()
        self.manager.start()

    def describe(self) -> str:
        c = self.manager.continuous_batching_config
        return (f"attn={self.manager.model.config._attn_implementation}, page_size={c.page_size}, "
                f"num_blocks={c.num_blocks}, max_batch_tokens={c.max_batch_tokens}, "
                f"cuda_graph={c.use_cuda_graph}, async={c.use_async_batching}")

    def run(self, prompts: list[list[int]], max_tokens: list[int], tag: str) -> tuple[Clock, list[list[int]]]:
        results: dict[str, Any] = {}
        with Clock() as clock:
            ids = [self.manager.add_request(p, request_id=f"{tag}-{i}", max_new_tokens=n, eos_token_id=-1)
                   for i, (p, n) in enumerate(zip(prompts, max_tokens))]
            while len(results) < len(ids):
                result = self.manager.get_result(timeout=1)
                if result is None:
                    if not self.manager.is_running():
                        raise RuntimeError("the continuous-batching thread stopped before finishing")
                    continue
                if result.is_finished():
                    if result.error is not None:
                        raise RuntimeError(f"request {result.request_id} failed: {result.error}")
                    results[result.request_id] = result
        return clock, [list(results[i].generated_tokens) for i in ids]

    def close(self) -> None:
        self.manager.stop(block=True)
        self.manager.destroy()


# ---- reporting helpers ----------------------------------------------------------------------------


def parity(ours: list[list[int]], theirs: list[list[int]]) -> str:
    same = sum(a == b for a, b in zip(ours, theirs))
    line = f"{same}/{len(ours)} requests token-identical"
    diffs = [(i, next((j for j, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b))))
             for i, (a, b) in enumerate(zip(ours, theirs)) if a != b]
    if diffs:
        shown = ", ".join(f"req {i} @ token {j}" for i, j in diffs[:5])
        line += f"; first difference: {shown}{' ...' if len(diffs) > 5 else ''}"
    return line


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (f"{os.cpu_count()} CPU cores ({cpu}), no GPU; torch {torch.__version__} "
            f"({torch.get_num_threads()} threads), transformers {transformers.__version__}, "
            f"Python {platform.python_version()}")


def load() -> str:
    """The 1/5/15-minute load averages: above the core count, other processes competed for the CPU."""
    try:
        return "/".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def tok_s(tokens: int, wall: float, cpu: float) -> str:
    return f"{tokens / wall:8.1f} tok/s  ({wall:6.2f} s wall, {cpu:6.2f} s CPU)"


# ---- main -----------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--num-requests", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--model", type=Path, default=default_model_path())
    ap.add_argument("--random-model", action="store_true",
                    help="a random 110 M-parameter Qwen3 made on the fly instead of --model")
    ap.add_argument("--min-len", type=int, default=16, help="shortest prompt and output (default 16)")
    ap.add_argument("--max-len", type=int, default=256, help="longest prompt and output (default 256)")
    ap.add_argument("--equal-outputs", type=int, default=None,
                    help="every request asks for exactly this many tokens (default: uniform in the length range)")
    ap.add_argument("--defaults", action="store_true",
                    help="our engine with its default settings (ignores --block-size, --max-num-seqs, "
                         "--max-num-batched-tokens, --max-model-len)")
    ap.add_argument("--eager", action="store_true", help="our engine with enforce_eager=True (no native decode step)")
    ap.add_argument("--repeats", type=int, default=1,
                    help="run every system this many times, interleaved, and report the median (default 1)")
    ap.add_argument("--hf-batch-sizes", type=int, nargs="+", default=[16, 32, 64],
                    help="static batch sizes tried for HF generate; the fastest is compared (default 16 32 64)")
    ap.add_argument("--block-size", type=int, default=256, help="our engine's kvcache_block_size")
    ap.add_argument("--max-num-seqs", type=int, default=256)
    ap.add_argument("--max-num-batched-tokens", type=int, default=8192)
    ap.add_argument("--max-model-len", type=int, default=1024)
    ap.add_argument("--threads", type=int, default=None,
                    help="torch intra-op threads for all three systems (default: the engine's thread rule)")
    ap.add_argument("--skip-hf-cb", action="store_true", help="do not run HF continuous batching")
    ap.add_argument("--trace-overhead", action="store_true",
                    help="also time full JSONL recording vs recording off")
    ap.add_argument("--trace-repeats", type=int, default=4,
                    help="runs each of recording off and on for --trace-overhead (default 4)")
    ap.add_argument("--save-trace", type=Path, default=None,
                    help="with --trace-overhead: keep the recorded JSONL here (default: a temporary file)")
    args = ap.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp:
        if args.random_model:
            args.model = make_random_model(Path(tmp))
        elif not (args.model / "config.json").is_file():
            sys.exit(f"no checkpoint at {args.model}: pass --model PATH")
        run_benchmark(args)


def run_benchmark(args: argparse.Namespace) -> None:
    transformers.logging.set_verbosity_error()
    # The engine's thread rule (or --threads) for every system, so that all three run on the same threads.
    apply_thread_rule(args.model, explicit=args.threads)
    torch.manual_seed(args.seed)

    tokenizer = AutoTokenizer.from_pretrained(args.model)
    hf_model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32).eval()
    vocab = min(len(tokenizer), hf_model.config.vocab_size)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    prompts, max_tokens = make_workload(args.num_requests, args.seed, vocab, args.min_len, args.max_len,
                                        args.equal_outputs)
    useful = sum(max_tokens)

    print(f"date     {datetime.now(timezone.utc).isoformat(timespec='seconds')}")
    print(f"machine  {machine()}; load average {load()}")
    print(f"model    {args.model} ({sum(p.numel() for p in hf_model.parameters()) / 1e6:.2f} M params, "
          f"{hf_model.config.num_hidden_layers} layers, hidden {hf_model.config.hidden_size}, vocab "
          f"{hf_model.config.vocab_size})")
    print(f"workload {args.num_requests} requests, seed {args.seed}: prompt tokens {sum(map(len, prompts))} "
          f"(len {args.min_len}..{args.max_len}), output tokens {useful} "
          f"({f'all {args.equal_outputs}' if args.equal_outputs else f'len {args.min_len}..{args.max_len}'}, "
          f"ignore_eos), greedy; {args.repeats} repeat(s), median reported")
    peaks = {backend: step_cost.matmul_peak_gflops(backend) for backend in ("torch", "onednn")
             if backend == "torch" or onednn_unusable_reason(torch.device("cpu"), torch.float32) is None}
    peak, bandwidth = max(peaks.values()), step_cost.memory_bandwidth_gbs()
    print(f"limits   float32 matmul {peak:.1f} GFLOP/s (1024^3, {torch.get_num_threads()} threads; "
          + ", ".join(f"{name} {value:.1f}" for name, value in peaks.items())
          + f"), memory bandwidth {bandwidth:.1f} GB/s (256 MiB copy)")

    # Build and warm up everything before any clock starts.
    engine_kwargs = {} if args.defaults else dict(
        kvcache_block_size=args.block_size, max_num_seqs=args.max_num_seqs,
        max_num_batched_tokens=args.max_num_batched_tokens, max_model_len=args.max_model_len)
    if args.threads is not None:
        engine_kwargs["cpu_threads"] = args.threads
    if args.eager:
        engine_kwargs["enforce_eager"] = True
    llm = LLM(args.model, **engine_kwargs)
    llm.generate([[1, 2, 3], [4, 5]], params_for([4, 8]), use_tqdm=False)
    roofline = DecodeRoofline(llm)
    timers = instrument(llm)
    run_hf_generate(hf_model, [[1, 2, 3]] * 2, [4, 4], 2, pad_id)
    cb, cb_error, cb_desc = None, None, ""
    if not args.skip_hf_cb:
        try:
            # Enough pages for every request at once, with room for the warm-up.
            pages = sum(-(-(len(p) + n) // CB_PAGE_SIZE) for p, n in zip(prompts, max_tokens)) + 4
            cb = HFContinuousBatching(hf_model, max(max_tokens), pages)
            cb_desc = cb.describe()
            cb.run([[1, 2, 3]], [4], "warmup")
        except Exception as exc:  # report why, never a made-up number
            cb_error = f"{type(exc).__name__}: {exc}"
            cb = None

    ours, cb_name = "ours", "HF continuous batching"
    hf_names = {bs: f"HF generate, batch {bs}" for bs in args.hf_batch_sizes}
    clocks: dict[str, list[Clock]] = defaultdict(list)
    token_ids: dict[str, list[list[int]]] = {}
    wasted: dict[str, int] = {}
    forward_share: list[float] = []
    steps_before = llm.num_prefill_steps, llm.num_decode_steps
    try:
        for r in range(args.repeats):
            # Repeat 0 is the workload itself; later repeats get fresh prompts of the same lengths, so our
            # prefix cache never turns a repeat into a cache hit.
            batch = prompts if r == 0 else fresh_prompts(prompts, args.seed * 1000 + r, vocab)
            print(f"\n-- repeat {r + 1}/{args.repeats} (load average {load()})")

            timers.reset()
            roofline.reset()
            clock, ids = run_ours(llm, batch, max_tokens)
            clocks[ours].append(clock)
            token_ids.setdefault(ours, ids)
            forward_share.append(timers.seconds["model forward (run_model)"] / clock.wall)
            if r == 0:
                steps = llm.num_prefill_steps - steps_before[0], llm.num_decode_steps - steps_before[1]
                breakdown = dict(timers.seconds), dict(timers.calls), clock.wall
                decode_limit = roofline.flops, roofline.bytes, roofline.seconds, roofline.steps
            print(f"{ours:<28} {tok_s(useful, clock.wall, clock.cpu)}")

            for bs, name in hf_names.items():
                clock, ids, generated = run_hf_generate(hf_model, batch, max_tokens, bs, pad_id)
                clocks[name].append(clock)
                token_ids.setdefault(name, ids)
                wasted[name] = generated - useful
                print(f"{name:<28} {tok_s(useful, clock.wall, clock.cpu)}   [{generated} tokens generated, "
                      f"{generated - useful} of them past their request's max_tokens]")

            if cb is not None:
                try:
                    clock, ids = cb.run(batch, max_tokens, f"r{r}")
                except Exception as exc:
                    cb_error = f"{type(exc).__name__}: {exc}"
                    cb.close()
                    cb = None
                else:
                    clocks[cb_name].append(clock)
                    token_ids.setdefault(cb_name, ids)
                    print(f"{cb_name:<28} {tok_s(useful, clock.wall, clock.cpu)}")
    finally:
        if cb is not None:
            cb.close()
        timers.remove()
        roofline.remove()

    wall = {name: statistics.median(c.wall for c in runs) for name, runs in clocks.items()}
    cpu = {name: statistics.median(c.cpu for c in runs) for name, runs in clocks.items()}
    best_bs = min(hf_names, key=lambda bs: wall[hf_names[bs]])
    best_hf = hf_names[best_bs]
    settings_shown = {k: v for k, v in engine_kwargs.items() if k != "cpu_threads"}  # threads: the machine line
    print(f"\n== summary: useful output tokens/s (by wall time), median of {args.repeats} ==")
    print(f"{ours:<28} {tok_s(useful, wall[ours], cpu[ours])}   "
          f"[{', '.join(f'{k}={v}' for k, v in settings_shown.items()) or 'default settings'}"
          f"; {steps[0]} prefill + {steps[1]} decode steps]")
    for name in hf_names.values():
        print(f"{name:<28} {tok_s(useful, wall[name], cpu[name])}   [{wasted[name]} tokens wasted]"
              f"{'   <- best' if name == best_hf else ''}")
    if cb_name in wall:
        print(f"{cb_name:<28} {tok_s(useful, wall[cb_name], cpu[cb_name])}   [{cb_desc}]")
    else:
        print(f"{cb_name:<28} did not run: {cb_error or 'skipped (--skip-hf-cb)'}")

    print()
    print(f"ours / HF generate (best: batch {best_bs})  {wall[best_hf] / wall[ours]:5.2f}x by wall time   "
          f"{cpu[best_hf] / cpu[ours]:5.2f}x by CPU time")
    if cb_name in wall:
        print(f"ours / HF continuous batching       {wall[cb_name] / wall[ours]:5.2f}x by wall time   "
              f"{cpu[cb_name] / cpu[ours]:5.2f}x by CPU time")

    split, calls, wall0 = breakdown
    outside = [1 - f for f in forward_share]
    print(f"\nour wall time outside the model forward: {100 * statistics.median(outside):.1f}% "
          f"(median of {args.repeats}; per repeat: {', '.join(f'{100 * x:.1f}%' for x in outside)})")
    print(f"breakdown of repeat 1 ({wall0:.2f} s):")
    for key, sec in sorted(split.items(), key=lambda kv: -kv[1]):
        print(f"  {key:<28} {sec:7.3f} s  {100 * sec / wall0:5.1f}%  ({calls[key]} calls)")
    rest = wall0 - sum(split.values())
    print(f"  {'(rest: engine loop etc.)':<28} {rest:7.3f} s  {100 * rest / wall0:5.1f}%")

    flops, nbytes, seconds, num_steps = decode_limit
    print(f"\nroofline of our {num_steps} decode forwards in repeat 1 ({seconds:.2f} s, "
          f"{1e3 * seconds / max(num_steps, 1):.2f} ms per step): {flops / seconds / 1e9:.1f} GFLOP/s = "
          f"{100 * flops / seconds / 1e9 / peak:.0f}% of the matmul peak; {nbytes / seconds / 1e9:.1f} GB/s = "
          f"{100 * nbytes / seconds / 1e9 / bandwidth:.0f}% of the memory bandwidth "
          f"(arithmetic intensity {flops / nbytes:.1f} FLOP/byte; the machine balance is "
          f"{peak / bandwidth:.1f})")

    print(f"\nparity, greedy token ids, ours vs {best_hf}: {parity(token_ids[ours], token_ids[best_hf])}")
    if cb_name in token_ids:
        print(f"parity, greedy token ids, ours vs {cb_name}: {parity(token_ids[ours], token_ids[cb_name])}")

    llm.close()
    if args.trace_overhead:
        trace_overhead(args, engine_kwargs, prompts, max_tokens, vocab)
    print(f"\nload average at the end {load()}")


def trace_overhead(args, engine_kwargs: dict, prompts: list[list[int]], max_tokens: list[int],
                   vocab: int) -> None:
    """Recording off vs full recording to JSONL: two fresh engines, fresh prompts each repeat, run in
    alternating order (off-on, on-off, ...) so that neither always benefits from going second."""
    with tempfile.TemporaryDirectory() as tmp:
        path = args.save_trace or Path(tmp) / "bench_trace.jsonl"
        workload = {"name": "bench_cpu", "seed": args.seed, "num_requests": len(prompts),
                    "prompt_len": [args.min_len, args.max_len], "output_len": [args.min_len, args.max_len],
                    "temperature": 0.0}
        llm_off = LLM(args.model, **engine_kwargs)
        llm_on = LLM(args.model, trace=path, trace_metadata={"workload": workload}, **engine_kwargs)
        for llm in (llm_off, llm_on):
            llm.generate([[1, 2, 3]], params_for([4]), use_tqdm=False)
        # Time spent inside the recorder itself (serialising, writing, flushing): a direct measurement
        # that does not drown in run-to-run noise the way a difference of two wall times can.
        emit_timer = StepTimers()
        emit_timer.wrap(llm_on.rec, "record", "record")
        off: list[Clock] = []
        on: list[Clock] = []
        emit_share: list[float] = []
        for r in range(args.trace_repeats):
            batch = fresh_prompts(prompts, args.seed * 1000 + 500 + r, vocab)
            for recording in ((False, True) if r % 2 == 0 else (True, False)):
                if recording:
                    emit_timer.reset()
                    on.append(run_ours(llm_on, batch, max_tokens)[0])
                    emit_share.append(emit_timer.seconds["record"] / on[-1].wall)
                else:
                    off.append(run_ours(llm_off, batch, max_tokens)[0])
        num_events = emit_timer.calls["record"]
        emit_timer.remove()
        llm_on.close()
        size = path.stat().st_size
        lines = sum(1 for _ in path.open(encoding="utf-8"))
    print(f"\ntrace overhead ({args.trace_repeats} interleaved repeats each, alternating order; "
          f"{lines} JSONL lines, {size / 1e6:.1f} MB written in all):")
    for label, runs in (("recording off", off), ("recording JSONL", on)):
        print(f"  {label:<16} wall {statistics.median(c.wall for c in runs):6.2f} s "
              f"[{', '.join(f'{c.wall:.2f}' for c in runs)}]   CPU {statistics.median(c.cpu for c in runs):6.2f} s "
              f"[{', '.join(f'{c.cpu:.2f}' for c in runs)}]")
    print(f"  time inside recorder.record: {100 * statistics.median(emit_share):.2f}% of the traced run's wall time "
          f"(median; {num_events} events in the last repeat)")
    for kind in ("wall", "cpu"):
        ratio = statistics.median(getattr(c, kind) for c in on) / statistics.median(getattr(c, kind) for c in off)
        best = min(getattr(c, kind) for c in on) / min(getattr(c, kind) for c in off)
        print(f"  on / off by {kind + ' time:':<10} median {ratio:.3f} ({100 * (ratio - 1):+.1f}%), "
              f"fastest {best:.3f} ({100 * (best - 1):+.1f}%)   target < +5%")


if __name__ == "__main__":
    main()
