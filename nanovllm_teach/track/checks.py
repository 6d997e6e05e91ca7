"""``build check``'s checks: each seam of a chapter against the engine's own function, on random tensors and on
the tensors the engine hands that function when it runs the shipped model.

Role: teaching (the track). Emits no events.

Every seam is checked alone, the rest of the engine being the engine's, so a difference points at one
function. The real tensors are caught (``real_calls``) from one prefill of two prompts through the shipped
checkpoint: the arguments of each seam's first calls. Tolerances (``TOLERANCES``, float32): 1e-5 absolute
and 1e-4 relative for one layer's arithmetic; 2e-4 absolute for the rotary table, whose angles reach a
thousand radians, where float32 rounds the angle itself to ~6e-5; 1e-4 both for what stacks layers (the
block, the model); exact for masks, token ids and loaded weights. The sampler's draws are checked by their
frequencies (``compare.chi_square_difference``), its greedy rows and its seeds exactly.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

from nanovllm_teach.i18n import Text, say
from nanovllm_teach.track.checks_cache import CACHE_CHECKS
from nanovllm_teach.track.checks_decisions import DECISION_CHECKS
from nanovllm_teach.track.compare import (Refused, called, chi_square_difference, first_difference,
                                          outputs_difference)
from nanovllm_teach.track.extract import reference
from nanovllm_teach.track.learner import Piece, installed
from nanovllm_teach.track.seams import Seam
from nanovllm_teach.utils.context import Context, reset_context, set_context

TOLERANCES = {  # (rtol, atol) by seam
    "rms_norm": (1e-4, 1e-5), "silu_and_mul": (1e-4, 1e-5), "cos_sin_table": (0.0, 2e-4),
    "apply_rotary": (1e-4, 1e-5), "attend": (1e-4, 1e-5), "causal_prefill": (1e-4, 1e-5),
    "Qwen3Attention.project": (1e-4, 1e-4), "Qwen3DecoderLayer.forward": (1e-4, 1e-4),
    "Qwen3Model.forward": (1e-4, 1e-4), "keep_mask": (0.0, 0.0),
}
DRAWS = 4000  # seeded draws per distribution: every kept token of the cases expects at least ~50

RANDOM = Text(en="random tensors", zh="随机张量")
RANDOM_HALF = Text(en="random bfloat16 tensors", zh="随机 bfloat16 张量")
REAL = Text(en="the shipped model's tensors (call {index})", zh="随附模型的真实张量（第 {index} 次调用）")
WITH_MASK = Text(en="a mask instead of is_causal (3 new tokens after 4 cached)",
                 zh="用 mask 代替 is_causal（4 个已缓存 token 之后的 3 个新 token）")
CHECKPOINT = Text(en="the shipped checkpoint", zh="随附的 checkpoint")
GREEDY = Text(en="temperature 0 rows", zh="温度为 0 的行")
SAME_SEEDS = Text(en="the same seeds twice", zh="同样的 seed 用两次")
DRAWS_AT = Text(en="{draws} draws at temperature {temperature:g}", zh="温度 {temperature:g} 下的 {draws} 次抽样")
FILTERED_REAL = Text(en="{draws} draws from the shipped model's logits, top-k 8",
                     zh="在随附模型的 logits 上取 top-k 8 后的 {draws} 次抽样")
SEEDS_DIFFER = Text(en="your {name}: seed {seed} drew token {first}, then {second} with the same logits: a seeded row "
                       "must draw from torch.Generator().manual_seed(seed)",
                    zh="你的 {name}：seed {seed} 在同样的 logits 上先抽到 token {first}，再抽到 {second}：带 seed 的行必须用 "
                       "torch.Generator().manual_seed(seed) 抽样")


@dataclass(frozen=True)
class Call:
    case: str  # what the learner reads the case as
    args: tuple[Any, ...]
    cu_seqlens: torch.Tensor | None = None  # the prefill the attention layers see (the block and the model)


@contextmanager
def prefill_of(cu_seqlens: torch.Tensor | None) -> Iterator[None]:
    """The step's ``Context`` of a prefill of sequences ``cu_seqlens`` without a cache, for the block."""
    if cu_seqlens is None:
        yield
        return
    longest = int(cu_seqlens.diff().max())
    set_context(Context(is_prefill=True, cu_seqlens_q=cu_seqlens, cu_seqlens_k=cu_seqlens, max_seqlen_q=longest,
                        max_seqlen_k=longest))
    try:
        yield
    finally:
        reset_context()


def _cloned(args: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)


@functools.cache
def shipped_model() -> tuple[Any, dict[str, list[tuple[Any, ...]]], torch.Tensor, torch.Tensor]:
    """The shipped checkpoint in the engine's Qwen3, the arguments of the first two calls of every seam
    during one prefill of two prompts, the logits of each prompt's last token, and the prompts' cu_seqlens."""
    from transformers import AutoConfig, AutoTokenizer

    from nanovllm_teach import default_model_path
    from nanovllm_teach.models.loader import load_model
    from nanovllm_teach.models.qwen3 import Qwen3ForCausalLM
    from nanovllm_teach.track.chapters import CHAPTERS

    path = default_model_path()
    calls: dict[str, list[tuple[Any, ...]]] = {}

    def recording(seam: Seam) -> Callable[..., Any]:
        original = reference(seam)
        signature = inspect.signature(original)

        def record(*args: Any, **kwargs: Any) -> Any:
            calls.setdefault(seam.qualname, [])
            if len(calls[seam.qualname]) < 2:  # kept positional, as the checks call a learner's function
                calls[seam.qualname].append(_cloned(signature.bind(*args, **kwargs).args))
            return original(*args, **kwargs)
        return record

    # What runs inside the forward pass: chapters 1 to 4 but the loader (the sampler's cases are the logits).
    seams = [seam for chapter in CHAPTERS[:4] for seam in chapter.seams if seam.qualname != "load_model"]
    tokenizer = AutoTokenizer.from_pretrained(path)
    prompts = [tokenizer.encode(text) for text in ("The capital of France is", "list all prime numbers")]
    ids = torch.tensor([t for p in prompts for t in p])
    positions = torch.tensor([i for p in prompts for i in range(len(p))])
    cu = torch.tensor([0, len(prompts[0]), len(ids)], dtype=torch.int32)
    with torch.inference_mode(), installed(Piece(seam, recording(seam), True) for seam in seams):
        model = Qwen3ForCausalLM(AutoConfig.from_pretrained(path))
        load_model(model, path)
        with prefill_of(cu):
            hidden = model(ids, positions)
        logits = model.compute_logits(hidden[cu[1:].long() - 1])
    return model, calls, logits, cu


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def random_calls(seam: Seam) -> list[Call]:
    """The seam's random cases (fixed seeds: a learner sees the same case again)."""
    g = _gen(0)
    case = say(RANDOM)
    name = seam.qualname
    if name == "rms_norm":
        return [Call(case, (torch.randn(5, 64, generator=g) * 3, torch.randn(64, generator=g), 1e-6)),
                Call(say(RANDOM_HALF), (torch.randn(5, 64, generator=g).bfloat16(),
                                        torch.randn(64, generator=g).bfloat16(), 1e-6))]
    if name == "silu_and_mul":
        return [Call(case, (torch.randn(6, 64, generator=g) * 2,))]
    if name == "cos_sin_table":
        return [Call(case, (16, 32, 10000.0)), Call(case, (64, 1024, 1000000.0))]
    if name == "apply_rotary":
        from nanovllm_teach.layers.rotary_embedding import cos_sin_table

        table = cos_sin_table(16, 64, 1e4)
        cos, sin = table[torch.randint(0, 64, (7,), generator=g)].unsqueeze(2).unbind(1)
        return [Call(case, (torch.randn(7, 6, 16, generator=g), cos, sin))]
    if name == "attend":
        q, k, v = (torch.randn(n, h, 16, generator=g) for n, h in ((6, 4), (6, 2), (6, 2)))
        mask = torch.arange(7).unsqueeze(0) <= torch.arange(4, 7).unsqueeze(1)
        qm, km, vm = (torch.randn(n, h, 16, generator=g) for n, h in ((3, 4), (7, 2), (7, 2)))
        return [Call(case, (q, k, v, 0.25, None, True)), Call(say(WITH_MASK), (qm, km, vm, 0.25, mask, False))]
    if name == "causal_prefill":
        q, k, v = (torch.randn(9, h, 16, generator=g) for h in (4, 2, 2))
        return [Call(case, (q, k, v, torch.tensor([0, 3, 4, 9], dtype=torch.int32), 0.25))]
    model, _, _, _ = shipped_model()
    one = torch.tensor([0, 5], dtype=torch.int32)
    layer = model.model.layers[0]
    rope = model.model.rotary_emb(torch.randint(0, 100, (5,), generator=g))
    hidden = torch.randn(5, model.model.embed_tokens.weight.size(1), generator=g)
    if name == "Qwen3Attention.project":
        return [Call(case, (layer.self_attn, rope, hidden), one)]
    if name == "Qwen3DecoderLayer.forward":
        return [Call(case, (layer, rope, hidden, None), one), Call(case, (layer, rope, hidden, hidden.flip(0)), one)]
    if name == "Qwen3Model.forward":
        ids = torch.randint(0, model.model.embed_tokens.weight.size(0), (5,), generator=g)
        return [Call(case, (model.model, ids, torch.arange(5)), one)]
    if name == "keep_mask":
        from nanovllm_teach.layers.sampler import SamplingFilters

        filters = SamplingFilters(torch.tensor([0, 5, 0, 0, 10, 1]), torch.tensor([1.0, 1, 0.8, 1, 0.9, 1]),
                                  torch.tensor([0.0, 0, 0, 0.1, 0.05, 0]))
        return [Call(case, (torch.randn(6, 40, generator=g) * 2, filters))]
    raise AssertionError(f"no random cases for {name}")


def real_calls(seam: Seam) -> list[Call]:
    """The seam's calls while the shipped model ran its prefill."""
    _, calls, logits, cu = shipped_model()
    if seam.qualname == "keep_mask":
        from nanovllm_teach.layers.sampler import SamplingFilters

        filters = SamplingFilters(torch.tensor([8, 0]), torch.tensor([0.9, 0.5]), torch.tensor([0.02, 0.0]))
        return [Call(say(REAL, index=1), (logits.clone(), filters))]
    in_model = seam.module.startswith("nanovllm_teach.models.")
    return [Call(say(REAL, index=i), args, cu if in_model else None)
            for i, args in enumerate(calls.get(seam.qualname, []), 1)]


def check_numeric(seam: Seam, fn: Callable[..., Any]) -> str | None:
    """``fn`` against the engine's function on every case: the first difference, or None."""
    rtol, atol = TOLERANCES[seam.qualname]
    ref = reference(seam)
    with torch.inference_mode():
        for call in random_calls(seam) + real_calls(seam):
            with prefill_of(call.cu_seqlens):
                want = ref(*_cloned(call.args))
                got = called(seam.qualname, call.case, fn, _cloned(call.args))
            problem = outputs_difference(seam.qualname, call.case, got, want, rtol, atol)
            if problem:
                return problem
    return None


def check_load_model(seam: Seam, fn: Callable[..., Any]) -> str | None:
    """``fn`` fills a fresh model from the shipped checkpoint: every parameter equal to the engine's load."""
    from transformers import AutoConfig

    from nanovllm_teach import default_model_path
    from nanovllm_teach.models.qwen3 import Qwen3ForCausalLM

    loaded, _, _, _ = shipped_model()
    case = say(CHECKPOINT)
    with torch.inference_mode():
        model = Qwen3ForCausalLM(AutoConfig.from_pretrained(default_model_path()))
        for param in model.parameters():
            param.data.fill_(float("nan"))  # a parameter the learner's loader never writes stays visibly empty
        called(seam.qualname, case, fn, (model, default_model_path()))
        want = dict(loaded.named_parameters())
        for name, param in model.named_parameters():
            problem = first_difference(f"{seam.qualname}: {name}", case, param.data, want[name].data, 0.0, 0.0)
            if problem:
                return problem
    return None


def check_sampler(seam: Seam, fn: Callable[..., Any]) -> str | None:
    """Greedy rows exactly; the same seeds, the same tokens; the draws' frequencies against the softmax."""
    from nanovllm_teach.layers.sampler import Sampler

    name, sampler, g = seam.qualname, Sampler(), _gen(1)
    with torch.inference_mode():
        logits = torch.randn(4, 30, generator=g) * 3
        temperatures = torch.tensor([0.0, 1.0, 0.0, 0.7])
        want = reference(seam)(sampler, logits, temperatures, [1, 2, 3, 4])
        got = called(name, say(GREEDY), fn, (sampler, logits.clone(), temperatures, [1, 2, 3, 4]))
        greedy = temperatures == 0
        problem = first_difference(name, say(GREEDY), got[greedy] if isinstance(got, torch.Tensor) else got,
                                   want[greedy], 0.0, 0.0)
        if problem:
            return problem
        row = torch.randn(10, generator=g) * 1.5
        row[[2, 7]] = float("-inf")
        _, _, real, _ = shipped_model()
        top = real[0].topk(8)
        real_row = torch.full_like(real[0], float("-inf")).scatter(0, top.indices, top.values)
        seeds = list(range(DRAWS))
        for case, row, temperature in ((say(DRAWS_AT, draws=DRAWS, temperature=0.7), row, 0.7),
                                       (say(DRAWS_AT, draws=DRAWS, temperature=1.5), row, 1.5),
                                       (say(FILTERED_REAL, draws=DRAWS), real_row, 1.0)):
            batch = row.expand(DRAWS, -1).contiguous()
            temps = torch.full((DRAWS,), temperature)
            tokens = called(name, case, fn, (sampler, batch, temps, seeds))
            if not isinstance(tokens, torch.Tensor) or tokens.shape != (DRAWS,) or tokens.dtype != want.dtype:
                # Named by its type, shape or dtype, which first_difference checks before any value.
                return first_difference(name, case, tokens, want.new_zeros(DRAWS), 0.0, 0.0)
            problem = chi_square_difference(name, case, tokens, torch.softmax(row / temperature, dim=-1))
            if problem:
                return problem
        again = called(name, say(SAME_SEEDS), fn, (sampler, batch[:50], temps[:50], seeds[:50]))
        differ = (again != tokens[:50]).nonzero()
        if differ.numel():
            seed = int(differ[0])
            return say(SEEDS_DIFFER, name=name, seed=seed, first=int(tokens[seed]), second=int(again[seed]))
    return None


def check_seam(seam: Seam, fn: Callable[..., Any]) -> str | None:
    """What is wrong with the learner's ``fn`` for ``seam`` (None: it matches the reference)."""
    checkers = {"load_model": check_load_model, "Sampler.forward": check_sampler, **CACHE_CHECKS,
                **DECISION_CHECKS}
    checker = checkers.get(seam.qualname, check_numeric)
    try:
        return checker(seam, fn)
    except Refused as refused:
        return str(refused)

