"""GPU check: one prepared script that exercises everything only a GPU can (an H200 in mind), offline.

Nothing is downloaded. The script writes its own Qwen3-0.6B-shaped checkpoint (hidden 1024, 28 layers,
16 query heads, 8 KV heads, head_dim 128, intermediate 3072, vocab 151936, tied embeddings) with random
bf16 weights and a small byte-level tokenizer (its few hundred ids are all valid in the 151936-row
vocabulary; the prompts are token ids anyway), then runs five sections, each on its own: a section that
fails prints its traceback and the script goes on.

1. **backends**: which attention backends this machine has (torch always; triton; flash_attn if importable).
2. **parity**: greedy tokens of our engine vs ``transformers`` ``generate`` (float32, one prompt at a time)
   on prompts that cross a KV block boundary while decoding and, in a second wave, hit the prefix cache;
   for every backend, with CUDA graphs and without (the torch backend always runs eagerly). float32 runs
   should be token-identical. bf16 runs (flash-attn needs bf16) are not expected to be: their rounding
   differs from float32's, and a random model's logits have many near-ties. So every generated token is
   also scored under the float32 reference, fed *our* tokens: ``margin = max logit - logit of our token``.
   A run passes when it is identical, or when every margin is within the tolerance (1e-3 for float32,
   0.15 for bf16): a near-tie went the other way. The logits of this random model have a standard
   deviation of about 0.6 (0.02 x sqrt(1024)), so 0.15 is a rounding-sized gap, not a wrong token.
3. **trace**: a recorded run with CUDA-graph replays, written to ``traces/gpu_cudagraph.jsonl`` and read
   back with the torch-free trace reader.
4. **bench**: nano-vllm's ``bench.py`` workload — 256 requests, prompts of 100..1024 random token ids,
   100..1024 output tokens each, ``ignore_eos`` — greedy, on our engine (graphs on, then off) and on
   ``transformers`` continuous batching (the engine behind ``generate_batch``; each request gets its own
   ``max_new_tokens``, falling back to ``generate_batch`` with one shared limit if that API is missing).
   Prints output tokens/s (sum of every request's ``max_tokens`` / wall seconds) and the ratio.
5. **kv budget**: the KV_BUDGET_ESTIMATE and CUDAGRAPH_CAPTURE numbers of the benchmark engine.

Everything printed also goes to ``benchmarks/gpu_check_output.txt``.

Usage::

    python benchmarks/gpu_check.py --quick   # < 5 minutes on an H200: 3 parity prompts of 16 tokens,
                                             # 64 bench requests of 100..512 tokens in and out
    python benchmarks/gpu_check.py           # the full check
"""

from __future__ import annotations

import os

# Nothing may reach the network: every file this script reads, it wrote itself. (Read when the Hugging Face
# libraries are imported, so set before them.)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import argparse  # noqa: E402
import gc  # noqa: E402
import importlib  # noqa: E402
import platform  # noqa: E402
import random  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import traceback  # noqa: E402
from collections import Counter  # noqa: E402
from collections.abc import Iterator  # noqa: E402
from contextlib import contextmanager  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402
from time import perf_counter  # noqa: E402
from typing import Any, TextIO  # noqa: E402

import torch  # noqa: E402
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers  # noqa: E402
from transformers import (AutoModelForCausalLM, AutoTokenizer, GenerationConfig,  # noqa: E402
                          PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM)

from nanovllm_teach import LLM, SamplingParams  # noqa: E402
from nanovllm_teach.engine.cuda_graphs import CAPTURABLE_BACKENDS  # noqa: E402
from nanovllm_teach.layers.attention_flash import flash_attn_unusable_reason  # noqa: E402
from nanovllm_teach.layers.attention_triton import triton_unusable_reason  # noqa: E402
from nanovllm_teach.trace import TraceRecorder, load_trace  # noqa: E402
from nanovllm_teach.trace.recorder import Recorder  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUTPUT = ROOT / "benchmarks" / "gpu_check_output.txt"
TRACE = ROOT / "traces" / "gpu_cudagraph.jsonl"

QWEN3_0_6B: dict[str, Any] = dict(
    hidden_size=1024, num_hidden_layers=28, num_attention_heads=16, num_key_value_heads=8, head_dim=128,
    intermediate_size=3072, vocab_size=151936, tie_word_embeddings=True, max_position_embeddings=40960,
    rope_theta=1_000_000.0, rms_norm_eps=1e-6)
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
TOLERANCE = {"float32": 1e-3, "bfloat16": 0.15}
BENCH_MAX_TOKEN_ID = 10000  # nano-vllm's bench draws prompt ids from randint(0, 10000)


# ---- output: the console and the output file at once ----------------------------------------------


class Tee:
    """Writes to several streams: everything the script prints also lands in ``gpu_check_output.txt``."""

    def __init__(self, *streams: TextIO) -> None:
        self.streams = streams

    def write(self, text: str) -> int:
        for stream in self.streams:
            stream.write(text)
            stream.flush()
        return len(text)

    def flush(self) -> None:
        for stream in self.streams:
            stream.flush()


FAILED_SECTIONS: list[str] = []


def free_gpu() -> None:
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


@contextmanager
def section(title: str) -> Iterator[None]:
    """Run one section; a failure is printed with its traceback and the script goes on."""
    print(f"\n== {title} ==", flush=True)
    start = perf_counter()
    try:
        yield
    except Exception:  # report and continue: one broken section must not hide the others' results
        traceback.print_exc(file=sys.stdout)
        FAILED_SECTIONS.append(title)
        print(f"-- {title}: FAILED (continuing)")
    finally:
        free_gpu()
        print(f"-- {title}: {perf_counter() - start:.1f} s", flush=True)


# ---- the checkpoint -------------------------------------------------------------------------------


def write_checkpoint(path: Path, shape: dict[str, Any], dtype: torch.dtype = torch.bfloat16,
                     device: str = "cpu", seed: int = 0) -> Path:
    """Save a randomly initialised Qwen3 of ``shape`` (safetensors, ``dtype``) and a byte-level BPE
    tokenizer whose EOS is ``<|im_end|>``, as a checkpoint directory both engines load."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=320, special_tokens=SPECIAL_TOKENS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(["the quick brown fox jumps over the lazy dog", "count 1 2 3 4 5"] * 10, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    if fast.vocab_size > shape["vocab_size"]:
        raise ValueError(f"the tokenizer has {fast.vocab_size} ids, more than vocab_size={shape['vocab_size']}")
    config = Qwen3Config(eos_token_id=fast.eos_token_id, pad_token_id=fast.pad_token_id, **shape)
    torch.manual_seed(seed)
    with torch.device(device):
        model = Qwen3ForCausalLM(config).to(dtype)
    model.save_pretrained(path)
    fast.save_pretrained(path)
    del model
    free_gpu()
    return path


# ---- workloads ------------------------------------------------------------------------------------


def make_bench_workload(num_requests: int, seed: int, min_len: int = 100,
                        max_len: int = 1024) -> tuple[list[list[int]], list[int]]:
    """nano-vllm's bench.py: prompt ids from randint(0, 10000), prompt and output lengths uniform in
    ``min_len..max_len``."""
    rng = random.Random(seed)
    prompts = [[rng.randint(0, BENCH_MAX_TOKEN_ID) for _ in range(rng.randint(min_len, max_len))]
               for _ in range(num_requests)]
    max_tokens = [rng.randint(min_len, max_len) for _ in range(num_requests)]
    return prompts, max_tokens


def make_parity_waves(quick: bool, seed: int, block_size: int = 256) -> list[list[list[int]]]:
    """Two waves of prompts. Wave 1: a prompt just short of a block boundary (decode crosses it), a long
    one spanning blocks, one token. Wave 2 starts with wave 1's first two blocks: prefix-cache hits."""
    rng = random.Random(seed)

    def ids(n: int) -> list[int]:
        return [rng.randint(3, BENCH_MAX_TOKEN_ID) for _ in range(n)]  # 0..2 are the special tokens

    shared = ids(2 * block_size)
    wave1 = [ids(block_size - 6), shared + ids(40), [rng.randint(3, 999)]]
    wave2 = [shared + ids(9), shared + ids(block_size + 3)]
    return [wave1[:2], wave2[:1]] if quick else [wave1, wave2]


# ---- our engine and the reference -----------------------------------------------------------------


@dataclass
class EngineRun:
    tokens: list[list[int]]
    events: list[Any]


def run_engine(path: Path, waves: list[list[list[int]]], max_tokens: int, **settings: Any) -> EngineRun:
    """Greedy generation, wave after wave, on one engine; every event kept in memory."""
    rec = TraceRecorder(detail_decode_steps=0)
    llm = LLM(path, trace=rec, **settings)
    greedy = SamplingParams(temperature=0.0, max_tokens=max_tokens)
    tokens = [out["token_ids"] for wave in waves for out in llm.generate(wave, greedy, use_tqdm=False)]
    llm.close()
    del llm
    free_gpu()
    return EngineRun(tokens, rec.events)


def hf_reference(model, prompts: list[list[int]], max_tokens: int, eos: int) -> list[list[int]]:
    """``transformers`` greedy ``generate``, one prompt at a time (no padding to blur the comparison)."""
    device = next(model.parameters()).device
    outs = []
    with torch.inference_mode():
        for prompt in prompts:
            generated = model.generate(torch.tensor([prompt], device=device), max_new_tokens=max_tokens,
                                       do_sample=False, eos_token_id=eos, pad_token_id=eos)
            outs.append(generated[0, len(prompt):].tolist())
    return outs


def greedy_margins(model, prompt: list[int], ours: list[int]) -> list[float]:
    """For each of our tokens: the reference's best logit minus its logit for our token, with the
    reference fed our own tokens (0 wherever we chose its argmax)."""
    device = next(model.parameters()).device
    with torch.inference_mode():
        logits = model(torch.tensor([prompt + ours[:-1]], device=device)).logits[0, len(prompt) - 1:].float()
    chosen = logits.gather(1, torch.tensor(ours, device=device).unsqueeze(1)).squeeze(1)
    return (logits.max(dim=1).values - chosen).tolist()


def first_difference(a: list[int], b: list[int]) -> int | None:
    if a == b:
        return None
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def verdict(ours: list[list[int]], ref: list[list[int]], margins: list[list[float]], tol: float) -> str:
    same = sum(a == b for a, b in zip(ours, ref))
    worst = max((m for ms in margins for m in ms), default=0.0)
    diffs = [(i, first_difference(a, b)) for i, (a, b) in enumerate(zip(ours, ref)) if a != b]
    status = "PASS identical" if not diffs else ("PASS near-ties" if worst <= tol else "FAIL")
    where = "; first differences: " + ", ".join(f"prompt {i} @ token {j}" for i, j in diffs) if diffs else ""
    return f"{status}: {same}/{len(ref)} prompts token-identical, max margin {worst:.2e} (tol {tol:g}){where}"


# ---- sections -------------------------------------------------------------------------------------


def available_backends() -> dict[str, str | None]:
    """Each backend and why it cannot run here (None when it can)."""
    cuda = torch.device("cuda")
    return {"torch": None, "triton": triton_unusable_reason(cuda),
            "flash_attn": flash_attn_unusable_reason(cuda, 256, torch.bfloat16)}


def parity_variants(backends: dict[str, str | None]) -> list[tuple[str, str, bool]]:
    """(dtype, backend, enforce_eager) for every backend that runs here; graphs only where capturable."""
    variants = []
    for dtype in ("float32", "bfloat16"):
        for backend, problem in backends.items():
            if problem is not None or (backend == "flash_attn" and dtype == "float32"):
                continue
            variants.append((dtype, backend, True))
            if backend in CAPTURABLE_BACKENDS:
                variants.append((dtype, backend, False))
    return variants


def section_parity(path: Path, quick: bool, seed: int, backends: dict[str, str | None],
                   device: str = "cuda") -> None:
    waves = make_parity_waves(quick, seed)
    prompts = [p for wave in waves for p in wave]
    max_tokens = 16 if quick else 48
    eos = AutoTokenizer.from_pretrained(path).eos_token_id
    print(f"prompts (token counts) {[len(p) for p in prompts]} in {len(waves)} waves, max_tokens {max_tokens}")
    hf = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).to(device).eval()
    start = perf_counter()
    ref = hf_reference(hf, prompts, max_tokens, eos)
    print(f"transformers float32 reference: {perf_counter() - start:.1f} s")
    settings = dict(kvcache_block_size=256, max_model_len=2048, max_num_batched_tokens=4096,
                    max_num_seqs=8 if quick else 16, num_kvcache_blocks=64, device=device)
    failed: list[str] = []
    for dtype, backend, eager in parity_variants(backends):
        name = f"{backend:<10} {dtype:<8} {'eager' if eager else 'graphs'}"
        try:
            start = perf_counter()
            run = run_engine(path, waves, max_tokens, attention_backend=backend, dtype=dtype,
                             enforce_eager=eager, **settings)
            replays = sum(e.event == "CUDAGRAPH_REPLAY" for e in run.events)
            hits = sum(e.event == "PREFIX_CACHE_HIT" for e in run.events)
            margins = [greedy_margins(hf, p, ours) for p, ours in zip(prompts, run.tokens)]
            result = verdict(run.tokens, ref, margins, TOLERANCE[dtype])
            print(f"{name}  {result}  "
                  f"[{replays} graph replays, {hits} prefix-cache hits, {perf_counter() - start:.1f} s]")
            if result.startswith("FAIL"):
                failed.append(name)
        except Exception:
            traceback.print_exc(file=sys.stdout)
            print(f"{name}  ERROR (see the traceback above)")
            failed.append(name)
        free_gpu()
    for backend, problem in backends.items():
        if problem is not None:
            print(f"{backend:<10} skipped: {problem}")
    del hf
    if failed:
        raise RuntimeError(f"parity failed for: {'; '.join(failed)}")


def section_trace(path: Path, quick: bool, seed: int, backends: dict[str, str | None],
                  trace_path: Path = TRACE) -> None:
    backend = "flash_attn" if backends["flash_attn"] is None else "triton"
    rng = random.Random(seed)
    n = 6 if quick else 12
    # Different output lengths: as requests finish, the batch shrinks through several graph buckets.
    prompts = [[rng.randint(3, BENCH_MAX_TOKEN_ID) for _ in range(rng.randint(20, 600))] for _ in range(n)]
    params = [SamplingParams(temperature=0.0, max_tokens=8 * (i + 1), ignore_eos=True) for i in range(n)]
    trace_path.parent.mkdir(exist_ok=True)
    rec = TraceRecorder(trace_path, keep_in_memory=False)
    with LLM(path, trace=rec, attention_backend=backend, kvcache_block_size=256, max_model_len=2048,
             max_num_batched_tokens=4096, max_num_seqs=16, num_kvcache_blocks=128,
             trace_metadata={"scenario": "gpu_cudagraph", "lesson": "decode steps replay CUDA graphs"}) as llm:
        llm.generate(prompts, params, use_tqdm=False)
    trace = load_trace(trace_path)
    replays = [e for e in trace.events if e.event == "CUDAGRAPH_REPLAY"]
    capture = [e.stats for e in trace.events if e.event == "CUDAGRAPH_CAPTURE"]
    print(f"wrote {trace_path}: backend {trace.header.get('attention_backend')}, "
          f"{len(trace.events)} events, {len(trace.steps)} steps")
    print(f"CUDAGRAPH_CAPTURE {capture}")
    print(f"CUDAGRAPH_REPLAY {len(replays)} steps, by (batch_size -> graph_batch_size): "
          f"{dict(sorted(Counter((e.stats['batch_size'], e.stats['graph_batch_size']) for e in replays).items()))}")
    print(f"RUN_MODEL (eager) {sum(e.event == 'RUN_MODEL' for e in trace.events)} steps")


class StartupRecorder(Recorder):
    """Keeps only the start-up events (the KV budget, the capture), by name, and drops the rest: the
    benchmark runs as good as untraced."""

    def __init__(self) -> None:
        self.events: dict[str, dict[str, Any]] = {}

    def emit(self, event: str, phase: str, reason: str, /, **stats: Any) -> None:
        if phase in ("bootstrap", "init"):
            self.events[event] = stats


def bench_ours(path: Path, prompts: list[list[int]], max_tokens: list[int], enforce_eager: bool,
               recorder: Recorder | None = None) -> float:
    """Seconds our engine takes for the workload (built and warmed up before the clock starts)."""
    llm = LLM(path, trace=recorder, enforce_eager=enforce_eager, max_model_len=4096)
    params = [SamplingParams(temperature=0.0, max_tokens=n, ignore_eos=True) for n in max_tokens]
    llm.generate([[5, 6, 7]] * 4, SamplingParams(temperature=0.0, max_tokens=8), use_tqdm=False)
    steps_before = llm.num_prefill_steps, llm.num_decode_steps
    torch.cuda.synchronize()
    start = perf_counter()
    llm.generate(prompts, params, use_tqdm=False)
    torch.cuda.synchronize()
    seconds = perf_counter() - start
    graphs = llm.model_runner.decode_graphs is not None
    print(f"ours ({llm.model_runner.attention_backend}, {llm.model_runner.dtype}, "
          f"{'decode in CUDA graphs' if graphs else 'eager'}): {llm.num_prefill_steps - steps_before[0]} prefill + "
          f"{llm.num_decode_steps - steps_before[1]} decode steps")
    del llm
    free_gpu()
    return seconds


def bench_hf(path: Path, prompts: list[list[int]], max_tokens: list[int]) -> tuple[float, str]:
    """Seconds ``transformers`` continuous batching takes (warmed up first), and how it was run."""
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16).to("cuda").eval()
    config = GenerationConfig(do_sample=False, max_new_tokens=max(max_tokens), eos_token_id=-1)
    try:
        manager = model.init_continuous_batching(generation_config=config)
    except (AttributeError, TypeError) as exc:
        # No per-request limits: every request generates max(max_tokens); only its own count as useful.
        print(f"continuous-batching manager unavailable ({exc}); generate_batch with one shared limit")
        model.generate_batch([[5, 6, 7]] * 4, generation_config=GenerationConfig(
            do_sample=False, max_new_tokens=8, eos_token_id=-1))
        torch.cuda.synchronize()
        start = perf_counter()
        model.generate_batch(prompts, generation_config=config)
        torch.cuda.synchronize()
        return perf_counter() - start, "generate_batch, shared max_new_tokens (favours us)"
    manager.start()
    try:
        def run(batch: list[list[int]], limits: list[int], tag: str) -> None:
            ids = [manager.add_request(p, request_id=f"{tag}-{i}", max_new_tokens=n, eos_token_id=-1)
                   for i, (p, n) in enumerate(zip(batch, limits))]
            done: set[str] = set()
            while len(done) < len(ids):
                result = manager.get_result(timeout=1)
                if result is None:
                    if not manager.is_running():
                        raise RuntimeError("transformers' continuous-batching thread stopped early")
                    continue
                if result.is_finished():
                    if getattr(result, "error", None):
                        raise RuntimeError(f"request {result.request_id} failed: {result.error}")
                    done.add(result.request_id)

        run([[5, 6, 7]] * 4, [8] * 4, "warmup")
        torch.cuda.synchronize()
        start = perf_counter()
        run(prompts, max_tokens, "bench")
        torch.cuda.synchronize()
        return perf_counter() - start, "continuous batching, per-request max_new_tokens"
    finally:
        manager.stop(block=True)


def section_bench(path: Path, quick: bool, seed: int, startup: StartupRecorder) -> None:
    num_requests, max_len = (64, 512) if quick else (256, 1024)
    prompts, max_tokens = make_bench_workload(num_requests, seed, 100, max_len)
    useful = sum(max_tokens)
    print(f"workload: {num_requests} requests, prompt tokens {sum(map(len, prompts))}, output tokens {useful} "
          f"(lengths 100..{max_len}, ignore_eos, greedy)")
    results: dict[str, float] = {}
    for label, eager in (("ours", False), ("ours, enforce_eager", True)):
        try:
            results[label] = bench_ours(path, prompts, max_tokens, eager, None if eager else startup)
            print(f"{label:<24} {useful / results[label]:10.1f} tok/s  ({results[label]:.2f} s)")
        except Exception:
            traceback.print_exc(file=sys.stdout)
            print(f"{label:<24} ERROR (see the traceback above)")
        free_gpu()
    try:
        seconds, how = bench_hf(path, prompts, max_tokens)
        results["transformers"] = seconds
        print(f"{'transformers':<24} {useful / seconds:10.1f} tok/s  ({seconds:.2f} s; {how})")
    except Exception:
        traceback.print_exc(file=sys.stdout)
        print(f"{'transformers':<24} ERROR (see the traceback above)")
    for label in ("ours", "ours, enforce_eager"):
        if label in results and "transformers" in results:
            print(f"{label} / transformers: {results['transformers'] / results[label]:.2f}x")


def gib(num_bytes: int) -> str:
    return f"{num_bytes / 2**30:8.2f} GiB"


def section_kv_budget(startup: StartupRecorder) -> None:
    if "KV_BUDGET_ESTIMATE" not in startup.events:
        raise RuntimeError("the benchmark engine did not start, so there is no KV budget to show")
    kv = startup.events["KV_BUDGET_ESTIMATE"]
    print(f"available = total * utilization - used - peak + current  (utilization {kv['utilization']})")
    for key in ("total", "free", "used", "peak", "current", "budget"):
        print(f"  {key:<8} {gib(kv[key])}")
    print(f"  block    {kv['block_bytes']} bytes = 2 (K,V) x {kv['num_layers']} layers x {kv['block_size']} tokens "
          f"x {kv['num_kv_heads']} kv heads x {kv['head_dim']} dims x {kv['dtype_bytes']} bytes")
    print(f"  blocks   {kv['num_blocks']} ({kv['num_blocks'] * kv['block_size']} tokens of KV cache)")
    if "CUDAGRAPH_CAPTURE" in startup.events:
        cap = startup.events["CUDAGRAPH_CAPTURE"]
        print(f"CUDA graphs: {len(cap['batch_sizes'])} buckets {cap['batch_sizes'][:6]}...{cap['batch_sizes'][-1]}, "
              f"captured in {cap['seconds']:.1f} s, {gib(cap['memory_bytes']).strip()} taken after the KV cache")


def describe_machine() -> None:
    print(f"python {platform.python_version()}, torch {torch.__version__} (CUDA {torch.version.cuda})")
    for name in ("transformers", "triton", "flash_attn"):
        try:
            print(f"{name} {importlib.import_module(name).__version__}")
        except Exception as exc:  # any import failure is information, not an error
            print(f"{name} not importable: {type(exc).__name__}: {exc}")
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        print(f"GPU {props.name}, {props.total_memory / 2**30:.1f} GiB, {torch.cuda.device_count()} device(s)")
    print(f"TRITON_INTERPRET={os.environ.get('TRITON_INTERPRET', '')!r}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="the reduced check (< 5 minutes on an H200)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--checkpoint-dir", type=Path, default=None,
                    help="where the random checkpoint goes (default: a temporary directory); one already "
                         "there is reused, which saves a minute on a rerun")
    args = ap.parse_args(argv)

    OUTPUT.parent.mkdir(exist_ok=True)
    with open(OUTPUT, "w") as out, tempfile.TemporaryDirectory() as tmp:
        stdout, stderr = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = Tee(stdout, out), Tee(stderr, out)  # library warnings belong in the file too
        try:
            started = perf_counter()
            print(f"gpu_check {'--quick' if args.quick else '(full)'}, seed {args.seed}")
            describe_machine()
            if not torch.cuda.is_available():
                print("no CUDA device: this script checks what only a GPU can; nothing to do here")
                return 1
            path = args.checkpoint_dir or Path(tmp) / "qwen3-0.6b-random"
            with section("checkpoint"):
                if (path / "config.json").is_file():
                    print(f"reusing the checkpoint in {path}")
                else:
                    write_checkpoint(path, QWEN3_0_6B, torch.bfloat16, "cuda", args.seed)
                    print(f"wrote a random Qwen3-0.6B-shaped checkpoint (bf16) to {path}")
            backends: dict[str, str | None] = {"torch": None, "triton": "not checked", "flash_attn": "not checked"}
            with section("1. backends"):
                backends = available_backends()
                for name, problem in backends.items():
                    print(f"{name:<10} {'available' if problem is None else 'unavailable: ' + problem}")
            with section("2. parity vs transformers"):
                section_parity(path, args.quick, args.seed, backends)
            with section("3. trace with CUDA-graph replays"):
                section_trace(path, args.quick, args.seed, backends)
            startup = StartupRecorder()
            with section("4. bench (nano-vllm workload)"):
                section_bench(path, args.quick, args.seed, startup)
            with section("5. KV budget"):
                section_kv_budget(startup)
            print(f"\ndone in {perf_counter() - started:.0f} s; failed sections: {FAILED_SECTIONS or 'none'}")
            print(f"(this output is also in {OUTPUT.relative_to(ROOT)})")
            return 1 if FAILED_SECTIONS else 0
        finally:
            sys.stdout, sys.stderr = stdout, stderr


if __name__ == "__main__":
    sys.exit(main())
