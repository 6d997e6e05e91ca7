"""Execution layer: which slice of a checkpoint tensor a tensor-parallel rank holds, and where it goes.

Every sharded linear layer (``layers/linear.py``) loads a Hugging Face tensor by asking ``rank_slice``
which part of it this rank keeps and where that part sits in the rank's own parameter, then copies it:
``param.narrow(dim, offset, length).copy_(loaded.narrow(dim, start, length))``. Column-parallel layers
(``qkv_proj``, ``gate_up_proj``) split their output features, row-parallel ones (``o_proj``,
``down_proj``) their input features; several projections may be packed in one parameter (q, k and v in
``qkv_proj``; gate and up in ``gate_up_proj``). It is the ``tp_slice`` exercise's point. Pure Python, no
torch.

Emits no events (the model runner reports the loaded weights as MODEL_WEIGHTS_LOADED).
"""

from __future__ import annotations


def rank_slice(kind: str, shape: list[int], parts: list[int], part: int, tp_size: int,
               tp_rank: int) -> tuple[int, int, int, int] | None:
    """``(dim, start, length, offset)``: rank ``tp_rank`` of ``tp_size`` keeps ``length`` entries of the
    checkpoint tensor of ``shape`` along ``dim`` from ``start``, at ``offset`` along ``dim`` of its own
    parameter; None: it keeps none of it (its parameter holds zeros there).

    ``kind`` is ``"column"`` or ``"row"``; ``parts`` are the output sizes of the projections packed in the
    layer, in order (one for a layer that packs nothing), and the tensor is projection number ``part``: its
    weight (``[out, in]``) or its bias (``[out]``)."""
    if kind == "row":
        if len(shape) == 1:  # added once, after the all-reduce has summed every rank's partial output
            return (0, 0, shape[0], 0) if tp_rank == 0 else None
        size = shape[1] // tp_size
        return 1, tp_rank * size, size, 0
    size = parts[part] // tp_size
    return 0, tp_rank * size, size, sum(parts[:part]) // tp_size
