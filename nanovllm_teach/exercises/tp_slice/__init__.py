"""Exercise ``tp_slice``: the slice of ``qkv_proj``, ``o_proj``, ``gate_up_proj``, ``down_proj`` a rank holds.

Beside this definition: ``template.py`` to start from, ``solution.py`` the reference. The learner's
``rank_slice`` takes and returns plain numbers; the linear layers (``layers/linear.py``) copy the slice it
names. Graded by what every rank of 1, 2 and 4 ranks holds after loading a small Qwen3 through the engine's
own loader (``grading``).
"""

from __future__ import annotations

from typing import Any

from nanovllm_teach.exercises.engine_grading import Piece
from nanovllm_teach.exercises.tp_slice.grading import POINT, ShardExercise
from nanovllm_teach.exercises.worker import is_int
from nanovllm_teach.i18n import Text, say

ORDER = 120  # the course's order (``nanovllm-teach exercises``): after one GPU's pieces

# What the check says, after "your rank_slice " / "你的 rank_slice " in the verdict.
NOT_A_SLICE = Text(en="returned {value}: it must return four ints (dim, start, length, offset), or None when the "
                      "rank keeps none of the tensor",
                   zh="返回了 {value}：它必须返回四个 int（dim、start、length、offset），或者在这个 rank "
                      "一点也不留时返回 None")
NO_SUCH_DIM = Text(en="returned dim {dim}, but the tensor of shape {shape} has dimensions 0 to {last}",
                   zh="返回的 dim 是 {dim}，但形状为 {shape} 的张量只有第 0 到第 {last} 维")
OUTSIDE = Text(en="returned start {start} and length {length} along dim {dim}, outside the tensor's {size} entries "
                  "there (shape {shape})",
               zh="沿第 {dim} 维返回了 start {start} 和 length {length}，超出了张量在这一维的 {size} 项（形状 {shape}）")
NEGATIVE_OFFSET = Text(en="returned offset {offset}: a place in the rank's parameter counts from 0",
                       zh="返回的 offset 是 {offset}：在 rank 的参数中的位置从 0 开始计数")


def _check_slice(args: tuple[Any, ...], result: Any) -> str | None:
    shape = args[1]
    if result is None:
        return None
    if not isinstance(result, (list, tuple)) or len(result) != 4 or not all(is_int(v) for v in result):
        return say(NOT_A_SLICE, value=repr(result)[:200])
    dim, start, length, offset = result
    if not 0 <= dim < len(shape):
        return say(NO_SUCH_DIM, dim=dim, shape=list(shape), last=len(shape) - 1)
    if start < 0 or length < 1 or start + length > shape[dim]:
        return say(OUTSIDE, start=start, length=length, dim=dim, size=shape[dim], shape=list(shape))
    if offset < 0:
        return say(NEGATIVE_OFFSET, offset=offset)
    return None


TITLE = Text(en="The slice of a weight a tensor-parallel rank holds: qkv_proj, o_proj, gate_up_proj, down_proj",
             zh="张量并行的 rank 持有权重的哪一片：qkv_proj、o_proj、gate_up_proj、down_proj")
# Hints from the gentlest to the strongest; none of them is the code.
HINTS = (
    Text(en="Draw the weight [out, in] of each projection and cut it into tp_size equal pieces: across the rows "
            "(output features) for a column-parallel layer, across the columns (input features) for a row-parallel "
            "one. In a packed layer, where does a rank's piece of k_proj go: after what, in its own parameter? And "
            "who adds a row-parallel layer's bias, if the ranks' outputs are summed afterwards?",
         zh="画出每个投影的权重 [out, in]，把它切成 tp_size 等份：列并行的层沿行（输出特征）切，行并行的层沿列"
            "（输入特征）切。在打包的层里，一个 rank 的那一份 k_proj 放在它自己参数中的哪里：排在什么之后？"
            "如果各 rank 的输出之后还要相加，行并行层的偏置该由谁来加？"),
    Text(en="Column: the share of projection part is parts[part] // tp_size rows, rank r's starts r shares into "
            "the tensor, and in the rank's parameter it comes after the shares of the parts before it. Row: a weight "
            "gives each rank shape[1] // tp_size columns the same way (nothing is packed); a bias (one dimension) "
            "goes whole to rank 0 and to no other rank.",
         zh="列并行：第 part 个投影的一份是 parts[part] // tp_size 行，rank r 的那一份在张量中从第 r 份开始，"
            "在 rank 的参数中排在它之前各投影的那几份之后。行并行：权重同样给每个 rank shape[1] // tp_size 列"
            "（没有打包）；偏置（一维）整个给 rank 0，不给其他 rank。"),
)


EXERCISE = ShardExercise(
    "tp_slice", TITLE, Text(en="rank_slice.rank_slice, called by the linear layers' weight_loader",
                             zh="rank_slice.rank_slice，由线性层的 weight_loader 调用"),
    ("rank_slice",),
    HINTS,
    (Piece("rank_slice", POINT, _check_slice, wire=("str", "list[int]", "list[int]", "int", "int", "int")),))
