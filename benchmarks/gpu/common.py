"""What every GPU-check section shares: its mode, the random checkpoint, greedy references, the verdict line.

A section runs in its own process (``run_section.py``), started by ``benchmarks/gpu_check.py``. It prints
what it measures, and its last line is its verdict: ``VERDICT: PASS|FAIL|SKIP <one line>``.
Modes: ``quick`` and ``full`` on a GPU; ``cpu`` is the stand-in of ``--cpu-dry-run`` (tiny shapes, the
Triton interpreter), which runs the same code wherever it can run without CUDA.
"""

from __future__ import annotations

import gc
import os
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

QWEN3_0_6B: dict[str, Any] = dict(
    hidden_size=1024, num_hidden_layers=28, num_attention_heads=16, num_key_value_heads=8, head_dim=128,
    intermediate_size=3072, vocab_size=151936, tie_word_embeddings=True, max_position_embeddings=40960,
    rope_theta=1_000_000.0, rms_norm_eps=1e-6)
# The CPU stand-in: the same layout (GQA 2, tied embeddings), small enough for the Triton interpreter.
TINY: dict[str, Any] = {**QWEN3_0_6B, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                        "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 128, "vocab_size": 4096,
                        "max_position_embeddings": 4096}
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
MAX_TOKEN_ID = 10000  # nano-vllm's bench draws prompt ids from randint(0, 10000)


@dataclass(frozen=True)
class Setup:
    mode: str        # quick, full or cpu
    work: Path       # scratch space shared by the sections of one run (the checkpoint lives here)
    out: Path        # what comes back from the GPU machine
    deadline: float  # time.time() by which the parent stops this section

    def seconds_left(self) -> float:
        return self.deadline - time.time()

    @property
    def gpu(self) -> bool:
        return self.mode != "cpu"

    @property
    def device(self) -> str:
        return "cuda" if self.gpu else "cpu"

    @property
    def checkpoint(self) -> Path:
        return self.work / "qwen3-0.6b-random"

    def need_checkpoint(self) -> Path:
        if not (self.checkpoint / "config.json").is_file():
            raise SystemExit(verdict("FAIL", f"no checkpoint in {self.checkpoint}: the checkpoint section failed"))
        return self.checkpoint


def verdict(status: str, text: str) -> str:
    """The section's last line; the parent reads it."""
    assert status in ("PASS", "FAIL", "SKIP"), status
    return f"VERDICT: {status} {text}"


def free_gpu() -> None:
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def write_checkpoint(path: Path, shape: dict[str, Any], dtype: torch.dtype, device: str = "cpu",
                     seed: int = 0) -> Path:
    """Save a randomly initialised Qwen3 of ``shape`` (safetensors, ``dtype``) and a byte-level BPE tokenizer
    whose EOS is ``<|im_end|>``: a checkpoint both engines load, made on the spot (nothing is downloaded)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

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
    tmp = path.with_name(path.name + ".partial")  # a section killed half-way leaves no half checkpoint
    model.save_pretrained(tmp)
    fast.save_pretrained(tmp)
    tmp.rename(path)
    del model
    free_gpu()
    return path


def random_prompts(rng: random.Random, n: int, lo: int, hi: int, vocab: int) -> list[list[int]]:
    """``n`` prompts of ``lo..hi`` random ids (3..: ids 0..2 are the special tokens)."""
    top = min(MAX_TOKEN_ID, vocab - 1)
    return [[rng.randint(3, top) for _ in range(rng.randint(lo, hi))] for _ in range(n)]


def make_bench_workload(num_requests: int, seed: int, min_len: int = 100,
                        max_len: int = 1024) -> tuple[list[list[int]], list[int]]:
    """nano-vllm's bench.py: prompt ids from randint(0, 10000), prompt and output lengths uniform in
    ``min_len..max_len``."""
    rng = random.Random(seed)
    prompts = [[rng.randint(0, MAX_TOKEN_ID) for _ in range(rng.randint(min_len, max_len))]
               for _ in range(num_requests)]
    max_tokens = [rng.randint(min_len, max_len) for _ in range(num_requests)]
    return prompts, max_tokens


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


def describe_machine() -> str:
    import importlib
    lines = [f"torch {torch.__version__} (CUDA {torch.version.cuda}), "
             f"TRITON_INTERPRET={os.environ.get('TRITON_INTERPRET', '')!r}"]
    for name in ("transformers", "triton", "msgspec", "structlog", "flash_attn"):
        try:
            module = importlib.import_module(name)
            lines.append(f"{name} {getattr(module, '__version__', '?')} from {Path(module.__file__).parent}")
        except Exception as exc:  # any import failure is information here
            lines.append(f"{name} not importable: {type(exc).__name__}: {exc}")
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        lines.append(f"GPU {props.name}, {props.total_memory / 2**30:.1f} GiB, {torch.cuda.device_count()} device(s)")
    return "\n".join(lines)
