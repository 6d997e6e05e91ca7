"""Execution layer: turn each row of logits into one token id.

Temperature 0 is greedy (argmax, exactly what ``transformers`` greedy decoding picks). Otherwise the
Gumbel-max form of sampling: ``argmax(softmax(logits / T) / E)`` with ``E ~ Exponential(1)`` draws from
the softmax distribution without a cumulative sum. A row with its own seed draws its noise from its own
generator, so its tokens do not depend on what else shares the batch.

``Sampler.sample`` is the whole of a step's sampling: first the filters a request asked for, on the
temperature-scaled logits and in the order of ``transformers``' logits warpers (top-k, then top-p, then
min-p; a candidate they remove gets probability 0), then the draw (``forward``), then the top
log-probabilities a request asked for, from the logits the sampler was given (before temperature and
filters, as vLLM reports them by default).
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import nn

from nanovllm_teach.logprobs import TokenLogprobs
from nanovllm_teach.sampling_params import MAX_LOGPROBS


class SamplingFilters(NamedTuple):
    """Per-row filters of a batch (a row that asked for none has top_k 0, top_p 1, min_p 0)."""

    top_ks: torch.Tensor  # int64; 0: no top-k
    top_ps: torch.Tensor  # float32 in (0, 1]
    min_ps: torch.Tensor  # float32 in [0, 1]


class Sampled(NamedTuple):
    token_ids: list[int]
    num_kept: list[int] | None  # candidates left per row (None: no row filters); greedy rows keep 1
    logprobs: list[TokenLogprobs | None] | None  # None: no row asked


TOP_P_CANDIDATES = 1024  # top-p looks at this many of the most likely first; the whole row only if they fall short


def keep_mask(scaled: torch.Tensor, filters: SamplingFilters) -> torch.Tensor:
    """Which candidates of each row of temperature-scaled logits survive top-k, then top-p, then min-p (a
    filter no row asks for is skipped)."""
    vocab = scaled.size(-1)
    minus_inf = float("-inf")
    keep = torch.ones_like(scaled, dtype=torch.bool)
    has_k = filters.top_ks > 0
    if bool(has_k.any()):
        # top-k: the k-th largest value is the bar (values tied with it stay); a row without top-k has none.
        k_max = min(int(filters.top_ks.max()), vocab)
        kth = scaled.topk(k_max, dim=-1).values.gather(1, (filters.top_ks.clamp(1, k_max) - 1).unsqueeze(1))
        keep = scaled >= torch.where(has_k.unsqueeze(1), kth, minus_inf)
    has_p = filters.top_ps < 1
    if bool(has_p.any()):
        # top-p: a candidate stays while the candidates more likely than it hold less than p of the mass
        # (the most likely always stays). Only the most likely can stay, so they are looked at first:
        # sorting whole rows of a vocabulary is what makes top-p slow.
        probs = scaled.masked_fill(~keep, minus_inf).softmax(dim=-1)
        top_ps = torch.where(has_p, filters.top_ps, 2.0).unsqueeze(1)  # 2: more than all the mass, keeps all
        width = min(TOP_P_CANDIDATES, vocab)
        top, order = probs.topk(width, dim=-1)
        if width < vocab and bool(((top.sum(dim=-1) < filters.top_ps) & has_p).any()):
            top, order = probs.sort(dim=-1, descending=True)  # a cut lies further down: whole rows
        before = top.cumsum(dim=-1) - top
        keep &= torch.zeros_like(keep).scatter_(1, order, before < top_ps)
    if bool((filters.min_ps > 0).any()):
        # min-p: drop what is less than min_p times as likely as the most likely candidate left.
        probs = scaled.masked_fill(~keep, minus_inf).softmax(dim=-1)
        keep &= probs >= probs.amax(dim=-1, keepdim=True) * filters.min_ps.unsqueeze(1)
    return keep


def top_logprobs(logits: torch.Tensor, token_ids: torch.Tensor, counts: list[int | None]) -> list[TokenLogprobs | None]:
    """For each row whose count is not None: the sampled token's log-probability and rank (1: the most
    likely), and the ``count`` most likely tokens with theirs."""
    rows = [row for row, count in enumerate(counts) if count is not None]
    logprobs = torch.log_softmax(logits[rows].float(), dim=-1)
    chosen = token_ids[rows].unsqueeze(1)
    chosen_logprobs = logprobs.gather(1, chosen)
    ranks = (logprobs > chosen_logprobs).sum(dim=-1) + 1
    top = logprobs.topk(max(counts[row] for row in rows), dim=-1)
    out: list[TokenLogprobs | None] = [None] * len(counts)
    for i, row in enumerate(rows):
        k = counts[row]
        out[row] = TokenLogprobs(int(chosen[i, 0]), float(chosen_logprobs[i, 0]), int(ranks[i]),
                                 list(zip(top.indices[i, :k].tolist(), top.values[i, :k].tolist())))
    return out


def exponential_noise(like: torch.Tensor, seeds: list[int | None]) -> torch.Tensor:
    """``E ~ Exponential(1)`` for every entry of ``like`` (rows, vocab), a seeded row's from its own generator.
    Drawn as ``-log(U)`` with ``U`` uniform in [0, 1) (the exponential's inverse distribution function), not
    with ``exponential_``, which on a CPU takes ~3.5x as long, on one thread: 3.5 ms for a row of Qwen3's
    151,936 entries against ~1 ms (at 16 rows, ``exponential_`` took a quarter of a Qwen3-0.6B decode step).
    ``U < 1``, so ``E > 0``."""
    noise = torch.empty_like(like)
    if all(seed is None for seed in seeds):
        noise.uniform_()
    else:
        for row, seed in enumerate(seeds):
            generator = None if seed is None else torch.Generator(device=like.device).manual_seed(seed)
            noise[row].uniform_(generator=generator)
    return noise.log_().neg_()


class SampleInputs(NamedTuple):
    """What ``Sampler.sample`` needs of a batch besides its logits."""

    temperatures: torch.Tensor
    seeds: list[int | None]
    filters: SamplingFilters | None  # None: no sequence filters
    num_logprobs: list[int | None] | None  # None: no sequence asked for log-probabilities

    @classmethod
    def warmup(cls, rows: int, device: torch.device) -> SampleInputs:
        """Temperature 1 on every row; on a GPU also the costliest filters (top-p sorts the vocabulary) and
        the most log-probabilities, whose buffers the KV budget must leave room for. A CPU skips them: sorting
        ``max_num_seqs`` rows of a real vocabulary takes seconds there, and its budget has a fixed cap."""
        inputs = cls(torch.ones(rows, device=device), [None] * rows, None, None)
        if device.type != "cuda":
            return inputs
        return inputs._replace(
            filters=SamplingFilters(torch.zeros(rows, dtype=torch.int64, device=device),
                                    torch.full((rows,), 0.9, device=device), torch.full((rows,), 0.05, device=device)),
            num_logprobs=[MAX_LOGPROBS] * rows)


class Sampler(nn.Module):
    def forward(self, logits: torch.Tensor, temperatures: torch.Tensor,
                seeds: list[int | None]) -> torch.Tensor:
        """The draw: one token id per row, greedy where the temperature is 0."""
        logits = logits.float()
        greedy = logits.argmax(dim=-1)
        if not bool((temperatures > 0).any()):
            return greedy
        probs = torch.softmax(logits / temperatures.clamp_min(1e-5).unsqueeze(1), dim=-1)
        sampled = probs.div_(exponential_noise(probs, seeds)).argmax(dim=-1)
        return torch.where(temperatures == 0, greedy, sampled)

    def sample(self, logits: torch.Tensor, temperatures: torch.Tensor, seeds: list[int | None],
               filters: SamplingFilters | None = None, num_logprobs: list[int | None] | None = None) -> Sampled:
        """Filter, draw, and report: ``filters`` None and ``num_logprobs`` None cost nothing beyond the draw."""
        num_kept = None
        raw = logits
        if filters is not None:
            # Greedy rows are not filtered: the most likely token survives every filter.
            rows = ((temperatures > 0) & ((filters.top_ks > 0) | (filters.top_ps < 1) | (filters.min_ps > 0)))
            rows = rows.nonzero().squeeze(1)
            logits = logits.float()
            kept = torch.where(temperatures > 0, logits.size(-1), 1)
            if rows.numel():
                scaled = logits[rows] / temperatures[rows].unsqueeze(1)
                keep = keep_mask(scaled, SamplingFilters(*(f[rows] for f in filters)))
                logits = logits.index_copy(0, rows, logits[rows].masked_fill(~keep, float("-inf")))
                kept = kept.index_copy(0, rows, keep.sum(dim=-1))
            num_kept = kept.tolist()
        token_ids = self(logits, temperatures, seeds)
        logprobs = None
        if num_logprobs is not None and any(count is not None for count in num_logprobs):
            logprobs = top_logprobs(raw, token_ids, num_logprobs)
        return Sampled(token_ids.tolist(), num_kept, logprobs)
