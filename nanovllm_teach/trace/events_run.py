"""The events of a run as the engine loop reports it (orchestration): each generate() call's start and
finish, a request's arrival and abort, and each step's end.

Part of the event contract (``events.py`` gathers these records into ``PAYLOADS``); torch-free, msgspec only.
"""

from typing import Literal

from msgspec import UNSET, UnsetType

from nanovllm_teach.i18n import Text
from nanovllm_teach.trace.events_execution import PREDICTED_BOUND, predicted
from nanovllm_teach.trace.payload import Count, Duration, Field, Finite, Ids, Payload

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
    since_arrival_ms: Field(Duration | UnsetType, "how long before joining the request arrived (a server's front "
                            "end, a wait for the next scheduling step); absent: it joined as it arrived",
                            unit="ms", volatile=True) = UNSET
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
    predicted_ms: predicted("step time", "ms") = UNSET
    bound: PREDICTED_BOUND = UNSET

    done = Text(en="ended the step with {batch_size} seqs run and {used_blocks} blocks used",
                zh="结束了这一步：运行了 {batch_size} 条序列，占用 {used_blocks} 个块")
