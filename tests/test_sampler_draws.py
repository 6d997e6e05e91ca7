"""The sampler's random draws: frequencies that match softmax(logits / T), from the shared generator and from
each request's own seed."""

from __future__ import annotations

import pytest
import torch

from nanovllm_teach.layers.sampler import Sampler, exponential_noise

DRAWS = 20_000


def _total_variation(tokens: torch.Tensor, probs: torch.Tensor) -> float:
    freq = torch.bincount(tokens, minlength=probs.numel()).float() / tokens.numel()
    return 0.5 * (freq - probs).abs().sum().item()


@pytest.mark.parametrize("temperature", [0.5, 1.0, 2.0])
def test_draws_follow_the_softmax_at_the_temperature(temperature):
    torch.manual_seed(0)
    logits = torch.tensor([2.0, 1.0, 0.5, 0.0, -1.0, -3.0])
    rows = logits.expand(DRAWS, -1)
    tokens = Sampler()(rows, torch.full((DRAWS,), temperature), [None] * DRAWS)
    # 20,000 draws of 6 outcomes: the sampling error of the distance is ~0.01.
    assert _total_variation(tokens, torch.softmax(logits / temperature, dim=-1)) < 0.03


def test_seeded_rows_follow_the_softmax_and_repeat_with_their_seed():
    logits = torch.tensor([1.5, 1.0, 0.0, -0.5])
    draws = 4_000
    seeds = list(range(draws))
    tokens = Sampler()(logits.expand(draws, -1), torch.ones(draws), seeds)
    assert _total_variation(tokens, torch.softmax(logits, dim=-1)) < 0.05
    mixed = [None if i % 3 else seed for i, seed in enumerate(seeds)]
    again = Sampler()(logits.expand(draws, -1), torch.ones(draws), mixed)
    assert all(again[i] == tokens[i] for i in range(0, draws, 3))  # the seeded rows, whatever is beside them


def test_exponential_noise_is_positive_with_the_exponential_mean_and_quantiles():
    torch.manual_seed(0)
    noise = exponential_noise(torch.empty(50, 10_000), [None] * 50)
    assert bool((noise > 0).all())  # U < 1; U = 0 (one draw in 2**24) gives +inf, a token that cannot win
    assert noise.mean().item() == pytest.approx(1.0, abs=0.02)
    quantiles = torch.quantile(noise.flatten()[:100_000], torch.tensor([0.1, 0.5, 0.9]))
    expected = -torch.log1p(-torch.tensor([0.1, 0.5, 0.9]))  # Exponential(1)'s inverse distribution function
    torch.testing.assert_close(quantiles, expected, rtol=0.03, atol=0.01)
