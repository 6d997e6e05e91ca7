"""The engine at scale, assembled: the real ``LLMEngine`` driving a ``SimulatedRunner`` on a ``SimClock``.

``simulated_parts(model, settings)`` is what ``LLM(model, runner="simulated", hardware=...)`` is built from:
the model is only a shape (a shipped name such as ``qwen3-8b``, or any folder with the ``config.json`` of a
dense decoder: Qwen3, Qwen2/2.5, Llama 2/3, Mistral; no tokenizer, no weights), ``hardware`` names the device (``sim/hardware.py``) and ``device`` becomes its name;
``quantization="fp8"`` stores the linear layers' weights in FP8 (``sim/cost_model.py`` says what changes);
the efficiency factors come from ``sim_factors``' file, or the device's own (``Efficiency.for_device``: a GPU's
fitted ones or the defaults, ``this-cpu``'s shipped calibration). The engine itself is the same
one, and does not know: this module imports the engine, never the other way round.

Emits no events itself (the engine and the runner do).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import AutoConfig

from nanovllm_teach.config import Config, check_config_shards, resolve_linear_backend
from nanovllm_teach.engine.runner import EngineParts
from nanovllm_teach.i18n import say
from nanovllm_teach.settings import Settings
from nanovllm_teach.sim.cost_model import load_shape, shape_dir
from nanovllm_teach.sim.efficiency import Efficiency
from nanovllm_teach.sim.hardware import DEVICES, attention_backend_on, device_names, get_device
from nanovllm_teach.sim.messages import (BAD_SIM_FACTORS, FACTORS_OR_ENGINE, SIMULATED_NEEDS_HARDWARE,
                                         SIMULATED_NO_SUCH_HARDWARE)
from nanovllm_teach.sim.published import fitted_cases
from nanovllm_teach.sim.runner import AnswerLengths, SimClock, SimulatedRunner
from nanovllm_teach.trace.recorder import Recorder
from nanovllm_teach.workload.arrivals import ApiServer


@dataclass(frozen=True)
class SimulatedParts(EngineParts):
    """The simulated engine's parts, and what only a simulation has."""

    description: dict[str, Any] | None = None  # the trace header's description of the simulated device
    answers: AnswerLengths | None = None  # where a workload's answer lengths go: the model follows them
    server: ApiServer = ApiServer()  # the simulated API server in front of the engine, which run_workload adds


def efficiency_of(settings: Settings) -> Efficiency:
    """The simulated device's efficiency factors: ``sim_factors``' file, or the device's own with those of the
    serving engine asked for (``Efficiency.for_device``)."""
    if settings.sim_factors is None:
        return Efficiency.for_device(settings.hardware, settings.serving_engine)
    if settings.serving_engine is not None:
        raise ValueError(say(FACTORS_OR_ENGINE))
    try:
        return Efficiency.from_json(settings.sim_factors)
    except (OSError, ValueError, TypeError) as error:  # JSONDecodeError is a ValueError
        raise ValueError(say(BAD_SIM_FACTORS, path=str(settings.sim_factors), why=error)) from None


def simulated_parts(model: str, asked: Settings) -> SimulatedParts:
    if asked.hardware not in device_names():
        known = ", ".join(device_names())
        raise ValueError(say(SIMULATED_NEEDS_HARDWARE, known=known) if asked.hardware is None
                         else say(SIMULATED_NO_SUCH_HARDWARE, name=asked.hardware, known=known))
    efficiency = efficiency_of(asked)  # a missing or bad file fails now, before anything is built
    path = shape_dir(model)
    shape = load_shape(path)  # first: it refuses what is not a dense decoder, saying why
    hf_config = AutoConfig.from_pretrained(str(path))
    check_config_shards(asked.tensor_parallel_size, hf_config)  # a simulated device has as many peers as it is asked for
    # "this-cpu" is measured only when the engine starts: it is a CPU, float32.
    kind, dtype = ((DEVICES[asked.hardware].kind, DEVICES[asked.hardware].dtype) if asked.hardware in DEVICES
                   else ("cpu", "float32"))
    linear = "torch" if kind == "gpu" else resolve_linear_backend(asked.linear_backend, torch.device("cpu"),
                                                                 torch.float32)
    config = Config.build(asked, path, hf_config, device=asked.hardware, dtype=dtype, on_gpu=kind == "gpu",
                          attention_backend=attention_backend_on(kind), linear_backend=linear)
    device = get_device(config.hardware)
    device.matmul_flops(config.quantization)  # FP8 weights on a device without FP8 are refused now, saying where
    clock, answers = SimClock(), AnswerLengths()

    def make_runner(config: Config, recorder: Recorder) -> SimulatedRunner:
        return SimulatedRunner(
            shape, device, block_size=config.kvcache_block_size, max_num_batched_tokens=config.max_num_batched_tokens,
            max_num_seqs=config.max_num_seqs, max_model_len=config.max_model_len,
            gpu_memory_utilization=config.gpu_memory_utilization, cpu_kvcache_gib=config.cpu_kvcache_gib,
            num_kvcache_blocks=config.num_kvcache_blocks, tensor_parallel_size=config.tensor_parallel_size,
            enforce_eager=config.enforce_eager, efficiency=efficiency, recorder=recorder, clock=clock,
            answers=answers, quantization=config.quantization)

    simulated = {"hardware": device.describe(), "efficiency": efficiency.to_dict(),
                 "factors_file": asked.sim_factors and Path(os.fspath(asked.sim_factors)).name,
                 "serving_engine": asked.serving_engine,  # whose collectives' cost; None: a fit over all
                 # how many published cases the device's own factors were fitted on (published.MIN_FITTED_CASES
                 # or more: fitted; fewer: unfitted, a roofline's estimate); None: this CPU or a factors file
                 "fitted_cases": (fitted_cases(device.name) if device.name in DEVICES and asked.sim_factors is None
                                  else None)}
    return SimulatedParts(config, make_runner, clock, None, shape.eos_token_id, simulated, answers,
                          ApiServer(efficiency.frontend_s, efficiency.frontend_request_s,
                                    efficiency.frontend_token_s))
