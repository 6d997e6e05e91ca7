"""The oneDNN linear path: the same products as ``F.linear`` up to rounding, whatever the number of rows,
and counted by torch's FLOP counter. (The native decode step calls the same operator on the packed weights:
tests/test_compiled_decode.py.)"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from nanovllm_teach.layers.linear import MergedColumnParallelLinear
from nanovllm_teach.layers.onednn_linear import (PACKED_MIN_ROWS, linear, onednn_unusable_reason, pack,
                                                  pack_linear_weights)

pytestmark = pytest.mark.skipif(onednn_unusable_reason(torch.device("cpu"), torch.float32) is not None,
                                reason="this PyTorch has no oneDNN linears")


@pytest.mark.parametrize("rows", [1, 3, PACKED_MIN_ROWS, 48, 300])
def test_a_packed_weight_gives_f_linear_products_up_to_rounding(rows):
    torch.manual_seed(rows)
    x, weight, bias = torch.randn(rows, 96), torch.randn(80, 96), torch.randn(80)
    packed = pack(weight)
    torch.testing.assert_close(linear(x, weight, bias, packed), F.linear(x, weight, bias))
    if rows < PACKED_MIN_ROWS:  # too few rows to be worth oneDNN's fixed cost: F.linear's own products
        assert torch.equal(linear(x, weight, bias, packed), F.linear(x, weight, bias))
    else:
        # Through oneDNN a row's result does not depend on the rows computed with it, as long as they are
        # enough to go through it (F.linear's single row is a matrix-vector product, summed in another order).
        torch.testing.assert_close(linear(x[:PACKED_MIN_ROWS], weight, bias, packed),
                                   linear(x, weight, bias, packed)[:PACKED_MIN_ROWS], rtol=0, atol=0)


def test_the_flop_counter_counts_the_onednn_operator_as_f_linear():
    x, weight = torch.randn(7, 64), torch.randn(32, 64)
    counts = []
    for packed in (None, pack(weight)):
        with FlopCounterMode(display=False) as counter:
            linear(x, weight, None, packed)
        counts.append(counter.get_total_flops())
    assert counts == [2 * 7 * 64 * 32] * 2
