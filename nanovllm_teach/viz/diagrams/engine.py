"""The engine's three layers and one step through them (``engine_layers``), and the life of a ``Sequence``
(``sequence_states``).

``engine_layers`` draws orchestration (``LLMEngine``, ``Teaching``, the step transaction), resources
(``Scheduler``, ``BlockManager``, ``Sequence``) and execution (``ModelRunner``, the model, its layers) as
stacked bands, with the calls of one ``LLMEngine.step()`` — ``schedule()``, ``run(batch)``,
``postprocess()`` — and the decision records going back up to orchestration, which writes the TEACHING
events. Given a trace and a step, that step's events are listed in the box of the class whose work they
report: each payload type says whose (``trace.payload.Payload.actor``, its layer in ``LAYERS``).

``sequence_states`` draws ``SequenceStatus``'s states and the edges between them, each labelled with what
moves a sequence along it; given a trace, each edge also carries how many times it was taken (its
STATE_TRANSITION events).

No torch. Emits no events.
"""

from __future__ import annotations

from collections import Counter

from matplotlib.figure import Figure

from nanovllm_teach.i18n import say
from nanovllm_teach.trace.payload import LAYERS
from nanovllm_teach.trace.reader import Trace
from nanovllm_teach.viz import words
from nanovllm_teach.viz.diagrams.boxes import MUTED, arrow, box, canvas, label, titled_box
from nanovllm_teach.viz.messages import (NO_STEPS, NOT_A_STATE_EDGE, STEP_NOT_IN_TRACE, STEP_WITHOUT_TRACE,
                                         TRACE_WITHOUT_STEP)
from nanovllm_teach.viz.style import PREEMPT_COLOR

# One colour per layer, light enough for black text on it.
LAYER_COLORS = {"orchestration": "#dbe9f6", "resources": "#e5f5e0", "execution": "#fde7d4"}
ABORT_COLOR = "#b2182b"
LAYER_EDGES = {"orchestration": "#4a7fb5", "resources": "#4f9a4f", "execution": "#c8772e"}

# The classes of each layer, left to right, with the file each lives in. The names are the engine's own.
LAYER_CLASSES: dict[str, tuple[tuple[str, str, str], ...]] = {
    "orchestration": (("LLMEngine", "LLMEngine", "engine/llm_engine.py"),
                      ("transaction", "transaction", "engine/transaction.py"),
                      ("Teaching", "Teaching", "engine/teaching.py")),
    "resources": (("Scheduler", "Scheduler", "engine/scheduler.py"),
                  ("BlockManager", "BlockManager", "engine/block_manager.py"),
                  ("Sequence", "Sequence", "engine/sequence.py")),
    "execution": (("ModelRunner", "ModelRunner", "engine/model_runner.py"),
                  ("model", "Qwen3ForCausalLM", "models/qwen3.py"),
                  ("layers", "layers/", "layers/*.py")),
}

_WIDTH, _HEIGHT = 14.6, 10.6
_BAND_X0, _BAND_X1 = 0.75, 12.1
_BAND_H = 3.05
_BAND_TOP = {"orchestration": 9.75, "resources": 6.5, "execution": 3.25}
_COLUMNS = (0.95, 4.85, 8.6)  # the left edges of the three boxes of a band
_BOX_W = 3.3
_TRACE_X0, _TRACE_X1 = 12.55, 14.3


def _step_events(trace: Trace, step: int) -> dict[str, list[str]]:
    """Each actor's events in ``step``: "NAME ×count", in the order each name first appears."""
    steps = {row.step for row in trace.steps}
    if step not in steps:
        span = f"{min(steps)}..{max(steps)}" if steps else say(NO_STEPS)
        raise ValueError(say(STEP_NOT_IN_TRACE, step=step, span=span))
    counts: dict[str, Counter[str]] = {actor: Counter() for actor in LAYERS}
    for event in trace.events_in_step(step):
        counts[type(event.stats).actor][event.event] += 1
    return {actor: [f"{name} ×{n}" for name, n in counted.items()] for actor, counted in counts.items()}


def engine_layers(trace: Trace | None = None, step: int | None = None) -> Figure:
    """The engine's three layers as stacked bands and one ``LLMEngine.step()`` through them; with ``trace``
    and ``step``, that step's events in the box of the class whose work each reports."""
    if trace is None and step is not None:
        raise ValueError(say(STEP_WITHOUT_TRACE, step=step))
    if trace is not None and step is None:
        raise ValueError(say(TRACE_WITHOUT_STEP))
    events = _step_events(trace, step) if trace is not None else None

    fig, ax = canvas(_WIDTH, _HEIGHT)
    if events is None:
        title = say(words.LAYERS_TITLE)
    else:
        phase = next(row.phase for row in trace.steps if row.step == step)
        title = say(words.LAYERS_STEP_TITLE, step=step, phase=say(words.PHASE[phase]))
    label(ax, _WIDTH / 2, _HEIGHT - 0.3, title, size=12, weight="bold", ground=False)

    geometry: dict[str, tuple[float, float, float, float]] = {}  # class key -> (x, y, width, height)
    for layer, classes in LAYER_CLASSES.items():
        top = _BAND_TOP[layer]
        box(ax, _BAND_X0, top - _BAND_H, _BAND_X1 - _BAND_X0, _BAND_H, face=LAYER_COLORS[layer],
            edge=LAYER_EDGES[layer], rounded=False, gid=f"band-{layer}")
        # The band's name starts over the second column: the calls between the layers pass the first.
        label(ax, _COLUMNS[1], top - 0.22, say(words.LAYERS_NAME[layer]), size=10.5, weight="bold",
              ha="left", color=LAYER_EDGES[layer], ground=False)
        label(ax, _COLUMNS[1] + 1.45, top - 0.22, say(words.LAYERS_ROLE[layer]), size=8, ha="left", color=MUTED,
              ground=False)
        for (key, name, where), x in zip(classes, _COLUMNS):
            # Boxes whose class reports events are tall enough for the list; the others leave room under
            # them for the arrows that pass by.
            tall = key in LAYERS
            height = 2.35 if tall else 1.35
            y = top - 0.45 - height
            lines = []
            if events is not None and tall:
                lines = events[key] or [say(words.LAYERS_NO_EVENTS)]
            titled_box(ax, x, y, _BOX_W, height, name, lines, subtitle=f"{where}\n{say(words.LAYERS_CLASS_ROLE[key])}",
                       edge=LAYER_EDGES[layer], size=8, gid=f"class-{key}")
            geometry[key] = (x, y, _BOX_W, height)

    # The trace: where every event ends up, outside the layers.
    box(ax, _TRACE_X0, 0.2, _TRACE_X1 - _TRACE_X0, 9.55, face="#f4f4f4", edge=MUTED, dashed=True, gid="trace")
    label(ax, (_TRACE_X0 + _TRACE_X1) / 2, 5.0, say(words.LAYERS_TRACE), size=10, weight="bold", ground=False)

    engine, scheduler, runner = geometry["LLMEngine"], geometry["Scheduler"], geometry["ModelRunner"]
    teaching = geometry["Teaching"]
    engine_bottom, scheduler_top = engine[1], scheduler[1] + scheduler[3]
    # ① and ③ go down from LLMEngine to the Scheduler, the records come back up beside them.
    for offset, text in ((0.3, words.LAYERS_SCHEDULE), (1.55, words.LAYERS_POSTPROCESS)):
        x = engine[0] + offset
        arrow(ax, [(x, engine_bottom), (x, scheduler_top)], gid="call")
        label(ax, x + 0.08, _BAND_TOP["resources"] - 0.22, say(text), size=8, ha="left")
    x = engine[0] + 2.9
    arrow(ax, [(x, scheduler_top), (x, engine_bottom)], color=LAYER_EDGES["resources"], dashed=True, gid="records")
    label(ax, x + 0.08, engine_bottom - 0.3, say(words.LAYERS_RECORDS), size=7.5, ha="left",
          color=LAYER_EDGES["resources"])
    # ② run(batch): down the left edge, past the resources layer, which it does not touch.
    lane = 0.4
    y_from, y_to = engine[1] + engine[3] - 0.7, runner[1] + runner[3] - 0.7
    arrow(ax, [(engine[0], y_from), (lane, y_from), (lane, y_to), (runner[0], y_to)], gid="call")
    label(ax, lane - 0.05, (y_from + y_to) / 2, say(words.LAYERS_RUN), size=8, rotation=90)
    # LLMEngine hands the records to Teaching, under the transaction box; Teaching and ModelRunner write
    # their events to the trace, under the boxes that have none.
    y_low = _BAND_TOP["orchestration"] - _BAND_H + 0.3
    arrow(ax, [(engine[0] + engine[2], y_low), (teaching[0], y_low)], color=LAYER_EDGES["resources"], dashed=True,
          gid="records")
    label(ax, (engine[0] + engine[2] + teaching[0]) / 2, y_low + 0.2, say(words.LAYERS_HANDS_ON), size=7.5,
          color=LAYER_EDGES["resources"])
    y_events = teaching[1] + 0.5
    arrow(ax, [(teaching[0] + teaching[2], y_events), (_TRACE_X0, y_events)], gid="events")
    label(ax, (_TRACE_X0 + _TRACE_X1) / 2, y_events - 0.45, say(words.LAYERS_TEACHING_EVENTS), size=8, ground=False)
    y_runner = _BAND_TOP["execution"] - _BAND_H + 0.3
    arrow(ax, [(runner[0] + runner[2], y_runner), (_TRACE_X0, y_runner)], gid="events")
    label(ax, (_TRACE_X0 + _TRACE_X1) / 2, y_runner + 0.45, say(words.LAYERS_OWN_EVENTS), size=8, ground=False)
    return fig


# The edges of the state machine: (from, to, finish reason or None), as STATE_TRANSITION events say them.
_FINISHES = ("eos", "length", "max_model_len")
EDGES = (("WAITING", "RUNNING", None), ("RUNNING", "WAITING", None),
         *(("RUNNING", "FINISHED", reason) for reason in _FINISHES),
         ("WAITING", "FINISHED", "aborted"), ("RUNNING", "FINISHED", "aborted"))
STATE_COLORS = {"WAITING": "#d9d9d9", "RUNNING": "#a6dbcc", "FINISHED": "#cfd8ef"}


def _transition_counts(trace: Trace) -> Counter[tuple[str, str, str | None]]:
    counts: Counter[tuple[str, str, str | None]] = Counter()
    for event in trace.events_named("STATE_TRANSITION"):
        stats = event.stats
        key = (stats.from_, stats.to, stats.get("finish_reason") if stats.to == "FINISHED" else None)
        if key not in EDGES:
            raise ValueError(say(NOT_A_STATE_EDGE, key=key, event=event.i))
        counts[key] += 1
    return counts


def sequence_states(trace: Trace | None = None) -> Figure:
    """The ``Sequence`` state machine: WAITING → RUNNING → FINISHED, RUNNING → WAITING on preemption, and
    aborts; with ``trace``, each edge carries how many of its STATE_TRANSITION events the trace has."""
    counts = _transition_counts(trace) if trace is not None else None

    def times(*keys: tuple[str, str, str | None]) -> str:
        return "" if counts is None else "  " + say(words.STATES_TIMES, n=sum(counts[k] for k in keys))

    fig, ax = canvas(13.0, 5.5)
    if counts is None:
        title = say(words.STATES_TITLE)
    else:
        title = say(words.STATES_COUNTED, n=len(trace.events_named("REQUEST_ENQUEUE")))
    label(ax, 6.5, 5.2, title, size=12, weight="bold", ground=False)

    w, h, y = 2.3, 1.1, 2.6
    xs = {"WAITING": 2.0, "RUNNING": 5.9, "FINISHED": 10.1}
    for state, x in xs.items():
        box(ax, x, y, w, h, face=STATE_COLORS[state], gid=f"state-{state}")
        label(ax, x + w / 2, y + h - 0.32, state, size=10.5, weight="bold", ground=False)
        label(ax, x + w / 2, y + 0.32, say(words.STATES_NOTE[state]), size=7.5, color=MUTED, ground=False)
    waiting, running, finished = (xs[s] for s in ("WAITING", "RUNNING", "FINISHED"))

    # Entering: add_request() puts a new sequence at the back of the waiting queue.
    enqueued = "" if trace is None else "  " + say(words.STATES_TIMES, n=len(trace.events_named("REQUEST_ENQUEUE")))
    arrow(ax, [(0.2, y + h / 2), (waiting, y + h / 2)], gid="edge-enter")
    label(ax, 0.2, y + h / 2 + 0.3, say(words.STATES_ENTER) + enqueued, size=8, ha="left")
    # Admission above, preemption below, between WAITING and RUNNING.
    up, down = y + h - 0.3, y + 0.3
    arrow(ax, [(waiting + w, up), (running, up)], gid="edge-WAITING-RUNNING")
    label(ax, (waiting + w + running) / 2, up + 0.55, say(words.STATES_ADMITTED) + times(EDGES[0]), size=8)
    arrow(ax, [(running, down), (waiting + w, down)], color=PREEMPT_COLOR, gid="edge-RUNNING-WAITING")
    label(ax, (waiting + w + running) / 2, down - 0.55, say(words.STATES_PREEMPTED) + times(EDGES[1]), size=8,
          color=PREEMPT_COLOR)
    # Finishing, one edge with a line per reason.
    mid = y + h / 2
    arrow(ax, [(running + w, mid), (finished, mid)], gid="edge-RUNNING-FINISHED")
    lines = [say(words.STATES_FINISHED_BY)] + [say(words.FINISH_REASON[r]) + times(("RUNNING", "FINISHED", r))
                                        for r in _FINISHES]
    label(ax, (running + w + finished) / 2, mid + 1.05, "\n".join(lines), size=8)
    # Aborts, from either queue: below everything.
    for start, key, depth in ((running, EDGES[6], 0.9), (waiting, EDGES[5], 1.75)):
        x0, x1, bottom = start + w / 2, finished + w / 2 - 0.3 + (0.6 if start == waiting else 0), y - depth
        arrow(ax, [(x0, y), (x0, bottom), (x1, bottom), (x1, y)], color=ABORT_COLOR, dashed=True,
              gid=f"edge-{key[0]}-FINISHED-aborted")
        aborted = say(words.ABORTED) + say(words.IN_BRACKETS, inner="abort_request") + times(key)
        label(ax, (x0 + x1) / 2 + (1.2 if start == waiting else 0.6), bottom, aborted, size=7.5, color=ABORT_COLOR)
    return fig
