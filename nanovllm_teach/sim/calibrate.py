"""Execution layer (simulated): fitting the named efficiency factors to a real engine's measured steps on a CPU.

A calibration compares, step by step, what the real engine took on this machine with what the cost model
predicts for the same step (``StepWork``: each sequence's new and cached tokens, whether the step was one
native call, whether the engine had sat idle before it). The steps come from the real run itself, or from
the simulated engine, which, given the real run's output lengths and its KV cache size, makes exactly the
real engine's decisions (``tests/test_sim_same_decisions.py``) when every request arrives at once.

The fit is small on purpose, so that a learner can follow it:

- the device's shares of its peaks (``matmul``, ``attention`` and ``memory``) are searched on a grid
  (``memory`` up to 3: a copy far larger than the caches measured the bandwidth, and a small model's weights
  stay in the last-level cache between steps);
- for each grid point the host's costs are linear in what the step did, one named factor each
  (``HOST_TERMS``): ``step_overhead_s`` per step, ``seq_overhead_s`` per sequence, ``kernel_launch_s`` per
  kernel an eager step launches from Python (a CPU prefill: the decode step is one native call), ``wake_s``
  per step after an idle wait. They are solved by least squares on the *relative* error, so a 1 ms decode
  weighs as much as a 200 ms prefill, none below zero: every subset of the terms is solved and the best
  one whose factors are all >= 0 kept (four terms: fifteen small solves);
- the point whose error is lowest wins: the mean of the median absolute relative errors of three kinds of
  step (prefills, decodes of a few sequences, batched decodes), so that each kind counts the same however
  many of each there are.

A second fit can keep the shares of a first one and refit the host terms alone (``shares``): that is how
the engine measured inside its server, where the same device does more host work, is calibrated.

``graph_launch_s`` (the call into the native decode step) is set to 0: on a CPU it is a fixed cost of every
decode step, which ``step_overhead_s`` absorbs; ``kernels_per_layer`` keeps its count, so ``kernel_launch_s``
is the price of one eager kernel as this engine issues it, its Python included.

Emits no events.
"""

from __future__ import annotations

import itertools
import statistics
from dataclasses import dataclass, replace
from typing import Sequence

import torch

from nanovllm_teach.i18n import say
from nanovllm_teach.sim.cost_model import ModelShape, StepCostModel, StepWork
from nanovllm_teach.sim.efficiency import Efficiency
from nanovllm_teach.sim.hardware import Device
from nanovllm_teach.sim.messages import CALIBRATION_NEEDS_A_CPU, ONE_TIME_PER_STEP

_SHARES = (0.02, 0.05, 0.1, 0.2, 0.35, 0.5, 0.7, 1.0)
_FEW_SEQS = 4  # a decode of at most this many sequences is "a few" (the error's kinds of step)
# Above 1: the weights of a small model stay in a CPU's last-level cache, read faster than the copy's DRAM rate.
_MEMORY_SHARES = (*_SHARES, 1.5, 2.0, 3.0)
HOST_TERMS = ("step_overhead_s", "seq_overhead_s", "kernel_launch_s", "wake_s")


@dataclass(frozen=True)
class Fit:
    efficiency: Efficiency
    median_abs_error: float  # of the per-step latency, relative: the mean of the kinds' medians (_kinds_error)
    predicted_s: list[float]


def predict(shape: ModelShape, device: Device, efficiency: Efficiency, steps: Sequence[StepWork]) -> list[float]:
    """Each step's predicted time in seconds (one rank; CUDA graphs are the GPU's, not calibrated here)."""
    model = StepCostModel(shape, device, efficiency)
    return [model.step(w.batch, native=w.native, after_idle=w.after_idle).total_s for w in steps]


def relative_errors(predicted: Sequence[float], measured: Sequence[float]) -> list[float]:
    return [abs(p - m) / m for p, m in zip(predicted, measured)]


def fit_efficiency(shape: ModelShape, device: Device, steps: Sequence[StepWork], measured_s: Sequence[float],
                   *, shares: Efficiency | None = None) -> Fit:
    """The factors that best predict ``measured_s`` (one measured step time per step) on a CPU. ``shares``:
    keep these factors' ``matmul``, ``attention`` and ``memory`` (the grid is that one point) and fit the
    host terms alone: the same device, with other host work (the engine inside its server)."""
    if len(steps) != len(measured_s) or not steps:
        raise ValueError(say(ONE_TIME_PER_STEP, steps=len(steps), times=len(measured_s)))
    if device.kind != "cpu":
        raise ValueError(say(CALIBRATION_NEEDS_A_CPU, kind=device.kind, name=device.name))
    model = StepCostModel(shape, device, Efficiency())
    counts = [model.counts(w.batch) for w in steps]
    # Each step's host terms: one per step, its sequences, the kernels it launches eagerly, an idle wait;
    # divided by the measured time (the relative error's weights), they do not depend on the grid point.
    columns = [(1.0, float(c.num_seqs), 0.0 if w.native else float(model.num_kernels), float(w.after_idle))
               for c, w in zip(counts, steps)]
    weighted = [[x / m for x in row] for row, m in zip(columns, measured_s)]
    gram = [[sum(r[i] * r[j] for r in weighted) for j in range(len(HOST_TERMS))] for i in range(len(HOST_TERMS))]
    best: Fit | None = None
    grid = (itertools.product(_SHARES, _SHARES, _MEMORY_SHARES) if shares is None
            else [(shares.matmul, shares.attention, shares.memory)])
    for matmul, attention, memory in grid:
        flops_rate, attention_rate = device.peak_flops * matmul, device.peak_flops * attention
        bytes_rate = device.memory_bandwidth * memory
        base = [max(c.linear_flops / flops_rate + c.attention_flops / attention_rate, c.bytes / bytes_rate)
                for c in counts]
        target = [(m - t) / m for t, m in zip(base, measured_s)]  # what the host terms are to explain
        rhs = [sum(r[i] * y for r, y in zip(weighted, target)) for i in range(len(HOST_TERMS))]
        host = _host_costs(gram, rhs)
        predicted = [t + sum(x * h for x, h in zip(row, host)) for t, row in zip(base, columns)]
        error = _kinds_error(relative_errors(predicted, measured_s), steps)
        if best is None or error < best.median_abs_error:
            efficiency = replace(Efficiency(), matmul=matmul, attention=attention, memory=memory, graph_launch_s=0.0,
                                 **dict(zip(HOST_TERMS, host)))
            best = Fit(efficiency, error, predicted)
    return best


def _kinds_error(errors: Sequence[float], steps: Sequence[StepWork]) -> float:
    """The mean of the median errors of three kinds of step: prefills (eager), decodes of a few sequences
    and batched decodes (more than ``_FEW_SEQS``). Each kind counts the same however many of each a workload
    has: a thousand one-sequence decodes would otherwise leave to chance what only prefills feel (the matmul
    share) and what only long batched decodes feel (attention, each sequence's cost)."""
    def kind(w: StepWork) -> int:
        return 0 if not w.native else 1 if len(w.batch) <= _FEW_SEQS else 2

    groups: dict[int, list[float]] = {}
    for e, w in zip(errors, steps):
        groups.setdefault(kind(w), []).append(e)
    return statistics.mean(statistics.median(group) for group in groups.values())


def _host_costs(gram: Sequence[Sequence[float]], rhs: Sequence[float]) -> list[float]:
    """Least squares with every factor >= 0, from the normal equations ``gram · host = rhs``: the best of the
    subsets of terms whose own solution has no negative factor (the squared error, up to a constant, is
    ``host · gram · host - 2 rhs · host``)."""
    k = len(rhs)
    best, best_cost = [0.0] * k, 0.0
    for size in range(1, k + 1):
        for chosen in itertools.combinations(range(k), size):
            solution = _solve([[gram[i][j] for j in chosen] + [rhs[i]] for i in chosen])
            if solution is None or min(solution) < 0:
                continue
            host = [0.0] * k
            for j, value in zip(chosen, solution):
                host[j] = value
            cost = (sum(host[i] * gram[i][j] * host[j] for i in range(k) for j in range(k))
                    - 2 * sum(h * r for h, r in zip(host, rhs)))
            if cost < best_cost:
                best, best_cost = host, cost
    return best


def _solve(a: list[list[float]]) -> list[float] | None:
    """``a``'s linear system (each row: coefficients, then the right-hand side), solved by torch in float64;
    None when it is (almost) singular: terms that no step tells apart."""
    system = torch.tensor(a, dtype=torch.float64)
    coefficients, rhs = system[:, :-1], system[:, -1]
    if torch.linalg.cond(coefficients) > 1e12:
        return None
    return torch.linalg.solve(coefficients, rhs).tolist()
