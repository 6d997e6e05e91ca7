"""Orchestration: what ``generate`` returns, in the shapes of vLLM's ``RequestOutput`` and ``CompletionOutput``.

A ``RequestOutput`` per prompt: ``request_id``, ``prompt`` (None when given token ids),
``prompt_token_ids``, ``outputs`` (one ``CompletionOutput`` per sample, ``SamplingParams.n`` of them),
``finished`` and ``metrics``. It also answers ``out["seq_id"]``, ``out["text"]``, ``out["token_ids"]`` and
``out["finish_reason"]`` as this engine's dicts did (nano-vllm's ``{"text", "token_ids"}`` plus two), for the
first sample; there ``finish_reason`` is the engine's own, the trace's.

Finish reasons: the trace keeps the engine's (``eos``, ``length``, ``max_model_len``, ``stop``, ``aborted``);
the API speaks vLLM's (``stop``, ``length``, ``abort``), with ``stop_reason`` saying which stop string or
stop token id ended the text (None for EOS). ``api_finish`` is the one place that maps them.

Pure Python. Emits no events.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from nanovllm_teach.engine.sequence import Sequence
from nanovllm_teach.engine.stopping import completion_text, first_stop
from nanovllm_teach.i18n import Text, say

# The engine's finish reason -> vLLM's.
API_FINISH_REASONS = {"eos": "stop", "stop": "stop", "length": "length", "max_model_len": "length",
                      "aborted": "abort"}
DICT_KEYS = ("seq_id", "text", "token_ids", "finish_reason")
NOT_A_DICT_KEY = Text(en="{key!r}: an output answers {keys} as a dict, and the rest as attributes (request_id, prompt, "
                         "prompt_token_ids, outputs, finished, metrics)",
                      zh="{key!r}：输出只有 {keys} 可以像 dict 那样取，其余的请作为属性读取（request_id、prompt、"
                         "prompt_token_ids、outputs、finished、metrics）")


@dataclass(frozen=True)
class Logprob:
    """One token's log-probability at one position (vLLM's ``Logprob``)."""

    logprob: float
    rank: int  # 1: the most likely token there
    decoded_token: str | None  # None without a tokenizer


@dataclass(frozen=True)
class CompletionOutput:
    """One sample of a request (vLLM's ``CompletionOutput``), plus this engine's ``seq_id`` and reason."""

    index: int  # which of the request's n samples
    text: str | None  # None without a tokenizer (a simulated model)
    token_ids: list[int]  # every generated id, stop tokens and special tokens included
    cumulative_logprob: float | None  # the sampled tokens' log-probabilities summed (None: none asked)
    logprobs: list[dict[int, Logprob]] | None  # per generated token: the top ones and the sampled one
    finish_reason: str | None  # "stop", "length" or "abort"; None while unfinished
    stop_reason: int | str | None  # the stop string or stop token id that ended it; None for EOS or else
    seq_id: int  # the engine's sequence: its trace events carry this id
    engine_finish_reason: str | None  # the trace's: eos, length, max_model_len, stop or aborted

    def finished(self) -> bool:
        return self.finish_reason is not None


@dataclass(frozen=True)
class RequestMetrics:
    """When things happened to a request (vLLM's ``RequestMetrics``), in seconds on the engine's clock (the
    host's monotonic clock, or a simulated one): only differences mean anything. None: not yet."""

    arrival_time: float | None
    first_scheduled_time: float | None
    first_token_time: float | None
    last_token_time: float | None
    finished_time: float | None

    @property
    def time_in_queue(self) -> float | None:
        if self.arrival_time is None or self.first_scheduled_time is None:
            return None
        return self.first_scheduled_time - self.arrival_time


@dataclass(frozen=True)
class RequestOutput:
    """One request's result (vLLM's ``RequestOutput``); ``out[key]`` reads the first sample as a dict would."""

    request_id: str
    prompt: str | None
    prompt_token_ids: list[int]
    outputs: list[CompletionOutput]
    finished: bool
    metrics: RequestMetrics

    def __getitem__(self, key: str) -> Any:
        first = self.outputs[0]
        values = {"seq_id": first.seq_id, "text": first.text, "token_ids": first.token_ids,
                  "finish_reason": first.engine_finish_reason}
        if key not in values:
            raise KeyError(say(NOT_A_DICT_KEY, key=key, keys=", ".join(DICT_KEYS)))
        return values[key]

    def keys(self) -> tuple[str, ...]:
        return DICT_KEYS

    def get(self, key: str, default: Any = None) -> Any:
        return self[key] if key in DICT_KEYS else default


def api_finish(seq: Sequence, text: str | None) -> tuple[str | None, int | str | None, str | None]:
    """vLLM's ``(finish_reason, stop_reason)`` for ``seq``, and its text cut before a stop string."""
    params = seq.sampling_params
    match = first_stop(text, params.stop) if text is not None and params.stop else None
    if match is not None:
        return "stop", match[1], text[:match[0]]
    reason = seq.finish_reason
    if reason is None:
        return None, None, text
    if reason != "aborted" and seq.completion_token_ids and seq.last_token in params.stop_token_ids:
        return "stop", seq.last_token, text  # also when that token was the last one max_tokens allowed
    return API_FINISH_REASONS[reason], None, text


def completion_output(seq: Sequence, index: int, tokenizer: Any | None) -> CompletionOutput:
    text = completion_text(seq, tokenizer) if tokenizer is not None else None
    finish_reason, stop_reason, text = api_finish(seq, text)
    logprobs = cumulative = None
    if seq.num_logprobs is not None:
        logprobs, cumulative = [], 0.0
        for position in range(seq.num_prompt_tokens, seq.num_tokens):
            entry = seq.logprobs.get(position)
            if entry is None:  # no probabilities from this runner (the simulator)
                logprobs, cumulative = None, None
                break
            tokens = dict(entry.top)
            ranks = {token_id: rank for rank, (token_id, _) in enumerate(entry.top, start=1)}
            tokens[entry.token_id], ranks[entry.token_id] = entry.logprob, entry.rank
            logprobs.append({token_id: Logprob(logprob, ranks[token_id], _decoded(tokenizer, token_id))
                             for token_id, logprob in tokens.items()})
            cumulative += entry.logprob
    return CompletionOutput(index, text, seq.completion_token_ids, cumulative, logprobs, finish_reason, stop_reason,
                            seq.seq_id, seq.finish_reason)


def _decoded(tokenizer: Any | None, token_id: int) -> str | None:
    return None if tokenizer is None else tokenizer.decode([token_id])


def request_output(seqs: list[Sequence], prompt: str | None, tokenizer: Any | None) -> RequestOutput:
    """The output of the request whose samples are ``seqs`` (the first one's ``seq_id`` is its id)."""
    first = seqs[0]

    def earliest(times: list[float | None]) -> float | None:
        known = [t for t in times if t is not None]
        return min(known) if known else None

    def latest(times: list[float | None]) -> float | None:
        return None if any(t is None for t in times) else max(times)

    metrics = RequestMetrics(
        arrival_time=first.arrival_time,
        first_scheduled_time=earliest([s.first_scheduled_time for s in seqs]),
        first_token_time=earliest([s.first_token_time for s in seqs]),
        last_token_time=max((s.last_token_time for s in seqs if s.last_token_time is not None), default=None),
        finished_time=latest([s.finished_time for s in seqs]))
    return RequestOutput(str(first.seq_id), prompt, first.prompt_token_ids,
                         [completion_output(seq, i, tokenizer) for i, seq in enumerate(seqs)],
                         all(seq.is_finished for seq in seqs), metrics)
