"""The calibration's fit (sim/calibrate.py) recovers the factors that made a set of steps, the host terms
included, and never fits a negative cost."""

from __future__ import annotations

import dataclasses
import random

import pytest

from nanovllm_teach.sim.calibrate import HOST_TERMS, fit_efficiency, predict
from nanovllm_teach.sim.cost_model import StepWork, load_shape
from nanovllm_teach.sim.efficiency import Efficiency
from nanovllm_teach.sim.hardware import DEVICES, Device

CPU = Device("test-cpu", "cpu", "float32", peak_flops=2e11, memory_bandwidth=2e10, memory_bytes=2**34,
             interconnect_bandwidth=2e10, interconnect="none", source="made up for the test")
SHAPE = load_shape("qwen3-0.6b")


def _steps(seed: int = 0, num: int = 600) -> list[StepWork]:
    """Prefills of 1-4 prompts (eager; half after an idle wait) and native decodes of 1-32 sequences."""
    rng = random.Random(seed)
    steps = []
    for _ in range(num):
        if rng.random() < 0.15:
            steps.append(StepWork([(rng.randint(8, 300), 0) for _ in range(rng.randint(1, 4))],
                                  after_idle=rng.random() < 0.5))
        else:
            steps.append(StepWork([(1, rng.randint(10, 500)) for _ in range(rng.randint(1, 32))], native=True))
    return steps


@pytest.mark.parametrize("truth", [
    Efficiency(matmul=0.35, attention=0.1, memory=0.7, graph_launch_s=0.0, step_overhead_s=300e-6,
               seq_overhead_s=15e-6, kernel_launch_s=40e-6, wake_s=4e-3),
    Efficiency(matmul=1.0, attention=0.05, memory=0.5, graph_launch_s=0.0, step_overhead_s=0.0,
               seq_overhead_s=30e-6, kernel_launch_s=0.0, wake_s=1e-3),
])
def test_the_fit_recovers_the_factors_that_made_the_steps(truth):
    steps = _steps()
    fit = fit_efficiency(SHAPE, CPU, steps, predict(SHAPE, CPU, truth, steps))
    assert fit.median_abs_error < 1e-9
    for name in ("matmul", "attention", "memory"):
        assert getattr(fit.efficiency, name) == getattr(truth, name), name
    for name in HOST_TERMS:
        assert getattr(fit.efficiency, name) == pytest.approx(getattr(truth, name), abs=1e-9), name


def test_a_cost_the_data_would_make_negative_is_zero():
    truth = Efficiency(matmul=0.5, attention=0.1, memory=1.0, graph_launch_s=0.0, step_overhead_s=200e-6,
                       seq_overhead_s=10e-6, kernel_launch_s=20e-6, wake_s=0.0)
    steps = _steps(seed=1)
    # Steps after an idle wait came out 2 ms faster: unconstrained, wake_s would be negative.
    measured = [t - (2e-3 if w.after_idle else 0.0) for t, w in zip(predict(SHAPE, CPU, truth, steps), steps)]
    fit = fit_efficiency(SHAPE, CPU, steps, measured)
    assert fit.efficiency.wake_s == 0.0
    assert all(getattr(fit.efficiency, name) >= 0 for name in HOST_TERMS)


def test_bad_input_is_refused():
    steps = _steps(num=10)
    with pytest.raises(ValueError, match="10 steps, 9 times"):
        fit_efficiency(SHAPE, CPU, steps, [1e-3] * 9)
    with pytest.raises(ValueError, match="h100-sxm"):
        fit_efficiency(SHAPE, DEVICES["h100-sxm"], steps, [1e-3] * 10)


def test_each_step_is_priced_as_it_ran():
    eff = dataclasses.replace(Efficiency(), wake_s=5e-3)
    prefill, decode = StepWork([(32, 0)]), StepWork([(1, 32)], native=True)
    cold = dataclasses.replace(prefill, after_idle=True)
    warm_s, cold_s, decode_s = predict(SHAPE, CPU, eff, [prefill, cold, decode])
    assert cold_s - warm_s == pytest.approx(5e-3)
    assert warm_s - decode_s > SHAPE.num_layers * eff.kernels_per_layer * eff.kernel_launch_s * 0.9


def test_a_second_fit_keeps_the_first_ones_shares_and_refits_the_host_terms():
    offline = Efficiency(matmul=0.5, attention=0.2, memory=1.0, graph_launch_s=0.0, step_overhead_s=100e-6,
                         seq_overhead_s=20e-6, kernel_launch_s=80e-6, wake_s=1e-3)
    served = dataclasses.replace(offline, step_overhead_s=300e-6, seq_overhead_s=60e-6)
    steps = _steps(seed=2)
    fit = fit_efficiency(SHAPE, CPU, steps, predict(SHAPE, CPU, served, steps), shares=offline)
    assert (fit.efficiency.matmul, fit.efficiency.attention, fit.efficiency.memory) == (0.5, 0.2, 1.0)
    for name in HOST_TERMS:
        assert getattr(fit.efficiency, name) == pytest.approx(getattr(served, name), abs=1e-9), name
