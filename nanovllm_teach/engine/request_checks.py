"""The shell around the engine: a request checked before it becomes a sequence. Pure Python, no torch.

The engine's core trusts its caller; ``LLM`` (``engine/frontend.py``) does not trust its own: whatever a
user, a notebook or an HTTP client hands it is checked here first, with an error that names the bad value,
before anything is queued. A request that passes can always be served: its prompt is token ids inside the
vocabulary, no longer than ``max_model_len``, and its longest possible answer fits in the whole KV cache.

Emits no events.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nanovllm_teach.i18n import Text, say
from nanovllm_teach.sampling_params import SamplingParams

if TYPE_CHECKING:  # the config imports torch; the checks only read its numbers
    from nanovllm_teach.config import Config

NOT_UNICODE = Text(en="prompt is not valid Unicode: character {index} is {char!r}, a lone surrogate (was the text "
                      "decoded with the wrong codec?)",
                   zh="prompt 不是合法的 Unicode：第 {index} 个字符 {char!r} 是孤立的代理项（lone surrogate）；"
                      "这段文本是不是用错了编码来解码？")
NOT_SAMPLING_PARAMS = Text(en="sampling_params must be a SamplingParams, got {kind}",
                           zh="sampling_params 必须是 SamplingParams，收到的是 {kind}")
NO_TOKENIZER = Text(en="this engine has no tokenizer (a simulated model has no vocabulary): give token id lists or "
                       "a workload",
                    zh="这个引擎没有 tokenizer（模拟的模型没有词表）：请给出 token id 列表或一个工作负载（workload）")
NO_VOCABULARY = Text(en="stop strings and logprobs need a model with a vocabulary; this engine has none "
                        "(a simulated model)",
                     zh="stop 字符串和 logprobs 需要一个有词表的模型；这个引擎没有（它是模拟的模型）")
NOT_A_PROMPT = Text(en="a prompt must be a str or a list of int token ids, got {kind}",
                    zh="prompt 必须是 str 或 int token id 的列表，收到的是 {kind}")
EMPTY_PROMPT = Text(en="prompt is empty: at least one token is needed", zh="prompt 为空：至少需要一个 token")
TOKEN_OUTSIDE_VOCABULARY = Text(en="token id {token} is outside the vocabulary [0, {vocab_size})",
                                zh="token id {token} 超出了词表范围 [0, {vocab_size})")
STOP_TOKEN_OUTSIDE_VOCABULARY = Text(en="stop token id {token} is outside the vocabulary [0, {vocab_size})",
                                     zh="stop token id {token} 超出了词表范围 [0, {vocab_size})")
PROMPT_TOO_LONG = Text(en="prompt has {count} tokens, more than max_model_len={max_model_len}",
                       zh="prompt 有 {count} 个 token，超过了 max_model_len={max_model_len}")
NEVER_FITS = Text(en="request could never fit: {tokens} tokens need {blocks} KV blocks of {block_size}, the whole "
                     "cache has {cache_blocks}; lower max_tokens or give the cache more blocks",
                  zh="这个请求永远放不下：{tokens} 个 token 需要 {blocks} 个大小为 {block_size} 的 KV 块，而整个缓存只有 "
                     "{cache_blocks} 个；请调低 max_tokens，或给缓存更多的块")


def _check_unicode(prompt: str) -> None:
    """A prompt must be text the tokenizer can encode: a lone surrogate (what a bad decode with
    ``errors="surrogateescape"`` leaves behind) is not, and the tokenizer's own error does not say so."""
    try:
        prompt.encode("utf-8")
    except UnicodeEncodeError as error:
        raise ValueError(say(NOT_UNICODE, index=error.start, char=prompt[error.start])) from None


def is_token_ids(prompt: Any) -> bool:
    """Whether ``prompt`` is a list (or tuple) of int token ids: exactly ``int`` (a bool is not a token id).

    The types are collected in C (``map``, ``set``), not tested one token at a time in Python: a workload of long
    prompts checks hundreds of thousands of tokens: a generator of ``isinstance`` calls was a third of a simulated
    run's profile (7x slower than this on 2,000 tokens)."""
    return isinstance(prompt, (list, tuple)) and set(map(type, prompt)) <= {int}


def checked_token_ids(prompt: Any, params: Any, config: Config, tokenizer: Any | None) -> list[int]:
    """The token ids of a valid request, or a ``TypeError``/``ValueError`` that says what is wrong."""
    if not isinstance(params, SamplingParams):
        raise TypeError(say(NOT_SAMPLING_PARAMS, kind=type(params).__name__))
    if isinstance(prompt, str) and tokenizer is None:
        raise TypeError(say(NO_TOKENIZER))
    if tokenizer is None and (params.stop or params.logprobs is not None):
        raise ValueError(say(NO_VOCABULARY))
    if isinstance(prompt, str):
        _check_unicode(prompt)
        token_ids = tokenizer.encode(prompt, add_special_tokens=False)
    elif is_token_ids(prompt):
        token_ids = list(prompt)
    else:
        raise TypeError(say(NOT_A_PROMPT, kind=type(prompt).__name__))
    if not token_ids:
        raise ValueError(say(EMPTY_PROMPT))
    vocab_size = config.hf_config.vocab_size
    bad = next((t for t in token_ids if not 0 <= t < vocab_size), None)
    if bad is not None:
        raise ValueError(say(TOKEN_OUTSIDE_VOCABULARY, token=bad, vocab_size=vocab_size))
    bad = next((t for t in params.stop_token_ids if t >= vocab_size), None)
    if bad is not None:
        raise ValueError(say(STOP_TOKEN_OUTSIDE_VOCABULARY, token=bad, vocab_size=vocab_size))
    if len(token_ids) > config.max_model_len:
        raise ValueError(say(PROMPT_TOO_LONG, count=len(token_ids), max_model_len=config.max_model_len))
    worst_case = min(len(token_ids) + params.max_tokens, config.max_model_len)
    blocks_needed = -(-worst_case // config.kvcache_block_size)
    if blocks_needed > config.num_kvcache_blocks:
        raise ValueError(say(NEVER_FITS, tokens=worst_case, blocks=blocks_needed, block_size=config.kvcache_block_size,
                             cache_blocks=config.num_kvcache_blocks))
    return token_ids
