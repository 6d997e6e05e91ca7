"""Orchestration layer: a request's own stop conditions, ``SamplingParams.stop`` and ``stop_token_ids``.

EOS, ``max_tokens`` and ``max_model_len`` are the scheduler's to check (``Scheduler.postprocess``); stop
strings need the text, which only the orchestration layer (it holds the tokenizer) can decode. After each
step the engine asks ``should_stop`` of every sequence that received a token and finishes those that
should (trace finish reason ``stop``). A stop string is searched in the whole decoded completion, so a stop
string spread over several tokens is found on the step its last piece arrives; the output's text ends
where the earliest stop string begins (``first_stop``), as vLLM's does by default.

Emits no events.
"""

from __future__ import annotations

from typing import Any

from nanovllm_teach.engine.sequence import Sequence


def first_stop(text: str, stops: tuple[str, ...]) -> tuple[int, str] | None:
    """Where the earliest of ``stops`` begins in ``text``, and which it is (the first listed, on a tie)."""
    found = [(index, order, stop) for order, stop in enumerate(stops) if (index := text.find(stop)) >= 0]
    if not found:
        return None
    index, _, stop = min(found)
    return index, stop


def completion_text(seq: Sequence, tokenizer: Any) -> str:
    """The completion so far, decoded as the output's text is."""
    return tokenizer.decode(seq.completion_token_ids, skip_special_tokens=seq.skip_special_tokens)


def should_stop(seq: Sequence, tokenizer: Any) -> bool:
    """Whether ``seq``'s newest token is one of its stop token ids, or completes one of its stop strings."""
    params = seq.sampling_params
    if seq.last_token in params.stop_token_ids:
        return True
    return bool(params.stop) and first_stop(completion_text(seq, tokenizer), params.stop) is not None
