"""Orchestration: the per-request sampling parameters a user passes to ``generate`` / ``add_request``."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SamplingParams:
    """How one request is decoded.

    ``temperature`` 0 means greedy (argmax); nano-vllm forbids it, we allow it because greedy is what the
    parity tests and the exercises compare. ``seed`` makes this request's sampling reproducible whatever
    else shares its batches. ``ignore_eos`` keeps generating through EOS up to ``max_tokens`` (benchmarks).
    ``skip_special_tokens`` leaves special tokens such as ``<|im_end|>`` out of the output text, as vLLM does by
    default; the output's ``token_ids`` keep every id.
    """

    temperature: float = 1.0
    max_tokens: int = 64
    ignore_eos: bool = False
    seed: int | None = None
    skip_special_tokens: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.temperature, bool) or not isinstance(self.temperature, (int, float)):
            raise TypeError(f"temperature must be a number, got {self.temperature!r}")
        if not self.temperature >= 0:  # also rejects NaN
            raise ValueError(f"temperature must be >= 0 (0 means greedy), got {self.temperature!r}")
        if isinstance(self.max_tokens, bool) or not isinstance(self.max_tokens, int):
            raise TypeError(f"max_tokens must be an int, got {self.max_tokens!r}")
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {self.max_tokens}")
        if not isinstance(self.ignore_eos, bool):
            raise TypeError(f"ignore_eos must be a bool, got {self.ignore_eos!r}")
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(self.seed, int)):
            raise TypeError(f"seed must be an int or None, got {self.seed!r}")
        if self.seed is not None and not 0 <= self.seed < 2**64:  # torch.Generator takes 64 bits, unsigned
            raise ValueError(f"seed must be between 0 and 2**64 - 1, got {self.seed}")
        if not isinstance(self.skip_special_tokens, bool):
            raise TypeError(f"skip_special_tokens must be a bool, got {self.skip_special_tokens!r}")
