"""Execution layer: ``ModelRunner`` turns a scheduled batch (``engine/batch.py``) into one token id per sequence.

Start-up: build Qwen3 and load its weights (packed for oneDNN with ``linear_backend="onednn"``); warm up
with the largest prefill step the scheduler can form, and a sampling of ``max_num_seqs`` rows, so the peak
memory of any step is seen; on a GPU hold the largest decode graph's pool while memory is read; size the KV
cache from what is left (``KV_BUDGET_ESTIMATE``) and bind each attention layer to its slice; build the fast
decode paths, which hold the cache's addresses (``engine/decode_paths.py``).

Every step, ``run(batch)``:

- ``prepare_prefill``: the new tokens of every sequence flattened into one batch with absolute positions;
  ``cu_seqlens_q``/``cu_seqlens_k`` mark the boundaries (``k`` longer when part of the prompt is cached);
  ``slot_mapping`` says where each new token's K/V goes in the cache.
- ``prepare_decode``: one token per sequence, ``context_lens`` and ``block_tables`` to read the rest back
  (on a CPU written into buffers kept from step to step, ``engine/decode_inputs.py``).
- run the model: a decode step on a fast path where one takes it (a CUDA graph on a GPU, the native step on
  a CPU: ``engine/decode_paths.py``), else eagerly, keeping each sequence's last hidden state; sample (unless
  the native step took the argmax itself).

It knows nothing of scheduling policy and sees no ``Sequence``. Under tensor parallelism every rank builds
one (``engine/tp_workers.py``): rank 0 reports every rank's facts, the ranks agree on the smallest KV block
count, and only rank 0 samples.

A step reports, it does not record: while the engine records, ``run`` returns with its tokens what it did
(``RunReport``: the step's input tensors, how the forward pass ran, what the filters kept), which the engine
says as PREPARE_*, RUN_MODEL or CUDAGRAPH_REPLAY and SAMPLE; with recording off it builds none of it.

Emits (at start-up): TP_RUNTIME_INIT, MODEL_WEIGHTS_LOADED, WARMUP, KV_BUDGET_ESTIMATE (and, through the
decode paths, DECODE_COMPILE, CUDAGRAPH_CAPTURE).
"""

from __future__ import annotations

import time
from typing import Any

import torch
import torch.distributed as dist
from msgspec import UNSET

from nanovllm_teach.config import Config
from nanovllm_teach.engine.cuda_graphs import bind_cuda_device
from nanovllm_teach.engine import prefill_layout  # looked up at each call: the prepare_prefill exercise replaces it
from nanovllm_teach.engine.batch import ScheduledBatch, ScheduledSeq, warmup_batch
from nanovllm_teach.engine.decode_inputs import StaticDecodeInputs, as_tensor, padded_block_tables
from nanovllm_teach.engine.decode_paths import DecodePaths, filters_rows
from nanovllm_teach.engine.runner import RunOutput, RunReport
from nanovllm_teach.engine.tp_group import all_ranks, join
from nanovllm_teach.i18n import Text, say
from nanovllm_teach.layers.attention import Attention, make_attention_backend
from nanovllm_teach.layers.onednn_linear import pack_linear_weights
from nanovllm_teach.layers.sampler import SampleInputs, Sampled, Sampler, SamplingFilters
from nanovllm_teach.models.qwen3 import Qwen3ForCausalLM
from nanovllm_teach.trace.events import KvBudgetEstimate, ModelWeightsLoaded, TpRuntimeInit, Warmup
from nanovllm_teach.trace.recorder import Recorder
from nanovllm_teach.utils.context import Context, get_context, reset_context, set_context
from nanovllm_teach.utils.kv_slots import token_slot
from nanovllm_teach.models.loader import load_model
from nanovllm_teach.utils.threads import apply_thread_rule
from nanovllm_teach.utils.memory import (MemoryReading, kv_block_bytes, read_memory, reset_peak, size_kv_cache,
                                         zeros_committed_on_write)

TP_ALREADY_RUNNING = Text(en="a tensor-parallel engine is already running in this process: close() it first",
                          zh="这个进程里已经有一个张量并行（tensor-parallel）引擎在运行：请先 close() 它")
BLOCKS_DO_NOT_FIT = Text(
    en="num_kvcache_blocks={blocks} asks for {asked_gib:.2f} GiB ({block_bytes} bytes per block), but only "
       "{room_gib:.2f} GiB are left for the KV cache on {device} at gpu_memory_utilization={utilization}: at most "
       "{fit} blocks fit",
    zh="num_kvcache_blocks={blocks} 需要 {asked_gib:.2f} GiB（每块 {block_bytes} 字节），但在 gpu_memory_utilization="
       "{utilization} 下，{device} 上留给 KV 缓存的只有 {room_gib:.2f} GiB：最多放得下 {fit} 块")
NO_ROOM_FOR_KV = Text(en="no memory left for the KV cache: budget {budget} bytes, one block needs {block_bytes}; lower "
                         "max_num_batched_tokens or raise gpu_memory_utilization",
                      zh="没有内存留给 KV 缓存了：预算 {budget} 字节，而一块就需要 {block_bytes} 字节；请调低 "
                         "max_num_batched_tokens 或调高 gpu_memory_utilization")

def decode_slot(seq: ScheduledSeq, block_size: int) -> int:
    """The cache slot a decode step stores ``seq``'s newest token's K/V in: in its last block, after the others."""
    return token_slot(seq.block_table, seq.num_tokens - 1, block_size)


class ModelRunner:
    def __init__(self, config: Config, rank: int, recorder: Recorder, dist_init: str | None = None) -> None:
        """``dist_init``: the ``tcp://host:port`` where the ranks of a tensor-parallel group meet (chosen by
        rank 0, see ``engine/tp_workers.py``); unused when ``tensor_parallel_size`` is 1."""
        if dist.is_initialized():  # the layers take their shard from the process-wide default group
            raise RuntimeError(say(TP_ALREADY_RUNNING))
        self.config = config
        self.rank = rank
        self.world_size = config.tensor_parallel_size
        self.rec = recorder
        hf_config = config.hf_config
        self.block_size = config.kvcache_block_size
        self.device = bind_cuda_device(torch.device(config.device), rank, self.world_size)
        self.dtype: torch.dtype = getattr(torch, config.dtype)  # resolved once, in Config, for every rank
        self.attention_backend = config.attention_backend
        backend = join(self.device, dist_init, self.world_size, rank) if self.world_size > 1 else "none"
        runtime = dict(device=str(self.device), rank=rank, world_size=self.world_size, backend=backend,
                       dtype=str(self.dtype), attention_backend=self.attention_backend,
                       linear_backend=config.linear_backend)
        if self.device.type == "cpu":
            threads = apply_thread_rule(config.model, self.world_size, config.cpu_threads)
            runtime |= dict(num_threads=threads.num_threads, threads_reason=threads.reason,
                            omp_wait_policy=threads.wait_policy)
        for facts in all_ranks(runtime, self.world_size):  # workers have no recorder: rank 0 reports every rank
            if self.rec.enabled:
                self.rec.record("init", "runtime_ready", TpRuntimeInit(**facts))

        default_dtype = torch.get_default_dtype()
        torch.set_default_dtype(self.dtype)
        try:
            with torch.device(self.device):
                self.model = Qwen3ForCausalLM(hf_config)
        finally:
            torch.set_default_dtype(default_dtype)
        report = load_model(self.model, config.model)
        self.model.eval()
        if config.linear_backend == "onednn":
            pack_linear_weights(self.model)
        # Per-rank lists only under tensor parallelism (a one-rank trace keeps its shape); a collective: unguarded.
        num_params_by_rank = all_ranks(report.num_params, self.world_size) if self.world_size > 1 else UNSET
        if self.rec.enabled:
            self.rec.record("init", "weights_loaded", ModelWeightsLoaded(
                num_files=report.num_files, num_keys=report.num_keys, dtype=report.dtype,
                num_params=report.num_params, num_params_by_rank=num_params_by_rank))
        self.sampler = Sampler()
        backend = make_attention_backend(self.attention_backend)
        self.attention_layers = [m for m in self.model.modules() if isinstance(m, Attention)]
        for layer in self.attention_layers:
            layer.backend = backend

        self.decode_paths = DecodePaths(self.model, config, self.device, self.dtype, self.world_size)
        self.static_decode_inputs = StaticDecodeInputs(
            config.max_num_seqs, -(-config.max_model_len // self.block_size)) if self.device.type == "cpu" else None
        self.warmup_model()
        with self.decode_paths.largest_graph_held(self._bind_stand_in_cache) as graph_reserve_bytes:
            reading = read_memory(self.device)  # `used` includes the graph pool while it is held
        self.num_kvcache_blocks = self.allocate_kv_cache(reading, graph_reserve_bytes)
        self.decode_paths.build(self.rec, graph_reserve_bytes)  # after the cache: they bake in its addresses

    def warmup_model(self) -> None:
        """Run the largest prefill step the scheduler can form (``warmup_batch``), then sample
        ``max_num_seqs`` rows of logits at temperature 1 (the sampler's float32 copies of a decode batch's
        logits can outweigh a small model's prefill), so the KV budget sees the peak of any step. The peak is
        the warm-up's own, not the process's. (One prefill of ``max_model_len`` tokens, which no step runs
        when ``max_num_batched_tokens`` is smaller, cost a Qwen3-0.6B over a minute of a 2-core start-up.)"""
        if self.device.type == "cuda":
            torch.cuda.empty_cache()
        peak_source = reset_peak(self.device)
        num_seqs, seq_len = warmup_batch(self.config.max_model_len, self.config.max_num_batched_tokens,
                                         self.config.max_num_seqs)
        # Whole prompts with no blocks: computed like any prefill, stored nowhere.
        batch = ScheduledBatch(is_prefill=True, seqs=[
            ScheduledSeq(i, [0] * seq_len, 0, seq_len, [], 0.0, None) for i in range(num_seqs)])
        start = time.perf_counter()
        with self.rec.paused():  # the warm-up's own step is not part of anyone's trace
            self.run(batch)
        sample_rows = self.config.max_num_seqs
        with torch.inference_mode():
            hidden = torch.zeros(sample_rows, self.config.hf_config.hidden_size, dtype=self.dtype, device=self.device)
            logits = self.model.compute_logits(hidden)  # a collective under tensor parallelism: every rank runs it
            if logits is not None:
                self.sampler.sample(logits, *SampleInputs.warmup(sample_rows, self.device))
            del hidden, logits
        seconds = time.perf_counter() - start
        if self.rec.enabled:
            self.rec.record("init", "expose_peak_memory", Warmup(
                num_seqs=num_seqs, seq_len=seq_len, sample_rows=sample_rows, peak_bytes=read_memory(self.device).peak,
                peak_source=peak_source, seconds=round(seconds, 4)))
        if self.device.type == "cuda":
            torch.cuda.empty_cache()

    def _bind_kv_cache(self, kv_cache: torch.Tensor | None) -> None:
        """Give every attention layer its slice of ``kv_cache`` (None: unbind, the layers store nothing)."""
        self.kv_cache = kv_cache
        for i, attn in enumerate(self.attention_layers):
            attn.k_cache = kv_cache[0, i] if kv_cache is not None else torch.tensor([])
            attn.v_cache = kv_cache[1, i] if kv_cache is not None else torch.tensor([])

    def _bind_stand_in_cache(self, bind: bool) -> None:
        """A one-block cache to capture a graph on while memory is read (``bind``), or none."""
        layer = self.attention_layers[0]
        self._bind_kv_cache(torch.zeros(2, len(self.attention_layers), 1, self.block_size, layer.num_kv_heads,
                                        layer.head_dim, dtype=self.dtype, device=self.device) if bind else None)

    def allocate_kv_cache(self, reading: MemoryReading, graph_reserve_bytes: int | None = None) -> int:
        """Size the KV cache from ``reading`` (or take the configured number), allocate it and bind it to every
        layer. ``graph_reserve_bytes``: what the decode graphs' pool took, already inside ``reading.used``."""
        layer = self.attention_layers[0]
        num_layers = len(self.attention_layers)
        elem_bytes = torch.tensor([], dtype=self.dtype).element_size()
        block_bytes = kv_block_bytes(num_layers, self.block_size, layer.num_kv_heads, layer.head_dim, elem_bytes)
        cpu_cap = int(self.config.cpu_kvcache_gib * 2**30) if self.device.type == "cpu" else None
        sizing = size_kv_cache(reading, self.config.gpu_memory_utilization, block_bytes, cpu_cap,
                               self.config.num_kvcache_blocks)
        # Every rank holds its shard of every block, so the group has as many blocks as its tightest rank.
        by_rank = all_ranks((sizing.num_blocks, sizing.room), self.world_size)
        num_blocks_by_rank = [blocks for blocks, _ in by_rank]
        num_blocks, room = min(num_blocks_by_rank), min(room for _, room in by_rank)
        if sizing.explicit is not None and sizing.explicit * block_bytes > room:
            raise ValueError(say(BLOCKS_DO_NOT_FIT, blocks=sizing.explicit, block_bytes=block_bytes,
                                 asked_gib=sizing.explicit * block_bytes / 2**30, room_gib=max(room, 0) / 2**30,
                                 device=self.device, utilization=sizing.utilization, fit=max(room, 0) // block_bytes))
        if num_blocks < 1:
            raise RuntimeError(say(NO_ROOM_FOR_KV, budget=sizing.budget, block_bytes=block_bytes))
        shape = (2, num_layers, num_blocks, self.block_size, layer.num_kv_heads, layer.head_dim)
        self._bind_kv_cache(zeros_committed_on_write(shape, self.dtype) if self.device.type == "cpu" else
                            torch.zeros(shape, dtype=self.dtype, device=self.device))
        if self.rec.enabled:
            self.rec.record("init", sizing.reason, KvBudgetEstimate(
                **sizing.stats(num_blocks), graph_reserve_bytes=graph_reserve_bytes, block_size=self.block_size,
                num_layers=num_layers, num_kv_heads=layer.num_kv_heads, head_dim=layer.head_dim,
                dtype_bytes=elem_bytes, vocab_size=self.config.hf_config.vocab_size,
                cap_reason=self.config.cpu_kv_cap_reason if cpu_cap is not None else UNSET,
                num_blocks_by_rank=num_blocks_by_rank if self.world_size > 1 else UNSET))
        return num_blocks

    # ---- one step -------------------------------------------------------------------------------

    def _tensor(self, values: list, dtype: torch.dtype = torch.int64) -> torch.Tensor:
        return as_tensor(values, dtype, self.device)

    def _block_tables(self, seqs: list[ScheduledSeq]) -> torch.Tensor:
        tables, width = padded_block_tables(seqs)
        return self._tensor(tables, torch.int32).view(len(seqs), width)

    def prepare_prefill(self, seqs: list[ScheduledSeq]) -> tuple[torch.Tensor, torch.Tensor]:
        input_ids = [token for seq in seqs for token in seq.token_ids]
        positions, cu_seqlens_q, cu_seqlens_k, slot_mapping = prefill_layout.prefill_layout(
            [seq.num_cached_tokens for seq in seqs], [len(seq.token_ids) for seq in seqs],
            [seq.block_table for seq in seqs], self.block_size)
        # Keys longer than queries: part of the context is read back from the cache through block tables.
        block_tables = self._block_tables(seqs) if cu_seqlens_k[-1] > cu_seqlens_q[-1] else None
        ctx = Context(is_prefill=True,
                      cu_seqlens_q=self._tensor(cu_seqlens_q, torch.int32),
                      cu_seqlens_k=self._tensor(cu_seqlens_k, torch.int32),
                      max_seqlen_q=max(b - a for a, b in zip(cu_seqlens_q, cu_seqlens_q[1:])),
                      max_seqlen_k=max(b - a for a, b in zip(cu_seqlens_k, cu_seqlens_k[1:])),
                      slot_mapping=self._tensor(slot_mapping), block_tables=block_tables)
        set_context(ctx)
        return self._tensor(input_ids), self._tensor(positions)

    def prepare_decode(self, seqs: list[ScheduledSeq]) -> tuple[torch.Tensor, torch.Tensor]:
        bs = self.block_size
        longs = ([seq.token_ids[0] for seq in seqs] + [seq.num_cached_tokens for seq in seqs]
                 + [decode_slot(seq, bs) for seq in seqs])
        tables, width = padded_block_tables(seqs)
        ints = [seq.num_tokens for seq in seqs] + tables
        if self.static_decode_inputs is not None:  # a CPU: written into the buffers kept from step to step
            ids, pos, slot_mapping, context_lens, block_tables = self.static_decode_inputs.fill(longs, ints, width)
        else:  # one tensor per dtype, cut into the step's five inputs (views)
            ids, pos, slot_mapping = self._tensor(longs).view(3, len(seqs)).unbind()
            ints_tensor = self._tensor(ints, torch.int32)
            context_lens, block_tables = ints_tensor[:len(seqs)], ints_tensor[len(seqs):].view(len(seqs), width)
        ctx = Context(is_prefill=False, slot_mapping=slot_mapping, context_lens=context_lens,
                      block_tables=block_tables)
        set_context(ctx)
        return ids, pos

    def prepare_sample(self, seqs: list[ScheduledSeq]) -> SampleInputs:
        temperatures = self._tensor([seq.temperature for seq in seqs], torch.float32)
        # A seeded request's noise depends only on its seed and its position, never on the batch.
        seeds = [None if seq.seed is None else (seq.seed * 1_000_003 + seq.num_tokens) % 2**63 for seq in seqs]
        filters = None
        if any(filters_rows(seq) for seq in seqs):
            filters = SamplingFilters(self._tensor([seq.top_k for seq in seqs]),
                                      self._tensor([seq.top_p for seq in seqs], torch.float32),
                                      self._tensor([seq.min_p for seq in seqs], torch.float32))
        num_logprobs = [seq.logprobs for seq in seqs]
        return SampleInputs(temperatures, seeds, filters,
                            num_logprobs if any(n is not None for n in num_logprobs) else None)

    def run_model(self, input_ids: torch.Tensor, positions: torch.Tensor, is_prefill: bool,
                  greedy: bool = False) -> torch.Tensor | list[int] | None:
        """The logits of each sequence's next token (None on the ranks other than 0). ``greedy``: every row
        is greedy and the sampler has nothing else to do; the native decode step then returns the token ids
        themselves, a list (``DecodePaths.greedy_rows``)."""
        if self.decode_paths.takes(is_prefill, input_ids.size(0)):
            return self.decode_paths.run(input_ids, positions, greedy)
        hidden_states = self.model(input_ids, positions)
        if is_prefill:
            # Only each sequence's last position predicts a next token.
            hidden_states = hidden_states[get_context().cu_seqlens_q[1:].long() - 1]
        return self.model.compute_logits(hidden_states)

    @staticmethod
    def step_inputs(input_ids: torch.Tensor, positions: torch.Tensor, ctx: Context) -> dict[str, Any]:
        """The step's inputs by name, as PREPARE_PREFILL_TENSORS and PREPARE_DECODE_TENSORS show them."""
        if ctx.is_prefill:
            return dict(max_seqlen_q=ctx.max_seqlen_q, max_seqlen_k=ctx.max_seqlen_k,
                        input_ids=input_ids, positions=positions, cu_seqlens_q=ctx.cu_seqlens_q,
                        cu_seqlens_k=ctx.cu_seqlens_k, slot_mapping=ctx.slot_mapping, block_tables=ctx.block_tables)
        return dict(input_ids=input_ids, positions=positions, context_lens=ctx.context_lens,
                    slot_mapping=ctx.slot_mapping, block_tables=ctx.block_tables)

    def run(self, batch: ScheduledBatch) -> RunOutput:
        """The one call the engine makes: one sampled token id per sequence of ``batch`` (and, while the
        engine records, what it did)."""
        seqs, is_prefill = batch.seqs, batch.is_prefill
        report = None
        # A with block, not the @torch.inference_mode() decorator, which makes a new context manager for each
        # call (a few µs a step right after the native step: its weights push the interpreter's data out of cache).
        try:
            with torch.inference_mode():
                input_ids, positions = self.prepare_prefill(seqs) if is_prefill else self.prepare_decode(seqs)
                greedy = self.decode_paths.greedy_rows(is_prefill, seqs)
                out = self.run_model(input_ids, positions, is_prefill, greedy)
                if greedy:  # the sampler has nothing to do: no sampling inputs are built
                    sampled = Sampled(out, None, None)
                elif out is not None:
                    sampled = self.sampler.sample(out, *self.prepare_sample(seqs))
                else:  # the LM head gathers the full vocabulary row on rank 0 only: the other ranks stop here
                    sampled = Sampled([], None, None)
                if self.rec.enabled:
                    report = RunReport(self.step_inputs(input_ids, positions, get_context()),
                                       self.decode_paths.forward_pass(is_prefill, len(seqs)), sampled.num_kept)
        finally:
            reset_context()
        return RunOutput(sampled.token_ids, sampled.logprobs, report)

    def close(self) -> None:
        """Nothing to release: the tensors go with the runner (a tensor-parallel group closes its own)."""
