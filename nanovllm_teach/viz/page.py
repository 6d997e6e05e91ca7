"""The replay page: one self-contained HTML file that steps through a trace in any browser, without Python;
and the viewer's parts that the notebook's Player (``player.py``) shares with it: the data, the script, the
markup and the style.

::

    from nanovllm_teach.trace import load_trace
    from nanovllm_teach.viz.page import write_replay_page
    write_replay_page(load_trace("traces/preemption.jsonl"), "preemption.html", lang="zh")

The page is the Player's viewer: step back / play-pause / step forward buttons (and the arrow keys and the
space bar), a play speed (up to the whole run in 30 s) and a step slider; the timelines (batch size, KV blocks used, step latency, queue lengths) and
the request Gantt chart on one shared step axis with one cursor (all the steps, or a window of them around the step shown, which a
run of over 5,000 steps opens on; the chart's rows are the requests of those steps and scroll in a box of bounded
height, so a trace of thousands of requests never pushes the rest down); the KV block grid at the end of the
step, coloured as ``blockgrid`` colours it, blocks freed at the step's end included (cells grouped and
filled by occupancy when there are too many to draw one by one; hover or click a cell to read it); the
queues; and the step's TEACHING lines in English and Chinese (switchable). The browser draws everything
(SVG and a canvas) from data inlined in the file: ``page_assets/`` holds the markup, the style and the
script (in parts; ``viewer_script`` joins them), ``page_words.py`` its words in both languages (the
pictures' own, from ``words.py``), this module the data. No network, no external file.

Part of the torch-free viz layer: it reads the trace layer's tables, segments, steps (cut and state at their
ends) and console lines, and emits no event.

Step convention (as everywhere): the state at the end of step N is drawn over step N.

How the data stays small (measured on a ``simulate`` run of 2,000 requests of Qwen3-8B on an H100, 41,159
steps, whose page weighed 49.5 MB with every line and queue written out):

- the TEACHING lines (41.0 MB of it) are templates, shared by every line that differs from another only in
  its numbers, and per step the numbers alone, each as its difference from the same slot of the template's
  previous line (``engine_step=N+1`` after ``engine_step=N`` costs one digit): 2.9 MB;
- the queues are written out only where they changed since the previous step (5.0 MB to 0.9 MB); the step
  table's columns and the Gantt chart's segments are differences from the previous value (1.3 and 1.7 MB
  to 0.8 MB each);
- the block grid is one delta per step (the blocks whose holder, cached mark or freedom changed, with
  holders interned as tuples of seq ids), which the page replays forward from a copy it keeps every 64
  steps;
- all of it, 6.1 MB of JSON, is gzip-compressed and written in base64: 0.9 MB in the file (gzip alone, on
  the JSON written out, gave 2.7 MB; the encoding above also spares the browser parsing 49.5 MB). The
  browser's own ``DecompressionStream`` inflates it (every current browser has one).

Every string from the trace reaches the page as data and is shown with ``textContent``; the data is base64
(no ``<``), so a trace cannot close the data's script element or inject markup.
"""

from __future__ import annotations

import base64
import gzip
import html
import itertools
import json
import re
from importlib import resources
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from nanovllm_teach.i18n import LANGS, resolve_lang, say
from nanovllm_teach.scenarios import trace_lesson
from nanovllm_teach.trace.console import VERBOSITIES, ConsoleRenderer
from nanovllm_teach.trace.reader import Trace
from nanovllm_teach.trace.replay import queues
from nanovllm_teach.trace.segments import held_segments, request_segments
from nanovllm_teach.trace.steps import cut_steps, step_ends
# The grid's conventions are blockgrid's: the blocks freed at a step's end, in their holder's colour faded.
from nanovllm_teach.viz.blockgrid import freed_at_step_end
from nanovllm_teach.viz.compare import trace_label
from nanovllm_teach.viz.messages import (BAD_VERBOSITY, IN_MEMORY, NO_STEP_TO_REPLAY, NOT_A_REPLAY_PAGE,
                                         PAGE_GRID_PROGRESS, PAGE_LINES_PROGRESS)
from nanovllm_teach.viz.page_words import replay_words
from nanovllm_teach.viz.style import (
    CACHED_COLOR, CURSOR_COLOR, FREE_COLOR, FREED_ALPHA, PHASE_COLORS, SEQ_PALETTE, STATE_COLORS,
)

_FREE, _CACHED = 0, 1  # block codes; code k >= 2 is holders[k - 2]
# A TEACHING line is stored as a template (its text with each run of digits not starting with 0 replaced by
# a slot character that no line of the trace holds, from Unicode's private use area) and the numbers taken
# out. At most 15 digits per number, so that every number is exact in a JavaScript double; longer runs are
# split.
_NUMBER = re.compile(r"[1-9][0-9]{0,14}")
_PRIVATE_USE = range(0xE000, 0xF900)


def _deltas(values: list[int]) -> list[int]:
    """``values`` as differences from the previous one (the first from 0): a column that changes by small
    steps becomes short numbers."""
    return [b - a for a, b in zip([0, *values], values)]


def _segment_deltas(segments: list[list[int]]) -> list[int]:
    """``[[row, state, a, b], ...]`` as one flat list, each field a difference from the previous segment's."""
    previous = [0, 0, 0, 0]
    out: list[int] = []
    for seg in segments:
        out += [v - p for v, p in zip(seg, previous)]
        previous = seg
    return out


def _walk_steps(trace: Trace, progress: bool) -> tuple[list[list[int]], list[list[int]], list[list[Any]]]:
    """One pass over the events. Per completed step: the blocks whose code changed since the previous step,
    as a flat ``[block, code, block, code, ...]``, and ``[waiting, running, preempted, finished]`` at its
    end, each list ``0`` where it equals the previous step's; and the interned holder tuples the codes
    point to."""
    holders_index: dict[tuple[int, ...], int] = {}
    codes: dict[int, int] = {}  # block -> code at the last step (absent: free)
    deltas: list[list[int]] = []
    step_queues: list[list[Any]] = []
    previous: list[list[int]] | None = None  # the first step's lists are always written out
    for _, state in tqdm(step_ends(trace.events, trace.settings), desc=say(PAGE_GRID_PROGRESS), unit="step",
                         total=len(trace.steps), disable=not progress, leave=False):
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
        lists: list[Any] = [list(q.waiting), list(q.running), list(q.preempted), list(q.finished)]
        step_queues.append(lists if previous is None else
                           [0 if new == old else new for new, old in zip(lists, previous)])
        previous = lists
    return deltas, [list(key) for key in holders_index], step_queues


def _freed(trace: Trace, steps: list[int]) -> dict[str, list[int]]:
    """``blockgrid.freed_at_step_end`` by step index (a string, as JSON keys are): ``[block, seq, ...]``."""
    index = {s: i for i, s in enumerate(steps)}
    return {str(index[step]): [v for block, seq in sorted(blocks.items()) for v in (block, seq)]
            for step, blocks in freed_at_step_end(trace).items() if step in index}


class _LineCoder:
    """The TEACHING lines as a shared table of template pairs (English, Chinese) and, per step, a flat list
    ``[pair, n1, n2, ..., pair, ...]``, each number stored as its difference from the same slot in the
    previous line of the same pair (so ``engine_step=N`` and an unchanged batch cost one digit)."""

    def __init__(self, slot: str) -> None:
        self.slot = slot
        self.texts: dict[str, int] = {}
        self.pairs: dict[tuple[int, int], int] = {}
        self.last: list[list[int]] = []

    def _template(self, line: str) -> tuple[str, list[int]]:
        return _NUMBER.sub(self.slot, line), [int(n) for n in _NUMBER.findall(line)]

    def _pair(self, en: str, zh: str) -> int:
        key = (self.texts.setdefault(en, len(self.texts)), self.texts.setdefault(zh, len(self.texts)))
        if key not in self.pairs:
            self.pairs[key] = len(self.pairs)
            self.last.append([0] * en.count(self.slot))
        return self.pairs[key]

    def step(self, en_lines: list[str], zh_lines: list[str]) -> tuple[list[int], list[int] | None]:
        """The step's flat list (both languages, where their lines differ only in words), and a flat list of
        the Chinese lines alone (numbers as they are, not differences) where they do not pair so."""
        en = [self._template(line) for line in en_lines]
        zh = [self._template(line) for line in zh_lines]
        paired = len(en) == len(zh) and all(a[1] == b[1] for a, b in zip(en, zh))
        out: list[int] = []
        for k, (text, numbers) in enumerate(en):
            pair = self._pair(text, zh[k][0] if paired else text)
            out.append(pair)
            out += [n - m for n, m in zip(numbers, self.last[pair])]
            self.last[pair] = numbers
        if paired:
            return out, None
        alone: list[int] = []
        for text, numbers in zh:
            alone += [self._pair(text, text), *numbers]
        return out, alone


def primed_renderers(trace: Trace, verbosity: str, first_event: int) -> dict[str, ConsoleRenderer]:
    """A console renderer per language, as it stands when the run reaches event ``first_event``: it numbers
    decode details ("decode detail #k/3") by the SCHEDULE_DECODE events it has seen, so it is shown the
    earlier ones (past ``decode_details`` the exact count no longer matters, so at most that many + 1)."""
    renderers = {lang: ConsoleRenderer(lang, verbosity=verbosity) for lang in LANGS}
    for renderer in renderers.values():
        seen = 0
        for e in itertools.islice(trace.events, first_event):
            if seen > renderer.decode_details:
                break
            if e.event == "SCHEDULE_DECODE":
                renderer.lines(e)
                seen += 1
    return renderers


def step_lines_window(trace: Trace, verbosity: str, first: int, stop: int | None = None,
                      progress: bool = False) -> dict[str, Any]:
    """The lines of the completed steps of index ``first`` to ``stop`` (exclusive; None: to the end), as the
    console printed the run in each language (``steps.cut_steps``), encoded by ``_LineCoder``: ``{"from",
    "slot", "texts", "pairs", "steps", "zhAlone"}`` (``zhAlone``: by step index from ``from``, as a string).
    The page holds one window of all the steps; the Player sends a long trace's lines a window at a time."""
    cut = cut_steps(trace.events)
    spans = list(cut.spans)[first:stop]
    renderers = primed_renderers(trace, verbosity, cut.spans[spans[0]].start if spans else 0)
    printed = [[[line for e in cut.events(trace.events, step) for line in renderers[lang].lines(e)]
                for lang in ("en", "zh")]
               for step in tqdm(spans, desc=say(PAGE_LINES_PROGRESS), unit="step", disable=not progress, leave=False)]
    seen = {ch for step in printed for lines in step for line in lines for ch in line if ord(ch) >= 0xE000}
    coder = _LineCoder(next(chr(c) for c in _PRIVATE_USE if chr(c) not in seen))
    steps: list[list[int]] = []
    zh_alone: dict[str, list[int]] = {}
    for i, (en, zh) in enumerate(printed):
        flat, alone = coder.step(en, zh)
        steps.append(flat)
        if alone is not None:
            zh_alone[str(i)] = alone
    return {"from": first, "slot": coder.slot, "texts": list(coder.texts), "pairs": [list(p) for p in coder.pairs],
            "steps": steps, "zhAlone": zh_alone}


def _lesson(trace: Trace) -> dict[str, Any] | None:
    """The trace's lesson in each language (``scenarios.trace_lesson``), and ``own``: whether it is the trace's
    own text, the same in every language (a shipped scenario's lesson is translated)."""
    said = {lang: trace_lesson(trace.header, lang) for lang in LANGS}
    if said["en"] is None:
        return None
    return {**said, "own": len(set(said.values())) == 1}


def page_data(trace: Trace, verbosity: str = "normal", progress: bool = False,
              lines_until: int | None = None) -> dict[str, Any]:
    """Everything the page draws, as JSON-ready data (see the module docstring for the encoding);
    ``progress``: show tqdm bars while a big trace is encoded; ``lines_until``: the TEACHING lines of the
    steps of index below it only (None: all)."""
    rows = trace.steps
    if not rows:
        raise ValueError(say(NO_STEP_TO_REPLAY, path=trace.path or say(IN_MEMORY)))
    if verbosity not in VERBOSITIES:
        raise ValueError(say(BAD_VERBOSITY, choices=VERBOSITIES, value=verbosity))
    steps = [r.step for r in rows]
    requests = trace.requests
    row_of = {r.seq_id: i for i, r in enumerate(requests)}
    states = list(STATE_COLORS)
    segments = sorted([row_of[s.seq_id], states.index(s.state), s.step_start, s.step_end]
                      for s in request_segments(trace) if s.seq_id in row_of)
    segments += [[row_of[s.seq_id], states.index(s.state), s.step_start, s.step_end]
                 for s in held_segments(trace) if s.seq_id in row_of]
    deltas, holders, step_queues = _walk_steps(trace, progress)
    settings = trace.settings
    return {
        "title": trace_label(trace),
        "lesson": _lesson(trace),
        "numBlocks": settings.num_blocks,
        "blockSize": settings.block_size,
        "policy": settings.policy,
        # Every column as differences (_deltas); latency in microseconds.
        "steps": {
            "step": _deltas(steps),
            "prefill": _deltas([int(r.phase == "prefill") for r in rows]),
            "batch": _deltas([r.batch_size for r in rows]),
            "tokens": _deltas([r.num_batched_tokens or 0 for r in rows]),
            "used": _deltas([r.used_blocks for r in rows]),
            "latencyUs": _deltas([round(r.latency_ms * 1000) for r in rows]),
            "waiting": _deltas([r.waiting_len for r in rows]),
            "running": _deltas([r.running_len for r in rows]),
            "preempted": _deltas([len(r.preempted) for r in rows]),
        },
        "requests": [[r.seq_id, r.finish_step, r.finish_reason] for r in requests],
        "states": states,
        # [row, state index, first step, end step (exclusive)] per segment, sorted by row (_segment_deltas).
        "segments": _segment_deltas(segments),
        "blockDeltas": deltas,
        "holders": holders,
        "freed": _freed(trace, steps),
        "queues": step_queues,
        "lines": step_lines_window(trace, verbosity, 0, lines_until, progress),
        "colors": {"seq": SEQ_PALETTE, "state": STATE_COLORS, "phase": PHASE_COLORS, "free": FREE_COLOR,
                   "cached": CACHED_COLOR, "cursor": CURSOR_COLOR, "freedAlpha": FREED_ALPHA},
    }


def viewer_asset(name: str) -> str:
    """The text of ``page_assets/name``."""
    return resources.files("nanovllm_teach.viz").joinpath("page_assets", name).read_text(encoding="utf-8")


# The parts of the viewer's script, in order: the body of one function (see common.js).
_SCRIPT_PARTS = ("common.js", "charts.js", "grid.js", "steps.js")


def viewer_script() -> str:
    """The viewer's JavaScript: ``inflate(bytes)`` and ``startViewer(root, D, host)`` (see common.js), for the
    page and for the Player's widget module."""
    body = "\n".join(viewer_asset(name) for name in _SCRIPT_PARTS)
    return f"{viewer_asset('inflate.js')}\nasync function startViewer(root, D, host) {{\n'use strict';\n{body}}}\n"


def viewer_markup() -> str:
    """The viewer's markup (page.html), to go inside an element of class ``replay``."""
    return viewer_asset("page.html")


def viewer_style() -> str:
    """The viewer's style (page.css), scoped to its ``.replay`` element."""
    return viewer_asset("page.css")


def packed_bytes(data: Any) -> bytes:
    """The data as JSON, gzip-compressed (no timestamp, so one trace always makes the same bytes)."""
    raw = json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return gzip.compress(raw, compresslevel=9, mtime=0)


def viewer_data(trace: Trace, lang: str, verbosity: str = "normal", live: bool = False,
                progress: bool = False, lines_until: int | None = None) -> dict[str, Any]:
    """``page_data`` with what the viewer opens on (``lang``; ``live``: at the last step) and its words."""
    data = page_data(trace, verbosity, progress, lines_until)
    data.update(lang=lang, live=live, ui=replay_words())
    return data


def read_page_data(page: str) -> dict[str, Any]:
    """The data inlined in a replay page (``viewer_data``'s dict), read back from its HTML."""
    match = re.search(r'<script type="application/gzip;base64" id="trace-data">([A-Za-z0-9+/=]*)</script>', page)
    if match is None:
        raise ValueError(say(NOT_A_REPLAY_PAGE))
    return json.loads(gzip.decompress(base64.b64decode(match.group(1))))


# The page starts its viewer on the document, with the data of its trace-data element (base64: text with no
# ``<`` at all, so it cannot end its script element); ``window.replay`` is the viewer's handle.
_PAGE_START = """const bytes = Uint8Array.from(atob(document.getElementById('trace-data').textContent), (ch) => ch.charCodeAt(0));
window.replay = await startViewer(document.querySelector('.replay'), await inflate(bytes), {keys: document});"""


def replay_page(trace: Trace, lang: str | None = None, verbosity: str = "normal", live: bool = False,
                progress: bool = False) -> str:
    """The replay page of ``trace`` as one HTML string; ``lang`` is the language it opens in (None: the
    chosen language, ``i18n``); ``live``: a trace still being recorded (``serve``'s ``/live``), so the page
    opens at its last step rather than its first; ``progress``: tqdm bars while a big trace is encoded."""
    lang = resolve_lang(lang)
    data = viewer_data(trace, lang, verbosity, live, progress)
    title = html.escape(data["title"])
    packed = base64.b64encode(packed_bytes(data)).decode("ascii")
    return "\n".join([
        "<!DOCTYPE html>", f'<html lang="{lang}"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>nanovllm_teach replay: {title}</title>",
        f"<style>{viewer_style()}</style></head><body style=\"margin: 0 16px 16px\"><div class=\"replay\">",
        viewer_markup(), "</div>",
        f'<script type="application/gzip;base64" id="trace-data">{packed}</script>',
        f"<script>(async () => {{\n'use strict';\n{viewer_script()}\n{_PAGE_START}\n}})();</script>",
        "</body></html>",
    ])


def write_replay_page(trace: Trace, path: str | Path, lang: str | None = None, verbosity: str = "normal",
                      progress: bool = False) -> Path:
    """Write ``replay_page(trace, lang, verbosity, progress=progress)`` to ``path`` (UTF-8); returns the path."""
    path = Path(path)
    text = replay_page(trace, lang, verbosity, progress=progress)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path
