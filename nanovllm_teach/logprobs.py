"""``TokenLogprobs``: the log-probabilities at one sampled position, as a request that asked for them gets them
(``SamplingParams.logprobs``). Plain data, no torch: the sampler makes them, the engine keeps them on the
sequence, the outputs and the server hand them out.
"""

from __future__ import annotations

import msgspec


class TokenLogprobs(msgspec.Struct, frozen=True):
    """The log-probabilities at one sampled position, from the logits the sampler was given (before
    temperature and filters)."""

    token_id: int  # the sampled token
    logprob: float
    rank: int  # its rank in the distribution: 1 is the most likely
    top: list[tuple[int, float]]  # the requested number of most likely (token id, log-probability), best first
