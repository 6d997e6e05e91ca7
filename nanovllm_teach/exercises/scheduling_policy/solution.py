"""Reference solution of ``scheduling_policy``: shortest prompt first, with aging so that nobody starves."""

from __future__ import annotations

from collections import deque

from nanovllm_teach.engine.sequence import Sequence

# A sequence overtaken by this many later arrivals goes first, however long its prompt.
MAX_OVERTAKEN = 24


def choose_next(waiting: deque[Sequence]) -> int:
    # seq_id grows with arrival order: the newest id minus a sequence's own counts who arrived after it.
    newest = max(seq.seq_id for seq in waiting)
    oldest = min(range(len(waiting)), key=lambda i: waiting[i].seq_id)
    if newest - waiting[oldest].seq_id >= MAX_OVERTAKEN:
        return oldest
    return min(range(len(waiting)), key=lambda i: (waiting[i].num_prompt_tokens, waiting[i].seq_id))
