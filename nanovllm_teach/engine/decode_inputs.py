"""Execution layer: a step's input tensors, made fast from Python lists; a CPU decode step's kept in buffers
from step to step.

``as_tensor`` makes a small tensor from a list through ``array.array`` (packed in C) rather than
``torch.tensor`` (which reads the list item by item); ``padded_block_tables`` lays block tables out as one
flat list, padded to the longest.

A CUDA graph reads its inputs from buffers allocated once (``engine/cuda_graphs.py`` copies each step's
inputs into them). The CPU decode step does the same for another reason: at one sequence the whole step
is ~0.5 ms, and making its five input tensors anew took seven torch calls from Python (a few microseconds
each, and several times that right after a step, whose weights have pushed the interpreter's own data out
of the processor's cache). Here the numbers are written into two ``array.array`` buffers (one per dtype,
a copy in C), and the tensors are views of those buffers, made once per batch shape and reused.

A step's tensors hold their values until the next decode step writes new ones, as a graph's buffers do:
whoever needs them longer keeps a copy (``.clone()``); the recorder turns a tensor into a list when it
records it. Emits no events.
"""

from __future__ import annotations

import array
from typing import TYPE_CHECKING, NamedTuple

import torch

if TYPE_CHECKING:
    from nanovllm_teach.engine.batch import ScheduledSeq

# The array.array type codes of the dtypes the step's inputs are built in (C's long long, int and float).
ARRAY_TYPECODES = {torch.int64: "q", torch.int32: "i", torch.float32: "f"}


def as_tensor(values: list, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """``values`` as a tensor on ``device``."""
    if device.type == "cpu" and values and dtype in ARRAY_TYPECODES:
        # torch.tensor reads a list item by item through Python's sequence protocol (~2.5 µs for a few
        # items); an array.array packs it in C and torch.frombuffer wraps its memory (~0.7 µs).
        return torch.frombuffer(array.array(ARRAY_TYPECODES[dtype], values), dtype=dtype)
    return torch.tensor(values, dtype=dtype, device=device)


def padded_block_tables(seqs: list[ScheduledSeq]) -> tuple[list[int], int]:
    """Every sequence's block table, padded with -1 to the longest, one after another (a flat list); and
    that longest length."""
    width = max(len(seq.block_table) for seq in seqs)
    return [block for seq in seqs for block in seq.block_table + [-1] * (width - len(seq.block_table))], width


class DecodeTensors(NamedTuple):
    """The five inputs of a decode step of ``n`` sequences (views of ``StaticDecodeInputs``' buffers)."""

    input_ids: torch.Tensor  # (n,) int64
    positions: torch.Tensor  # (n,) int64
    slot_mapping: torch.Tensor  # (n,) int64
    context_lens: torch.Tensor  # (n,) int32
    block_tables: torch.Tensor  # (n, width) int32, padded with -1


class StaticDecodeInputs:
    """Buffers for the inputs of any decode step of up to ``max_num_seqs`` sequences of up to ``max_blocks``
    blocks each."""

    def __init__(self, max_num_seqs: int, max_blocks: int) -> None:
        longs = array.array("q", bytes(8 * 3 * max_num_seqs))
        ints = array.array("i", bytes(4 * max_num_seqs * (1 + max_blocks)))
        # torch.frombuffer shares the arrays' memory but does not stop an array from being resized (and
        # moved); a memoryview does: it is how the buffers are written, and it keeps them where they are.
        self.long_tensor = torch.frombuffer(longs, dtype=torch.int64)
        self.int_tensor = torch.frombuffer(ints, dtype=torch.int32)
        self.longs, self.ints = memoryview(longs), memoryview(ints)
        # Per (sequences, block-table width): at most max_num_seqs * max_blocks entries of five views.
        self.views: dict[tuple[int, int], DecodeTensors] = {}

    def fill(self, longs: list[int], ints: list[int], width: int) -> DecodeTensors:
        """The step's tensors holding ``longs`` (token ids, then positions, then slots, ``n`` of each) and
        ``ints`` (``n`` context lengths, then the ``n`` block tables, ``width`` each). More than the buffers
        hold raises ValueError (a memoryview's slice keeps its length)."""
        n = len(longs) // 3
        self.longs[:len(longs)] = array.array("q", longs)
        self.ints[:len(ints)] = array.array("i", ints)
        views = self.views.get((n, width))
        if views is None:
            ids, pos, slots = self.long_tensor[:3 * n].view(3, n).unbind()
            views = self.views[n, width] = DecodeTensors(
                ids, pos, slots, self.int_tensor[:n], self.int_tensor[n:n + n * width].view(n, width))
        return views
