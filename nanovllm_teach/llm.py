"""The shell's face: ``LLM``, the vLLM-style name users write — the engine (``engine/llm_engine.py``) inside
its shell (``engine/frontend.py``), with its parts chosen and vLLM's outputs.

``LLM(model, **settings)`` checks the settings, then picks what the engine is built from (``EngineParts``):

- the real engine: the checkpoint's config resolved for this machine (``Config.resolve``), its tokenizer
  and the shapes of its weights checked first, so a bad model folder fails in seconds and before the trace
  file is opened; the model runner on one rank, or a tensor-parallel group (``engine/tp_workers.py``); the
  wall clock;
- ``runner="simulated"``: the simulator's parts (``sim/engine.py``): a model shape, a ``SimulatedRunner``,
  a simulated clock.

The engine is the same either way and does not know which it got. ``generate`` returns vLLM's
``RequestOutput``s (``outputs.py``); ``run_workload`` serves requests that arrive in time
(``workload/arrivals.py``), telling a simulated model how long each answer is.

Emits nothing itself (the engine does).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence as SequenceOf

# config.py first: it asks libgomp for passive waiting before torch loads, and transformers loads torch.
from nanovllm_teach.config import Config  # isort: skip

from transformers import AutoTokenizer

from nanovllm_teach.assets import default_model_path
from nanovllm_teach.engine.frontend import Frontend, Prompt
from nanovllm_teach.engine.model_runner import ModelRunner
from nanovllm_teach.engine.request_checks import is_token_ids
from nanovllm_teach.engine.runner import EngineParts, Runner, WallClock
from nanovllm_teach.engine.sequence import Sequence
from nanovllm_teach.engine.serialized import serialized
from nanovllm_teach.engine.tp_workers import TensorParallelRunner
from nanovllm_teach.i18n import Text, say
from nanovllm_teach.models.loader import check_checkpoint
from nanovllm_teach.outputs import RequestOutput, request_output
from nanovllm_teach.sampling_params import SamplingParams
from nanovllm_teach.settings import Settings
from nanovllm_teach.sim.engine import SimulatedParts, simulated_parts
from nanovllm_teach.trace.recorder import Recorder, make_recorder
from nanovllm_teach.workload.arrivals import ApiServer, serve_workload
from nanovllm_teach.workload.metrics import WorkloadResult
from nanovllm_teach.workload.requests import Request

NOT_PROMPTS = Text(en="prompts must be a prompt (a str or a list of token ids) or a list of prompts, got {kind}",
                   zh="prompts 必须是一个 prompt（str 或 token id 的列表）或 prompt 的列表，收到的是 {kind}")
PARAMS_PER_PROMPT = Text(en="got {count} SamplingParams for {prompts} prompts",
                         zh="{prompts} 个 prompt 却给了 {count} 个 SamplingParams")
ARRIVALS_PER_PROMPT = Text(en="got {count} arrival_steps for {prompts} prompts",
                           zh="{prompts} 个 prompt 却给了 {count} 个 arrival_steps")
BAD_ARRIVAL_STEPS = Text(en="arrival_steps must be ints >= 0, got {arrivals}",
                         zh="arrival_steps 必须是 >= 0 的 int，收到的是 {arrivals}")
NO_EOS = Text(en="the tokenizer in {model} defines no EOS token: generation could never stop",
              zh="{model} 里的 tokenizer 没有定义 EOS token：生成将永远无法停止")


class LLM(Frontend):
    def __init__(self, model: str | Path | None = None, *, trace: str | Path | Recorder | None = None,
                 trace_metadata: dict[str, Any] | None = None, **settings: Any) -> None:
        """``model``: a checkpoint folder (None: the shipped one), or a model shape for the simulated runner;
        ``trace``: a path to write the trace to, or a recorder; ``settings``: see ``settings.py``."""
        name = str(model if model is not None else default_model_path())
        asked = Settings.from_kwargs(settings)
        parts = simulated_parts(name, asked) if asked.simulated else real_parts(name, asked)
        simulated = parts if isinstance(parts, SimulatedParts) else None
        self.answers = simulated.answers if simulated else None  # a simulated model is told its answers' lengths
        self.server = simulated.server if simulated else ApiServer()  # what a simulated request meets before the engine
        super().__init__(parts.config, recorder=make_recorder(trace),
                         trace_header=parts.config.trace_header(trace_metadata or {},
                                                                simulated.description if simulated else None),
                         make_runner=parts.make_runner, clock=parts.clock, tokenizer=parts.tokenizer,
                         eos_token_id=parts.eos_token_id)

    @serialized
    def generate(self, prompts: Prompt | SequenceOf[Prompt],
                 sampling_params: SamplingParams | list[SamplingParams] | None = None,
                 use_tqdm: bool = True, arrival_steps: SequenceOf[int] | None = None) -> list[RequestOutput]:
        """Generate for one prompt or a list of them (a prompt: a str, or a list of token ids); one
        ``RequestOutput`` per prompt comes back, in prompt order (``nanovllm_teach/outputs.py``: vLLM's
        shape, which also answers ``out["seq_id"]``, ``out["text"]``, ``out["token_ids"]`` and
        ``out["finish_reason"]`` as nano-vllm's dicts do).

        ``arrival_steps``: request ``i`` arrives once ``arrival_steps[i]`` engine steps of this call have run
        (0 = at once; an idle engine takes no steps, so the next request then arrives at once). It refuses
        to start while requests queued with ``add_request`` are unfinished; if it raises (Ctrl-C included),
        its requests are aborted first: the engine is left empty, every KV block free. A call from another
        thread waits for this one to finish.
        """
        if isinstance(prompts, str) or (isinstance(prompts, list) and prompts and is_token_ids(prompts)):
            prompts = [prompts]  # one prompt: text, or token ids
        if not isinstance(prompts, (list, tuple)):
            raise TypeError(say(NOT_PROMPTS, kind=type(prompts).__name__))
        if isinstance(sampling_params, list):
            if len(sampling_params) != len(prompts):
                raise ValueError(say(PARAMS_PER_PROMPT, count=len(sampling_params), prompts=len(prompts)))
            params = sampling_params
        else:
            params = [sampling_params or SamplingParams()] * len(prompts)
        arrivals = list(arrival_steps) if arrival_steps is not None else [0] * len(prompts)
        if len(arrivals) != len(prompts):
            raise ValueError(say(ARRIVALS_PER_PROMPT, count=len(arrivals), prompts=len(prompts)))
        if any(isinstance(a, bool) or not isinstance(a, int) or a < 0 for a in arrivals):
            raise ValueError(say(BAD_ARRIVAL_STEPS, arrivals=arrivals))
        requests = [self.make_request(p, sp) for p, sp in zip(prompts, params)]
        self.run_requests(requests, arrivals, use_tqdm, "generate()")
        return [request_output(samples, p if isinstance(p, str) else None, self.tokenizer)
                for p, samples in zip(prompts, requests)]

    @serialized
    def request_output(self, seqs: list[Sequence], prompt: str | None = None) -> RequestOutput:
        """The vLLM-shaped output of the request whose samples are ``seqs`` (from ``make_request``), as it
        stands now: ``finished`` False while any is unfinished. ``prompt``: its text, if it was given as text."""
        return request_output(seqs, prompt, self.tokenizer)

    @serialized
    def run_workload(self, workload: SequenceOf[Request], *, ignore_eos: bool = False) -> WorkloadResult:
        """Serve ``workload`` (see ``workload/arrivals.py``): each request joins ``arrival_s`` seconds after the
        call, simulated or by the wall clock. ``ignore_eos`` (simulated): every request runs to its
        ``max_tokens`` (nano-vllm's benchmark). Refuses and aborts as ``generate`` does, and like it holds the
        engine for the whole call (another thread's call waits). A simulated engine whose factors carry an
        API server's costs (``frontend_*``: fitted on published cases, or the served calibration's) lets each
        request go through that server first."""
        return serve_workload(self, workload, ignore_eos=ignore_eos, answers=self.answers, server=self.server)


def real_parts(model: str, asked: Settings) -> EngineParts:
    """The real engine's parts; everything cheap is checked before anything is built."""
    config = Config.resolve(model, asked)
    tokenizer = AutoTokenizer.from_pretrained(config.model)
    if tokenizer.eos_token_id is None:
        raise ValueError(say(NO_EOS, model=config.model))
    check_checkpoint(config.model, config.hf_config)
    return EngineParts(config, model_runner, WallClock(), tokenizer, tokenizer.eos_token_id)


def model_runner(config: Config, recorder: Recorder) -> Runner:
    """One rank, or a tensor-parallel group whose rank 0 runs here."""
    if config.tensor_parallel_size > 1:
        return TensorParallelRunner(config, recorder)
    return ModelRunner(config, 0, recorder)
