"""Where the grader's reference traces come from, and that each is recorded once per process.

The reference must be the engine as shipped: a notebook cell or a solution may have patched the engine in
the grader's process, and a reference recorded there would agree with it. So a reference is recorded by a
fresh interpreter of the shipped package, which records every graded workload at once; an interrupted
recording is stopped and leaves nothing behind. Only the grade command, which runs nothing of a learner's in
its own process, records there (``recorded_here``).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from nanovllm_teach.cli import main
from nanovllm_teach.engine import scheduler
from nanovllm_teach.exercises import references
from nanovllm_teach.exercises.references import PendingReferences, graded_workloads, record_graded, reference_trace
from nanovllm_teach.exercises.scheduling_policy.workloads import LONG_PROMPTS_FIRST
from nanovllm_teach.step_workloads import TIGHT_CACHE
from nanovllm_teach.trace import diff_traces, load_trace


@pytest.fixture
def no_references(monkeypatch):
    """A process that has recorded no reference yet."""
    monkeypatch.setattr(references, "_recorded", {})


def _no_interpreter(monkeypatch):
    """No interpreter recording references may start (the sandboxed worker, a learner's, may)."""
    popen = subprocess.Popen

    def refuse(command, *args, **kwargs):
        if "nanovllm_teach.exercises.references" in " ".join(map(str, command)):
            raise AssertionError("a reference interpreter was started")
        return popen(command, *args, **kwargs)
    monkeypatch.setattr(subprocess, "Popen", refuse)


def _last_come_first_served(waiting):
    return len(waiting) - 1


def test_a_patched_process_gets_the_shipped_engines_references_from_one_interpreter(no_references, monkeypatch,
                                                                                    tmp_path):
    shipped = reference_trace(LONG_PROMPTS_FIRST)
    references._recorded.clear()
    monkeypatch.setattr(scheduler, "choose_next", _last_come_first_served)  # as a notebook cell might
    record_graded(LONG_PROMPTS_FIRST, tmp_path / "patched.jsonl")
    patched = load_trace(tmp_path / "patched.jsonl")
    assert diff_traces(patched, shipped) is not None  # recorded in this process, it would follow the patch
    there = reference_trace(LONG_PROMPTS_FIRST)
    assert there is not shipped and diff_traces(there, shipped) is None
    graded = graded_workloads()
    assert set(name for name, _ in references._recorded) == set(graded)  # every one, from that interpreter
    _no_interpreter(monkeypatch)
    assert set(PendingReferences(tuple(graded.values())).traces()) == set(graded)


def test_an_interrupted_recording_is_stopped_and_leaves_no_folder(no_references, monkeypatch):
    pending = PendingReferences((TIGHT_CACHE,))
    process, folder = pending._process, pending._folder.name

    def interrupted(timeout=None):
        raise KeyboardInterrupt
    monkeypatch.setattr(process, "communicate", interrupted)
    with pytest.raises(KeyboardInterrupt):
        pending.traces()
    assert process.poll() is not None
    assert not Path(folder).exists()
    assert references._recorded == {}


def test_the_grade_command_records_its_references_in_its_own_process(no_references, monkeypatch, tmp_path, capsys):
    shipped = reference_trace(TIGHT_CACHE)  # from a fresh interpreter
    references._recorded.clear()
    _no_interpreter(monkeypatch)
    solution = tmp_path / "decode_slot.py"
    solution.write_text("def decode_slot(seq, block_size):\n    position = seq.num_tokens - 1\n"
                        "    return seq.block_table[position // block_size] * block_size + position % block_size\n")
    assert main(["grade", "decode_slot", str(solution)]) == 0
    assert capsys.readouterr().out.startswith("PASS decode_slot")
    assert diff_traces(references._recorded[("tight_cache", "")], shipped) is None
    assert references._here is False  # only for the length of the command


def test_a_reference_engine_that_fails_is_said_so_in_this_process_and_in_a_fresh_one(no_references, tmp_path):
    broken = tmp_path / "no_model_here"
    broken.mkdir()
    with pytest.raises(RuntimeError, match="^the reference engine failed on workload .*tight_cache"):
        PendingReferences((TIGHT_CACHE,), broken).traces()
    with references.recorded_here(), pytest.raises(RuntimeError,
                                                    match="^the reference engine failed on workload tight_cache: "):
        PendingReferences((TIGHT_CACHE,), broken).traces()
    assert references._recorded == {}
