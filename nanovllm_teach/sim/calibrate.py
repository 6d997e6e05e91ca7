"""Execution layer (simulated): fitting the named efficiency factors to a real engine's measured steps.

A calibration compares, step by step, what the real engine took on this machine with what the cost model
predicts for the same batch. The batches are the same by construction: the simulated engine, given the
real run's output lengths and its KV cache size, makes exactly the real engine's decisions
(``tests/test_sim_same_decisions.py``), so its step ``k`` is the real engine's step ``k``.

The fit is small on purpose, so that a learner can follow it:

- the device's shares of its peaks (``matmul``, ``attention`` and ``memory``) are searched on a grid;
- for each grid point the host costs are linear in the batch (``step_overhead_s`` per step,
  ``seq_overhead_s`` per sequence) and are solved by least squares on the *relative* error, so a 2 ms
  decode weighs as much as a 200 ms prefill; negative solutions are clipped to zero;
- the point whose median absolute relative error is lowest wins.

``kernel_launch_s`` and ``kernels_per_layer`` keep their defaults: on a CPU the launches are a fixed cost
per step, which ``step_overhead_s`` absorbs.

Emits no events.
"""

from __future__ import annotations

import itertools
import statistics
from dataclasses import dataclass, replace
from typing import Sequence

from nanovllm_teach.sim.cost_model import Efficiency, ModelShape, StepCostModel
from nanovllm_teach.sim.hardware import Device

Batch = list[tuple[int, int]]  # (num_new_tokens, num_cached_tokens) per sequence
_SHARES = (0.02, 0.05, 0.1, 0.2, 0.35, 0.5, 0.7, 1.0)


@dataclass(frozen=True)
class Fit:
    efficiency: Efficiency
    median_abs_error: float  # of the per-step latency, relative
    predicted_s: list[float]


def predict(shape: ModelShape, device: Device, efficiency: Efficiency, batches: Sequence[Batch]) -> list[float]:
    """Each batch's predicted step time in seconds (eager steps, one rank)."""
    model = StepCostModel(shape, device, efficiency)
    return [model.step(batch).total_s for batch in batches]


def relative_errors(predicted: Sequence[float], measured: Sequence[float]) -> list[float]:
    return [abs(p - m) / m for p, m in zip(predicted, measured)]


def fit_efficiency(shape: ModelShape, device: Device, batches: Sequence[Batch],
                   measured_s: Sequence[float]) -> Fit:
    """The factors that best predict ``measured_s`` (one measured step time per batch)."""
    if len(batches) != len(measured_s) or not batches:
        raise ValueError(f"need one measured time per batch, got {len(batches)} batches, {len(measured_s)} times")
    best: Fit | None = None
    for matmul, attention, memory in itertools.product(_SHARES, _SHARES, _SHARES):
        device_only = replace(Efficiency(), matmul=matmul, attention=attention, memory=memory, step_overhead_s=0.0,
                              seq_overhead_s=0.0)
        base = predict(shape, device, device_only, batches)
        step, seq = _host_costs(base, [len(b) for b in batches], measured_s)
        efficiency = replace(device_only, step_overhead_s=step, seq_overhead_s=seq)
        predicted = [t + step + seq * len(b) for t, b in zip(base, batches)]
        error = statistics.median(relative_errors(predicted, measured_s))
        if best is None or error < best.median_abs_error:
            best = Fit(efficiency, error, predicted)
    return best


def _host_costs(base: Sequence[float], num_seqs: Sequence[int], measured: Sequence[float]) -> tuple[float, float]:
    """Least squares for ``measured ≈ base + a + b * num_seqs``, each residual divided by ``measured``; the
    2x2 normal equations, solved by hand, then clipped to ``a, b >= 0``."""
    rows = [(1 / m, n / m, (m - t) / m) for t, n, m in zip(base, num_seqs, measured)]
    s11 = sum(x * x for x, _, _ in rows)
    s12 = sum(x * y for x, y, _ in rows)
    s22 = sum(y * y for _, y, _ in rows)
    r1 = sum(x * r for x, _, r in rows)
    r2 = sum(y * r for _, y, r in rows)
    det = s11 * s22 - s12 * s12
    a, b = ((r1 * s22 - r2 * s12) / det, (s11 * r2 - s12 * r1) / det) if det > 1e-30 else (r1 / s11, 0.0)
    if b < 0:
        a, b = r1 / s11, 0.0
    if a < 0:
        a, b = 0.0, max(0.0, r2 / s22)
    return max(a, 0.0), b
