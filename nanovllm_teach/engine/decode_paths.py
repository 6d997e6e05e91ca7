"""Execution layer: the fast ways a decode step runs — a CUDA graph replayed on a GPU, the native compiled step
on a CPU — built at start-up, and which one a step takes.

An eager step runs the model module by module (``ModelRunner.run_model``), a few hundred small operations
launched from Python. A decode step, one token per sequence, can skip that:

- on a GPU, a CUDA graph (``engine/cuda_graphs.py``) captured once per batch-size bucket is replayed, the
  batch padded to its bucket; while the KV budget is read, the largest graph holds its memory pool, so the
  cache leaves room for it;
- on a CPU, one call into the native decode step (``engine/compiled_decode.py``) runs every layer and the
  LM head, and when every row is greedy with nothing else asked of the sampler, the argmax too
  (``greedy_rows``): its token ids skip the sampler.

Both bake in the KV cache's addresses, so they are built once it is bound (``build``). A prefill always runs
eagerly; so does a decode step when neither path can take it (``eager_reason`` says why).

Emits: DECODE_COMPILE, CUDAGRAPH_CAPTURE.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch
from torch import nn

from nanovllm_teach.config import Config
from nanovllm_teach.engine import compiled_decode
from nanovllm_teach.engine.batch import ScheduledSeq
from nanovllm_teach.engine.compiled_decode import CompiledDecode
from nanovllm_teach.engine.cuda_graphs import (DecodeGraphs, choose_graph_batch_size, eager_reason, graph_batch_sizes,
                                               largest_graph_held, why_no_graphs)
from nanovllm_teach.engine.runner import ForwardPass
from nanovllm_teach.trace.events import CudagraphCapture, DecodeCompile
from nanovllm_teach.trace.recorder import Recorder
from nanovllm_teach.utils.context import get_context


def filters_rows(seq: ScheduledSeq) -> bool:
    """Whether a sequence's sampling cuts its distribution (top-k, top-p or min-p)."""
    return seq.top_k > 0 or seq.top_p < 1 or seq.min_p > 0


class DecodePaths:
    def __init__(self, model: nn.Module, config: Config, device: torch.device, dtype: torch.dtype,
                 world_size: int) -> None:
        self.model, self.config, self.device, self.dtype, self.world_size = model, config, device, dtype, world_size
        self.graph_skip = why_no_graphs(device, config.enforce_eager, config.attention_backend)
        self.graphs: DecodeGraphs | None = None  # the warm-up and the capture itself run eagerly
        self.native: CompiledDecode | None = None
        self.native_skip: str | None = None  # why there is no native step (``build`` decides)

    def _capture(self, batch_sizes: list[int]) -> DecodeGraphs:
        return DecodeGraphs.capture(self.model, batch_sizes=batch_sizes, max_model_len=self.config.max_model_len,
                                    block_size=self.config.kvcache_block_size,
                                    hidden_size=self.config.hf_config.hidden_size, dtype=self.dtype,
                                    device=self.device)

    @contextmanager
    def largest_graph_held(self, bind_stand_in_cache: Callable[[bool], None]) -> Iterator[int | None]:
        """While inside, the largest decode graph holds its pool (captured on a one-block stand-in cache that
        ``bind_stand_in_cache(True)`` binds and ``(False)`` unbinds), so a memory reading counts it as used;
        yields the bytes it took (None: this engine captures no graphs)."""
        if self.graph_skip is not None:
            yield None
            return
        bind_stand_in_cache(True)
        try:
            with largest_graph_held(self._capture, graph_batch_sizes(self.config.max_num_seqs), self.device) as taken:
                yield taken
        finally:
            bind_stand_in_cache(False)

    def build(self, rec: Recorder, graph_reserve_bytes: int | None) -> None:
        """Once the KV cache is bound: the native step where it can run (the time is the library's build, on
        a machine's first start, or its load, and the step's binding), the decode graphs where they can."""
        hf_config = self.config.hf_config
        start = time.perf_counter()
        self.native_skip = compiled_decode.unusable_reason(
            self.device, self.world_size, self.dtype, self.config.attention_backend, self.config.enforce_eager,
            bool(getattr(hf_config, "attention_bias", False)),
            {"hidden_size": hf_config.hidden_size, "intermediate_size": hf_config.intermediate_size})
        if self.native_skip is None:
            self.native = CompiledDecode(self.model)
            if rec.enabled:
                rec.record("init", "compile_decode_step", DecodeCompile(
                    seconds=round(time.perf_counter() - start, 4), batch_sizes=[]))
        if self.graph_skip is None:
            free_before = torch.cuda.mem_get_info(self.device)[0]
            start = time.perf_counter()
            self.graphs = self._capture(graph_batch_sizes(self.config.max_num_seqs))
            if rec.enabled:
                rec.record("init", "capture_decode_graphs", CudagraphCapture(
                    batch_sizes=self.graphs.batch_sizes, seconds=round(time.perf_counter() - start, 4),
                    memory_bytes=free_before - torch.cuda.mem_get_info(self.device)[0],
                    reserved_bytes=graph_reserve_bytes))

    def _graph_batch_size(self, is_prefill: bool, num_seqs: int) -> int | None:
        return None if self.graphs is None else choose_graph_batch_size(is_prefill, num_seqs, self.graphs.batch_sizes)

    def takes(self, is_prefill: bool, num_seqs: int) -> bool:
        """Whether a step runs on one of these paths (else eagerly)."""
        return not is_prefill and (self.native is not None or self._graph_batch_size(False, num_seqs) is not None)

    def greedy_rows(self, is_prefill: bool, seqs: list[ScheduledSeq]) -> bool:
        """Whether this step's token ids come out of the native step itself: every row greedy, no filter, no
        log-probabilities (the sampler would take the argmax of the same logits)."""
        return (self.native is not None and not is_prefill
                and not any(seq.temperature > 0 or filters_rows(seq) or seq.logprobs is not None for seq in seqs))

    def run(self, input_ids: torch.Tensor, positions: torch.Tensor, greedy: bool) -> torch.Tensor | list[int] | None:
        """A decode step that ``takes`` says runs here: the logits (None on the ranks other than 0), or with
        ``greedy`` the token ids themselves."""
        graph_bs = self._graph_batch_size(False, input_ids.size(0))
        if graph_bs is not None:
            return self.model.compute_logits(self.graphs.replay(input_ids, positions, get_context(), graph_bs))
        step = self.native.greedy_token_ids if greedy else self.native  # the LM head (and the argmax) inside
        return step(input_ids, positions)

    def forward_pass(self, is_prefill: bool, num_seqs: int) -> ForwardPass:
        """How a step of ``num_seqs`` sequences ran (the same choices ``takes`` and ``run`` made, told)."""
        graph_bs = self._graph_batch_size(is_prefill, num_seqs)
        if graph_bs is not None:
            return ForwardPass("graph", num_seqs, graph_batch_size=graph_bs)
        mode = "compiled" if self.native is not None and not is_prefill else "eager"
        return ForwardPass(mode, num_seqs, eager_reason=eager_reason(is_prefill, self.graph_skip))
