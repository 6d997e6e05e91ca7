"""The words of the replay page (``viz/page.py``) and of the live view around it (``serve``'s ``/live``), by
the keys their scripts read (``page_assets/``). Every word is an entry of the pictures' one table
(``viz/words.py``), so the page says what the figures and the Player say. A page carries both languages
and switches between them without a reload, so it is given both (``in_both``).

Part of the torch-free viz layer. Emits no events.
"""

from __future__ import annotations

import re

from nanovllm_teach.i18n import LANGS, Text
from nanovllm_teach.viz import words

# The replay page's labels, headings, legends and tooltips; ``{name}`` fields are filled in by the script.
REPLAY_WORDS: dict[str, Text] = {
    "replay": words.REPLAY,
    "step": words.STEP,
    "stepHeader": words.STEP_HEADER,
    "timelines": words.TIMELINES,
    "requests": words.REQUESTS,
    "queues": words.QUEUES_AT_STEP_END,
    "blocks": words.KV_BLOCKS_AT_STEP_END,
    "lines": words.TEACHING_LINES,
    "play": words.PLAY,
    "pause": words.PAUSE,
    "back": words.STEP_BACK,
    "forward": words.STEP_FORWARD,
    "shortcut": words.SHORTCUT,
    "spaceBar": words.SPACE_BAR,
    "waiting": words.QUEUE["waiting"],
    "running": words.QUEUE["running"],
    "queueHead": words.QUEUE_HEAD,
    "finished": words.FINISHED_THIS_STEP,
    "preemptedNote": words.UNDERLINED_PREEMPTED,
    "noLines": words.NO_LINES_IN_STEP,
    "gridSummary": words.GRID_SUMMARY,
    "gridMaxRefs": words.GRID_MAX_REFS,
    "gridFreed": words.GRID_FREED,
    "gridCell": words.GRID_CELL,
    "groupSummary": words.GROUP_SUMMARY,
    "block": words.BLOCK_N,
    "seq": words.SEQ,
    "sharedBy": words.SHARED_BY,
    "labelValue": words.LABEL_VALUE,
    "inBrackets": words.IN_BRACKETS,
    "hover": words.HOVER_A_CELL,
    "convention": words.PAGE_CONVENTION,
    "batchSize": words.BATCH_SIZE,
    "kvUsed": words.KV_BLOCKS_USED_OF,
    "latency": words.STEP_LATENCY,
    "log": words.LOG_SCALE,
    "preemption": words.PREEMPTION,
    "ganttAria": words.GANTT_CHART,
    "ganttRows": words.GANTT_ROWS,
    "ganttScroll": words.GANTT_SCROLL,
    "blocksN": words.BLOCKS_N,
    "usedBySeq": words.USED_BY_SEQ,
    "freed": words.FREED_AT_STEP_END,
    "sharedRefs": words.SHARED,
    "groupUsed": words.GROUP_FILLED,
    "cached": words.CACHED,
    "free": words.FREE,
    "speed": words.SPEED,
    "wholeRun": words.WHOLE_RUN_IN,
    "zoom": words.ZOOM,
    "allSteps": words.ALL_STEPS,
    "windowSteps": words.WINDOW_STEPS,
    "traceText": words.TRACE_OWN_TEXT,
}

# What reads the same in both languages: symbols and code names.
SAME_WORDS: dict[str, str] = {"none": "—", "finishes": "● EOS   | max_tokens"}

# The live view's ticker and its switch.
LIVE_WORDS: dict[str, Text] = {
    "idle": words.LIVE_IDLE,
    "live": words.LIVE,
    "step": words.STEP,
    "running": words.QUEUE["running"],
    "waiting": words.QUEUE["waiting"],
    "blocks": words.KV_BLOCKS_USED,
    "full": words.LIVE_FULL,
    "lost": words.LIVE_GONE,
    "follow": words.FOLLOW_NEWEST,
}


def one_line(text: str) -> str:
    """``text`` as the page draws it: a figure's axis label on one line, its line break a space, or nothing
    before full-width punctuation, where Chinese puts no space (每步延迟（ms）)."""
    return re.sub(r"\n(?=[\u3000-\u303f\uff00-\uffef])", "", text).replace("\n", " ")


def in_both(table: dict[str, Text], same: dict[str, str] | None = None,
            nested: dict[str, dict[str, Text]] | None = None) -> dict[str, dict[str, object]]:
    """``{lang: {key: words}}`` for every language: each ``Text`` of ``table`` in that language, on one line,
    the ``same`` words as they are, each ``nested`` table as a table of its own under its key."""
    def said(texts: dict[str, Text], lang: str) -> dict[str, str]:
        return {key: one_line(text.in_lang(lang)) for key, text in texts.items()}
    return {lang: {**(same or {}), **said(table, lang), **{key: said(t, lang) for key, t in (nested or {}).items()}}
            for lang in LANGS}


def replay_words() -> dict[str, dict[str, object]]:
    """The replay page's words in every language, as its script reads them (``UI[lang][key]``); the Gantt
    chart's states (a step's phase among them) under ``state``."""
    return in_both(REPLAY_WORDS, SAME_WORDS, {"state": words.STATE})


def live_words() -> dict[str, dict[str, object]]:
    """The live view's words in every language (the batch is "batch" in both, the field's own word)."""
    return in_both(LIVE_WORDS, {"batch": "batch"})
