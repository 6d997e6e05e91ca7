"""Execution layer: the matrix multiplies of the linear layers through oneDNN, with weights packed once.
Emits no events.

``F.linear`` on a CPU calls the BLAS library PyTorch was built with (Intel's MKL in the PyPI wheels). On
some processors, AMD's among them, MKL's float32 GEMM takes a code path that reaches about half of what
the cores can do: on a 2-core AMD EPYC, 48 rows times a 256 x 1024 weight ran at 95 GFLOP/s through
``F.linear`` and at 190 GFLOP/s through oneDNN, the other CPU library PyTorch ships. oneDNN does best when
the weight is reordered once into its own blocked layout (*packed*) instead of on every call; that matters
most for a decode step, whose few rows make each call short. Below ``PACKED_MIN_ROWS`` rows, though, oneDNN's
fixed cost per call (~15 µs on one thread of a Xeon) outweighs what it saves: there ``F.linear``'s
matrix-vector product is up to 2-3x faster, so a decode step of a few sequences multiplies through it.
The price: through oneDNN a row's result does not depend on how many rows are multiplied with it, while
``F.linear`` sums one row (a matrix-vector product) in another order than several, so a sequence's logits
now differ by rounding between a decode step of 1, of 2-15 and of 16 or more sequences (as they always did
with ``linear_backend="torch"``). Greedy tokens are still checked against transformers'.

This is what ``torch.compile`` itself does on a CPU when it freezes a model (its weight pre-packing pass),
with the same two operators: ``torch.ops.mkldnn._reorder_linear_weight`` packs, and
``torch.ops.mkldnn._linear_pointwise`` multiplies. They are private to PyTorch (the leading underscore), so
they are called here and, with the same arguments, from the native decode step
(``kernels/decode_step_cpu.cpp``) and nowhere else, and ``onednn_unusable_reason`` checks that they exist.

The sums are added in another order than MKL's, so the logits are not bitwise ``F.linear``'s; greedy
tokens are checked against Hugging Face's with both (``linear_backend="onednn"`` and ``"torch"``). A packed
weight is a second copy of the weight: the plain one stays, for the tied embedding and the checkpoint checks.
PyTorch's ``FlopCounterMode`` counts ``F.linear`` but knows nothing of this operator, so its FLOPs are
registered with the counter here: a step's FLOPs count the same whichever library multiplied.
"""

from __future__ import annotations

import math
import platform

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.flop_counter import register_flop_formula

from nanovllm_teach.i18n import Text, say

NOT_ON_CPU = Text(en="oneDNN linears run on a CPU, not on {device}", zh="oneDNN 线性层只在 CPU 上运行，不能在 {device} 上运行")
NOT_FLOAT32 = Text(en="oneDNN linears are used for float32 only, not {dtype}",
                   zh="oneDNN 线性层只用于 float32，不用于 {dtype}")
NO_ONEDNN = Text(en="this PyTorch build has no oneDNN (torch.backends.mkldnn.is_available() is False)",
                 zh="这个 PyTorch 构建没有 oneDNN（torch.backends.mkldnn.is_available() 为 False）")
NO_LINEAR_OPS = Text(en="this PyTorch ({version}) lacks the oneDNN linear operators",
                     zh="这个 PyTorch（{version}）缺少 oneDNN 的线性层算子")


def onednn_unusable_reason(device: torch.device, dtype: torch.dtype) -> str | None:
    """Why the linear layers cannot run through oneDNN here (None when they can)."""
    if device.type != "cpu":
        return say(NOT_ON_CPU, device=device.type)
    if dtype != torch.float32:
        return say(NOT_FLOAT32, dtype=dtype)
    if not torch.backends.mkldnn.is_available():
        return say(NO_ONEDNN)
    if not all(hasattr(torch.ops.mkldnn, op) for op in ("_reorder_linear_weight", "_linear_pointwise")):
        return say(NO_LINEAR_OPS, version=torch.__version__)
    return None


def auto_linear_backend(device: torch.device, dtype: torch.dtype) -> str:
    """What ``linear_backend="auto"`` is here: ``"onednn"`` on x86-64 CPUs, where it was measured to be
    faster; elsewhere (an Arm laptop, whose BLAS may well be the fast one) ``"torch"``, the plain ``F.linear``."""
    usable = onednn_unusable_reason(device, dtype) is None
    return "onednn" if usable and platform.machine().lower() in ("x86_64", "amd64") else "torch"


def pack(weight: torch.Tensor) -> torch.Tensor:
    """``weight`` (out_features, in_features) in oneDNN's layout for ``linear``."""
    return torch.ops.mkldnn._reorder_linear_weight(weight.detach())


# The fewest rows worth oneDNN's packed multiply. One thread of this project's Xeon, oneDNN's time over
# F.linear's for the shipped model's four weight shapes: 1.8-3.8x at 1-2 rows, 1.3-2.2x at 8, 0.9-1.3x at
# 16, 0.9-1.3x at 32-64 (benchmarks/RESULTS.md). The native decode step follows the same rule, except for a
# weight with long rows (every real Qwen3's), which it multiplies through oneDNN from 4 rows.
PACKED_MIN_ROWS = 16


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
           packed: torch.Tensor | None) -> torch.Tensor:
    """``x @ weight.T + bias``: through oneDNN when the layer holds a ``packed`` weight and ``x`` has at least
    ``PACKED_MIN_ROWS`` rows, else ``F.linear``."""
    if packed is None or x.numel() < PACKED_MIN_ROWS * x.size(-1):
        return F.linear(x, weight, bias)
    return torch.ops.mkldnn._linear_pointwise(x, packed, bias, "none", [], "")


def pack_linear_weights(model: nn.Module) -> int:
    """Pack the weight of every layer of ``model`` that multiplies through ``linear`` (the layers with a
    ``packed_weight`` attribute); returns how many were packed. A packed weight is a copy: a weight changed
    afterwards (other weights loaded into the model) must be packed again."""
    layers = [m for m in model.modules() if hasattr(m, "packed_weight")]
    for layer in layers:
        layer.packed_weight = pack(layer.weight)
    return len(layers)


if hasattr(torch.ops.mkldnn, "_linear_pointwise"):
    @register_flop_formula(torch.ops.mkldnn._linear_pointwise)
    def _linear_flops(x_shape, *args, out_shape, **kwargs) -> int:
        """One multiply and one add per input feature, for every output element."""
        return 2 * math.prod(out_shape) * x_shape[-1]
