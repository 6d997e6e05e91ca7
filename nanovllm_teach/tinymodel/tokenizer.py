"""The tokenizer of the shipped tiny Qwen3 model: byte-level BPE trained on the synthetic corpus.

Not an engine layer: part of the tool that trained the checkpoint in
``nanovllm_teach/assets/qwen3-tiny`` (run by ``python -m nanovllm_teach.tinymodel.train``).
``build_tokenizer`` trains the tokenizer with the ``tokenizers`` library and wraps it for
transformers; ``encode_conversation`` turns one conversation into token ids and marks where the
assistant's answer, the only part that carries loss, begins.
"""

from __future__ import annotations

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from nanovllm_teach.tinymodel.corpus import CHAT_TEMPLATE, ENDOFTEXT, IM_END, SPECIAL_TOKENS, Conversation, render_prompt

# Qwen's pre-tokenizer regex (contractions, words with one leading non-letter, numbers,
# punctuation runs, newlines, spaces) with one change: Qwen splits numbers into single digits,
# we allow runs of up to three digits, as GPT-4's and Llama 3's tokenizers do. BPE then makes
# every number the corpus uses one token, and a model this small learns "count to B" and "primes
# up to N" far faster when the stopping test compares two tokens instead of two digit sequences.
PRETOKENIZE_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)


def build_tokenizer(texts: list[str], vocab_size: int) -> PreTrainedTokenizerFast:
    """Train a Qwen-style byte-level BPE tokenizer on ``texts`` and wrap it for transformers."""
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    # Split with the regex first, then map every byte to a printable character: this is what
    # makes the tokenizer "byte-level" -- any UTF-8 text encodes, there is no unknown token.
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=list(SPECIAL_TOKENS),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer)
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=IM_END,
        pad_token=ENDOFTEXT,  # Qwen pads with <|endoftext|>; it never appears inside a chat
        model_max_length=1024,
    )
    wrapped.chat_template = CHAT_TEMPLATE
    return wrapped


def encode_conversation(tokenizer: PreTrainedTokenizerFast, conversation: Conversation) -> tuple[list[int], int]:
    """Token ids of a whole conversation and the index where the assistant's answer begins.

    The prompt and the answer are tokenized separately: the prompt ends with a newline and an
    answer starts a new pre-token, so this equals tokenizing the whole text, and it tells us
    exactly which tokens are the answer (the only ones that carry loss).
    """
    prompt = tokenizer.encode(render_prompt(conversation.user), add_special_tokens=False)
    answer = tokenizer.encode(conversation.assistant + IM_END, add_special_tokens=False)
    return prompt + answer, len(prompt)
