"""The sampler's top-k / top-p / min-p against transformers' logits warpers, and its log-probabilities."""

from __future__ import annotations

import pytest
import torch
from transformers.generation.logits_process import (MinPLogitsWarper, TemperatureLogitsWarper, TopKLogitsWarper,
                                                    TopPLogitsWarper)

from nanovllm_teach.layers.sampler import TOP_P_CANDIDATES, Sampler, SamplingFilters, keep_mask

VOCAB = 384


def _reference_keep(logits: torch.Tensor, temperature: float, top_k: int, top_p: float, min_p: float) -> torch.Tensor:
    """What transformers keeps: its warpers in generate()'s order, each only when it filters."""
    warpers = [TemperatureLogitsWarper(temperature)]
    if top_k > 0:
        warpers.append(TopKLogitsWarper(top_k))
    if top_p < 1:
        warpers.append(TopPLogitsWarper(top_p))
    if min_p > 0:
        warpers.append(MinPLogitsWarper(min_p))
    scores = logits.clone()
    for warp in warpers:
        scores = warp(None, scores)
    return torch.isfinite(scores)


@pytest.mark.parametrize("top_k, top_p, min_p", [
    (1, 1.0, 0.0), (5, 1.0, 0.0), (50, 1.0, 0.0), (VOCAB + 10, 1.0, 0.0),
    (0, 0.05, 0.0), (0, 0.5, 0.0), (0, 0.9, 0.0), (0, 0.999, 0.0),
    (0, 1.0, 0.01), (0, 1.0, 0.3), (0, 1.0, 1.0),
    (20, 0.8, 0.0), (0, 0.8, 0.1), (30, 0.95, 0.05),
])
@pytest.mark.parametrize("temperature", [0.5, 1.0, 1.7])
def test_kept_candidates_equal_transformers_warpers(top_k, top_p, min_p, temperature):
    logits = torch.randn(6, VOCAB, generator=torch.Generator().manual_seed(top_k * 7 + int(top_p * 100)))
    logits[0] *= 4  # a peaked row next to flat ones
    ours = keep_mask(logits / temperature, SamplingFilters(torch.full((6,), top_k), torch.full((6,), top_p),
                                                           torch.full((6,), min_p)))
    for row in range(6):
        reference = _reference_keep(logits[row:row + 1], temperature, top_k, top_p, min_p)[0]
        assert torch.equal(ours[row], reference), (row, int(ours[row].sum()), int(reference.sum()))


def test_each_row_keeps_its_own_filters_and_greedy_rows_are_untouched():
    logits = torch.randn(3, VOCAB, generator=torch.Generator().manual_seed(3))
    temperatures = torch.tensor([1.0, 0.0, 1.0])
    filters = SamplingFilters(torch.tensor([4, 4, 0]), torch.tensor([1.0, 1.0, 1.0]), torch.tensor([0.0, 0.0, 0.0]))
    top4 = set(logits[0].topk(4).indices.tolist())
    for _ in range(30):
        sampled = Sampler().sample(logits, temperatures, [None] * 3, filters)
        assert sampled.token_ids[0] in top4
        assert sampled.token_ids[1] == int(logits[1].argmax())
        assert sampled.num_kept == [4, 1, VOCAB]


def test_top_k_1_is_greedy_at_any_temperature():
    logits = torch.randn(5, VOCAB, generator=torch.Generator().manual_seed(5))
    filters = SamplingFilters(torch.ones(5, dtype=torch.int64), torch.ones(5), torch.zeros(5))
    sampled = Sampler().sample(logits, torch.full((5,), 1.5), [None] * 5, filters)
    assert sampled.token_ids == logits.argmax(dim=-1).tolist()


def test_logprobs_are_the_unfiltered_distribution_with_the_sampled_token():
    logits = torch.randn(2, VOCAB, generator=torch.Generator().manual_seed(9))
    filters = SamplingFilters(torch.tensor([3, 0]), torch.tensor([1.0, 1.0]), torch.tensor([0.0, 0.0]))
    sampled = Sampler().sample(logits, torch.tensor([1.0, 0.0]), [11, None], filters, [2, None])
    assert sampled.logprobs[1] is None
    entry = sampled.logprobs[0]
    expected = torch.log_softmax(logits[0], dim=-1)
    assert entry.token_id == sampled.token_ids[0]
    assert entry.logprob == pytest.approx(float(expected[entry.token_id]), abs=1e-5)
    assert entry.rank == 1 + int((expected > expected[entry.token_id]).sum())
    assert [t for t, _ in entry.top] == expected.topk(2).indices.tolist()
    assert [lp for _, lp in entry.top] == pytest.approx(expected.topk(2).values.tolist(), abs=1e-5)


@pytest.mark.parametrize("top_p", [0.3, 0.9])
def test_top_p_on_a_large_vocabulary_looks_further_only_when_it_must(top_p):
    """Beyond ``TOP_P_CANDIDATES`` tokens: a peaked row's cut lies among its most likely tokens, a flat row's
    further down (the whole row is sorted then); both keep what transformers keeps."""
    vocab = 4 * TOP_P_CANDIDATES
    logits = torch.randn(2, vocab, generator=torch.Generator().manual_seed(17))
    logits[0] *= 6
    logits[1] *= 0.05
    filters = SamplingFilters(torch.zeros(1, dtype=torch.int64), torch.full((1,), top_p), torch.zeros(1))
    ours = torch.cat([keep_mask(logits[row:row + 1], filters) for row in range(2)])  # one row at a time
    assert torch.equal(ours, _reference_keep(logits, 1.0, 0, top_p, 0.0))
    assert logits[0].softmax(-1).topk(TOP_P_CANDIDATES).values.sum() > top_p  # the cut among the first looked at
    assert logits[1].softmax(-1).topk(TOP_P_CANDIDATES).values.sum() < top_p  # the whole row needed
