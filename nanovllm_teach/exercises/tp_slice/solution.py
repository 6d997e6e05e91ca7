"""Reference solution of ``tp_slice``: the slice of a checkpoint tensor a tensor-parallel rank holds."""

from __future__ import annotations


def rank_slice(kind: str, shape: list[int], parts: list[int], part: int, tp_size: int,
               tp_rank: int) -> tuple[int, int, int, int] | None:
    if kind == "column":  # output features split: each part's rows in tp_size equal blocks, packed in order
        rows = parts[part] // tp_size
        packed_before = sum(parts[:part]) // tp_size
        return 0, tp_rank * rows, rows, packed_before
    if len(shape) == 2:  # a row-parallel weight: input features (columns) split
        columns = shape[1] // tp_size
        return 1, tp_rank * columns, columns, 0
    if tp_rank == 0:  # a row-parallel bias: added once, after the all-reduce
        return 0, 0, shape[0], 0
    return None
