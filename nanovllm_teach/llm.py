"""Orchestration: ``LLM`` is the vLLM-style name users write; all of it lives in ``LLMEngine``."""

from nanovllm_teach.engine.llm_engine import LLMEngine


class LLM(LLMEngine):
    pass
