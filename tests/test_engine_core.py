"""The core alone: ``LLMEngine`` without its shell is a working engine of nano-vllm's shape, and the shell adds
nothing to what it decides.

``LLM`` is the core inside ``Frontend`` (validation, ``n > 1``, threads, the serving frame). Built from the
same parts, the bare core must generate the same greedy tokens and make the same decisions, event for event;
and its module must stay the loop only: no lock, no validation, no vLLM outputs.
"""

from __future__ import annotations

import ast
import inspect

import pytest

from nanovllm_teach.engine import llm_engine
from nanovllm_teach.engine.llm_engine import LLMEngine
from nanovllm_teach.llm import LLM, real_parts
from nanovllm_teach.sampling_params import SamplingParams
from nanovllm_teach.settings import Settings
from nanovllm_teach.trace import TraceRecorder
from nanovllm_teach.trace.diff import diff_decisions
from nanovllm_teach.trace.reader import Trace
from nanovllm_teach.assets import default_model_path

# Tight enough that prefix caching, chunked prefill and preemption all happen.
SETTINGS = dict(kvcache_block_size=16, num_kvcache_blocks=14, max_num_batched_tokens=48, max_num_seqs=4)
SYSTEM = "You are a helpful assistant. Answer in one short sentence, and count carefully when asked to count. "
PROMPTS = [SYSTEM + "count from 1 to 20", SYSTEM + "list all prime numbers within 100",
           SYSTEM + "count from 1 to 20, then back down to 1, and say which numbers are even and which are odd, "
                    "one line each, with no other words",
           SYSTEM + "introduce yourself"]


def _core(recorder: TraceRecorder) -> LLMEngine:
    parts = real_parts(str(default_model_path()), Settings.from_kwargs(dict(SETTINGS)))
    return LLMEngine(parts.config, recorder=recorder, trace_header=parts.config.trace_header({}),
                     make_runner=parts.make_runner, clock=parts.clock, tokenizer=parts.tokenizer,
                     eos_token_id=parts.eos_token_id)


def test_the_bare_core_generates_what_llm_generates_and_decides_the_same():
    params = SamplingParams(temperature=0, max_tokens=40, ignore_eos=True)
    core_rec, shell_rec = TraceRecorder(), TraceRecorder()
    with _core(core_rec) as core:
        seqs = core.generate(PROMPTS, params, use_tqdm=False)
    with LLM(trace=shell_rec, **SETTINGS) as llm:
        outputs = llm.generate(PROMPTS, params, use_tqdm=False)
    assert [seq.completion_token_ids for seq in seqs] == [out.outputs[0].token_ids for out in outputs]
    assert all(seq.finish_reason == "length" for seq in seqs)
    core_trace, shell_trace = Trace.from_recorder(core_rec), Trace.from_recorder(shell_rec)
    assert diff_decisions(core_trace, shell_trace) is None  # the shell decides nothing of its own
    happened = {e.event for e in core_trace.events}
    assert {"PREFIX_CACHE_HIT", "PREEMPT"} <= happened, happened
    assert any(any(e.stats["chunked"]) for e in core_trace.events if e.event == "SCHEDULE_PREFILL")


def test_the_core_step_returns_nano_vllms_pair_and_keeps_the_step_record():
    with _core(TraceRecorder()) as core:
        core.add_request("count from 1 to 5", SamplingParams(temperature=0, max_tokens=4))
        finished, num_tokens = core.step()
        assert finished == [] and num_tokens > 0  # a prefill: the total length after its new token
        step = core.last_step
        assert [type(d).__name__ for d in step.decisions] == ["Allocated"]
        while not core.is_finished():
            finished, num_tokens = core.step()
            assert num_tokens == -1  # a decode of one sequence
        assert [len(tokens) for _, tokens in finished] == [4]
        assert [type(d).__name__ for d in core.last_step.decisions] == ["Finished", "Freed"]
        with pytest.raises(RuntimeError, match="no request waiting or running"):
            core.step()


def test_the_core_module_is_the_loop_only():
    """No thread lock, no request checks, no vLLM outputs, no held samples: those are the shell's."""
    source = inspect.getsource(llm_engine)
    imported = {node.module for node in ast.walk(ast.parse(source)) if isinstance(node, ast.ImportFrom)}
    assert not imported & {"threading", "nanovllm_teach.outputs", "nanovllm_teach.engine.frontend",
                           "nanovllm_teach.engine.request_checks", "nanovllm_teach.engine.serialized"}
    assert "import threading" not in source and "self.lock" not in source and "@serialized" not in source
    assert len(source.splitlines()) <= 220
