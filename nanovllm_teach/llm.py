"""Orchestration: ``LLM``, the vLLM-style name users write — an ``LLMEngine`` with its parts chosen.

``LLM(model, **settings)`` checks the settings, then picks what the engine is built from (``EngineParts``):

- the real engine: the checkpoint's config resolved for this machine (``Config.resolve``), its tokenizer
  and the shapes of its weights checked first, so a bad model folder fails in seconds and before the trace
  file is opened; the model runner on one rank, or a tensor-parallel group (``engine/tp_workers.py``); the
  wall clock;
- ``runner="simulated"``: the simulator's parts (``sim/engine.py``): a model shape, a ``SimulatedRunner``,
  a simulated clock.

The engine is the same either way and does not know which it got. ``run_workload`` serves requests that
arrive in time (``workload/arrivals.py``), telling a simulated model how long each answer is.

Emits nothing itself (the engine does).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence as SequenceOf

# config.py first: it asks libgomp for passive waiting before torch loads, and transformers loads torch.
from nanovllm_teach.config import Config  # isort: skip

from transformers import AutoTokenizer

from nanovllm_teach.assets import default_model_path
from nanovllm_teach.engine.llm_engine import LLMEngine
from nanovllm_teach.engine.model_runner import ModelRunner
from nanovllm_teach.engine.runner import EngineParts, Runner, WallClock
from nanovllm_teach.engine.serialized import serialized
from nanovllm_teach.engine.tp_workers import TensorParallelRunner
from nanovllm_teach.settings import Settings
from nanovllm_teach.sim.engine import simulated_parts
from nanovllm_teach.trace.recorder import Recorder, make_recorder
from nanovllm_teach.models.loader import check_checkpoint
from nanovllm_teach.workload.arrivals import serve_workload
from nanovllm_teach.workload.metrics import WorkloadResult
from nanovllm_teach.workload.requests import Request


class LLM(LLMEngine):
    def __init__(self, model: str | Path | None = None, *, trace: str | Path | Recorder | None = None,
                 trace_metadata: dict[str, Any] | None = None, **settings: Any) -> None:
        """``model``: a checkpoint folder (None: the shipped one), or a model shape for the simulated runner;
        ``trace``: a path to write the trace to, or a recorder; ``settings``: see ``settings.py``."""
        name = str(model if model is not None else default_model_path())
        asked = Settings.from_kwargs(settings)
        parts = simulated_parts(name, asked) if asked.simulated else real_parts(name, asked)
        self.answers = parts.answers
        self.frontend_s = parts.frontend_s
        super().__init__(parts.config, recorder=make_recorder(trace),
                         trace_header=parts.config.trace_header(trace_metadata or {}, parts.simulated),
                         make_runner=parts.make_runner, clock=parts.clock, tokenizer=parts.tokenizer,
                         eos_token_id=parts.eos_token_id)

    @serialized
    def run_workload(self, workload: SequenceOf[Request], *, ignore_eos: bool = False) -> WorkloadResult:
        """Serve ``workload`` (see ``workload/arrivals.py``): each request joins ``arrival_s`` seconds after the
        call, simulated or by the wall clock. ``ignore_eos`` (simulated): every request runs to its
        ``max_tokens`` (nano-vllm's benchmark). Refuses and aborts as ``generate`` does, and like it holds the
        engine for the whole call (another thread's call waits). A simulated engine whose factors carry a
        server's latency (``frontend_s``, the served calibration's) lets each request join that much later."""
        return serve_workload(self, workload, ignore_eos=ignore_eos, answers=self.answers, frontend_s=self.frontend_s)


def real_parts(model: str, asked: Settings) -> EngineParts:
    """The real engine's parts; everything cheap is checked before anything is built."""
    config = Config.resolve(model, asked)
    tokenizer = AutoTokenizer.from_pretrained(config.model)
    if tokenizer.eos_token_id is None:
        raise ValueError(f"the tokenizer in {config.model} defines no EOS token: generation could never stop")
    check_checkpoint(config.model, config.hf_config)
    return EngineParts(config, model_runner, WallClock(), tokenizer, tokenizer.eos_token_id)


def model_runner(config: Config, recorder: Recorder) -> Runner:
    """One rank, or a tensor-parallel group whose rank 0 runs here."""
    if config.tensor_parallel_size > 1:
        return TensorParallelRunner(config, recorder)
    return ModelRunner(config, 0, recorder)
