"""The configuration: settings checked in one torch-free place, resolved once, read the same everywhere."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest
import torch

from nanovllm_teach import LLM, default_model_path
from nanovllm_teach.config import Config
from nanovllm_teach.layers.attention_cpp import cpp_unusable_reason
from nanovllm_teach.layers.onednn_linear import auto_linear_backend
from nanovllm_teach.settings import Settings
from nanovllm_teach.trace import TraceRecorder

MODEL = str(default_model_path())
# What attention_backend="auto" is on this CPU (tests/test_attention_cpp.py checks that choice itself).
CPU_ATTENTION = "cpp" if cpp_unusable_reason(torch.device("cpu"), torch.float32) is None else "torch"


def test_the_settings_and_their_checks_need_no_torch():
    code = """
import importlib.abc, sys
class Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "transformers", "numpy"):
            raise ImportError(f"{name} is blocked")
from nanovllm_teach.settings import POLICIES, Settings
sys.meta_path.insert(0, Blocker())
try:
    Settings(max_num_seqs=0)
except ValueError as error:
    print(error)
print(Settings(scheduling_policy=POLICIES[1]).scheduling_policy)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["max_num_seqs must be a positive int, got 0", "static"]


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(max_num_batched_tokens=0), ValueError, "max_num_batched_tokens must be a positive int or None, got 0"),
    (dict(dtype="fp8"), ValueError, "dtype must be one of"),
    (dict(enforce_eager=1), TypeError, "enforce_eager must be True or False, got 1"),
    (dict(max_seqs=4), TypeError, "unknown engine setting"),
    (dict(sim_factors="x.json"), ValueError, "needs runner='simulated'"),
])
def test_a_bad_setting_is_named_before_the_model_is_read(kwargs, error, match):
    with pytest.raises(error, match=match):
        Config.from_kwargs("/no/such/folder", kwargs)  # the folder would fail next


def test_a_linear_backend_that_cannot_run_here_is_refused_naming_it():
    with pytest.raises(ValueError, match="linear_backend must be one of .* got 'mkl'"):
        Config.from_kwargs(MODEL, {"linear_backend": "mkl"})
    with pytest.raises(ValueError, match="linear_backend='onednn' cannot run here: .*float32 only"):
        Config.from_kwargs(MODEL, {"linear_backend": "onednn", "dtype": "bfloat16"})
    assert Config.from_kwargs(MODEL, {"linear_backend": "torch"}).linear_backend == "torch"


def test_auto_and_unset_values_are_resolved_once_and_the_asked_values_kept():
    config = Config.from_kwargs(MODEL, {})
    assert (config.device, config.dtype, config.attention_backend) == ("cpu", "float32", CPU_ATTENTION)
    assert config.max_num_batched_tokens == 2048 and config.max_model_len == config.hf_config.max_position_embeddings
    assert config.linear_backend == auto_linear_backend(torch.device("cpu"), torch.float32)
    assert config.resolved_from() == {"max_num_batched_tokens": None, "max_model_len": 4096,
                                      "attention_backend": "auto", "linear_backend": "auto", "device": "auto",
                                      "dtype": "auto", "cpu_kvcache_gib": None}
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.max_num_seqs = 1
    rebuilt = Config.from_kwargs(config.model, config.settings())  # what a tensor-parallel worker does
    assert rebuilt.settings() == config.settings() and rebuilt.resolved_from() == {}
    assert isinstance(config.requested, Settings) and config.requested.device == "auto"


def test_the_header_events_and_runner_read_the_same_resolved_config():
    rec = TraceRecorder()
    llm = LLM(MODEL, trace=rec, max_model_len=128, kvcache_block_size=16, max_num_batched_tokens=256)
    header, events = rec.header, {e.event: e.stats for e in rec.events}
    assert header["config"]["attention_backend"] == events["ENGINE_INIT"]["attention_backend"] == \
        events["ENGINE_READY"]["attention_backend"] == llm.model_runner.attention_backend == CPU_ATTENTION
    assert header["config"]["dtype"] == "float32" and header["requested"]["dtype"] == "auto"
    assert header["config"]["device"] == events["ENGINE_READY"]["device"] == str(llm.model_runner.device)
    # The KV cache's size, known once the runner has measured the memory, is the engine's config's.
    assert llm.config.num_kvcache_blocks == events["ENGINE_READY"]["num_kvcache_blocks"] == \
        llm.scheduler.block_manager.num_blocks
    assert header["config"]["num_kvcache_blocks"] is None  # asked: as many as the budget allows
