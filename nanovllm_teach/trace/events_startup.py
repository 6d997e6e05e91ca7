"""The events of the engine's start-up, in the order it emits them: its settings, each tensor-parallel rank's
runtime, the weights, the warm-up, the KV cache's size, the CUDA graphs or the native decode step, and ready.

Part of the event contract (``events.py`` gathers these records into ``PAYLOADS``); torch-free, msgspec only.
Most of these events are the ModelRunner's (execution layer); ENGINE_INIT and ENGINE_READY are the LLMEngine's.
"""

from typing import Literal

from msgspec import UNSET, UnsetType

from nanovllm_teach.i18n import Text
from nanovllm_teach.trace.payload import Count, Duration, Field, Finite, Ids, Payload

_DEVICE = Field(str, "the device this ran on (cpu, cuda:0, ...)", volatile=True)


class EngineInit(Payload, kw_only=True):
    shown_from = "quiet"

    max_num_batched_tokens: Field(Count, "token budget of one step", unit="tokens")
    max_num_seqs: Field(Count, "most sequences in one batch", unit="seqs")
    max_model_len: Field(Count, "longest prompt + completion", unit="tokens")
    block_size: Field(Count, "tokens per KV block", unit="tokens")
    tp_size: Field(Count, "tensor-parallel ranks", unit="ranks")
    model: Field(str, "the model's name, its folder's name (version-1 traces: the folder's path)", volatile=True)
    enable_prefix_caching: Field(bool, "whether full prompt blocks are shared by their hash")
    policy: Field(str, 'scheduling policy: "continuous" or "static"')
    attention_backend: Field(str, "attention implementation the engine runs (torch, cpp, triton, flash_attn), "
                             "\"auto\" resolved (what it resolves to depends on the machine)", volatile=True)


class TpRuntimeInit(Payload, kw_only=True):
    actor = "ModelRunner"
    shown_from = "quiet"

    device: _DEVICE
    rank: Field(Count, "this rank's index")
    world_size: Field(Count, "number of ranks")
    backend: Field(str, 'torch.distributed backend ("none" on one rank)')
    dtype: Field(str, "dtype of the weights and activations")
    attention_backend: Field(str, "attention implementation this rank runs", volatile=True)
    linear_backend: Field(str | UnsetType, 'how its linear layers multiply: "torch" (F.linear) or "onednn" '
                          "(weights packed for oneDNN)") = UNSET
    num_threads: Field(int | UnsetType, "torch's intra-op CPU threads on this rank (utils/threads.py)",
                       volatile=True) = UNSET
    threads_reason: Field(str | UnsetType, "what decided num_threads", volatile=True) = UNSET
    omp_wait_policy: Field(str | UnsetType, 'the OpenMP wait policy libgomp was given ("unset": it spins a '
                           "while before sleeping)", volatile=True) = UNSET


class ModelWeightsLoaded(Payload, kw_only=True):
    actor = "ModelRunner"
    shown_from = "quiet"

    num_files: Field(Count, "safetensors files read", unit="files")
    num_keys: Field(Count, "tensors read", unit="tensors")
    dtype: Field(str, "dtype the weights were loaded in")
    num_params: Field(Count, "parameters on this rank", unit="params")
    num_params_by_rank: Field(Ids | UnsetType, "parameters on each rank (tensor parallelism only)",
                              unit="params") = UNSET


class Warmup(Payload, kw_only=True):
    actor = "ModelRunner"
    shown_from = "quiet"

    num_seqs: Field(Count, "sequences in the warm-up batch", unit="seqs")
    seq_len: Field(Count, "tokens per warm-up sequence", unit="tokens")
    sample_rows: Field(Count | UnsetType, "rows of logits the warm-up sampled (max_num_seqs, temperature > 0), "
                       "so the sampler's peak is seen too", unit="rows") = UNSET
    peak_bytes: Field(Count, "peak memory of the warm-up", unit="bytes", volatile=True)
    peak_source: Field(str | UnsetType, "how the peak was measured (e.g. torch.cuda.max_memory_allocated, "
                       "VmHWM after reset, ru_maxrss)", volatile=True) = UNSET
    seconds: Field(Duration, "wall time of the warm-up", unit="s", volatile=True)


_MEMORY = "memory reading after warm-up:"


class KvBudgetEstimate(Payload, kw_only=True):
    actor = "ModelRunner"
    shown_from = "quiet"
    told_by = frozenset({"num_blocks", "block_bytes"})

    device: _DEVICE
    total: Field(Count, f"{_MEMORY} total", unit="bytes", volatile=True)
    free: Field(Count, f"{_MEMORY} free", unit="bytes", volatile=True)
    used: Field(Count, f"{_MEMORY} used", unit="bytes", volatile=True)
    peak: Field(Count, f"{_MEMORY} peak of this process", unit="bytes", volatile=True)
    current: Field(Count, f"{_MEMORY} held by this process now", unit="bytes", volatile=True)
    utilization: Field(Finite, "share of the memory the engine may use (gpu_memory_utilization)")
    budget: Field(int, "bytes left for the KV cache (may be negative: nothing left)", unit="bytes",
                  volatile=True)
    block_bytes: Field(Count, "bytes of one KV block over all layers", unit="bytes")
    uncapped_num_blocks: Field(int | UnsetType, "what the memory formula alone allows", unit="blocks",
                               volatile=True) = UNSET
    cap_bytes: Field(int | None | UnsetType, "the cpu_kvcache_gib cap on CPU (None on GPU)", unit="bytes") = UNSET
    cap_reason: Field(str | UnsetType, "where the CPU cap came from: cpu_kvcache_gib as set, or when unset a share "
                      "of the memory available at start-up, or what the limits can fill", volatile=True) = UNSET
    limited_by: Field(Literal["memory", "cpu_kvcache_gib", "num_kvcache_blocks"] | UnsetType,
                      "what decided num_blocks", volatile=True) = UNSET
    graph_reserve_bytes: Field(int | None | UnsetType, "device memory held for the CUDA graphs' pool while the "
                               "budget was read (None: no graphs)", unit="bytes", volatile=True) = UNSET
    estimated_num_blocks: Field(int, "blocks the budget allows", unit="blocks", volatile=True)
    num_blocks: Field(Count, "blocks allocated", unit="blocks")
    explicit: Field(bool, "whether num_kvcache_blocks was given (then the estimate is not used)")
    block_size: Field(Count, "tokens per KV block", unit="tokens")
    num_layers: Field(Count, "decoder layers", unit="layers")
    num_kv_heads: Field(Count, "KV heads on this rank", unit="heads")
    head_dim: Field(Count, "size of one head", unit="elements")
    dtype_bytes: Field(Count, "bytes per element of the cache", unit="bytes")
    vocab_size: Field(Count, "vocabulary size (the logits' width)", unit="tokens")
    num_blocks_by_rank: Field(Ids | UnsetType, "blocks each rank could hold (tensor parallelism only)",
                              unit="blocks") = UNSET

    done = Text(en="sized the KV cache at {num_blocks} blocks of {block_bytes} bytes",
                zh="把 KV 缓存定为 {num_blocks} 个 {block_bytes} 字节的块")


class CudagraphCapture(Payload, kw_only=True):
    actor = "ModelRunner"
    shown_from = "quiet"

    batch_sizes: Field(Ids, "the batch sizes a decode graph was captured for", unit="seqs")
    seconds: Field(Duration, "wall time of the capture", unit="s", volatile=True)
    memory_bytes: Field(int, "device memory the graphs took", unit="bytes", volatile=True)
    reserved_bytes: Field(int | UnsetType, "memory reserved for them before the KV cache was sized",
                          unit="bytes", volatile=True) = UNSET


class DecodeCompile(Payload, kw_only=True):
    actor = "ModelRunner"
    shown_from = "quiet"

    seconds: Field(Duration, "wall time to get the native decode step: its build the first time on a machine, "
                   "then a load of the cached library", unit="s", volatile=True)
    batch_sizes: Field(Ids, "batch sizes compiled for (empty: the native step serves every batch size)",
                       unit="seqs")


class EngineReady(Payload, kw_only=True):
    shown_from = "quiet"

    num_kvcache_blocks: Field(Count, "KV blocks in the cache", unit="blocks")
    eos_token_id: Field(int | None, "the tokenizer's end-of-sequence id")
    attention_backend: Field(str, "attention implementation running", volatile=True)
    device: _DEVICE
