"""The narrow edge between orchestration and execution: what ``LLMEngine`` asks of the runner it drives, and
the clock it runs on. Pure Python, no torch.

Any object with these few members is a runner: the model runner (``engine/model_runner.py``), its
tensor-parallel group (``engine/tp_workers.py``) and the cost-model simulator (``nanovllm_teach/sim``) all
are, and the engine cannot tell them apart. Time comes from an injected ``Clock``: the host's wall clock,
or a simulated one that only the simulated runner and idle waits move.

Emits no events.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Protocol

import msgspec

from nanovllm_teach.engine.batch import ScheduledBatch

if TYPE_CHECKING:  # the config imports torch; this edge does not need to
    from nanovllm_teach.config import Config
    from nanovllm_teach.trace.recorder import Recorder


class TokenLogprobs(msgspec.Struct, frozen=True):
    """The log-probabilities at one sampled position, for a request that asked (``SamplingParams.logprobs``),
    from the logits the sampler was given (before temperature and filters)."""

    token_id: int  # the sampled token
    logprob: float
    rank: int  # its rank in the distribution: 1 is the most likely
    top: list[tuple[int, float]]  # the requested number of most likely (token id, log-probability), best first


class Runner(Protocol):
    num_kvcache_blocks: int  # sized at start-up: the block manager is built with this many

    def run(self, batch: ScheduledBatch) -> list[int]:
        """One sampled token id per sequence of ``batch``, in its order."""

    def logprobs(self) -> list[TokenLogprobs | None] | None:
        """The last ``run``'s log-probabilities, one entry per sequence of its batch (None for a sequence
        that asked for none); None when none asked, or the runner has no probabilities (the simulator)."""

    def step_stats(self) -> dict[str, Any]:
        """What the runner adds to the last step's STEP_DONE (a prediction, say; usually nothing)."""

    def close(self) -> None:
        """Release what the runner holds (worker processes, say)."""


class RunnerDefaults:
    """What a runner that adds nothing to STEP_DONE, has no log-probabilities and holds nothing to release
    inherits."""

    def step_stats(self) -> dict[str, Any]:
        return {}

    def logprobs(self) -> list[TokenLogprobs | None] | None:
        return None

    def close(self) -> None:
        pass


class Clock(Protocol):
    def now_s(self) -> float:
        """Seconds on this clock (only differences count)."""

    def now_ns(self) -> int:
        """The same clock in whole nanoseconds: the trace's event stamps (``t_ns``)."""

    def wait_until(self, t_s: float) -> None:
        """Let time pass until ``now_s() >= t_s`` (an idle engine waiting for its next arrival)."""


class WallClock:
    """The host's monotonic clock: a real engine's steps take the time they take."""

    def now_s(self) -> float:
        return time.perf_counter()

    def now_ns(self) -> int:
        return time.perf_counter_ns()  # the same clock as now_s, read without a float in between

    def wait_until(self, t_s: float) -> None:
        time.sleep(max(0.0, t_s - time.perf_counter()))


@dataclass(frozen=True)
class EngineParts:
    """What an ``LLMEngine`` is built from, chosen by whoever builds it (``nanovllm_teach/llm.py``)."""

    config: Config
    make_runner: Callable[[Config, Recorder], Runner]  # called once the trace is open
    clock: Clock
    tokenizer: Any | None  # None: prompts are token ids, outputs have no text
    eos_token_id: int
    simulated: dict[str, Any] | None = None  # the trace header's description of a simulated device
    answers: Any | None = None  # where a workload's answer lengths go, for a model that follows them
    frontend_s: float = 0.0  # a simulated server's latency outside the engine, which run_workload adds
