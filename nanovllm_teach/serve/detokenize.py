"""Serving: text from tokens as they come, for streaming.

A token is not always whole characters (a byte-level BPE splits a Chinese character or an emoji across
tokens), and a token's text can depend on the one before it. ``IncrementalText`` decodes a short window of
recent tokens and hands out only what is new and complete: a window ending in U+FFFD (a character cut in
half) is held back until the next token completes it. ``finish`` returns whatever the whole completion's
decode has beyond what was sent, so the streamed pieces add up to exactly the non-streamed text (the same
``tokenizer.decode`` that offline ``generate`` uses).

Emits no events.
"""

from __future__ import annotations

from typing import Any


class IncrementalText:
    def __init__(self, tokenizer: Any, skip_special_tokens: bool = True) -> None:
        self.tokenizer = tokenizer
        self.skip = skip_special_tokens
        # A fast tokenizer's decode is its Rust backend's, then an optional clean-up of spaces. Without the
        # clean-up, the backend alone gives the same text for a fifth of the cost (two calls a streamed token).
        backend = getattr(tokenizer, "backend_tokenizer", None)
        self._backend = None if backend is None or getattr(tokenizer, "clean_up_tokenization_spaces", True) else backend
        self.token_ids: list[int] = []
        self.sent = ""
        self._prefix = 0  # the window's start: tokens before it are fully sent
        self._read = 0  # tokens up to here are sent

    def _decode(self, ids: list[int]) -> str:
        if self._backend is not None:
            return self._backend.decode(ids, skip_special_tokens=self.skip)
        return self.tokenizer.decode(ids, skip_special_tokens=self.skip)

    def add(self, token_ids: tuple[int, ...] | list[int]) -> str:
        """The new text that ``token_ids`` complete (possibly empty)."""
        self.token_ids.extend(token_ids)
        before = self._decode(self.token_ids[self._prefix:self._read])
        after = self._decode(self.token_ids[self._prefix:])
        if len(after) <= len(before) or after.endswith("\ufffd") or not after.startswith(before):
            return ""
        piece = after[len(before):]
        self._prefix, self._read = self._read, len(self.token_ids)
        self.sent += piece
        return piece

    def finish(self) -> str:
        """The rest of the whole completion's text, once no token will follow."""
        whole = self.text()
        rest = whole[len(self.sent):] if whole.startswith(self.sent) else ""
        self.sent += rest
        return rest

    def text(self) -> str:
        return self._decode(self.token_ids)
