"""Orchestration: one recorded run of the engine, the way scenarios, the autograder and the benchmarks do it.

A ``Workload`` is everything a run is asked to do, as data: the engine settings, the prompts, their sampling
parameters and when each arrives. ``record_run(workload, recorder)`` builds the engine with those settings,
runs the workload through ``generate()`` while ``recorder`` records every TEACHING event, and closes the
engine whatever happens. Two runs of one workload make the same decisions; only clocks and memory
readings differ.

Prompts are token-id lists, plain strings, or ``Chat`` messages, which are written out with the model's own
chat template when the run starts (so a workload does not need the tokenizer to be written down).

A ``TimedWorkload`` is the other kind: requests arriving in seconds, served by ``LLM.run_workload`` (on the
simulated engine, the same numbers on every machine).
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable
from unittest import mock

from nanovllm_teach.i18n import Text, say
from nanovllm_teach.sampling_params import SamplingParams

if TYPE_CHECKING:
    from nanovllm_teach.trace.recorder import Recorder
    from nanovllm_teach.workload.requests import Request

PARAMS_PER_PROMPT = Text(en="workload {name!r}: {count} SamplingParams for {prompts} prompts",
                         zh="工作负载 {name!r}：{prompts} 个 prompt 却给了 {count} 个 SamplingParams")
STILL_GOING = Text(en="the run was still going after {max_steps} steps: stopped", zh="运行到第 {max_steps} 步仍未结束：已停止")


@dataclass(frozen=True)
class Chat:
    """A user message (and optionally a system message), rendered with the model's chat template."""

    user: str
    system: str | None = None

    def render(self, tokenizer: Any) -> str:
        messages = ([{"role": "system", "content": self.system}] if self.system else []) + \
                   [{"role": "user", "content": self.user}]
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


Prompt = str | list[int] | Chat


@dataclass(frozen=True)
class Workload:
    """A fixed run: engine ``settings`` (keyword arguments of ``LLM``), prompts, one ``SamplingParams`` each,
    and ``arrival_steps`` (request ``i`` arrives after ``arrival_steps[i]`` steps; empty: all at once).

    ``memory``: when set (the fields of a ``utils.memory.MemoryReading``), the engine reads this instead of
    the machine's memory, so that a KV cache sized "from memory" comes out the same on every machine.

    ``description`` says what the run shows: a plain string, or a ``Text`` where a learner reads it in their
    language (the graded workloads, named in a verdict). The trace header records only ``name`` (and what a
    caller adds in ``metadata``), so a trace is the same in every language.
    """

    name: str
    description: str | Text
    settings: dict[str, Any]
    prompts: list[Prompt]
    params: list[SamplingParams]
    arrival_steps: list[int] = field(default_factory=list)
    memory: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if len(self.params) != len(self.prompts):
            raise ValueError(say(PARAMS_PER_PROMPT, name=self.name, count=len(self.params), prompts=len(self.prompts)))

    def prompts_for(self, tokenizer: Any) -> list[str | list[int]]:
        """The prompts as ``generate()`` takes them: ``Chat`` messages written out with ``tokenizer``'s
        chat template, the others as they are."""
        return [p.render(tokenizer) if isinstance(p, Chat) else p for p in self.prompts]


@dataclass(frozen=True)
class TimedWorkload:
    """Requests with arrival times in seconds, served on ``model`` with ``settings`` by the engine alone
    (``serve_workload`` with no API server in front: what such a run measures is the scheduler's order, not
    the simulated server's work that ``LLM.run_workload`` adds on a simulated GPU)."""

    name: str
    description: Text  # in both languages: a verdict says it
    requests: list[Request]
    model: str
    settings: dict[str, Any]

    def record(self, recorder: Recorder) -> None:
        """Serve the workload on the engine as it is now, recording every event."""
        from nanovllm_teach.llm import LLM
        from nanovllm_teach.workload.arrivals import serve_workload

        llm = LLM(self.model, trace=recorder, trace_metadata={"workload": self.name}, **self.settings)
        try:
            serve_workload(llm, self.requests, answers=llm.answers)
        finally:
            llm.close()


class StepLimitExceeded(RuntimeError):
    """The run was still going after the number of steps it was allowed."""


def record_run(workload: Workload, recorder: Recorder | str | Path | None, model: str | Path | None = None, *,
               metadata: dict[str, Any] | None = None, max_steps: int | None = None) -> list[dict[str, Any]]:
    """Run ``workload`` on the engine as it is now, recording into ``recorder``; returns ``generate()``'s
    outputs. ``max_steps``: refuse to run more steps than this (``StepLimitExceeded``)."""
    from nanovllm_teach.llm import LLM
    from nanovllm_teach.utils.memory import MemoryReading

    reading = MemoryReading(**workload.memory) if workload.memory is not None else None
    fixed_memory = (mock.patch("nanovllm_teach.engine.model_runner.read_memory", lambda device: reading)
                    if reading is not None else nullcontext())
    with fixed_memory:
        llm = LLM(model, trace=recorder, trace_metadata={"workload": workload.name, **(metadata or {})},
                  **workload.settings)
        try:
            if max_steps is not None:
                llm.step = _step_limited(llm, max_steps)
            return llm.generate(workload.prompts_for(llm.tokenizer), list(workload.params), use_tqdm=False,
                                arrival_steps=list(workload.arrival_steps) or None)
        finally:
            llm.close()


def _step_limited(llm: Any, max_steps: int) -> Callable[[], Any]:
    """``llm.step`` that refuses to run step ``max_steps + 1``."""
    step = llm.step
    steps = 0

    def limited() -> Any:
        nonlocal steps
        if steps >= max_steps:
            raise StepLimitExceeded(say(STILL_GOING, max_steps=max_steps))
        steps += 1
        return step()
    return limited
