"""The events of a step's execution (the ModelRunner, execution layer): the tensors prepared for prefill or
decode, the forward pass (eager, compiled, or a CUDA graph's replay) and the sampled tokens; and the fields in
which a simulated step carries its predicted cost (STEP_DONE carries two of them too).

Part of the event contract (``events.py`` gathers these records into ``PAYLOADS``); torch-free, msgspec only.
"""

from typing import Any, Literal

from msgspec import UNSET, UnsetType

from nanovllm_teach.i18n import Text
from nanovllm_teach.trace.payload import Count, Field, Finite, Ids, Payload

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


# A simulated step (``runner="simulated"``) carries its predicted cost on RUN_MODEL and CUDAGRAPH_REPLAY, and
# its predicted time and bound on STEP_DONE (``events_run.py``).
_PREDICTED = "simulated runs only: predicted"


def predicted(meaning: str, unit: str) -> Any:
    """A field of a simulated step's predicted cost (``meaning``, in ``unit``): optional, as a real run has none."""
    return Field(Finite | UnsetType, f"{_PREDICTED} {meaning}", unit=unit, volatile=True)


PREDICTED_BOUND = Field(Literal["compute", "memory", "launch"] | UnsetType,
                        "simulated runs only: what bounds the predicted step time", volatile=True)


class _Cost(Payload, kw_only=True):
    predicted_ms: predicted("step time", "ms") = UNSET
    bound: PREDICTED_BOUND = UNSET
    compute_ms: predicted("time of the FLOPs at the device's efficiency", "ms") = UNSET
    memory_ms: predicted("time of the bytes moved", "ms") = UNSET
    launch_ms: predicted("kernel-launch or graph-replay overhead", "ms") = UNSET
    comm_ms: predicted("tensor-parallel all-reduce time", "ms") = UNSET
    host_ms: predicted("host-side time of the step", "ms") = UNSET
    flops: predicted("floating-point operations", "FLOP") = UNSET
    bytes: predicted("bytes moved to and from device memory", "bytes") = UNSET


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
