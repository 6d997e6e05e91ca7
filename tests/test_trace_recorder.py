"""The recorder (``nanovllm_teach.trace.recorder``): ``enabled`` is honoured, steps are scoped by
``at_step``, the warm-up by ``paused``, tensor fields keep their shapes (and values while the detail budget
lasts), values can be checked against the contract (``validate=True``), and recording never corrupts the engine: a failing sink or a
full disk stops recording with one warning while the engine carries on, Ctrl-C from a sink propagates, and
an existing trace file is replaced only once the engine has started.

The engine runs on a tiny random checkpoint (``checkpoints.make_random_checkpoint``).
"""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import msgspec
import pytest

from nanovllm_teach.trace import (
    ContractError, NullRecorder, RecordingStopped, TraceRecorder, check_consistency, load_trace,
)
from nanovllm_teach.trace.events import EngineReady, GenerateFinish, GenerateStart, PrepareDecodeTensors

HERE = Path(__file__).resolve().parent
SETTINGS = dict(kvcache_block_size=16, max_model_len=128, max_num_batched_tokens=256)
PROMPTS = [[5, 6, 7, 8, 9], list(range(10, 40)), list(range(40, 60))]
HEADER = {"schema": "nanovllm_teach.trace", "version": 2}


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    sys.path.insert(0, str(HERE))
    from checkpoints import make_random_checkpoint
    return make_random_checkpoint(tmp_path_factory.mktemp("recorder") / "ckpt")


def _generate(checkpoint: Path, trace, **settings) -> list[list[int]]:
    """Greedy token ids of PROMPTS (8 tokens each), recorded into ``trace`` (a path, a recorder or None)."""
    import torch
    from nanovllm_teach import LLM, SamplingParams

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        llm = LLM(checkpoint, trace=trace, **{**SETTINGS, **settings})
        try:
            params = SamplingParams(temperature=0.0, max_tokens=8, ignore_eos=True)
            return [out["token_ids"] for out in llm.generate(PROMPTS, params, use_tqdm=False)]
        finally:
            llm.close()
    finally:
        torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def untraced(checkpoint) -> list[list[int]]:
    return _generate(checkpoint, None)


# ---- scopes ----------------------------------------------------------------------------------------------

def test_a_disabled_or_paused_recorder_records_nothing():
    rec = TraceRecorder()
    rec.record("ingress", "batch_enters_engine", GenerateStart(n_prompts=1))
    with rec.paused():
        assert rec.enabled is False
        rec.record("ingress", "batch_enters_engine", GenerateStart(n_prompts=2))
        with rec.paused():
            rec.record("ingress", "batch_enters_engine", GenerateStart(n_prompts=3))
        assert rec.enabled is False
    assert rec.enabled is True
    rec.enabled = False
    rec.record("ingress", "batch_enters_engine", GenerateStart(n_prompts=4))
    assert [e.stats["n_prompts"] for e in rec.events] == [1]


def test_at_step_scopes_events_and_restores_the_outer_step():
    rec = TraceRecorder()
    with rec.at_step(3):
        rec.record("ingress", "batch_enters_engine", GenerateStart(n_prompts=1))
        with pytest.raises(RuntimeError):
            with rec.at_step(4):
                assert rec.step == 4
                rec.record("ingress", "batch_enters_engine", GenerateStart(n_prompts=2))
                raise RuntimeError("the step failed")
        assert rec.step == 3
    assert rec.step is None
    rec.record("ingress", "batch_enters_engine", GenerateStart(n_prompts=3))
    assert [e.step for e in rec.events] == [3, 4, None]
    null = NullRecorder()
    with null.at_step(7), null.paused():
        null.record("ingress", "batch_enters_engine", GenerateStart(n_prompts=1))
    assert null.step is None and null.enabled is False


class FakeTensor:
    """Has ``shape`` and ``tolist``: the recorder treats it as a tensor (and never imports torch)."""

    def __init__(self, values: list) -> None:
        self.values = values
        self.shape = (len(values),) + ((len(values[0]),) if values and isinstance(values[0], list) else ())

    def tolist(self) -> list:
        return self.values


def test_tensor_fields_keep_their_shape_and_values_while_the_budget_lasts():
    rec = TraceRecorder(detail_decode_steps=1)
    tensors = dict(input_ids=FakeTensor([5]), positions=FakeTensor([4]), context_lens=FakeTensor([5]),
                   slot_mapping=FakeTensor([4]), block_tables=FakeTensor([[0]]))
    for _ in range(2):
        rec.record("decode", "one_token_per_sequence", PrepareDecodeTensors(batch_size=1, **tensors))
    first, second = (e.stats for e in rec.events)
    assert first["block_tables_shape"] == [1, 1] and first["input_ids"] == [5] and first["block_tables"] == [[0]]
    assert second["input_ids_shape"] == [1] and "input_ids" not in second, "past the budget: shapes only"


def test_validate_checks_each_value_against_the_contract():
    rec = TraceRecorder(validate=True)
    rec.record("ingress", "batch_enters_engine", GenerateStart(n_prompts=2))
    with pytest.raises(ContractError, match=r"GENERATE_START.n_prompts: expected `int`, got `str`"):
        rec.record("ingress", "batch_enters_engine", GenerateStart(n_prompts="two"))
    # A field the event does not have, or one left out, cannot even be built.
    with pytest.raises(TypeError, match="colour"):
        GenerateStart(n_prompts=2, colour="blue")
    with pytest.raises(TypeError, match="decode_steps"):
        GenerateFinish(total_steps=1, prefill_steps=1, n_outputs=1)
    with pytest.raises(ValueError, match="unknown event 'GENERATE_START' or phase 'warmup'"):
        rec.record("warmup", "batch_enters_engine", GenerateStart(n_prompts=1))
    assert len(rec.events) == 1


def test_every_engine_emit_site_follows_the_contract(checkpoint, tmp_path):
    """The engine under every scenario a trace can show: preemption (a tiny cache), chunked prefill (a
    small budget), prefix-cache hits (a shared prompt, two calls), static batching."""
    for settings in (dict(num_kvcache_blocks=5), dict(max_num_batched_tokens=16), dict(),
                     dict(scheduling_policy="static")):
        rec = TraceRecorder(validate=True)
        _generate(checkpoint, rec, **settings)
        _generate(checkpoint, rec, **settings) if not settings else None
        assert rec.stopped_by is None
        names = {e.event for e in rec.events}
        assert {"ENGINE_INIT", "KV_BUDGET_ESTIMATE", "STEP_DONE", "SAMPLE"} <= names, settings


# ---- recording never corrupts the engine ---------------------------------------------------------------

def test_a_failing_sink_stops_recording_and_the_engine_carries_on(checkpoint, untraced, tmp_path):
    seen = []

    def sink(event):
        seen.append(event.i)
        if event.event == "STEP_DONE" and event.step == 2:
            raise RuntimeError("the console went away")

    path = tmp_path / "run.jsonl"
    rec = TraceRecorder(path, sinks=[sink])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tokens = _generate(checkpoint, rec)
    stopped = [w for w in caught if issubclass(w.category, RecordingStopped)]
    assert len(stopped) == 1 and "RuntimeError: the console went away" in str(stopped[0].message)
    assert tokens == untraced
    assert rec.enabled is False and isinstance(rec.stopped_by, RuntimeError)
    assert seen == list(range(seen[-1] + 1)) and len(rec.events) == len(seen)  # nothing after the failure
    trace = load_trace(path)  # whole lines only: the failing event itself was written before the sink ran
    assert len(trace.events) == len(seen) and trace.events[-1].event == "STEP_DONE"


def test_ctrl_c_from_a_sink_propagates(checkpoint):
    def sink(event):
        if event.event == "SAMPLE":
            raise KeyboardInterrupt

    rec = TraceRecorder(sinks=[sink], validate=True)
    with pytest.raises(KeyboardInterrupt):
        _generate(checkpoint, rec)
    assert rec.enabled is True and rec.stopped_by is None
    assert "REQUEST_ABORT" in {e.event for e in rec.events}  # the engine's clean-up, checked too


def _steps_on_disk(path: Path) -> set[int]:
    return {json.loads(line)["step"] for line in path.read_text().splitlines()[1:] if json.loads(line)["step"]}


def test_a_step_is_on_disk_when_it_returns_and_a_generate_when_it_returns_or_raises(checkpoint, tmp_path):
    """``step()`` flushes its lines; ``generate`` defers its steps' flushes (FLUSH_SECONDS) but leaves the
    file whole when it returns, and when Ctrl-C stops it, up to the interrupted step."""
    from nanovllm_teach import LLM, SamplingParams

    stop_at = []

    def sink(event):
        if stop_at and event.event == "SAMPLE" and event.step == stop_at[0]:
            raise KeyboardInterrupt

    path = tmp_path / "run.jsonl"
    rec = TraceRecorder(path, sinks=[sink])
    llm = LLM(checkpoint, trace=rec, **SETTINGS)
    try:
        params = SamplingParams(temperature=0.0, max_tokens=8, ignore_eos=True)
        llm.add_request(PROMPTS[0], params)
        llm.step()
        llm.step()
        assert _steps_on_disk(path) == {1, 2}
        while not llm.is_finished():
            llm.step()
        llm.generate(PROMPTS, params, use_tqdm=False)
        assert _steps_on_disk(path) == set(range(1, llm.num_steps + 1))
        assert path.read_text().splitlines()[-1] == msgspec.json.encode(rec.events[-1]).decode()
        stop_at.append(llm.num_steps + 3)
        with pytest.raises(KeyboardInterrupt):
            llm.generate(PROMPTS, params, use_tqdm=False)
        # The interrupted step was rolled back, and its number is reused; its events up to the interrupt are
        # on disk with the steps before it.
        assert _steps_on_disk(path) == set(range(1, stop_at[0] + 1))
    finally:
        llm.close()


DISK_FULL = textwrap.dedent("""
    import json, resource, sys, warnings
    sys.path.insert(0, sys.argv[1])
    import torch
    from test_trace_recorder import _generate
    from nanovllm_teach.trace import RecordingStopped
    torch.set_num_threads(1)
    limit = int(sys.argv[4])
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))  # no file grows past this: "disk full"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tokens = _generate(sys.argv[2], sys.argv[3])
    print(json.dumps({"tokens": tokens, "warnings": [str(w.message) for w in caught
                                                     if issubclass(w.category, RecordingStopped)]}))
""")


@pytest.fixture(scope="module")
def full_trace(checkpoint, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("full") / "run.jsonl"
    _generate(checkpoint, path)
    return path


@pytest.mark.parametrize("when", ["start-up", "mid-run"])
def test_a_full_disk_stops_recording_and_the_engine_carries_on(checkpoint, untraced, full_trace, tmp_path, when):
    path = tmp_path / "run.jsonl"
    header_bytes = len(full_trace.read_bytes().split(b"\n", 1)[0]) + 1
    # Room for the header and a few start-up events, or for half of the whole trace.
    limit = header_bytes + 300 if when == "start-up" else full_trace.stat().st_size // 2
    done = subprocess.run([sys.executable, "-c", DISK_FULL, str(HERE), str(checkpoint), str(path), str(limit)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["tokens"] == untraced
    assert len(result["warnings"]) == 1 and "OSError" in result["warnings"][0]
    assert path.stat().st_size <= limit
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kept = load_trace(path, strict=False)  # the last line may be cut short
    full = load_trace(full_trace)
    assert [e.i for e in kept.events] == list(range(len(kept.events))) and len(kept.events) < len(full.events)
    assert [e.event for e in kept.events] == [e.event for e in full.events[:len(kept.events)]]
    assert not list(tmp_path.glob(".*.partial"))


def test_an_existing_trace_is_replaced_only_once_the_engine_has_started(tmp_path):
    path = tmp_path / "run.jsonl"
    path.write_text("yesterday's trace\n")
    rec = TraceRecorder(path)
    rec.open(HEADER)
    rec.record("ingress", "batch_enters_engine", GenerateStart(n_prompts=1))
    assert path.read_text() == "yesterday's trace\n"
    rec.record("init", "engine_ready", EngineReady(num_kvcache_blocks=4, eos_token_id=2, attention_backend="torch",
                                                   device="cpu"))
    assert [e.event for e in load_trace(path).events] == ["GENERATE_START", "ENGINE_READY"]
    rec.record("ingress", "batch_enters_engine", GenerateStart(n_prompts=2))  # still the same file
    rec.close()
    assert len(load_trace(path).events) == 3 and not list(tmp_path.glob(".*.partial"))

    dropped = TraceRecorder(path)  # never ready, never closed: an engine that failed to start
    dropped.open(HEADER)
    dropped.record("ingress", "batch_enters_engine", GenerateStart(n_prompts=9))
    del dropped
    gc.collect()
    assert len(load_trace(path).events) == 3 and not list(tmp_path.glob(".*.partial"))


def _start_engine(model: Path, trace: Path) -> str:
    """Try to start an engine; the error's type (the traceback, and the recorder it holds, is dropped)."""
    from nanovllm_teach import LLM
    try:
        LLM(model, trace=trace, **SETTINGS)
    except Exception as error:
        return type(error).__name__
    return "started"


def test_an_engine_that_fails_to_start_leaves_the_old_trace_alone(checkpoint, tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    for file in checkpoint.iterdir():
        data = file.read_bytes()
        (broken / file.name).write_bytes(data[:len(data) // 3] if file.suffix == ".safetensors" else data)
    path = tmp_path / "run.jsonl"
    path.write_text("yesterday's trace\n")
    assert _start_engine(broken, path) != "started"
    gc.collect()
    assert path.read_text() == "yesterday's trace\n"
    assert not list(tmp_path.glob(".*.partial"))


def test_a_recorded_run_is_whole_and_consistent(full_trace):
    trace = load_trace(full_trace)
    assert check_consistency(trace) == [] and len(trace.requests) == len(PROMPTS)
