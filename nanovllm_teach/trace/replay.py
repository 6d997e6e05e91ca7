"""Random access to the engine state of a trace, step by step: the block grid and the player read it.

Part of the torch-free trace layer; emits nothing. The state is the one interpreter's (``state.walk``), the
steps are cut as everywhere (``steps``); this module keeps copies of the state along the way so that any
step's state is cheap to rebuild, and says what the KV cache and the queues held at the end of a step.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from nanovllm_teach.i18n import Text, say
from nanovllm_teach.trace.reader import Trace
from nanovllm_teach.trace.state import STATE_EVENTS, EngineState
from nanovllm_teach.trace.steps import cut_steps, step_ends

NO_SUCH_STEP = Text(en="step {step} has no STEP_DONE in this trace (steps {first}..{last})",
                    zh="这个 trace 里第 {step} 步没有 STEP_DONE（已有的步：{first}..{last}）")
NO_STEP_DONE = Text(en="this trace has no completed step", zh="这个 trace 里没有已完成的步")


@dataclass(frozen=True, slots=True)
class KVSnapshot:
    """The KV cache at the end of one step: who holds each used block, and which free blocks are cached."""

    step: int
    num_blocks: int
    holders: dict[int, tuple[int, ...]]  # used block -> seq ids holding it; 2+ ids: a shared prefix block
    cached_free: frozenset[int]  # free blocks whose content is still hashed (reusable by a prefix hit)

    @property
    def num_used(self) -> int:
        return len(self.holders)

    @property
    def num_free(self) -> int:
        return self.num_blocks - len(self.holders)

    @property
    def shared(self) -> dict[int, int]:
        """Shared blocks and their reference counts."""
        return {b: len(seqs) for b, seqs in self.holders.items() if len(seqs) > 1}


@dataclass(frozen=True, slots=True)
class Queues:
    """The scheduler's queues at the end of one step (seq ids, head first)."""

    step: int
    waiting: tuple[int, ...]
    running: tuple[int, ...]
    preempted: tuple[int, ...]  # the waiting sequences that are there because they were preempted
    finished: tuple[int, ...]  # sequences that finished in this step


class EngineReplay:
    """Random access to the replayed engine state of one trace, step by step.

    One pass over the events keeps a copy of the state every ``keyframe_every`` steps; ``state_at(n)``
    starts from the nearest earlier copy and applies the events up to step ``n``'s STEP_DONE, so any
    step costs at most ``keyframe_every`` steps of events, however long the trace.
    """

    def __init__(self, trace: Trace, keyframe_every: int = 32) -> None:
        settings = trace.settings
        self.trace = trace
        self.num_blocks = settings.num_blocks
        self._events = [e for e in trace.events if e.event in STATE_EVENTS]
        # Position (in ``_events``) of each completed step's STEP_DONE: the last of its events.
        self._done_at: dict[int, int] = {step: span[-1] for step, span in cut_steps(self._events).spans.items()}
        # (state after the step, the position of its STEP_DONE); the first is the state before any event.
        self._keyframe_steps: list[float] = [float("-inf")]
        self._keyframes: list[tuple[EngineState, int]] = [
            (EngineState(settings.block_size, settings.enable_prefix_caching), -1)]
        for count, (step, state) in enumerate(step_ends(self._events, settings), start=1):
            if count % keyframe_every == 0:
                self._keyframe_steps.append(step)
                self._keyframes.append((state.copy(), self._done_at[step]))
        self.steps: list[int] = sorted(self._done_at)

    def state_at(self, step: int) -> EngineState:
        """The state at the end of ``step`` (a fresh copy the caller may change)."""
        if step not in self._done_at:
            raise KeyError(say(NO_SUCH_STEP, step=step, first=self.steps[0], last=self.steps[-1]) if self.steps
                           else say(NO_STEP_DONE))
        k = bisect.bisect_right(self._keyframe_steps, step) - 1
        state, pos = self._keyframes[k]
        state = state.copy()
        for e in self._events[pos + 1:self._done_at[step] + 1]:
            state.apply(e)
        return state

    def kv_at(self, step: int) -> KVSnapshot:
        """The KV cache at the end of ``step``."""
        return kv_snapshot(self.state_at(step), self.num_blocks)

    def queues_at(self, step: int) -> Queues:
        """The queues at the end of ``step``."""
        return queues(self.state_at(step))


def kv_snapshot(state: EngineState, num_blocks: int) -> KVSnapshot:
    """The KV cache as ``state`` holds it (a cache of ``num_blocks`` blocks)."""
    holders = {b: tuple(sorted(seqs)) for b, seqs in sorted(state.holders.items())}
    return KVSnapshot(state.step, num_blocks, holders, frozenset(state.hashed - state.holders.keys()))


def queues(state: EngineState) -> Queues:
    """The queues as ``state`` holds them."""
    preempted = tuple(sid for sid in state.waiting if sid in state.preempted)
    return Queues(state.step, tuple(state.waiting), tuple(state.running), preempted, tuple(state.finished))


def replay_blocks(trace: Trace) -> dict[int, dict[int, list[int]]]:
    """For each completed step, which sequences hold each used block: ``{step: {block_id: [seq_id, ...]}}``.

    A block listed with several sequences is a shared prefix block; each step's dict has as many entries as
    the step ended with used blocks.
    """
    return {step: {b: sorted(seqs) for b, seqs in sorted(state.holders.items())}
            for step, state in step_ends(trace.events, trace.settings)}
