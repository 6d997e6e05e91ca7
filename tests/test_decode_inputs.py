"""StaticDecodeInputs: a CPU decode step's tensors are views of buffers written anew each step."""

import pytest
import torch

from nanovllm_teach.engine.decode_inputs import StaticDecodeInputs


def fill(inputs: StaticDecodeInputs, ids, pos, slots, lens, tables):
    width = max(len(t) for t in tables)
    flat = [b for t in tables for b in t + [-1] * (width - len(t))]
    return inputs.fill(ids + pos + slots, lens + flat, width)


def test_each_step_sees_its_own_values_in_every_shape():
    inputs = StaticDecodeInputs(max_num_seqs=4, max_blocks=3)
    steps = [([5], [9], [17], [10], [[2]]),
             ([1, 2, 3], [4, 5, 6], [7, 8, 9], [5, 6, 7], [[0], [1, 2], [3, 4, 5]]),
             ([5], [9], [17], [10], [[2]]),  # a shape seen before: the same views, the new values
             ([8, 7], [6, 5], [4, 3], [2, 1], [[1, 2, 0], [3]])]
    for ids, pos, slots, lens, tables in steps:
        out = fill(inputs, ids, pos, slots, lens, tables)
        assert out.input_ids.tolist() == ids and out.positions.tolist() == pos
        assert out.slot_mapping.tolist() == slots and out.context_lens.tolist() == lens
        width = out.block_tables.size(1)
        assert out.block_tables.tolist() == [t + [-1] * (width - len(t)) for t in tables]
        assert out.input_ids.dtype == torch.int64 and out.block_tables.dtype == torch.int32
        assert all(t.is_contiguous() for t in (out.input_ids, out.context_lens, out.block_tables))


def test_a_step_larger_than_the_buffers_raises_instead_of_writing_past_them():
    inputs = StaticDecodeInputs(max_num_seqs=2, max_blocks=1)
    with pytest.raises(ValueError):
        fill(inputs, [1, 2, 3], [1, 2, 3], [1, 2, 3], [1, 1, 1], [[0], [1], [2]])
