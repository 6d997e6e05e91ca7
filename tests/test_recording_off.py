"""With recording off no payload is built: the resources layer (scheduler, block manager, the step's
transaction) holds no recorder at all, it returns decision records; the layer that turns them (and what the
runner reports) into events (``engine/teaching.py``) returns at the first line of every method; the model
runner never calls the recorder (each emit site is guarded by ``rec.enabled``) and reports nothing. And the benchmark's copy of the engine without
emit lines (``benchmarks/bench_recording.py``) really has none left."""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys
from pathlib import Path

import pytest

import nanovllm_teach.engine.teaching as teaching_module
from nanovllm_teach.config import Config
from nanovllm_teach.engine import transaction
from nanovllm_teach.engine.batch import ScheduledBatch, ScheduledSeq
from nanovllm_teach.engine.decisions import Aborted
from nanovllm_teach.engine.model_runner import ModelRunner
from nanovllm_teach.engine.scheduler import Scheduler
from nanovllm_teach.engine.sequence import Sequence
from nanovllm_teach.engine.teaching import Teaching
from nanovllm_teach.sampling_params import SamplingParams
from nanovllm_teach.trace import NullRecorder, TraceRecorder
from nanovllm_teach.trace.payload import Payload
from nanovllm_teach.trace.recorder import Recorder

HERE = Path(__file__).resolve().parent
RESOURCES_LAYER = ("nanovllm_teach.engine.block_manager", "nanovllm_teach.engine.scheduler",
                   "nanovllm_teach.engine.transaction", "nanovllm_teach.engine.decisions",
                   "nanovllm_teach.engine.sequence", "nanovllm_teach.engine.batch")
TEACHING_METHODS = ("engine_starting", "engine_ready", "enqueued", "scheduled", "ran", "step_done", "postprocessed",
                    "aborted", "rolled_back")


class SilentRecorder(NullRecorder):
    """Recording off, and every call that would record fails the test: an emit site must not even call."""

    def record(self, phase, reason, payload, /):
        raise AssertionError(f"{payload.event} built and recorded with recording off")


class Poison:
    """An argument that fails the test if anything so much as looks at it."""

    def __getattr__(self, name):
        raise AssertionError(f"an argument's {name} was read with recording off")


# ---- the resources layer holds no recorder ----------------------------------------------------------


def _imported_modules(source: str) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            names.add(node.module or "")
    return names


@pytest.mark.parametrize("name", RESOURCES_LAYER)
def test_the_resources_layer_imports_nothing_from_the_trace(name):
    __import__(name)
    imported = _imported_modules(inspect.getsource(sys.modules[name]))
    assert not {m for m in imported if m.startswith("nanovllm_teach.trace")}, (name, imported)


def test_the_resources_layer_does_not_even_load_the_trace_package():
    """Imported on its own, in a fresh interpreter, the resources layer loads no trace module (and no torch)."""
    code = ("import sys\n" + "".join(f"import {name}\n" for name in RESOURCES_LAYER) +
            "print(sorted(m for m in sys.modules if m.startswith('nanovllm_teach.trace') or m == 'torch'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_scheduler_and_block_manager_hold_no_recorder():
    scheduler = Scheduler(max_num_seqs=4, max_num_batched_tokens=12, max_model_len=64, eos=-1,
                          num_kvcache_blocks=9, block_size=4)
    for obj in (scheduler, scheduler.block_manager):
        assert not hasattr(obj, "rec") and not hasattr(obj, "recorder"), type(obj).__name__
        assert not any(isinstance(value, Recorder) for value in vars(obj).values()), type(obj).__name__
        assert "recorder" not in inspect.signature(type(obj)).parameters


# ---- the teaching layer returns at once ---------------------------------------------------------------


def _drive(teaching: Teaching) -> tuple[int, bool, int]:
    """The scheduler through prefix-cache hits, chunked prefill, preemption, finishing, an abort and a
    rollback, each decision handed to ``teaching`` as ``LLMEngine`` hands it. Returns (the step kinds seen
    as bits, whether anyone was preempted, steps)."""
    scheduler = Scheduler(max_num_seqs=4, max_num_batched_tokens=12, max_model_len=64, eos=-1,
                          num_kvcache_blocks=9, block_size=4)
    shared = list(range(1, 10))
    for i, prompt in enumerate([shared, shared + [20], list(range(30, 40)), [7, 8]]):
        scheduler.add(Sequence(i, prompt, SamplingParams(temperature=0.0, max_tokens=8, ignore_eos=True), 4))
    steps = kinds = 0
    preempted = False

    def schedule():
        checkpoint = transaction.checkpoint(scheduler)
        batch, decisions = scheduler.schedule()
        teaching.scheduled(batch, decisions, scheduler, steps)
        return checkpoint, batch

    while not scheduler.is_finished():
        checkpoint, batch = schedule()
        preempted |= any(seq.num_preemptions for seq in scheduler.accepted.values())
        if steps == 5:  # a decode that preempts: undoing it gives blocks back
            teaching.rolled_back(transaction.rollback(scheduler, checkpoint))  # as if the step had raised
            checkpoint, batch = schedule()
        seqs = [scheduler.accepted[entry.seq_id] for entry in batch.seqs]
        teaching.postprocessed(scheduler.postprocess(batch, [5] * len(batch.seqs)), seqs)
        kinds |= 1 << batch.is_prefill
        steps += 1
        if steps == 6:
            victim = scheduler.accepted[max(scheduler.accepted)]
            decisions = transaction.abort(scheduler, [victim.seq_id])
            assert any(isinstance(d, Aborted) for d in decisions)
            teaching.aborted(decisions, {victim.seq_id: victim})
    return kinds, preempted, steps


def test_the_scenario_reaches_every_emit_site_when_recording():
    """The control for the test below: recording on, the same scenario says every kind of event the
    teaching layer has, an undone step included."""
    rec = TraceRecorder(validate=True)
    kinds, preempted, steps = _drive(Teaching(rec))
    assert kinds == 3 and preempted and steps > 6
    assert {e.event for e in rec.events} == {"SCHEDULE_PREFILL", "SCHEDULE_DECODE", "PREFIX_CACHE_HIT",
                                             "BLOCK_ALLOCATE", "BLOCK_FREE", "PREEMPT", "STATE_TRANSITION",
                                             "REQUEST_ABORT"}
    assert any(e.reason == "step_rolled_back" for e in rec.events)


def test_teaching_never_builds_a_payload_with_recording_off(monkeypatch):
    """Every event class the teaching layer builds fails the test if it is built; so does a ``record`` call."""
    def refuse(name):
        def build(*args, **kwargs):
            raise AssertionError(f"a {name} payload was built with recording off")
        return build

    payloads = [name for name, value in vars(teaching_module).items()
                if isinstance(value, type) and issubclass(value, Payload)]
    assert len(payloads) >= 8
    for name in payloads:
        monkeypatch.setattr(teaching_module, name, refuse(name))
    kinds, preempted, steps = _drive(Teaching(SilentRecorder()))
    assert kinds == 3 and preempted and steps > 6


@pytest.mark.parametrize("method", TEACHING_METHODS)
def test_every_teaching_method_returns_at_its_first_line_with_recording_off(method):
    """Not one of its arguments is looked at: nothing is computed for a trace nobody keeps."""
    arity = len(inspect.signature(getattr(Teaching, method)).parameters) - 1
    assert getattr(Teaching(SilentRecorder()), method)(*[Poison() for _ in range(arity)]) is None


# ---- the execution layer ------------------------------------------------------------------------------


def test_the_model_runner_never_calls_a_recorder_that_is_off(tmp_path):
    sys.path.insert(0, str(HERE))
    from checkpoints import make_random_checkpoint

    config = Config.from_kwargs(str(make_random_checkpoint(tmp_path / "ckpt")),
                                dict(kvcache_block_size=16, max_model_len=64, max_num_batched_tokens=64))
    runner = ModelRunner(config, 0, SilentRecorder())  # start-up events too
    prefill = runner.run(ScheduledBatch(True, [ScheduledSeq(0, [3, 4, 5], 0, 3, [0], 0.0, None)]))
    decode = runner.run(ScheduledBatch(False, [ScheduledSeq(0, prefill.token_ids, 3, 4, [0], 0.0, None)]))
    assert len(decode.token_ids) == 1
    assert prefill.report is None and decode.report is None  # nothing built for a trace nobody keeps


# ---- the benchmark's emit-free engine -----------------------------------------------------------------


def test_the_benchmark_deletes_every_emit_line():
    sys.path.insert(0, str(HERE.parent / "benchmarks"))
    from bench_recording import ENGINE_MODULES, DeleteEmitLines, engine_without_emit_lines

    for name in ENGINE_MODULES:
        __import__(name)
        tree = DeleteEmitLines().visit(ast.parse(inspect.getsource(sys.modules[name])))
        left = [ast.unparse(node) for node in ast.walk(tree) if isinstance(node, ast.Attribute)
                and node.attr in ("emit", "record", "enabled", "at_step", "paused", "flushing_deferred")
                and isinstance(node.value, ast.Attribute) and node.value.attr == "rec"]
        left += [ast.unparse(node) for node in ast.walk(tree) if isinstance(node, ast.Call)
                 and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Attribute)
                 and node.func.value.attr == "teaching"]
        assert not left, (name, left)
    real = {name: sys.modules[name] for name in ENGINE_MODULES}
    engine, deleted = engine_without_emit_lines()
    assert deleted >= 30 and engine.__module__ == ENGINE_MODULES[-1]  # 37 emit sites on the engine's path
    assert engine is not real["nanovllm_teach.llm"].LLM
    assert all(sys.modules[name] is module for name, module in real.items())  # the real engine untouched
    # The copy is built from copies all the way down: its engine, its teaching layer, its model runner.
    stripped_engine = engine.__mro__[2]  # LLM, its shell (Frontend), the core
    assert stripped_engine.__name__ == "LLMEngine" and stripped_engine is not real["nanovllm_teach.engine.llm_engine"].LLMEngine
    stripped_teaching = stripped_engine.__init__.__globals__["Teaching"]
    assert stripped_teaching is not Teaching
    assert engine.__init__.__globals__["ModelRunner"] is not ModelRunner
    # An emit-free Teaching method does nothing at all, even given a recorder that records.
    rec = TraceRecorder()
    for method in TEACHING_METHODS:
        arity = len(inspect.signature(getattr(stripped_teaching, method)).parameters) - 1
        assert getattr(stripped_teaching(rec), method)(*[Poison() for _ in range(arity)]) is None
    assert not rec.events
