"""Reference solution of ``graph_bucket``: the smallest captured graph that holds the decode batch."""

from __future__ import annotations


def choose_graph_batch_size(is_prefill: bool, batch_size: int, graph_sizes: list[int]) -> int | None:
    if is_prefill:
        return None
    for size in graph_sizes:  # ascending
        if size >= batch_size:
            return size
    return None
