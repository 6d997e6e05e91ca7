"""Exercise ``graph_bucket``: which captured CUDA Graph a decode step replays, for its batch size.

Beside this definition: ``template.py`` to start from, ``solution.py`` the reference. Graded on the
simulated engine (an NVIDIA L4, where decode steps replay CUDA Graphs), by the ``CUDAGRAPH_REPLAY`` and
``RUN_MODEL`` events each step leaves and the scheduling decisions after them.
"""

from __future__ import annotations

from typing import Any

from nanovllm_teach.exercises.engine_grading import EngineExercise, Piece
from nanovllm_teach.exercises.scheduling_policy.workloads import MIXED_BURSTS
from nanovllm_teach.exercises.verdict import stats
from nanovllm_teach.exercises.worker import is_int
from nanovllm_teach.i18n import Text, say
from nanovllm_teach.trace.diff import DECISION_EVENTS, Divergence
from nanovllm_teach.trace.reader import Trace

ORDER = 110  # the course's order (``nanovllm-teach exercises``): after sizing the KV cache

# What the check says, after "your choose_graph_batch_size " / "你的 choose_graph_batch_size " in the verdict.
NOT_A_BUCKET = Text(en="returned {value!r}: it must return one of the captured batch sizes {sizes}, or None to "
                       "run the step eagerly",
                    zh="返回了 {value!r}：它必须返回已捕获的批大小 {sizes} 之一，或者返回 None 表示这一步以 eager 方式运行")
TOO_SMALL = Text(en="returned {value} for a batch of {batch} sequences: a graph of {value} cannot hold them",
                 zh="对一个有 {batch} 条序列的 batch 返回了 {value}：大小为 {value} 的图装不下它们")


def _check_bucket(args: tuple[Any, ...], result: Any) -> str | None:
    _, batch_size, graph_sizes = args
    if result is None:
        return None
    if not is_int(result) or result not in graph_sizes:
        return say(NOT_A_BUCKET, value=result, sizes=list(graph_sizes))
    if result < batch_size:
        return say(TOO_SMALL, value=result, batch=batch_size)
    return None


BATCH_OF = Text(en="that step's decode batch had {count} sequences", zh="那一步的解码 batch 有 {count} 条序列")


def _batch_context(divergence: Divergence, reference: Trace) -> str | None:
    """The size of the batch whose graph differs."""
    size = stats(divergence.reference).get("batch_size")
    return say(BATCH_OF, count=size) if divergence.event == "CUDAGRAPH_REPLAY" and isinstance(size, int) else None


TITLE = Text(en="Which CUDA Graph a decode step replays: the batch-size bucket",
             zh="解码步重放哪一个 CUDA Graph：批大小的档位")
# Hints from the gentlest to the strongest; none of them is the code.
HINTS = (
    Text(en="A graph replays exactly the batch size it was captured with; a smaller batch is padded up to it. "
            "Which buckets can hold this batch, and which of them wastes the least? And does a prefill step "
            "ever replay a graph?",
         zh="一个图只能按捕获时的批大小重放；更小的 batch 会被补齐到这个大小。哪些档位装得下这个 batch？其中哪个浪费最少？"
            "预填充步会重放图吗？"),
    Text(en="Prefill: None. Decode: walk graph_sizes (ascending) and return the first size that is at least "
            "batch_size; if none is, None (the step runs eagerly).",
         zh="预填充：返回 None。解码：按升序遍历 graph_sizes，返回第一个不小于 batch_size 的大小；如果没有，"
            "返回 None（这一步以 eager 方式运行）。"),
)


EXERCISE = EngineExercise(
    "graph_bucket", TITLE, "cuda_graphs.choose_graph_batch_size",
    ("choose_graph_batch_size",),
    HINTS,
    (Piece("choose_graph_batch_size", "nanovllm_teach.sim.runner:choose_graph_batch_size", _check_bucket,
           wire=("bool", "int", "list[int]")),),
    (MIXED_BURSTS,),
    ("CUDAGRAPH_REPLAY", "RUN_MODEL") + DECISION_EVENTS,
    _batch_context)
