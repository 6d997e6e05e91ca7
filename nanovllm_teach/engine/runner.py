"""The narrow edge between orchestration and execution: what ``LLMEngine`` asks of the runner it drives, and
the clock it runs on. Pure Python, no torch.

Any object with these few members is a runner: the model runner (``engine/model_runner.py``), its
tensor-parallel group (``engine/tp_workers.py``) and the cost-model simulator (``nanovllm_teach/sim``) all
are, and the engine cannot tell them apart. A runner reports, it does not record: ``run`` returns the tokens
and, while the engine records, what it did to get them (``RunReport``: the step's input tensors, how the
forward pass ran, what the filters kept), which the engine says as TEACHING events. Time comes from an
injected ``Clock``: the host's wall clock, or a simulated one that only the simulated runner and idle waits
move.

Emits no events.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Protocol

import msgspec

from nanovllm_teach.engine.batch import ScheduledBatch
from nanovllm_teach.logprobs import TokenLogprobs

if TYPE_CHECKING:  # the config imports torch; this edge does not need to
    from nanovllm_teach.config import Config
    from nanovllm_teach.trace.recorder import Recorder


class ForwardPass(msgspec.Struct, frozen=True):
    """How the model ran one step."""

    mode: str  # eager, compiled (the native decode step on a CPU) or graph (a CUDA graph replayed)
    batch_size: int  # sequences whose logits were computed
    graph_batch_size: int | None = None  # the replayed graph's batch size (the batch is padded to it)
    eager_reason: str | None = None  # why no graph ran (``engine/cuda_graphs.py``'s codes)
    predicted: dict[str, Any] | None = None  # a simulated step's predicted cost (``sim/cost_model.py``)


class RunReport(NamedTuple):
    """What a runner did in one step, for the trace: asked of it only while the engine records."""

    inputs: dict[str, Any]  # the step's inputs by name (input_ids, positions, slot_mapping, max_seqlen_q, …)
    forward: ForwardPass
    num_kept: list[int] | None  # candidates each row kept after its filters (None: no row filters)


NO_STATS: Mapping[str, Any] = MappingProxyType({})


class RunOutput(NamedTuple):
    """One step's answer: a sampled token id per sequence of the batch, in its order, and what came with it."""

    token_ids: list[int]
    logprobs: list[TokenLogprobs | None] | None = None  # per sequence (None: it asked for none); None: nobody asked
    report: RunReport | None = None  # None when the engine does not record
    step_stats: Mapping[str, Any] = NO_STATS  # what the runner adds to STEP_DONE (a simulated prediction)


class Runner(Protocol):
    num_kvcache_blocks: int  # sized at start-up: the block manager is built with this many

    def run(self, batch: ScheduledBatch) -> RunOutput:
        """One sampled token id per sequence of ``batch``, and (while the engine records) what it did."""

    def close(self) -> None:
        """Release what the runner holds (worker processes, say)."""


class Clock(Protocol):
    def now_s(self) -> float:
        """Seconds on this clock (only differences count)."""

    def now_ns(self) -> int:
        """The same clock in whole nanoseconds: the trace's event stamps (``t_ns``)."""

    def wait_until(self, t_s: float) -> None:
        """Let time pass until ``now_s() >= t_s`` (an idle engine waiting for its next arrival)."""

    def advance(self, seconds: float) -> None:
        """Let ``seconds`` pass on work that holds up a busy engine's loop (an API server's, between steps)."""


class WallClock:
    """The host's monotonic clock: a real engine's steps take the time they take."""

    def now_s(self) -> float:
        return time.perf_counter()

    def now_ns(self) -> int:
        return time.perf_counter_ns()  # the same clock as now_s, read without a float in between

    def wait_until(self, t_s: float) -> None:
        time.sleep(max(0.0, t_s - time.perf_counter()))

    def advance(self, seconds: float) -> None:
        time.sleep(seconds)


@dataclass(frozen=True)
class EngineParts:
    """What an ``LLMEngine`` is built from, chosen by whoever builds it (``nanovllm_teach/llm.py``)."""

    config: Config
    make_runner: Callable[[Config, Recorder], Runner]  # called once the trace is open
    clock: Clock
    tokenizer: Any | None  # None: prompts are token ids, outputs have no text
    eos_token_id: int
