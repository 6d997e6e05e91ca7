"""A simulation is bounded before it starts: absurd sizes and rates are refused in one line (exit 2) by a
process that never grows past 1 GiB, and the estimate of the KV cache agrees with the runner's sizing."""

from __future__ import annotations

import os
import resource
import subprocess
import sys

import pytest

from nanovllm_teach.sim.budget import HostEstimate, check_host_memory, estimated_kv_blocks, host_bytes
from nanovllm_teach.sim.cost_model import StepCostModel, load_shape
from nanovllm_teach.sim.hardware import get_device
from nanovllm_teach.sim.runner import SimulatedRunner
from nanovllm_teach.workload.requests import Burst, Fixed, Poisson, make_workload

GIB = 2**30


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (GIB, GIB))


ABSURD = [
    (["--num-kvcache-blocks", "1000000000000", "--requests", "10"], "cannot fit: h100-sxm holds at most"),
    (["--requests", "1000000000"], "would need about"),
    (["--requests", "100000000", "--prompt-lens", "fixed:1", "--output-lens", "fixed:1"], "would need about"),
    (["--shared-prefix", "1000000:100000"], "1000000 groups for 1000 requests"),
    (["--shared-prefix", "10:100000"], "leaves no room"),
    (["--arrivals", "poisson:1e-300"], "would take 1e+303 s to arrive"),
    (["--arrivals", "burst:1:inf"], "finite"),
    (["--prompt-lens", "fixed:1000000000"], "more than the 8191 that fit"),
    (["--output-lens", "uniform:1:1000000000"], "more than the 8191 that fit"),
    (["--max-num-batched-tokens", "1000000000000"], "no memory left for the KV cache"),
    (["--block-size", "1000000000000"], "no memory left for the KV cache"),
    (["--tensor-parallel-size", "1000000000000"], "must divide"),
    (["--model", "qwen3-32b", "--hardware", "l4"], "no memory left for the KV cache"),
]


@pytest.mark.parametrize("argv, reason", ABSURD, ids=[" ".join(a) for a, _ in ABSURD])
def test_absurd_sizes_are_refused_in_one_line_within_a_gib(argv, reason):
    done = subprocess.run([sys.executable, "-m", "nanovllm_teach.cli", "simulate", *argv], capture_output=True,
                          text=True, timeout=120, preexec_fn=_limit_memory, env={**os.environ, "NO_COLOR": "1"})
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and reason in lines[0], done.stderr


@pytest.mark.parametrize("model, hardware, tp, settings", [
    ("qwen3-8b", "h100-sxm", 1, {}),
    ("qwen3-32b", "a100-80gb", 2, {"max_model_len": 4096, "block_size": 16}),
    ("qwen3-0.6b", "rtx-4070-laptop", 1, {"max_num_batched_tokens": 4096, "max_num_seqs": 64}),
])
def test_the_estimate_of_the_kv_cache_is_the_runners_sizing(model, hardware, tp, settings):
    shape, device = load_shape(model), get_device(hardware)
    limits = {"max_model_len": 8192, "block_size": 256, "max_num_batched_tokens": 16384, "max_num_seqs": 512,
              **settings}
    runner = SimulatedRunner(shape, device, tensor_parallel_size=tp, **limits)
    estimate = estimated_kv_blocks(StepCostModel(shape, device, tensor_parallel_size=tp), 0.9, limits["max_model_len"],
                                   limits["max_num_batched_tokens"], limits["max_num_seqs"], limits["block_size"])
    assert estimate == runner.num_kvcache_blocks


def test_the_runner_refuses_more_blocks_than_the_device_holds():
    with pytest.raises(ValueError, match="cannot fit"):
        SimulatedRunner(load_shape("qwen3-8b"), get_device("l4"), num_kvcache_blocks=10**6)


def test_host_estimate_grows_with_requests_and_refuses_past_what_is_available():
    small = host_bytes(1000, 100, 100, 1000)
    assert host_bytes(2000, 100, 100, 1000).requests == 2 * small.requests
    check_host_memory(small, available=8 * GIB)
    with pytest.raises(ValueError, match="would need about"):
        check_host_memory(HostEstimate(0, 7 * GIB, 0, 0), available=8 * GIB)


def test_a_workload_spanning_more_than_the_limit_is_refused_before_it_is_drawn():
    with pytest.raises(ValueError, match="would take"):
        make_workload(10, Poisson(1e-300), Fixed(1), Fixed(1), vocab_size=10)
    with pytest.raises(ValueError, match="would take"):
        make_workload(3, Burst(1, 6e6), Fixed(1), Fixed(1), vocab_size=10)
    assert len(make_workload(2, Burst(1, 6e6), Fixed(1), Fixed(1), vocab_size=10)) == 2
