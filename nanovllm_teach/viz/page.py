"""The replay page: one self-contained HTML file that steps through a trace in any browser, without Python.

::

    from nanovllm_teach.trace import load_trace
    from nanovllm_teach.viz.page import write_replay_page
    write_replay_page(load_trace("traces/preemption.jsonl"), "preemption.html", lang="zh")

The page has the Player's panels: a step slider with play/pause, the timelines (batch size, KV blocks used,
step latency, queue lengths) and the request Gantt chart on one shared step axis with one cursor, the KV
block grid at the end of the step (cells grouped and coloured by occupancy when there are too many to draw
one by one; hover or click a cell to read it), the queues, and the step's TEACHING lines in English and
Chinese (switchable). The browser draws everything (SVG and a canvas) from data inlined in the file:
``page_assets/`` holds the markup, the style and the script (in parts), this module the data. No network,
no external file.

Part of the torch-free viz layer: it reads the trace layer's tables, segments, steps (cut and state at their
ends) and console lines, and emits no event.

Step convention (as everywhere): the state at the end of step N is drawn over step N.

How the data stays small: the tables are columns of numbers; the block grid is one delta per step (the
blocks whose holder, cached mark or freedom changed, with holders interned as tuples of seq ids), which the
page replays forward from a copy it keeps every 64 steps; the TEACHING lines of one step are
stored once when both languages print them alike.

Every string from the trace reaches the page as JSON data and is shown with ``textContent``; ``<`` is
escaped in the JSON, so a trace cannot close the data's script element or inject markup.
"""

from __future__ import annotations

import html
import json
from importlib import resources
from pathlib import Path
from typing import Any

from nanovllm_teach.trace.console import VERBOSITIES, ConsoleRenderer
from nanovllm_teach.trace.reader import Trace
from nanovllm_teach.i18n import LANGS, resolve_lang
from nanovllm_teach.trace.replay import queues
from nanovllm_teach.trace.segments import held_segments, request_segments
from nanovllm_teach.trace.steps import cut_steps, step_ends
from nanovllm_teach.viz.compare import trace_label
from nanovllm_teach.viz.style import CACHED_COLOR, CURSOR_COLOR, FREE_COLOR, PHASE_COLORS, SEQ_PALETTE, STATE_COLORS

_FREE, _CACHED = 0, 1  # block codes; code k >= 2 is holders[k - 2]


def _walk_steps(trace: Trace) -> tuple[list[list[int]], list[list[int]], list[list[list[int]]]]:
    """One pass over the events. Per completed step: the blocks whose code changed since the previous step,
    as a flat ``[block, code, block, code, ...]``, and ``[waiting, running, preempted, finished]`` at its
    end; and the interned holder tuples the codes point to."""
    holders_index: dict[tuple[int, ...], int] = {}
    codes: dict[int, int] = {}  # block -> code at the last step (absent: free)
    deltas: list[list[int]] = []
    step_queues: list[list[list[int]]] = []
    for _, state in step_ends(trace.events, trace.settings):
        now: dict[int, int] = {b: _CACHED for b in state.hashed if b not in state.holders}
        for block, seqs in state.holders.items():
            key = tuple(sorted(seqs))
            now[block] = 2 + holders_index.setdefault(key, len(holders_index))
        delta: list[int] = []
        for block in sorted(codes.keys() | now.keys()):
            code = now.get(block, _FREE)
            if codes.get(block, _FREE) != code:
                delta += [block, code]
        codes = now
        deltas.append(delta)
        q = queues(state)
        step_queues.append([list(q.waiting), list(q.running), list(q.preempted), list(q.finished)])
    return deltas, [list(key) for key in holders_index], step_queues


def _step_lines(trace: Trace, verbosity: str) -> list[list[Any]]:
    """Per completed step, ``[en_lines, zh_lines]`` (zh is null where it equals en): the lines of the step's
    events (``steps.cut_steps``), as the console printed the run."""
    renderers = {lang: ConsoleRenderer(lang, verbosity=verbosity) for lang in LANGS}
    cut = cut_steps(trace.events)
    out: list[list[Any]] = []
    for step in cut.spans:
        en, zh = ([line for e in cut.events(trace.events, step) for line in renderers[lang].lines(e)]
                  for lang in ("en", "zh"))
        out.append([en, None if zh == en else zh])
    return out


def page_data(trace: Trace, verbosity: str = "normal") -> dict[str, Any]:
    """Everything the page draws, as JSON-ready data (see the module docstring for the encoding)."""
    rows = trace.steps
    if not rows:
        raise ValueError(f"trace {trace.path or '(in memory)'} has no completed engine step to replay")
    if verbosity not in VERBOSITIES:
        raise ValueError(f"verbosity must be one of {VERBOSITIES}, got {verbosity!r}")
    steps = [r.step for r in rows]
    requests = trace.requests
    row_of = {r.seq_id: i for i, r in enumerate(requests)}
    states = list(STATE_COLORS)
    segments = [seg for seg in request_segments(trace) if seg.seq_id in row_of] + held_segments(trace)
    deltas, holders, step_queues = _walk_steps(trace)
    settings = trace.settings
    return {
        "title": trace_label(trace),
        "lesson": trace.header.get("lesson"),
        "numBlocks": settings.num_blocks,
        "blockSize": settings.block_size,
        "policy": settings.policy,
        "steps": {
            "step": steps,
            "prefill": [int(r.phase == "prefill") for r in rows],
            "batch": [r.batch_size for r in rows],
            "tokens": [r.num_batched_tokens or 0 for r in rows],
            "used": [r.used_blocks for r in rows],
            "latency": [round(r.latency_ms, 3) for r in rows],
            "waiting": [r.waiting_len for r in rows],
            "running": [r.running_len for r in rows],
            "preempted": [len(r.preempted) for r in rows],
        },
        "requests": [[r.seq_id, r.finish_step, r.finish_reason] for r in requests],
        "states": states,
        # [row, state index, first step, end step (exclusive)]
        "segments": [[row_of[s.seq_id], states.index(s.state), s.step_start, s.step_end] for s in segments],
        "blockDeltas": deltas,
        "holders": holders,
        "queues": step_queues,
        "lines": _step_lines(trace, verbosity),
        "colors": {"seq": SEQ_PALETTE, "state": STATE_COLORS, "phase": PHASE_COLORS, "free": FREE_COLOR,
                   "cached": CACHED_COLOR, "cursor": CURSOR_COLOR},
    }


def _asset(name: str) -> str:
    return resources.files("nanovllm_teach.viz").joinpath("page_assets", name).read_text(encoding="utf-8")


# The parts of the page's script, in order; they share one function scope (see common.js).
_SCRIPT_PARTS = ("common.js", "charts.js", "grid.js", "steps.js")


def _script() -> str:
    return "\n".join(_asset(name) for name in _SCRIPT_PARTS)


def _json_for_script(data: Any) -> str:
    """JSON that is safe inside a ``<script>`` element: no ``<`` at all (so no ``</script>`` or ``<!--``)."""
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c")


def replay_page(trace: Trace, lang: str | None = None, verbosity: str = "normal") -> str:
    """The replay page of ``trace`` as one HTML string; ``lang`` is the language it opens in (None: the
    chosen language, ``i18n``)."""
    lang = resolve_lang(lang)
    data = page_data(trace, verbosity)
    data["lang"] = lang
    title = html.escape(data["title"])
    return "\n".join([
        "<!DOCTYPE html>", f'<html lang="{lang}"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>nanovllm_teach replay: {title}</title>",
        f"<style>{_asset('page.css')}</style></head><body>",
        _asset("page.html"),
        f'<script type="application/json" id="trace-data">{_json_for_script(data)}</script>',
        f"<script>(() => {{\n'use strict';\n{_script()}}})();</script>",
        "</body></html>",
    ])


def write_replay_page(trace: Trace, path: str | Path, lang: str | None = None, verbosity: str = "normal") -> Path:
    """Write ``replay_page(trace, lang, verbosity)`` to ``path`` (UTF-8); returns the path."""
    path = Path(path)
    text = replay_page(trace, lang, verbosity)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path
