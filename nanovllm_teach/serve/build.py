"""Serving: one call that builds a whole server (the engine, its recorder, the app) from settings.

``build_server(model, trace=..., live=..., **settings)`` is what ``nanovllm-teach serve``, the tests, the
benchmark and notebook 15 call. The engine records only when asked: to ``trace`` (a JSONL file, written
with real arrival times) and/or to the live page's feed (``live``).

Orchestration; imports torch (through ``LLM``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import FastAPI
from transformers import AutoTokenizer

from nanovllm_teach.llm import LLM
from nanovllm_teach.serve.app import MAX_BODY_BYTES, MAX_WAITING, ServeLimits, create_app
from nanovllm_teach.trace.recorder import TraceRecorder


def build_server(model: str | Path | None = None, *, trace: str | Path | None = None,
                 served_model_name: str | None = None, live: bool = True, max_waiting: int = MAX_WAITING,
                 max_body_bytes: int = MAX_BODY_BYTES, **settings: Any) -> FastAPI:
    """An app serving ``model`` (None: the shipped one); the engine starts here, its thread with the app."""
    limits = ServeLimits(max_body_bytes=max_body_bytes, max_waiting=max_waiting)
    feed = None
    if live:
        from nanovllm_teach.serve.live import LiveFeed
        feed = LiveFeed()
    recorder = None
    if trace is not None or feed is not None:
        recorder = TraceRecorder(trace, keep_in_memory=False, sinks=[feed] if feed is not None else [])
    llm = LLM(model, trace=recorder, trace_metadata={"scenario": "serve"}, **settings)
    tokenizer = AutoTokenizer.from_pretrained(llm.config.model)  # the HTTP thread's own
    name = served_model_name or Path(llm.config.model).name
    if feed is not None:
        feed.start(recorder.header)
    return create_app(llm, model_name=name, tokenizer=tokenizer, limits=limits, live=feed)
