"""Where the grader's reference traces come from, and that each is recorded once per process.

Grading an exercise is mostly start-up: importing torch and transformers and starting the engine take
seconds, the graded workloads a fraction of a second each. So a process whose engine is the one on disk
records the references itself, before the student's code is forked off (``nanovllm-teach grade``, a test
session, a notebook that patched nothing); one where an engine function was replaced asks a fresh
interpreter, which records every graded workload at once. Both give the same traces.
"""

from __future__ import annotations

import subprocess

import pytest

from nanovllm_teach.cli import main
from nanovllm_teach.engine import scheduler
from nanovllm_teach.exercises import EXERCISES, references
from nanovllm_teach.exercises.scheduling_policy.workloads import LONG_PROMPTS_FIRST
from nanovllm_teach.exercises.references import PendingReferences, graded_workloads, reference_trace, replaced_definitions
from nanovllm_teach.exercises.workloads import TIGHT_CACHE
from nanovllm_teach.trace import diff_traces


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


def test_a_replaced_engine_function_is_found():
    assert replaced_definitions() == []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(scheduler, "choose_next", _last_come_first_served)
        patch.setattr(scheduler.Scheduler, "schedule_decode", lambda self: [])
        assert replaced_definitions() == ["nanovllm_teach.engine.scheduler.choose_next",
                                          "nanovllm_teach.engine.scheduler.Scheduler.schedule_decode"]
    assert replaced_definitions() == []


def test_the_cli_records_its_references_in_its_own_process(no_references, monkeypatch, capsys):
    _no_interpreter(monkeypatch)
    assert main(["grade", "decode_slot", str(EXERCISES["decode_slot"].solution_path)]) == 0
    assert capsys.readouterr().out.startswith("PASS decode_slot")
    assert set(name for name, _ in references._recorded) == {w.name for w in EXERCISES["decode_slot"].workloads}


def test_a_patched_process_gets_the_shipped_engines_references_from_one_interpreter(no_references, monkeypatch):
    graded = graded_workloads()
    here = {name: reference_trace(graded[name]) for name in ("tight_cache", LONG_PROMPTS_FIRST.name)}
    references._recorded.clear()
    monkeypatch.setattr(scheduler, "choose_next", _last_come_first_served)  # as a notebook cell might
    there = reference_trace(LONG_PROMPTS_FIRST)
    assert there is not here[LONG_PROMPTS_FIRST.name] and diff_traces(there, here[LONG_PROMPTS_FIRST.name]) is None
    assert set(name for name, _ in references._recorded) == set(graded)  # every one, from that interpreter
    assert diff_traces(reference_trace(TIGHT_CACHE), here["tight_cache"]) is None
    _no_interpreter(monkeypatch)
    assert set(PendingReferences(tuple(graded.values())).traces()) == set(graded)
