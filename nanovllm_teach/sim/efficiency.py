"""Execution layer (simulated): how far below its datasheet a real engine runs, as a few named factors, and which
factors each device gets.

``Efficiency`` holds them: the shares of peak compute, bandwidth and interconnect a real kernel reaches, the
costs of launching kernels and graphs, the host's per-step and per-sequence work, waking up after an idle wait,
and a served request's time in the API server before it reaches the engine (``sim/cost_model.py`` says how
each enters a step's time, ``workload/arrivals.py`` how the server's delays a request).
``Efficiency.for_device`` gives a GPU the factors fitted on published measurements (``DEVICE_EFFICIENCY``, each
fit named beside it), the fitted API server (``GPU_API_SERVER``) and, for a named serving engine, its own
collectives' cost (``ENGINE_EFFICIENCY``; otherwise the GPU's fit over every engine's runs); ``this-cpu`` the
shipped calibration of this engine on a CPU (``THIS_CPU_FACTORS``); any other device the defaults.
``from_json`` reads a calibration run's saved factors.

Emits no events.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Mapping

from nanovllm_teach.i18n import say
from nanovllm_teach.sim.hardware import CPU_DEVICE_NAME, DEVICES
from nanovllm_teach.sim.messages import (ENGINE_NEEDS_A_GPU, FACTOR_NEGATIVE, FACTOR_NOT_A_SHARE,
                                         MEMORY_FACTOR_OUT_OF_RANGE, UNKNOWN_FACTORS)

# The factors of this engine on a CPU, fitted by ``python benchmarks/bench_sim.py --part calibrate --save`` on the
# machine the project is built on; rerun it to fit them to yours (``this-cpu``'s peaks are measured anyway).
THIS_CPU_FACTORS = Path(__file__).resolve().parent / "this_cpu_factors.json"
# The same engine measured inside its server (nanovllm-teach serve), by the same command: there its steps share
# the cores, and Python's GIL, with the server's work for every token it streams, so they take longer. Pass it
# as ``sim_factors`` to predict a served engine.
THIS_CPU_SERVED_FACTORS = Path(__file__).resolve().parent / "this_cpu_served_factors.json"
_FRACTIONS = frozenset({"matmul", "attention", "interconnect", "fp8_matmul"})
# ``memory`` is a share of the measured or datasheet bandwidth, but may exceed 1 up to this: a CPU's bandwidth is
# a copy far larger than its caches, and a model small enough to stay in the last-level cache between steps
# (the shipped one: 7.7 MB) is read faster than that.
MAX_MEMORY_SHARE = 4.0


@dataclass(frozen=True)
class Efficiency:
    """How far below the datasheet a real engine runs, as a few named numbers.

    The defaults are round figures for a GPU running kernels of nano-vllm's kind (cuBLAS GEMMs,
    flash-attention, decode reads close to the bandwidth) and Python-side costs of an engine of this size;
    they are the same for every GPU. A device can be given fitted factors instead (``from_json``), which
    is how the calibration against a measured engine plugs in.
    """

    matmul: float = 0.7  # share of peak FLOP/s a large matrix multiply reaches
    attention: float = 0.5  # share of peak FLOP/s the attention kernel reaches
    memory: float = 0.8  # share of datasheet bandwidth a streaming read reaches (above 1: from a CPU's cache)
    interconnect: float = 0.7  # share of link bandwidth a ring all-reduce reaches
    # With FP8 weights (quantization="fp8"): the share of the FP8 peak the linear layers' GEMMs reach (the default
    # is the 16-bit one: a roofline's guess), and the GPU time per layer of what FP8 adds around them, which no
    # roofline counts: a kernel quantizing each linear layer's input (before qkv, o, gate_up and down), a few
    # microseconds each however few tokens it holds, so it weighs on a decode; 0 unless fitted.
    fp8_matmul: float = 0.7
    fp8_layer_s: float = 0.0
    kernel_launch_s: float = 8e-6  # one eager kernel launch, Python dispatch included
    kernels_per_layer: int = 14  # norms, qkv, q/k norms, rotary, store K/V, attention, o, norm, gate_up, act, down
    graph_launch_s: float = 30e-6  # replaying one captured CUDA graph
    allreduce_latency_s: float = 10e-6  # a collective's fixed cost, whatever its size
    step_overhead_s: float = 1e-3  # host work every step: schedule, build inputs, sample, postprocess
    seq_overhead_s: float = 10e-6  # host work per sequence in the batch
    wake_s: float = 0.0  # the first step after the engine sat idle: cold caches, a core woken up
    # A served request's time outside the engine (no step cost: workload/arrivals.py's ApiServer): a latency no
    # request waits in line for, then the API server's work, one request at a time, per request and per prompt token.
    frontend_s: float = 0.0
    frontend_request_s: float = 0.0
    frontend_token_s: float = 0.0

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in _FRACTIONS:
                if not 0 < value <= 1:
                    raise ValueError(say(FACTOR_NOT_A_SHARE, name=f.name, value=value))
            elif f.name == "memory":
                if not 0 < value <= MAX_MEMORY_SHARE:
                    raise ValueError(say(MEMORY_FACTOR_OUT_OF_RANGE, most=MAX_MEMORY_SHARE, value=value))
            elif not value >= 0:
                raise ValueError(say(FACTOR_NEGATIVE, name=f.name, value=value))

    def to_dict(self) -> dict[str, float]:
        return asdict(self)

    @classmethod
    def for_device(cls, name: str | None, serving_engine: str | None = None) -> "Efficiency":
        """A GPU's own factors where published measurements fitted some (``DEVICE_EFFICIENCY``) and the fitted API
        server (``GPU_API_SERVER``), with the serving engine's own costs (``ENGINE_EFFICIENCY[serving_engine]``;
        None: the GPU's fit over every engine's runs); for ``this-cpu``, the shipped calibration
        (``THIS_CPU_FACTORS``: this engine measured step by step on a CPU, the GPU defaults being far from a CPU's
        host costs); the defaults elsewhere. Neither of those runs a published engine: a ``serving_engine`` there
        is refused."""
        if serving_engine is not None and name not in DEVICES:
            raise ValueError(say(ENGINE_NEEDS_A_GPU, engine=serving_engine, device=name))
        if name == CPU_DEVICE_NAME:
            return cls.from_json(THIS_CPU_FACTORS)
        if name in DEVICES:
            return cls(**(GPU_API_SERVER | DEVICE_EFFICIENCY.get(name, {}) | ENGINE_EFFICIENCY.get(serving_engine, {})))
        return cls()

    @classmethod
    def from_dict(cls, values: Mapping[str, float]) -> "Efficiency":
        unknown = sorted(set(values) - {f.name for f in fields(cls)})
        if unknown:
            raise ValueError(say(UNKNOWN_FACTORS, names=", ".join(unknown)))
        return cls(**values)

    @classmethod
    def from_json(cls, path: str | Path) -> "Efficiency":
        """Fitted factors saved by a calibration run (any subset; the rest keep their defaults)."""
        return cls.from_dict(json.loads(Path(path).read_text()))


# One set of factors per GPU model, shared by every model and case on it; a factor not named keeps its
# default. Each was fitted on the "fitted" cases of sim/published.json for that GPU and on nothing else, and
# is judged on the others (benchmarks/bench_sim_published.py --fit prints the fit):
# - h100-sxm: memory, so that the simulated median TPOT of Llama-3.1-8B on one H100 matches on average 6.59 ms
#   with 4 clients (vLLM 0.21.0, an InferenceBench sweep) and 7.56 ms for 10 ShareGPT requests at once
#   (LambdaLabsML/vllm-benchmark, an older vLLM): the newer engine spends less host time per step, so this one
#   factor sits between them (+8% and -8%); then allreduce_latency_s, so that three tensor-parallel 16-bit
#   runs match on average: Llama-3-8B sent 10 prompts at once on two and on four H100s (LambdaLabsML/vllm-
#   benchmark, the engine of the one-GPU run above: 5.26 and 3.88 ms median TPOT) and Llama-3.1-70B on four
#   H100s at 4 requests/s (vLLM 0.6.0, 23.58 ms, sglang's benchmark_vllm_060 README). One fixed cost whatever
#   the number of GPUs: each run alone asks for 18.3 us (2 GPUs) and 19.6 us (4 GPUs) on the same engine, no
#   growth a ring's 2(tp-1) hops would show, but 35.4 us on vLLM 0.6.0 (4 GPUs), whose all-reduces, or
#   something else in its steps, cost more; the mean (a simulation naming no serving engine) leaves the 8B runs
#   5% slow and the 70B run 10% fast, each engine's own (ENGINE_EFFICIENCY, below) neither.
#   With FP8 weights, unfitted (the 16-bit shares, nothing per layer), one H100 ran Llama-3.1-8B-FP8's decode 19%
#   faster than LambdaLabsML/vllm-benchmark measured (5.20 ms median TPOT, 10 prompts at once) and Llama-3.1-70B-
#   FP8's prefill 36% faster (280.5 ms median TTFT): vLLM's FP8 GEMMs are not its 16-bit ones. So fp8_layer_s,
#   so that the 8B decode matches (a fixed time per layer, not a share of the bandwidth: the 70B decode, 80
#   layers of weights 9 times larger, then lands 3% fast; as a bandwidth share, 20% slow), then fp8_matmul, so
#   that the 70B prefill matches.
# - a100-80gb: memory, so that Llama-3.1-8B matches vLLM 0.6.0's median TPOT of 14.14 ms at 4 requests/s on one
#   A100 80G (the same README).
# GPUs with no fitted case (a100-40gb and the rest) keep the defaults.
DEVICE_EFFICIENCY: dict[str, dict[str, float]] = {
    "h100-sxm": {"memory": 0.773, "allreduce_latency_s": 2.28e-05, "fp8_layer_s": 3.11e-05, "fp8_matmul": 0.407},
    "a100-80gb": {"memory": 0.661},
}
# The API server in front of a served engine on any GPU: its work per request is the host's, whatever the GPU.
# Fitted, with the factors above (and each case's engine's, below) in place, so that the median TTFT of the
# fitted cases that give one matches on average: 10 prompts sent at once to one H100 (62.19 ms) and vLLM 0.6.0
# at 4 requests/s on an A100 and on four H100s (100.48 ms, 179.15 ms). Its work per prompt token stays 0: all
# three send ShareGPT-like prompts, so that cost cannot be told from the per-request one
# (bench_sim_published.py's fit_server).
GPU_API_SERVER: dict[str, float] = {"frontend_request_s": 4.34e-03}
# A served engine's own software, the same whatever GPU it drives: the fixed cost of each of its collectives
# (launch and synchronization). Each was fitted on the fitted tensor-parallel cases of sim/published.json run by
# that engine (their ``serving_engine``) and on nothing else, as h100-sxm's own value is on all of them
# (benchmarks/bench_sim_published.py --fit). The two engines' runs on the same H100s ask for costs far apart,
# which one fit for both cannot give:
# - vllm-0.5: LambdaLabsML/vllm-benchmark's runs (its report names vLLM v0.5.4): Llama-3-8B's 10 prompts at once
#   on two and on four H100s.
# - vllm-0.6: vLLM 0.6.0 with --num-scheduler-steps 10 (sglang's benchmark_vllm_060 README; the release that
#   reworked the engine's host side: multi-step scheduling, output processing overlapped with the next step):
#   Llama-3.1-70B at 4 requests/s on four H100s.
# The API server stays one fit for all (GPU_API_SERVER: bench_sim_published.py's fit_server says why).
ENGINE_EFFICIENCY: dict[str, dict[str, float]] = {
    "vllm-0.5": {"allreduce_latency_s": 1.9e-05},
    "vllm-0.6": {"allreduce_latency_s": 3.54e-05},
}
