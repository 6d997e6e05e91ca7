"""With recording off, the scheduler, the block manager and the model runner never call the recorder, so
no payload is built (each emit site is guarded by ``rec.enabled``); and the benchmark's copy of the engine
without emit lines (``benchmarks/bench_recording.py``) really has none left."""

from __future__ import annotations

import ast
import inspect
import sys
from pathlib import Path

from nanovllm_teach.config import Config
from nanovllm_teach.engine.model_runner import ModelRunner
from nanovllm_teach.engine.batch import ScheduledBatch, ScheduledSeq
from nanovllm_teach.engine.scheduler import Scheduler
from nanovllm_teach.engine.sequence import Sequence
from nanovllm_teach.sampling_params import SamplingParams
from nanovllm_teach.trace import NullRecorder

HERE = Path(__file__).resolve().parent


class SilentRecorder(NullRecorder):
    """Recording off, and every call that would record fails the test: an emit site must not even call."""

    def record(self, phase, reason, payload, /):
        raise AssertionError(f"{payload.event} built and recorded with recording off")


def test_the_scheduler_and_block_manager_never_call_a_recorder_that_is_off():
    """Prefix-cache hits, chunked prefill, preemption, finishing, an abort and a rollback: every emit site."""
    scheduler = Scheduler(max_num_seqs=4, max_num_batched_tokens=12, max_model_len=64, eos=-1,
                          num_kvcache_blocks=9, block_size=4, recorder=SilentRecorder())
    shared = list(range(1, 10))
    for i, prompt in enumerate([shared, shared + [20], list(range(30, 40)), [7, 8]]):
        scheduler.add(Sequence(i, prompt, SamplingParams(temperature=0.0, max_tokens=8, ignore_eos=True), 4))
    steps = kinds = 0
    preempted = False
    while not scheduler.is_finished():
        checkpoint = scheduler.checkpoint()
        batch = scheduler.schedule()
        preempted |= any(seq.num_preemptions for seq in scheduler.accepted.values())
        if steps == 3:
            scheduler.rollback(checkpoint)  # as if the step had raised
            batch = scheduler.schedule()
        scheduler.postprocess(batch, [5] * len(batch.seqs))
        kinds |= 1 << batch.is_prefill
        steps += 1
        if steps == 6:
            assert scheduler.abort([max(scheduler.accepted)])
    assert kinds == 3 and preempted and steps > 6


def test_the_model_runner_never_calls_a_recorder_that_is_off(tmp_path):
    sys.path.insert(0, str(HERE))
    from checkpoints import make_random_checkpoint

    config = Config.from_kwargs(str(make_random_checkpoint(tmp_path / "ckpt")),
                                dict(kvcache_block_size=16, max_model_len=64, max_num_batched_tokens=64))
    runner = ModelRunner(config, 0, SilentRecorder())  # start-up events too
    token = runner.run(ScheduledBatch(True, [ScheduledSeq(0, [3, 4, 5], 0, 3, [0], 0.0, None)]))
    assert len(runner.run(ScheduledBatch(False, [ScheduledSeq(0, token, 3, 4, [0], 0.0, None)]))) == 1


def test_the_benchmark_deletes_every_emit_line():
    sys.path.insert(0, str(HERE.parent / "benchmarks"))
    from bench_recording import ENGINE_MODULES, DeleteEmitLines, engine_without_emit_lines

    for name in ENGINE_MODULES:
        __import__(name)
        tree = DeleteEmitLines().visit(ast.parse(inspect.getsource(sys.modules[name])))
        left = [ast.unparse(node) for node in ast.walk(tree) if isinstance(node, ast.Attribute)
                and node.attr in ("emit", "record", "enabled", "at_step", "paused")
                and isinstance(node.value, ast.Attribute) and node.value.attr == "rec"]
        assert not left, (name, left)
    real = {name: sys.modules[name] for name in ENGINE_MODULES}
    engine, deleted = engine_without_emit_lines()
    assert deleted >= 25 and engine.__module__ == ENGINE_MODULES[-1]
    assert engine is not real[ENGINE_MODULES[-1]].LLMEngine
    assert all(sys.modules[name] is module for name, module in real.items())  # the real engine untouched
