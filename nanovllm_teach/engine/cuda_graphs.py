"""Execution layer: CUDA graphs for decode steps, as nano-vllm captures them.

A decode step of a small model is dominated by launch overhead: hundreds of small kernels, each launched
from Python. A CUDA graph records those launches once and replays them with one call. A graph replays
exactly what it recorded — the same kernels on the same memory addresses with the same shapes — so:

- the model reads its inputs from **static buffers** (``input_ids``, ``positions``, ``slot_mapping``,
  ``context_lens``, ``block_tables``) and writes into a static ``outputs`` buffer; a step copies its
  tensors into the first rows of the buffers before replaying;
- one graph per **batch-size bucket**: 1, 2, 4, 8, then every 16 up to ``min(max_num_seqs, 512)``;
  a batch of 11 replays the graph for 16, and its rows 11..15 are padding (slot -1: store nothing;
  context length 0: attend to nothing);
- every attention kernel must read lengths on the device, never on the host, and launch a grid that
  does not depend on them: the ``triton`` and ``flash_attn`` backends do; the ``torch`` backend selects
  the slots to store with a boolean mask (a data-dependent shape), so it always runs eagerly.

Prefill always runs eagerly (its shape changes every step), and so does a decode batch larger than the
largest bucket, anything on a CPU (where decode runs the native step of ``engine/compiled_decode.py``
instead, the CPU's counterpart of these graphs), everything under ``enforce_eager``, and the Triton kernels while they run in the Triton interpreter
(``TRITON_INTERPRET=1``: Python code, which a graph cannot record). Each case has a short code, the
``eager_reason`` of the RUN_MODEL event: ``prefill``, ``enforce_eager``, ``no_cuda``,
``backend_cannot_capture``, ``batch_above_largest_graph``.

The bucket arithmetic and the eager-or-graph decision are plain Python and tested on any machine; only
``DecodeGraphs.capture`` needs a GPU. ``engine/decode_paths.py`` captures the graphs (CUDAGRAPH_CAPTURE) and
replays them; the engine says each replay (CUDAGRAPH_REPLAY) from what the model runner reports.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import nn

from nanovllm_teach.utils.context import Context, reset_context, set_context

MAX_GRAPH_BATCH_SIZE = 512
CAPTURABLE_BACKENDS = frozenset({"triton", "flash_attn"})


def bind_cuda_device(device: torch.device, rank: int, world_size: int) -> torch.device:
    """The device this rank runs on, made the process's current CUDA device (CPU devices pass through).

    Triton launches and CUDA-graph capture go to the *current* device, not to the device of the tensors:
    an engine on ``cuda:1`` that never called ``set_device`` would launch its kernels on ``cuda:0``."""
    if device.type != "cuda":
        return device
    if world_size > 1:
        device = torch.device("cuda", rank)  # one GPU per rank, as in nano-vllm
    elif device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    torch.cuda.set_device(device)
    return device


def graph_batch_sizes(max_num_seqs: int, limit: int = MAX_GRAPH_BATCH_SIZE) -> list[int]:
    """The buckets nano-vllm captures: 1, 2, 4, 8, then 16, 32, ... up to ``min(max_num_seqs, limit)``."""
    largest = min(max_num_seqs, limit)
    return [bs for bs in (1, 2, 4, 8) if bs <= largest] + list(range(16, largest + 1, 16))


@dataclass(frozen=True)
class CaptureSkip:
    """Why an engine captures no decode graphs: ``code`` is RUN_MODEL's ``eager_reason``, ``why`` a sentence."""

    code: str
    why: str


def why_no_graphs(device: torch.device, enforce_eager: bool, backend: str) -> CaptureSkip | None:
    """Why no decode graphs are captured for this engine (None: capture them)."""
    if enforce_eager:
        return CaptureSkip("enforce_eager", "enforce_eager is set")
    if device.type != "cuda":
        return CaptureSkip("no_cuda", f"CUDA graphs need a CUDA device, this engine runs on {device.type}")
    if backend not in CAPTURABLE_BACKENDS:
        return CaptureSkip("backend_cannot_capture", f"the {backend} attention backend is not capturable "
                           "(it stores K/V through a data-dependent mask)")
    from nanovllm_teach import kernels  # both capturable backends store K/V with our Triton kernel
    if kernels.INTERPRETED:
        return CaptureSkip("backend_cannot_capture", "TRITON_INTERPRET=1: the Triton kernels run in the Python "
                           "interpreter, whose launches a CUDA graph cannot record")
    return None


def capture_skip_reason(device: torch.device, enforce_eager: bool, backend: str) -> str | None:
    """``why_no_graphs`` as a sentence (None: graphs are captured)."""
    skip = why_no_graphs(device, enforce_eager, backend)
    return None if skip is None else skip.why


def eager_reason(is_prefill: bool, skip: CaptureSkip | None) -> str:
    """RUN_MODEL's ``eager_reason`` for a step that did not replay a graph."""
    if is_prefill:
        return "prefill"
    return skip.code if skip is not None else "batch_above_largest_graph"


def choose_graph_batch_size(is_prefill: bool, batch_size: int, graph_sizes: Sequence[int]) -> int | None:
    """The bucket to replay for this step — the smallest one that holds the batch — or None to run eagerly
    (prefill, no graphs captured, or a batch larger than every bucket)."""
    if is_prefill:
        return None
    return next((size for size in graph_sizes if size >= batch_size), None)


@dataclass
class DecodeGraphs:
    """One captured graph per bucket, and the static buffers they all read and write."""

    batch_sizes: list[int]
    graphs: dict[int, torch.cuda.CUDAGraph]
    input_ids: torch.Tensor
    positions: torch.Tensor
    slot_mapping: torch.Tensor
    context_lens: torch.Tensor
    block_tables: torch.Tensor
    outputs: torch.Tensor

    @classmethod
    @torch.inference_mode()
    def capture(cls, model: nn.Module, *, batch_sizes: list[int], max_model_len: int, block_size: int,
                hidden_size: int, dtype: torch.dtype, device: torch.device) -> "DecodeGraphs":
        """Capture ``model``'s decode forward pass for every bucket of ``batch_sizes`` (ascending; the KV
        cache must be bound already)."""
        sizes = list(batch_sizes)
        max_bs = sizes[-1]
        max_blocks = -(-max_model_len // block_size)  # the widest block table a sequence can have
        with torch.device(device):
            buffers = dict(
                input_ids=torch.zeros(max_bs, dtype=torch.int64),
                positions=torch.zeros(max_bs, dtype=torch.int64),
                # -1: the capture runs write nothing into the KV cache.
                slot_mapping=torch.full((max_bs,), -1, dtype=torch.int64),
                context_lens=torch.zeros(max_bs, dtype=torch.int32),
                block_tables=torch.zeros(max_bs, max_blocks, dtype=torch.int32),
                outputs=torch.zeros(max_bs, hidden_size, dtype=dtype),
            )
        graphs: dict[int, torch.cuda.CUDAGraph] = {}
        pool = None
        # Largest first: its memory pool is then big enough for every smaller graph to share it.
        for bs in reversed(sizes):
            set_context(Context(is_prefill=False, slot_mapping=buffers["slot_mapping"][:bs],
                                context_lens=buffers["context_lens"][:bs],
                                block_tables=buffers["block_tables"][:bs]))
            try:
                # One eager run first: Triton compiles its kernels on first launch, which a capture cannot do.
                buffers["outputs"][:bs] = model(buffers["input_ids"][:bs], buffers["positions"][:bs])
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph, pool):
                    buffers["outputs"][:bs] = model(buffers["input_ids"][:bs], buffers["positions"][:bs])
            finally:
                reset_context()
            if pool is None:
                pool = graph.pool()
            graphs[bs] = graph
            torch.cuda.synchronize(device)
        return cls(batch_sizes=sizes, graphs=graphs, **buffers)

    def replay(self, input_ids: torch.Tensor, positions: torch.Tensor, ctx: Context,
               graph_batch_size: int) -> torch.Tensor:
        """Run one decode step through the ``graph_batch_size`` graph; the hidden states of its real rows."""
        bs = input_ids.size(0)
        self.input_ids[:bs] = input_ids
        self.positions[:bs] = positions
        # Rows bs.. are padding: slot -1 stores nothing, context length 0 attends to nothing.
        self.slot_mapping.fill_(-1)
        self.slot_mapping[:bs] = ctx.slot_mapping
        self.context_lens.zero_()
        self.context_lens[:bs] = ctx.context_lens
        # Columns past this step's widest table keep stale ids; no kernel reads past context_lens.
        self.block_tables[:bs, :ctx.block_tables.size(1)] = ctx.block_tables
        self.graphs[graph_batch_size].replay()
        return self.outputs[:bs]


@contextmanager
def largest_graph_held(capture: Callable[[list[int]], DecodeGraphs], batch_sizes: list[int],
                       device: torch.device) -> Iterator[int]:
    """Capture only the largest bucket and hold it while inside; yields the device memory it took.

    Every smaller graph shares the largest one's pool, so this is what the real capture will take: held
    while the memory is read, it is counted as used before the KV cache is sized (the real graphs can only
    be captured after the cache exists, since they bake in its addresses)."""
    free_before = torch.cuda.mem_get_info(device)[0]
    probe = capture(batch_sizes[-1:])
    torch.cuda.empty_cache()  # the eager run before the capture left cached blocks that are not the pool's
    try:
        yield free_before - torch.cuda.mem_get_info(device)[0]
    finally:
        del probe
        torch.cuda.empty_cache()
