"""Cutting a trace into engine steps: which events make up each step's lines, pictures and state.

Part of the torch-free trace layer; emits nothing. A step's events run from just after the previous step's
STEP_DONE to its own STEP_DONE. So what the engine logged between two steps (a request arriving, generate()
starting, before the first step the whole start-up) belongs to the step it leads into, as it does in a live
console: it is printed just before that step's lines. The events after the last STEP_DONE (generate()
finishing, a step that never completed) belong to no step.

Everything that shows a trace step by step (the player, the replay page, the random-access replay) cuts it
here, so a step holds the same events everywhere.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from nanovllm_teach.trace.schema import TraceEvent
from nanovllm_teach.trace.state import EngineSettings, EngineState, ends_a_step, walk


@dataclass(frozen=True, slots=True)
class StepCut:
    """Where each completed step's events are in an event list."""

    spans: dict[int, range]  # step -> positions of its events, in event order; the last is its STEP_DONE
    after: range  # the events after the last STEP_DONE, which belong to no completed step

    def events(self, events: Sequence[TraceEvent], step: int) -> Sequence[TraceEvent]:
        """The events of ``step`` in ``events`` (the list this cut was made from)."""
        span = self.spans[step]
        return events[span.start:span.stop]


def cut_steps(events: Sequence[TraceEvent]) -> StepCut:
    """The steps of ``events``: for each completed step, the positions from just after the previous step's
    STEP_DONE to its own; and the positions after the last STEP_DONE."""
    spans: dict[int, range] = {}
    start = 0
    for pos, e in enumerate(events):
        if ends_a_step(e):
            spans[e.step] = range(start, pos + 1)
            start = pos + 1
    return StepCut(spans, range(start, len(events)))


def step_ends(events: Iterable[TraceEvent], settings: EngineSettings) -> Iterator[tuple[int, EngineState]]:
    """The engine state at the end of every completed step, in order: ``(step, state)``. One state object,
    changed in place as the walk goes on: copy it to keep it."""
    for e, state in walk(events, settings):
        if ends_a_step(e):
            yield e.step, state
