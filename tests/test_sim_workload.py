"""Workloads: seeded, arrivals in seconds, lengths from the named distributions, shared prefixes."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from nanovllm_teach.workload.requests import (AtOnce, Burst, Fixed, LogNormal, Poisson, Replay, SharedPrefix, Uniform,
                                         make_workload, sharegpt_output_lengths,
                                              sharegpt_prompt_lengths)


def _workload(n=200, arrivals=Poisson(4.0), seed=0, **kwargs):
    return make_workload(n, arrivals, Uniform(10, 50), Fixed(8), vocab_size=1000, seed=seed, **kwargs)


def test_same_seed_same_workload_other_seed_other_workload():
    assert _workload() == _workload()
    assert _workload() != _workload(seed=1)


def test_poisson_arrivals_have_the_asked_rate():
    times = [r.arrival_s for r in _workload(4000, Poisson(4.0))]
    assert times == sorted(times)
    assert len(times) / times[-1] == pytest.approx(4.0, rel=0.05)
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert statistics.stdev(gaps) == pytest.approx(statistics.mean(gaps), rel=0.1)  # exponential: sd = mean


def test_bursts_replays_and_all_at_once():
    assert [r.arrival_s for r in _workload(5, Burst(2, 1.5))] == [0, 0, 1.5, 1.5, 3.0]
    assert [r.arrival_s for r in _workload(3, Replay([0.5, 1, 4]))] == [0.5, 1, 4]
    assert {r.arrival_s for r in _workload(4, AtOnce())} == {0.0}
    with pytest.raises(ValueError, match="Replay holds 3"):
        _workload(2, Replay([0.5, 1, 4]))
    with pytest.raises(ValueError, match="increasing"):
        Replay([2, 1])
    with pytest.raises(ValueError, match="rate"):
        Poisson(0)


def test_lengths_stay_in_their_ranges():
    workload = _workload(500)
    assert {len(r.prompt_token_ids) for r in workload} <= set(range(10, 51))
    assert {r.output_len for r in workload} == {8}
    assert all(0 <= t < 1000 for r in workload for t in r.prompt_token_ids)
    with pytest.raises(ValueError, match="lo <= hi"):
        Uniform(5, 2)


def test_a_fitted_log_normal_has_its_median_and_p90():
    dist = LogNormal.fit(400, 1000)
    assert dist.sigma == pytest.approx(math.log(2.5) / 1.2815515655446004)
    rng = random.Random(0)
    draws = sorted(dist.sample(rng) for _ in range(20000))
    assert draws[10000] == pytest.approx(400, rel=0.05)
    assert draws[18000] == pytest.approx(1000, rel=0.05)



def test_sharegpt_lengths_have_the_published_means_of_vllms_sharegpt_requests():
    # vLLM pull request 18566: 1,000 ShareGPT requests, 229,711 prompt and 203,068 output tokens.
    rng = random.Random(1)
    prompts = [sharegpt_prompt_lengths().sample(rng) for _ in range(40000)]
    outputs = [sharegpt_output_lengths().sample(rng) for _ in range(40000)]
    assert statistics.mean(prompts) == pytest.approx(229.711, rel=0.02)
    assert statistics.mean(outputs) == pytest.approx(203.068, rel=0.02)
    assert min(prompts) >= 4 and max(prompts) <= 1024 and max(outputs) <= 1024


def test_shared_prefix_groups_start_with_the_same_tokens():
    workload = _workload(60, shared_prefix=SharedPrefix(num_groups=3, prefix_len=32))
    groups = {r.prefix_group for r in workload}
    assert groups == {0, 1, 2}
    for group in groups:
        prefixes = {tuple(r.prompt_token_ids[:32]) for r in workload if r.prefix_group == group}
        assert len(prefixes) == 1
    assert len({tuple(r.prompt_token_ids[:32]) for r in workload}) == 3
    assert all(len(r.prompt_token_ids) >= 32 + 10 for r in workload)


def test_length_specs_from_the_command_line():
    from nanovllm_teach.workload.requests import parse_lengths

    assert parse_lengths("fixed:7") == Fixed(7)
    assert parse_lengths("uniform:100:1024") == Uniform(100, 1024)
    assert parse_lengths("lognormal:400:1000") == LogNormal.fit(400, 1000)
    assert parse_lengths("sharegpt-output") == sharegpt_output_lengths()
    assert parse_lengths("sharegpt-prompt", hi=500) == sharegpt_prompt_lengths(hi=500)
    for bad in ("uniform:100", "gauss:1:2", "fixed:x", "uniform:9:3"):
        with pytest.raises(ValueError, match="spec|lo <= hi"):
            parse_lengths(bad)
