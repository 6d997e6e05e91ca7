"""The TEACHING event contract: one record type per event, each field with its type, unit and meaning.

Part of the torch-free trace layer (msgspec only). Every line of a trace file is one event
``{"i", "t_ns", "event", "phase", "step", "reason", "stats"}``; ``stats`` is the event's payload, one of the
``Payload`` types below, chosen by ``event``. ``load_trace`` checks every payload against its type, the
recorder does on request (``TraceRecorder(validate=True)``), and ``docs/trace-format.md`` is generated from
these declarations (``python -m nanovllm_teach.trace.docs``).

A field is declared with ``Field(type, meaning, unit=..., volatile=...)``. *Volatile* fields say how this
machine ran (clocks, memory, device, paths), not what the engine decided: ``diff_traces`` ignores them.
A field that is ``| UnsetType = UNSET`` may be absent (newer fields, which older traces lack, and tensor
values the recorder's detail budget dropped); an absent field is not a key of the payload.

Each event's class also says what the event *means*, in class attributes above its fields (the defaults
are in ``payload.Payload``): ``changes_state`` (the state interpreter, ``state.py``, applies it),
``decision`` (a scheduling or block decision: ``diff_decisions`` compares these), ``acts_on_sequence``
(done to one sequence or its blocks), ``carries_tensors``, ``shown_from`` (the least console verbosity that
prints it), ``actor`` (whose work it reports: ``LAYERS`` gives the class's layer),
and ``done``, what the engine did, as the verb phrase diff's sentences are made of: a ``Text`` of the
event's fields in both languages, which ``did`` says. Every reader asks the class; ``events_where`` lists
the events that share a meaning.

Adding a field: one ``Field`` line here plus the emit site. Adding an event: one ``Payload`` class here
(with what it means), its entry in ``PAYLOADS``, its reason sentences in ``reasons.py``, one emit line, and
a case in ``state.py`` if it changes state.
"""

from typing import Any, Callable, Literal

import msgspec
from msgspec import UNSET, UnsetType

from nanovllm_teach.i18n import Text, say
from nanovllm_teach.trace.payload import (
    ContractError, Count, Duration, Field, Finite, Ids, Payload, explain_error, field_meta, show,
)

SeqStatus = Literal["WAITING", "RUNNING", "FINISHED"]

# ---- start-up ---------------------------------------------------------------------------------------------

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


# ---- generate() and requests ------------------------------------------------------------------------------

class GenerateStart(Payload, kw_only=True):
    shown_from = "quiet"

    n_prompts: Field(Count, "prompts in this generate() call", unit="requests")


class GenerateFinish(Payload, kw_only=True):
    shown_from = "quiet"

    total_steps: Field(Count, "engine steps this call ran", unit="steps")
    prefill_steps: Field(Count, "of which prefill steps", unit="steps")
    decode_steps: Field(Count, "of which decode steps", unit="steps")
    n_outputs: Field(Count, "outputs returned", unit="requests")


class RequestEnqueue(Payload, kw_only=True):
    actor = "Scheduler"
    changes_state = True
    told_by = frozenset({"seq_id", "prompt_len"})

    seq_id: Field(Count, "the new sequence")
    prompt_len: Field(Count, "prompt length", unit="tokens")
    max_tokens: Field(Count, "most completion tokens", unit="tokens")
    temperature: Field(Finite, "sampling temperature (0: greedy)")
    ignore_eos: Field(bool, "whether the end-of-sequence token is ignored")
    seed: Field(int | None, "the request's sampling seed, if any")
    waiting_len: Field(Count, "waiting queue length after it joined", unit="seqs")
    prompt: Field(str | UnsetType, "the prompt's text, in traces made to show it (the engine does not write it)") = UNSET

    done = Text(en="enqueued seq {seq_id} ({prompt_len} prompt tokens)",
                zh="让序列 {seq_id} 进入等待队列（prompt 有 {prompt_len} 个 token）")


class RequestAbort(Payload, kw_only=True):
    shown_from = "quiet"
    acts_on_sequence = True
    told_by = frozenset({"seq_id"})

    seq_id: Field(Count, "the aborted sequence")
    num_completion_tokens: Field(Count, "tokens it had generated", unit="tokens")

    done = Text(en="aborted seq {seq_id}", zh="中止了序列 {seq_id}")


# ---- scheduling and the KV cache --------------------------------------------------------------------------

_QUEUES = "queue length after scheduling"


class SchedulePrefill(Payload, kw_only=True):
    actor = "Scheduler"
    changes_state = decision = True
    told_by = frozenset({"seq_ids", "num_scheduled_tokens"})

    seq_ids: Field(Ids, "the batch, in order")
    num_scheduled_tokens: Field(Ids, "prompt tokens each computes this step", unit="tokens")
    chunked: Field(list[bool], "whether each computes only a chunk of its prompt and continues next step")
    num_batched_tokens: Field(Count, "tokens computed this step", unit="tokens")
    scheduled: Field(Count, "batch size", unit="seqs")
    waiting_len: Field(Count, f"waiting {_QUEUES}", unit="seqs")
    running_len: Field(Count, f"running {_QUEUES}", unit="seqs")

    done = Text(en="scheduled seqs {seq_ids} for prefill ({num_scheduled_tokens} tokens)",
                zh="把序列 {seq_ids} 调度去预填充（各算 {num_scheduled_tokens} 个 token）")


class ScheduleDecode(Payload, kw_only=True):
    actor = "Scheduler"
    changes_state = decision = True
    told_by = frozenset({"seq_ids"})

    seq_ids: Field(Ids, "the batch, in order")
    num_batched_tokens: Field(Count, "tokens computed this step (one per sequence)", unit="tokens")
    scheduled: Field(Count, "batch size", unit="seqs")
    decode_step_index: Field(Count, "decode steps before this one", unit="steps")
    waiting_len: Field(Count, f"waiting {_QUEUES}", unit="seqs")
    running_len: Field(Count, f"running {_QUEUES}", unit="seqs")

    done = Text(en="scheduled seqs {seq_ids} for decode", zh="把序列 {seq_ids} 调度去解码")


class PrefixCacheHit(Payload, kw_only=True):
    actor = "BlockManager"
    changes_state = decision = acts_on_sequence = True
    told_by = frozenset({"seq_id", "block_ids", "num_cached_blocks", "num_cached_tokens"})

    seq_id: Field(Count, "the admitted sequence")
    num_cached_blocks: Field(Count, "prompt blocks found by their hash", unit="blocks")
    num_cached_tokens: Field(Count, "prompt tokens whose K/V need no computing", unit="tokens")
    block_ids: Field(Ids, "the reused blocks")

    done = Text(en="reused the cached blocks {block_ids} for seq {seq_id} ({num_cached_tokens} tokens)",
                zh="为序列 {seq_id} 复用了已缓存的块 {block_ids}（{num_cached_tokens} 个 token）")


class BlockAllocate(Payload, kw_only=True):
    actor = "BlockManager"
    changes_state = decision = acts_on_sequence = True
    told_by = frozenset({"seq_id", "block_ids", "shared_block_ids"})

    seq_id: Field(Count, "the sequence given the blocks")
    block_ids: Field(Ids, "fresh blocks taken from the free list")
    shared_block_ids: Field(Ids, "cached prefix blocks it now shares (one more holder each)") = []
    num_free_blocks: Field(Count, "free blocks after", unit="blocks")

    done = Text(en="allocated blocks {block_ids} to seq {seq_id}", zh="为序列 {seq_id} 分配了块 {block_ids}")
    done_sharing = Text(en="allocated blocks {block_ids} to seq {seq_id} (and shared the cached blocks "
                           "{shared_block_ids})",
                        zh="为序列 {seq_id} 分配了块 {block_ids}（并共享了已缓存的块 {shared_block_ids}）")

    def did(self, reason: str, lang: str | None = None) -> str:
        return say(self.done_sharing if self.shared_block_ids else self.done, lang, seq_id=self.seq_id,
                   block_ids=show(self.block_ids), shared_block_ids=show(self.shared_block_ids))


class BlockFree(Payload, kw_only=True):
    actor = "BlockManager"
    changes_state = decision = acts_on_sequence = True
    told_by = frozenset({"seq_id", "block_ids", "reason"})

    seq_id: Field(Count, "the sequence giving its blocks back")
    block_ids: Field(Ids, "its whole block table")
    freed_block_ids: Field(Ids, "the blocks no sequence holds any more (now free)")
    num_free_blocks: Field(Count, "free blocks after", unit="blocks")

    done = Text(en="freed the blocks {block_ids} of seq {seq_id}", zh="释放了序列 {seq_id} 的块 {block_ids}")
    done_preempting = Text(en="preempted seq {seq_id} (freeing blocks {block_ids})",
                           zh="抢占了序列 {seq_id}（释放块 {block_ids}）")

    def did(self, reason: str, lang: str | None = None) -> str:
        return say(self.done_preempting if reason == "preempted" else self.done, lang, seq_id=self.seq_id,
                   block_ids=show(self.block_ids))


class Preempt(Payload, kw_only=True):
    actor = "Scheduler"
    changes_state = decision = acts_on_sequence = True
    shown_from = "quiet"
    told_by = frozenset({"seq_id"})

    seq_id: Field(Count, "the preempted sequence (recomputed later)")
    freed_blocks: Field(Count, "blocks it gave back", unit="blocks")
    needed_by: Field(Count, "the sequence that needed a block")
    num_tokens: Field(Count, "its length when preempted", unit="tokens")
    num_free_blocks: Field(Count, "free blocks after", unit="blocks")

    done = Text(en="preempted seq {seq_id}", zh="抢占了序列 {seq_id}")


class StateTransition(Payload, kw_only=True):
    actor = "Scheduler"
    changes_state = decision = acts_on_sequence = True
    shown_from = "quiet"
    told_by = frozenset({"seq_id", "from", "to"})

    seq_id: Field(Count, "the sequence")
    from_: Field(SeqStatus, "state before") = msgspec.field(name="from")
    to: Field(SeqStatus, "state after")
    num_completion_tokens: Field(Count, "tokens generated so far", unit="tokens")
    max_tokens: Field(Count, "most completion tokens", unit="tokens")
    token_id: Field(int | UnsetType, "the last sampled token (finishing only)") = UNSET
    finish_reason: Field(str | UnsetType, "eos, length, max_model_len, stop (one of the request's stop strings "
                         "or stop token ids) or aborted (finishing only)") = UNSET

    done = Text(en="moved seq {seq_id} from {from_} to {to}", zh="把序列 {seq_id} 从 {from_} 转到 {to}")


# ---- execution --------------------------------------------------------------------------------------------

_TENSOR = "(values kept while the recorder's detail budget lasts)"


def _values(type_: Any, meaning: str) -> Any:
    return Field(type_ | UnsetType, f"{meaning} {_TENSOR}")


def _shape(name: str) -> Any:
    # Optional only so that a typed payload can be built with the tensors alone: the recorder writes it.
    return Field(Ids | UnsetType, f"shape of {name} (written by the recorder from the tensor)", unit="elements")


class PreparePrefillTensors(Payload, kw_only=True):
    actor = "ModelRunner"
    carries_tensors = True
    shown_from = "detail"

    n_seqs: Field(Count, "sequences in the batch", unit="seqs")
    flat_tokens: Field(Count, "tokens flattened into one row", unit="tokens")
    max_seqlen_q: Field(Count, "longest query (new tokens) of a sequence", unit="tokens")
    max_seqlen_k: Field(Count, "longest key (context) of a sequence", unit="tokens")
    has_block_tables: Field(bool, "whether some prompt reuses cached blocks (attention reads the cache)")
    input_ids_shape: _shape("input_ids") = UNSET
    input_ids: _values(Ids, "token ids to compute") = UNSET
    positions_shape: _shape("positions") = UNSET
    positions: _values(Ids, "their positions") = UNSET
    cu_seqlens_q_shape: _shape("cu_seqlens_q") = UNSET
    cu_seqlens_q: _values(Ids, "cumulative query lengths") = UNSET
    cu_seqlens_k_shape: _shape("cu_seqlens_k") = UNSET
    cu_seqlens_k: _values(Ids, "cumulative key lengths") = UNSET
    slot_mapping_shape: _shape("slot_mapping") = UNSET
    slot_mapping: _values(list[int], "cache slot of each new token's K/V") = UNSET
    block_tables_shape: _shape("block_tables (when there are any)") = UNSET
    block_tables: _values(list[list[int]] | None, "each sequence's block table (None: no cached prefix)") = UNSET

    done = Text(en="prepared the prefill tensors of {n_seqs} seqs ({flat_tokens} tokens)",
                zh="为 {n_seqs} 条序列准备了预填充的张量（{flat_tokens} 个 token）")


class PrepareDecodeTensors(Payload, kw_only=True):
    actor = "ModelRunner"
    carries_tensors = True
    shown_from = "detail"

    batch_size: Field(Count, "sequences in the batch", unit="seqs")
    input_ids_shape: _shape("input_ids") = UNSET
    input_ids: _values(Ids, "each sequence's last token") = UNSET
    positions_shape: _shape("positions") = UNSET
    positions: _values(Ids, "its position") = UNSET
    context_lens_shape: _shape("context_lens") = UNSET
    context_lens: _values(Ids, "each sequence's length") = UNSET
    slot_mapping_shape: _shape("slot_mapping") = UNSET
    slot_mapping: _values(list[int], "cache slot of each new token's K/V") = UNSET
    block_tables_shape: _shape("block_tables") = UNSET
    block_tables: _values(list[list[int]], "each sequence's block table (-1: padding)") = UNSET

    done = Text(en="prepared the decode tensors of {batch_size} seqs", zh="为 {batch_size} 条序列准备了解码的张量")


# A simulated step (``runner="simulated"``) carries its predicted cost on RUN_MODEL and CUDAGRAPH_REPLAY.
_PREDICTED = "simulated runs only: predicted"


def _cost(meaning: str, unit: str) -> Any:
    return Field(Finite | UnsetType, f"{_PREDICTED} {meaning}", unit=unit, volatile=True)


_BOUND = Field(Literal["compute", "memory", "launch"] | UnsetType,
               "simulated runs only: what bounds the predicted step time", volatile=True)


class _Cost(Payload, kw_only=True):
    predicted_ms: _cost("step time", "ms") = UNSET
    bound: _BOUND = UNSET
    compute_ms: _cost("time of the FLOPs at the device's efficiency", "ms") = UNSET
    memory_ms: _cost("time of the bytes moved", "ms") = UNSET
    launch_ms: _cost("kernel-launch or graph-replay overhead", "ms") = UNSET
    comm_ms: _cost("tensor-parallel all-reduce time", "ms") = UNSET
    host_ms: _cost("host-side time of the step", "ms") = UNSET
    flops: _cost("floating-point operations", "FLOP") = UNSET
    bytes: _cost("bytes moved to and from device memory", "bytes") = UNSET


class RunModel(_Cost, kw_only=True):
    actor = "ModelRunner"
    shown_from = "detail"

    mode: Field(Literal["eager", "compiled"], "how the forward pass ran (compiled: the native decode step on a "
                "CPU, engine/compiled_decode.py)")
    batch_size: Field(Count, "sequences whose logits are computed", unit="seqs")
    num_tokens: Field(Count, "tokens through the model", unit="tokens")
    graph_batch_size: Field(None, "always None (no graph ran)")
    eager_reason: Field(Literal["prefill", "enforce_eager", "no_cuda", "backend_cannot_capture",
                                "batch_above_largest_graph"] | None | UnsetType,
                        "why no CUDA graph ran (None: a graph ran)") = UNSET


class CudagraphReplay(_Cost, kw_only=True):
    actor = "ModelRunner"
    shown_from = "detail"

    mode: Field(Literal["graph"], "how the forward pass ran")
    batch_size: Field(Count, "sequences in the batch", unit="seqs")
    num_tokens: Field(Count, "tokens through the model", unit="tokens")
    graph_batch_size: Field(Count, "batch size of the replayed graph (the batch is padded to it)", unit="seqs")


class Sample(Payload, kw_only=True):
    actor = "ModelRunner"
    told_by = frozenset({"seq_ids", "token_ids"})
    shown_from = "detail"

    seq_ids: Field(Ids, "the batch, in order")
    temperatures: Field(list[Finite], "each sequence's temperature")
    token_ids: Field(list[int], "the token sampled for each")
    top_k: Field(list[Count] | UnsetType, "each sequence's top-k (0: none; present when any sequence "
                 "filters)") = UNSET
    top_p: Field(list[Finite] | UnsetType, "each sequence's top-p (1: none; present when any sequence "
                 "filters)") = UNSET
    min_p: Field(list[Finite] | UnsetType, "each sequence's min-p (0: none; present when any sequence "
                 "filters)") = UNSET
    num_kept: Field(list[Count] | UnsetType, "candidate tokens each sequence drew from after top-k, top-p and "
                    "min-p (the whole vocabulary unfiltered, 1 when greedy; present when any sequence filters)",
                    unit="tokens") = UNSET

    done = Text(en="sampled tokens {token_ids} for seqs {seq_ids}", zh="为序列 {seq_ids} 采样了 token {token_ids}")


class StepDone(Payload, kw_only=True):
    changes_state = True

    phase: Field(Literal["prefill", "decode"] | UnsetType, "the kind of step") = UNSET
    latency_ms: Field(Duration, "wall time of the step", unit="ms", volatile=True)
    num_tokens_stat: Field(int, "nano-vllm's signed count: prefill = total length of its sequences after their "
                           "new token, decode = minus the number of sequences", unit="tokens")
    num_batched_tokens: Field(Count | UnsetType, "tokens actually computed this step (throughput uses this)",
                              unit="tokens") = UNSET
    batch_size: Field(Count, "sequences run", unit="seqs")
    seq_ids: Field(Ids, "the batch, in order")
    finished: Field(Ids, "sequences that finished in this step")
    used_blocks: Field(Count, "KV blocks held after the step", unit="blocks")
    free_blocks: Field(Count, "KV blocks free after the step", unit="blocks")
    waiting_len: Field(Count, "waiting queue length after the step", unit="seqs")
    running_len: Field(Count, "running queue length after the step", unit="seqs")
    predicted_ms: _cost("step time", "ms") = UNSET
    bound: _BOUND = UNSET

    done = Text(en="ended the step with {batch_size} seqs run and {used_blocks} blocks used",
                zh="结束了这一步：运行了 {batch_size} 条序列，占用 {used_blocks} 个块")


# Every event, in the order a run emits them, with its payload type.
PAYLOADS: dict[str, type[Payload]] = {
    "ENGINE_INIT": EngineInit, "TP_RUNTIME_INIT": TpRuntimeInit, "MODEL_WEIGHTS_LOADED": ModelWeightsLoaded,
    "WARMUP": Warmup, "KV_BUDGET_ESTIMATE": KvBudgetEstimate, "CUDAGRAPH_CAPTURE": CudagraphCapture,
    "DECODE_COMPILE": DecodeCompile, "ENGINE_READY": EngineReady, "GENERATE_START": GenerateStart, "GENERATE_FINISH": GenerateFinish,
    "REQUEST_ENQUEUE": RequestEnqueue, "SCHEDULE_PREFILL": SchedulePrefill, "SCHEDULE_DECODE": ScheduleDecode,
    "PREFIX_CACHE_HIT": PrefixCacheHit, "BLOCK_ALLOCATE": BlockAllocate, "BLOCK_FREE": BlockFree,
    "PREEMPT": Preempt, "PREPARE_PREFILL_TENSORS": PreparePrefillTensors,
    "PREPARE_DECODE_TENSORS": PrepareDecodeTensors, "RUN_MODEL": RunModel, "CUDAGRAPH_REPLAY": CudagraphReplay,
    "SAMPLE": Sample, "STATE_TRANSITION": StateTransition, "STEP_DONE": StepDone, "REQUEST_ABORT": RequestAbort,
}
for _name, _cls in PAYLOADS.items():
    _cls.event = _name
EVENTS = tuple(PAYLOADS)


def events_where(means: Callable[[type[Payload]], bool]) -> tuple[str, ...]:
    """The events whose payload type ``means`` holds for, in ``EVENTS`` order:
    ``events_where(lambda p: p.changes_state)``."""
    return tuple(name for name, cls in PAYLOADS.items() if means(cls))


def check_payload(event: str, stats: dict[str, Any]) -> Payload:
    """``stats`` as ``event``'s typed payload; a ContractError names the unknown event, or the first field
    that is missing, unknown or of the wrong type."""
    cls = PAYLOADS.get(event)
    if cls is None:
        raise ContractError(event, None, f"unknown event (the events are {', '.join(EVENTS)})")
    try:
        return msgspec.convert(stats, cls)
    except msgspec.ValidationError as error:
        raise explain_error(event, error) from None


def volatile_fields() -> list[str]:
    """``EVENT.field`` for every payload field declared volatile."""
    return [f"{event}.{name}" for event, cls in PAYLOADS.items()
            for name, _, meta, _ in field_meta(cls) if meta is not None and meta.extra.get("volatile")]
