"""Orchestration: the per-request sampling parameters a user passes to ``generate`` / ``add_request``.

The names and meanings are vLLM's (``vllm.SamplingParams``), so a vLLM user's code runs unchanged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from nanovllm_teach.i18n import Text, say

MAX_LOGPROBS = 20  # vLLM's default max_logprobs: the most top log-probabilities one token may ask for
MAX_N = 256  # the most samples one request may ask for (each is a sequence in the engine)
MAX_STOPS = 32  # the most stop strings (and, separately, stop token ids) one request may give


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


NOT_A_NUMBER = Text(en="{name} must be a number, got {value!r}", zh="{name} 必须是数字，收到的是 {value!r}")
NOT_AN_INT = Text(en="{name} must be an int, got {value!r}", zh="{name} 必须是 int，收到的是 {value!r}")
NOT_A_BOOL = Text(en="{name} must be a bool, got {value!r}", zh="{name} 必须是 bool，收到的是 {value!r}")
TEMPERATURE_RANGE = Text(en="temperature must be a finite number >= 0 (0 means greedy), got {value!r}",
                         zh="temperature 必须是 >= 0 的有限数（0 表示贪心解码），收到的是 {value!r}")
MAX_TOKENS_RANGE = Text(en="max_tokens must be >= 1, got {value}", zh="max_tokens 必须 >= 1，收到的是 {value}")
SEED_TYPE = Text(en="seed must be an int or None, got {value!r}", zh="seed 必须是 int 或 None，收到的是 {value!r}")
SEED_RANGE = Text(en="seed must be between 0 and 2**64 - 1, got {value}",
                  zh="seed 必须在 0 到 2**64 - 1 之间，收到的是 {value}")
TOP_P_RANGE = Text(en="top_p must be a number in (0, 1], got {value!r}",
                   zh="top_p 必须是 (0, 1] 区间内的数，收到的是 {value!r}")
TOP_K_RANGE = Text(en="top_k must be an int >= 1, or 0 or -1 for no top-k filter, got {value!r}",
                   zh="top_k 必须是 >= 1 的 int，或用 0、-1 表示不做 top-k 过滤，收到的是 {value!r}")
MIN_P_RANGE = Text(en="min_p must be a number in [0, 1], got {value!r}",
                   zh="min_p 必须是 [0, 1] 区间内的数，收到的是 {value!r}")
N_RANGE = Text(en="n must be an int between 1 and {limit}, got {value!r}",
               zh="n 必须是 1 到 {limit} 之间的 int，收到的是 {value!r}")
LOGPROBS_RANGE = Text(en="logprobs must be None or an int between 0 and {limit}, got {value!r}",
                      zh="logprobs 必须是 None 或 0 到 {limit} 之间的 int，收到的是 {value!r}")
STOP_TYPE = Text(en="stop must be a str, a list of str or None, got {kind}",
                 zh="stop 必须是 str、str 的列表或 None，收到的是 {kind}")
TOO_MANY_STOP_STRINGS = Text(en="stop has {count} strings, more than {limit}",
                             zh="stop 有 {count} 个字符串，超过了上限 {limit}")
EMPTY_STOP_STRING = Text(en="every stop string must be a non-empty str, got {value!r}",
                         zh="stop 中的每个字符串都必须是非空的 str，收到的是 {value!r}")
STOP_TOKEN_IDS_TYPE = Text(en="stop_token_ids must be a list of int or None, got {kind}",
                           zh="stop_token_ids 必须是 int 的列表或 None，收到的是 {kind}")
TOO_MANY_STOP_TOKEN_IDS = Text(en="stop_token_ids has {count} ids, more than {limit}",
                               zh="stop_token_ids 有 {count} 个 id，超过了上限 {limit}")
BAD_STOP_TOKEN_ID = Text(en="every stop token id must be an int >= 0, got {value!r}",
                         zh="stop_token_ids 中的每个 id 都必须是 >= 0 的 int，收到的是 {value!r}")


@dataclass(frozen=True)
class SamplingParams:
    """How one request is decoded.

    ``temperature`` 0 means greedy (argmax); nano-vllm forbids it, we allow it because greedy is what the
    parity tests and the exercises compare. ``seed`` makes this request's sampling reproducible whatever
    else shares its batches. ``ignore_eos`` keeps generating through EOS up to ``max_tokens`` (benchmarks).
    ``skip_special_tokens`` leaves special tokens such as ``<|im_end|>`` out of the output text, as vLLM does by
    default; the output's ``token_ids`` keep every id.

    Filters, applied after the temperature, in the order of ``transformers``' logits warpers: ``top_k`` keeps
    the k most likely tokens (0 or -1: all), ``top_p`` the smallest set whose probability reaches p (1: all),
    ``min_p`` the tokens at least ``min_p`` times as likely as the most likely one (0: all). ``n`` samples
    per prompt (they share the prompt's cached KV blocks). ``stop`` strings end the text where one first
    appears (the text excludes it); ``stop_token_ids`` end it on one of those tokens (kept in ``token_ids``).
    ``logprobs``: how many top log-probabilities to return for each generated token (the sampled token's
    is always included; None: none).
    """

    temperature: float = 1.0
    max_tokens: int = 64
    ignore_eos: bool = False
    seed: int | None = None
    skip_special_tokens: bool = True
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    n: int = 1
    stop: str | list[str] | tuple[str, ...] | None = None
    stop_token_ids: list[int] | tuple[int, ...] | None = None
    logprobs: int | None = None

    def __post_init__(self) -> None:
        if isinstance(self.temperature, bool) or not isinstance(self.temperature, (int, float)):
            raise TypeError(say(NOT_A_NUMBER, name="temperature", value=self.temperature))
        if not (math.isfinite(self.temperature) and self.temperature >= 0):  # inf could not even be recorded
            raise ValueError(say(TEMPERATURE_RANGE, value=self.temperature))
        if not _is_int(self.max_tokens):
            raise TypeError(say(NOT_AN_INT, name="max_tokens", value=self.max_tokens))
        if self.max_tokens < 1:
            raise ValueError(say(MAX_TOKENS_RANGE, value=self.max_tokens))
        if not isinstance(self.ignore_eos, bool):
            raise TypeError(say(NOT_A_BOOL, name="ignore_eos", value=self.ignore_eos))
        if self.seed is not None and not _is_int(self.seed):
            raise TypeError(say(SEED_TYPE, value=self.seed))
        if self.seed is not None and not 0 <= self.seed < 2**64:  # torch.Generator takes 64 bits, unsigned
            raise ValueError(say(SEED_RANGE, value=self.seed))
        if not isinstance(self.skip_special_tokens, bool):
            raise TypeError(say(NOT_A_BOOL, name="skip_special_tokens", value=self.skip_special_tokens))
        if not _is_number(self.top_p) or not 0 < self.top_p <= 1:
            raise ValueError(say(TOP_P_RANGE, value=self.top_p))
        if not _is_int(self.top_k) or self.top_k < -1:
            raise ValueError(say(TOP_K_RANGE, value=self.top_k))
        if not _is_number(self.min_p) or not 0 <= self.min_p <= 1:
            raise ValueError(say(MIN_P_RANGE, value=self.min_p))
        if not _is_int(self.n) or not 1 <= self.n <= MAX_N:
            raise ValueError(say(N_RANGE, limit=MAX_N, value=self.n))
        object.__setattr__(self, "stop", self._stop_strings(self.stop))
        object.__setattr__(self, "stop_token_ids", self._stop_token_ids(self.stop_token_ids))
        if self.logprobs is not None and (not _is_int(self.logprobs) or not 0 <= self.logprobs <= MAX_LOGPROBS):
            raise ValueError(say(LOGPROBS_RANGE, limit=MAX_LOGPROBS, value=self.logprobs))

    @staticmethod
    def _stop_strings(stop: Any) -> tuple[str, ...]:
        """``stop`` as a tuple of non-empty strings (a frozen record holds no list)."""
        stops = (stop,) if isinstance(stop, str) else () if stop is None else stop
        if not isinstance(stops, (list, tuple)):
            raise TypeError(say(STOP_TYPE, kind=type(stop).__name__))
        if len(stops) > MAX_STOPS:
            raise ValueError(say(TOO_MANY_STOP_STRINGS, count=len(stops), limit=MAX_STOPS))
        bad = next((s for s in stops if not isinstance(s, str) or not s), None)
        if bad is not None:
            raise ValueError(say(EMPTY_STOP_STRING, value=bad))
        return tuple(stops)

    @staticmethod
    def _stop_token_ids(ids: Any) -> tuple[int, ...]:
        ids = () if ids is None else ids
        if not isinstance(ids, (list, tuple)):
            raise TypeError(say(STOP_TOKEN_IDS_TYPE, kind=type(ids).__name__))
        if len(ids) > MAX_STOPS:
            raise ValueError(say(TOO_MANY_STOP_TOKEN_IDS, count=len(ids), limit=MAX_STOPS))
        bad = next((t for t in ids if not _is_int(t) or t < 0), None)
        if bad is not None:
            raise ValueError(say(BAD_STOP_TOKEN_ID, value=bad))
        return tuple(ids)
