"""Serving: the OpenAI request bodies this server accepts (pydantic), and the bodies it answers with.

Accepted: ``model``, ``prompt`` (a string, a list of token ids, or a batch of either: a list of strings or of
token id lists, as vLLM takes; prompt ``i``'s choices are ``i * n`` to ``i * n + n - 1``) or ``messages``
(``system`` / ``user`` / ``assistant``, content a string or text parts), ``max_tokens`` (chat: also
``max_completion_tokens``), ``temperature``, ``top_p``, ``seed``, ``n``, ``stop`` (a string or a list),
``stream``, ``stream_options.include_usage``, log-probabilities (completions: ``logprobs``, an int; chat:
``logprobs`` true and ``top_logprobs``), and vLLM's extras ``top_k``, ``min_p``, ``stop_token_ids`` and
``ignore_eos``: each means what it means in ``SamplingParams``. The other sampling fields of OpenAI's API
(penalties, ``logit_bias``, ``tools``, ...) are refused with a 400 naming the field when they ask for something
other than their neutral value; fields OpenAI does not define are ignored, as vLLM ignores them. Types are
strict, as a hostile client is expected: a number must be finite (``Infinity``, ``NaN`` and ``1e400`` are
refused, with vLLM's words "must be a finite number"), a boolean is no integer or number (``max_tokens: true``
is refused, not read as 1), and a string is no number.

Errors are OpenAI's shape: ``{"error": {"message", "type", "param", "code"}}``. Finish reasons are the API's
(``stop``, ``length``), with vLLM's ``stop_reason`` (the stop string or stop token id that ended a choice);
the engine's own (eos, length, max_model_len, stop) stay in the trace. Log-probabilities come in OpenAI's
two shapes: the completions' legacy object (``tokens``, ``token_logprobs``, ``top_logprobs``,
``text_offset``) and chat's ``content`` list (``token``, ``logprob``, ``bytes``, ``top_logprobs``); the
completions' ``top_logprobs`` also hold the sampled token, as vLLM's and offline ``generate``'s do.

``prompt_ids`` and ``chat_prompt_ids`` turn a request's prompt or messages into token ids (the API process's
own tokenizer, the chat template), with a 400 for what they cannot take.

Emits no events.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Literal

import msgspec
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, ValidationError

from nanovllm_teach.engine.request_checks import EMPTY_PROMPT  # the engine's own refusal, said the same way
from nanovllm_teach.i18n import Text, say
from nanovllm_teach.logprobs import TokenLogprobs

_ENCODE = msgspec.json.Encoder().encode
# Fields of OpenAI's API this server does not implement, and the values that ask for nothing.
NEUTRAL = {
    "best_of": (None, 1), "echo": (None, False),
    "presence_penalty": (None, 0, 0.0), "frequency_penalty": (None, 0, 0.0), "logit_bias": (None, {}),
    "suffix": (None, ""), "tools": (None, []), "tool_choice": (None, "none", "auto"), "response_format": (None,),
    "repetition_penalty": (None, 1, 1.0),
}

# The server's refusals, in the server's language (its --lang), here beside ``ApiError`` for every route's
# use. Where vLLM has words for the same refusal, the English is vLLM's. Pydantic's own descriptions of a
# bad field (``{field}: Input should be ...``) stay pydantic's.
MODEL_NOT_FOUND = Text(en="the model {model!r} does not exist: this server serves {served!r}",
                       zh="模型 {model!r} 不存在：这个服务器提供的是 {served!r}")
MAX_TOKENS_TOO_LARGE = Text(
    en="max_tokens is too large: {max_tokens}. This model's maximum context length is max_model_len={max_model_len} "
       "tokens and your request has {prompt_tokens} input tokens ({max_tokens} > {max_model_len} - {prompt_tokens})",
    zh="max_tokens 太大：{max_tokens}。这个模型的最大上下文长度是 max_model_len={max_model_len} 个 token，而你的请求"
       "已有 {prompt_tokens} 个输入 token（{max_tokens} > {max_model_len} - {prompt_tokens}）")
TOO_MANY_CHOICES = Text(en="the request asks for {prompts} prompts x n={n} choices, more than {limit}",
                        zh="这个请求要求 {prompts} 个 prompt x n={n} 个 choice，超过了上限 {limit}")
MORE_THAN_CAPACITY = Text(en="the request asks for {count} sequences (prompts x n), more than this server holds at "
                             "once ({capacity})",
                          zh="这个请求要求 {count} 个序列（prompt 数 x n），超过了这个服务器同时能容纳的数量（{capacity}）")
QUEUE_FULL = Text(en="the waiting queue is full ({waiting} sequences beyond the running batch; this request is "
                     "{count}): retry later",
                  zh="等待队列已满（正在运行的 batch 之外已有 {waiting} 个序列；这个请求有 {count} 个）：请稍后重试")
BODY_TOO_LARGE = Text(en="the body has {size} bytes, more than this server takes ({limit})",
                      zh="请求体有 {size} 字节，超过了这个服务器接受的上限（{limit}）")
BODY_OVER_LIMIT = Text(en="the body has more than {limit} bytes, more than this server takes",
                       zh="请求体超过了 {limit} 字节，超过了这个服务器接受的上限")
BODY_TOO_SLOW = Text(en="the body did not arrive within {timeout_s} s", zh="请求体没有在 {timeout_s} 秒内到达")
TOO_MANY_FOLLOWERS = Text(en="{count} clients follow the live events already: retry later",
                          zh="已有 {count} 个客户端在跟踪实时事件：请稍后重试")
FIELD_PROBLEM = Text(en="{field}: {problem}", zh="{field}：{problem}")
TOP_LOGPROBS_ALONE = Text(en="top_logprobs needs logprobs: true", zh="top_logprobs 需要 logprobs: true")
NOT_JSON = Text(en="the body is not valid JSON: {why}", zh="请求体不是合法的 JSON：{why}")
NOT_FINITE = Text(en="must be a finite number, got {value!r}", zh="必须是有限数，收到的是 {value!r}")
NOT_SUPPORTED = Text(en="{name} is not supported by this server yet (got {value!r})",
                     zh="这个服务器暂不支持 {name}（收到的是 {value!r}）")
TEMPLATE_REFUSED = Text(en="messages: the chat template refused them: {why}", zh="messages：chat 模板拒绝了它们：{why}")
LONE_SURROGATE = Text(en="prompt is not valid Unicode (a lone surrogate)", zh="prompt 不是合法的 Unicode（含有孤立的代理项）")


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
    include_usage: StrictBool = False


class _Common(BaseModel):
    # A float field refuses inf and nan (JSON's Infinity, NaN, or 1e400, which overflows to inf): pydantic's
    # "Input should be a finite number". Nothing the engine or its trace cannot hold gets past the parse.
    model_config = ConfigDict(extra="allow", allow_inf_nan=False)

    model: str
    max_tokens: StrictInt | None = None
    temperature: StrictFloat | None = None
    seed: StrictInt | None = None
    stream: StrictBool = False
    stream_options: StreamOptions | None = None
    ignore_eos: StrictBool = False
    top_p: StrictFloat | None = None
    top_k: StrictInt | None = None
    min_p: StrictFloat | None = None
    n: StrictInt = 1
    stop: str | list[str] | None = None
    stop_token_ids: list[StrictInt] | None = None


class CompletionRequest(_Common):
    prompt: str | list[str] | list[StrictInt] | list[list[StrictInt]]
    logprobs: StrictInt | None = None

    def prompts(self) -> list[str | list[int]]:
        """The request's prompts: one, or the batch it sent (a list of strings or of token id lists)."""
        if isinstance(self.prompt, str) or not self.prompt or isinstance(self.prompt[0], int):
            return [self.prompt]
        return list(self.prompt)

    def num_logprobs(self) -> int | None:
        return self.logprobs


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
    max_completion_tokens: StrictInt | None = None
    logprobs: StrictBool = False
    top_logprobs: StrictInt | None = None

    def num_logprobs(self) -> int | None:
        if self.top_logprobs is not None and not self.logprobs:
            raise ApiError(400, say(TOP_LOGPROBS_ALONE), param="top_logprobs")
        return (self.top_logprobs or 0) if self.logprobs else None


def parse(kind: type[_Common], body: bytes) -> _Common:
    """The request, or an ``ApiError`` (400) naming the field that is wrong or not supported."""
    try:
        request = kind.model_validate_json(body)
    except ValidationError as error:
        first = error.errors()[0]
        if first["type"] == "json_invalid":
            raise ApiError(400, say(NOT_JSON, why=first["msg"])) from None
        field = ".".join(str(part) for part in first["loc"]) or None
        message = first["msg"]
        if first["type"] == "finite_number":  # vLLM's words
            message = say(NOT_FINITE, value=first["input"])
        raise ApiError(400, say(FIELD_PROBLEM, field=field, problem=message) if field else message,
                       param=field) from None
    for name, value in (request.model_extra or {}).items():
        if name in NEUTRAL and value not in NEUTRAL[name]:
            raise ApiError(400, say(NOT_SUPPORTED, name=name, value=value), param=name)
    return request


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex}"


def usage(num_prompt_tokens: int, num_completion_tokens: int) -> dict[str, int]:
    return {"prompt_tokens": num_prompt_tokens, "completion_tokens": num_completion_tokens,
            "total_tokens": num_prompt_tokens + num_completion_tokens}


def completion_logprobs(tokenizer: Any, entries: tuple[TokenLogprobs, ...], offset: int) -> dict[str, list]:
    """OpenAI's legacy completions ``logprobs`` for ``entries``, whose first token starts at ``offset`` in
    the choice's text (the offsets of a stream's chunks go on where the last chunk's ended)."""
    tokens = [tokenizer.decode([e.token_id]) for e in entries]
    offsets = []
    for token in tokens:
        offsets.append(offset)
        offset += len(token)
    tops = [{**{tokenizer.decode([t]): lp for t, lp in e.top}, token: e.logprob} for e, token in zip(entries, tokens)]
    return {"tokens": tokens, "token_logprobs": [e.logprob for e in entries], "top_logprobs": tops,
            "text_offset": offsets}


def chat_logprobs(tokenizer: Any, entries: tuple[TokenLogprobs, ...]) -> dict[str, list]:
    """Chat's ``logprobs``: one ``content`` entry per token, with its ``top_logprobs`` best first."""
    def one(token_id: int, logprob: float) -> dict[str, Any]:
        token = tokenizer.decode([token_id])
        return {"token": token, "logprob": logprob, "bytes": list(token.encode("utf-8"))}
    return {"content": [{**one(e.token_id, e.logprob), "top_logprobs": [one(t, lp) for t, lp in e.top]}
                        for e in entries]}


class Shape:
    """The response bodies of one request: a completion or a chat completion, with its id and time."""

    def __init__(self, chat: bool, model: str) -> None:
        self.chat, self.model = chat, model
        self.id = new_id("chatcmpl" if chat else "cmpl")
        self.created = int(time.time())
        self._delta_parts: dict[int, tuple[bytes, bytes]] = {}

    def delta_event(self, index: int, text: str) -> bytes:
        """The Server-Sent Event of one text delta of choice ``index`` (``chunk(index, text)`` as
        ``data: ...``), built from its parts: the bytes around the text are made once per choice."""
        if index not in self._delta_parts:
            marker = "\u0000delta\u0000"
            template = _ENCODE(self.chunk(index, marker)).decode("utf-8")
            before, after = template.split(_ENCODE(marker).decode("utf-8"))
            self._delta_parts[index] = b"data: " + before.encode(), after.encode() + b"\n\n"
        before, after = self._delta_parts[index]
        return before + _ENCODE(text) + after

    def _head(self, obj: str) -> dict[str, Any]:
        return {"id": self.id, "object": obj, "created": self.created, "model": self.model}

    def whole(self, choices: list[dict[str, Any]], use: dict[str, int]) -> dict[str, Any]:
        """The whole response; ``choices``: per choice its ``text``, ``logprobs`` (a shape above, or None),
        ``finish_reason`` and ``stop_reason``, by index."""
        if self.chat:
            body = [{"index": i, "message": {"role": "assistant", "content": c["text"]}, "logprobs": c["logprobs"],
                     "finish_reason": c["finish_reason"], "stop_reason": c["stop_reason"]}
                    for i, c in enumerate(choices)]
            return {**self._head("chat.completion"), "choices": body, "usage": use}
        body = [{"index": i, "text": c["text"], "logprobs": c["logprobs"], "finish_reason": c["finish_reason"],
                 "stop_reason": c["stop_reason"]} for i, c in enumerate(choices)]
        return {**self._head("text_completion"), "choices": body, "usage": use}

    def chunk(self, index: int, text: str | None, finish_reason: str | None = None, role: bool = False,
              logprobs: dict[str, list] | None = None, stop_reason: int | str | None = None) -> dict[str, Any]:
        """One streamed chunk of choice ``index``: a delta of ``text`` (chat: the role first, alone) with the
        log-probabilities of its tokens, or the finish reason."""
        if self.chat:
            delta: dict[str, Any] = {"role": "assistant", "content": ""} if role else {}
            if text:
                delta["content"] = text
            choice = {"index": index, "delta": delta, "logprobs": logprobs, "finish_reason": finish_reason}
        else:
            choice = {"index": index, "text": text or "", "logprobs": logprobs, "finish_reason": finish_reason}
        if finish_reason is not None:
            choice["stop_reason"] = stop_reason
        obj = "chat.completion.chunk" if self.chat else "text_completion"
        return {**self._head(obj), "choices": [choice]}

    def usage_chunk(self, use: dict[str, int]) -> dict[str, Any]:
        obj = "chat.completion.chunk" if self.chat else "text_completion"
        return {**self._head(obj), "choices": [], "usage": use}


def chat_prompt_ids(tokenizer: Any, req: ChatRequest) -> list[int]:
    """The token ids of ``req``'s messages through the model's chat template (a 400 if the template refuses)."""
    messages = [{"role": m.role, "content": m.text()} for m in req.messages]
    try:
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    except Exception as error:  # the template's own checks (a jinja exception): the messages are at fault
        raise ApiError(400, say(TEMPLATE_REFUSED, why=error), param="messages") from None
    return tokenizer.encode(text, add_special_tokens=False)


def prompt_ids(tokenizer: Any, prompt: str | list[int]) -> list[int]:
    """A completions prompt's token ids (given as ids, or text to encode: a 400 if it is empty or not Unicode)."""
    if isinstance(prompt, list):
        return prompt
    if not prompt:
        raise ApiError(400, say(EMPTY_PROMPT), param="prompt")
    try:
        prompt.encode("utf-8")
    except UnicodeEncodeError:
        raise ApiError(400, say(LONE_SURROGATE), param="prompt") from None
    return tokenizer.encode(prompt, add_special_tokens=False)
