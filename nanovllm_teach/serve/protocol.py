"""Serving: the OpenAI request bodies this server accepts (pydantic), and the bodies it answers with.

Accepted: ``model``, ``prompt`` (a string or a list of token ids) or ``messages`` (``system`` / ``user`` /
``assistant``, content a string or text parts), ``max_tokens`` (chat: also ``max_completion_tokens``),
``temperature``, ``seed``, ``stream``, ``stream_options.include_usage``, and vLLM's extra ``ignore_eos``.
The other sampling fields of OpenAI's API are refused with a 400 naming the field when they ask for
something other than their neutral value (``top_p`` other than 1, ``n`` other than 1, any ``stop``, ...);
fields OpenAI does not define are ignored, as vLLM ignores them.

Errors are OpenAI's shape: ``{"error": {"message", "type", "param", "code"}}``. Finish reasons are the API's
(``stop``, ``length``); the engine's own (eos, length, max_model_len) stay in the trace.

Emits no events.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Literal

import msgspec
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from nanovllm_teach.serve.metrics import API_FINISH_REASON

_ENCODE = msgspec.json.Encoder().encode
# Fields of OpenAI's API this server does not implement yet, and the values that ask for nothing.
NEUTRAL = {
    "top_p": (None, 1, 1.0), "n": (None, 1), "best_of": (None, 1), "stop": (None, [], ""),
    "logprobs": (None, False), "top_logprobs": (None, 0), "echo": (None, False),
    "presence_penalty": (None, 0, 0.0), "frequency_penalty": (None, 0, 0.0), "logit_bias": (None, {}),
    "suffix": (None, ""), "tools": (None, []), "tool_choice": (None, "none", "auto"), "response_format": (None,),
    "top_k": (None, -1, 0), "min_p": (None, 0, 0.0), "stop_token_ids": (None, []), "repetition_penalty": (None, 1, 1.0),
}


class ApiError(Exception):
    """An error answered as OpenAI's error body with ``status``."""

    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        kind = "invalid_request_error" if self.status < 500 else "server_error"
        return {"error": {"message": self.message, "type": kind, "param": self.param, "code": self.code}}


class StreamOptions(BaseModel):
    include_usage: bool = False


class _Common(BaseModel):
    model_config = ConfigDict(extra="allow")

    model: str
    max_tokens: int | None = None
    temperature: float | None = None
    seed: int | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    ignore_eos: bool = False


class CompletionRequest(_Common):
    prompt: str | list[int]


class TextPart(BaseModel):
    type: Literal["text"]
    text: str


class Message(BaseModel):
    role: Literal["system", "user", "assistant"]
    content: str | list[TextPart]

    def text(self) -> str:
        return self.content if isinstance(self.content, str) else "".join(p.text for p in self.content)


class ChatRequest(_Common):
    messages: list[Message] = Field(min_length=1)
    max_completion_tokens: int | None = None


def parse(kind: type[_Common], body: bytes) -> _Common:
    """The request, or an ``ApiError`` (400) naming the field that is wrong or not supported."""
    try:
        request = kind.model_validate_json(body)
    except ValidationError as error:
        first = error.errors()[0]
        if first["type"] == "json_invalid":
            raise ApiError(400, f"the body is not valid JSON: {first['msg']}") from None
        field = ".".join(str(part) for part in first["loc"]) or None
        raise ApiError(400, f"{field}: {first['msg']}" if field else first["msg"], param=field) from None
    for name, value in (request.model_extra or {}).items():
        if name in NEUTRAL and value not in NEUTRAL[name]:
            raise ApiError(400, f"{name} is not supported by this server yet (got {value!r})", param=name)
    return request


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex}"


def usage(num_prompt_tokens: int, num_completion_tokens: int) -> dict[str, int]:
    return {"prompt_tokens": num_prompt_tokens, "completion_tokens": num_completion_tokens,
            "total_tokens": num_prompt_tokens + num_completion_tokens}


def api_finish_reason(engine_reason: str | None) -> str | None:
    return None if engine_reason is None else API_FINISH_REASON.get(engine_reason, "stop")


class Shape:
    """The response bodies of one request: a completion or a chat completion, with its id and time."""

    def __init__(self, chat: bool, model: str) -> None:
        self.chat, self.model = chat, model
        self.id = new_id("chatcmpl" if chat else "cmpl")
        self.created = int(time.time())
        # A text delta is the one chunk sent per token: its bytes around the text are made once per request.
        marker = "\u0000delta\u0000"
        template = _ENCODE(self.chunk(marker)).decode("utf-8")
        before, after = template.split(_ENCODE(marker).decode("utf-8"))
        self._delta_before, self._delta_after = b"data: " + before.encode(), after.encode() + b"\n\n"

    def delta_event(self, text: str) -> bytes:
        """The Server-Sent Event of one text delta (``chunk(text)`` as ``data: ...``), built from its parts."""
        return self._delta_before + _ENCODE(text) + self._delta_after

    def _head(self, obj: str) -> dict[str, Any]:
        return {"id": self.id, "object": obj, "created": self.created, "model": self.model}

    def whole(self, text: str, finish_reason: str | None, use: dict[str, int]) -> dict[str, Any]:
        if self.chat:
            choice = {"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": None,
                      "finish_reason": finish_reason}
            return {**self._head("chat.completion"), "choices": [choice], "usage": use}
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason}
        return {**self._head("text_completion"), "choices": [choice], "usage": use}

    def chunk(self, text: str | None, finish_reason: str | None = None, role: bool = False) -> dict[str, Any]:
        """One streamed chunk: a delta of ``text`` (chat: the role first, alone), or the finish reason."""
        if self.chat:
            delta: dict[str, Any] = {"role": "assistant", "content": ""} if role else {}
            if text:
                delta["content"] = text
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
            return {**self._head("chat.completion.chunk"), "choices": [choice]}
        choice = {"index": 0, "text": text or "", "logprobs": None, "finish_reason": finish_reason}
        return {**self._head("text_completion"), "choices": [choice]}

    def usage_chunk(self, use: dict[str, int]) -> dict[str, Any]:
        obj = "chat.completion.chunk" if self.chat else "text_completion"
        return {**self._head(obj), "choices": [], "usage": use}
