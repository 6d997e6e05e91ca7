"""Resources layer: ``Sequence``, one request's whole life inside the engine. Pure Python, no torch.

State machine::

    WAITING --schedule (prefill)--> RUNNING --postprocess (EOS / max_tokens)--> FINISHED
       ^                               |
       +------- preempt (no KV block) -+

Token bookkeeping: ``num_cached_tokens`` counts the tokens whose K/V is already in the cache (a reused
prefix, or earlier prefill chunks); ``num_scheduled_tokens`` is how many the current step computes.

Emits no events.
"""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING

from nanovllm_teach.sampling_params import SamplingParams

if TYPE_CHECKING:
    from nanovllm_teach.logprobs import TokenLogprobs


class SequenceStatus(Enum):
    WAITING = "WAITING"
    RUNNING = "RUNNING"
    FINISHED = "FINISHED"


class Sequence:
    def __init__(self, seq_id: int, token_ids: list[int], sampling_params: SamplingParams,
                 block_size: int) -> None:
        self.seq_id = seq_id
        self.block_size = block_size
        self.status = SequenceStatus.WAITING
        self.token_ids = list(token_ids)
        self.last_token = self.token_ids[-1]
        self.num_tokens = len(self.token_ids)
        self.num_prompt_tokens = self.num_tokens
        self.num_cached_tokens = 0
        self.num_scheduled_tokens = 0
        self.block_table: list[int] = []
        self.sampling_params = sampling_params
        self.temperature = sampling_params.temperature
        self.max_tokens = sampling_params.max_tokens
        self.ignore_eos = sampling_params.ignore_eos
        self.seed = sampling_params.seed
        self.skip_special_tokens = sampling_params.skip_special_tokens
        self.top_k = max(sampling_params.top_k, 0)  # -1 (vLLM's "no filter") is 0 here
        self.top_p = sampling_params.top_p
        self.min_p = sampling_params.min_p
        self.num_logprobs = sampling_params.logprobs
        self.finish_reason: str | None = None
        self.num_preemptions = 0
        # Filled in by the orchestration layer, which reads them to build the request's output:
        # the log-probabilities of the token at each position (a step undone and run again overwrites its
        # own), and when things happened, in seconds on the engine's clock.
        self.logprobs: dict[int, TokenLogprobs] = {}
        self.arrival_time: float | None = None
        self.first_scheduled_time: float | None = None
        self.first_token_time: float | None = None
        self.last_token_time: float | None = None
        self.finished_time: float | None = None

    def __len__(self) -> int:
        return self.num_tokens

    def __repr__(self) -> str:
        return (f"Sequence(seq_id={self.seq_id}, status={self.status.value}, num_tokens={self.num_tokens}, "
                f"num_cached_tokens={self.num_cached_tokens}, block_table={self.block_table})")

    @property
    def is_finished(self) -> bool:
        return self.status == SequenceStatus.FINISHED

    @property
    def num_completion_tokens(self) -> int:
        return self.num_tokens - self.num_prompt_tokens

    @property
    def prompt_token_ids(self) -> list[int]:
        return self.token_ids[:self.num_prompt_tokens]

    @property
    def completion_token_ids(self) -> list[int]:
        return self.token_ids[self.num_prompt_tokens:]

    @property
    def num_blocks(self) -> int:
        """KV blocks needed to hold every current token."""
        return (self.num_tokens + self.block_size - 1) // self.block_size

    @property
    def last_block_num_tokens(self) -> int:
        return self.num_tokens - (self.num_blocks - 1) * self.block_size

    def block(self, i: int) -> list[int]:
        """The token ids that belong in the ``i``-th block of this sequence."""
        return self.token_ids[i * self.block_size:(i + 1) * self.block_size]

    def append_token(self, token_id: int) -> None:
        self.token_ids.append(token_id)
        self.last_token = token_id
        self.num_tokens += 1
