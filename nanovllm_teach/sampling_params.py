"""Orchestration: the per-request sampling parameters a user passes to ``generate`` / ``add_request``.

The names and meanings are vLLM's (``vllm.SamplingParams``), so a vLLM user's code runs unchanged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

MAX_LOGPROBS = 20  # vLLM's default max_logprobs: the most top log-probabilities one token may ask for
MAX_N = 256  # the most samples one request may ask for (each is a sequence in the engine)
MAX_STOPS = 32  # the most stop strings (and, separately, stop token ids) one request may give


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


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
            raise TypeError(f"temperature must be a number, got {self.temperature!r}")
        if not (math.isfinite(self.temperature) and self.temperature >= 0):  # inf could not even be recorded
            raise ValueError(f"temperature must be a finite number >= 0 (0 means greedy), got {self.temperature!r}")
        if not _is_int(self.max_tokens):
            raise TypeError(f"max_tokens must be an int, got {self.max_tokens!r}")
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {self.max_tokens}")
        if not isinstance(self.ignore_eos, bool):
            raise TypeError(f"ignore_eos must be a bool, got {self.ignore_eos!r}")
        if self.seed is not None and not _is_int(self.seed):
            raise TypeError(f"seed must be an int or None, got {self.seed!r}")
        if self.seed is not None and not 0 <= self.seed < 2**64:  # torch.Generator takes 64 bits, unsigned
            raise ValueError(f"seed must be between 0 and 2**64 - 1, got {self.seed}")
        if not isinstance(self.skip_special_tokens, bool):
            raise TypeError(f"skip_special_tokens must be a bool, got {self.skip_special_tokens!r}")
        if not _is_number(self.top_p) or not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be a number in (0, 1], got {self.top_p!r}")
        if not _is_int(self.top_k) or self.top_k < -1:
            raise ValueError(f"top_k must be an int >= 1, or 0 or -1 for no top-k filter, got {self.top_k!r}")
        if not _is_number(self.min_p) or not 0 <= self.min_p <= 1:
            raise ValueError(f"min_p must be a number in [0, 1], got {self.min_p!r}")
        if not _is_int(self.n) or not 1 <= self.n <= MAX_N:
            raise ValueError(f"n must be an int between 1 and {MAX_N}, got {self.n!r}")
        object.__setattr__(self, "stop", self._stop_strings(self.stop))
        object.__setattr__(self, "stop_token_ids", self._stop_token_ids(self.stop_token_ids))
        if self.logprobs is not None and (not _is_int(self.logprobs) or not 0 <= self.logprobs <= MAX_LOGPROBS):
            raise ValueError(f"logprobs must be None or an int between 0 and {MAX_LOGPROBS}, got {self.logprobs!r}")

    @staticmethod
    def _stop_strings(stop: Any) -> tuple[str, ...]:
        """``stop`` as a tuple of non-empty strings (a frozen record holds no list)."""
        stops = (stop,) if isinstance(stop, str) else () if stop is None else stop
        if not isinstance(stops, (list, tuple)):
            raise TypeError(f"stop must be a str, a list of str or None, got {type(stop).__name__}")
        if len(stops) > MAX_STOPS:
            raise ValueError(f"stop has {len(stops)} strings, more than {MAX_STOPS}")
        bad = next((s for s in stops if not isinstance(s, str) or not s), None)
        if bad is not None:
            raise ValueError(f"every stop string must be a non-empty str, got {bad!r}")
        return tuple(stops)

    @staticmethod
    def _stop_token_ids(ids: Any) -> tuple[int, ...]:
        ids = () if ids is None else ids
        if not isinstance(ids, (list, tuple)):
            raise TypeError(f"stop_token_ids must be a list of int or None, got {type(ids).__name__}")
        if len(ids) > MAX_STOPS:
            raise ValueError(f"stop_token_ids has {len(ids)} ids, more than {MAX_STOPS}")
        bad = next((t for t in ids if not _is_int(t) or t < 0), None)
        if bad is not None:
            raise ValueError(f"every stop token id must be an int >= 0, got {bad!r}")
        return tuple(ids)
