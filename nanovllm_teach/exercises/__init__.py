"""Classroom exercises with an autograder that diffs traces.

Each exercise removes one piece of the engine: the student rewrites it from a template, and the grader
plugs the student's code into the real engine, runs fixed workloads, and compares the TEACHING trace with
the reference engine's, event for event. A failure names the step and the event where the two runs first
part ways, in plain words ("step 12: you preempted seq 1 (…), the reference preempted seq 4 (…)").

======================  ===============================================================================
``schedule_prefill``    admitting prompts: budget, chunking, prefix cache (``Scheduler._schedule_prefill``)
``schedule_decode``     decode scheduling with preemption (``Scheduler._schedule_decode``)
``postprocess``         taking in sampled tokens, the finish rules (``Scheduler.postprocess``)
``can_append``          can a sequence grow by one token, and its new block (``BlockManager``)
``allocate``            a new sequence's block table: shared prefix blocks, ref counts (``BlockManager``)
``block_hash``          the chained prefix-cache hash (``compute_block_hash``)
``decode_slot``         the decode slot mapping (``model_runner.decode_slot``)
``kv_cache_blocks``     bytes per KV block and blocks per memory budget (``utils.memory``)
``trace_quiz``          questions about a recorded run, answered from its trace
``scheduling_policy``   open-ended: who is admitted next (``scheduler.choose_next``), graded by latency
======================  ===============================================================================

``scheduling_policy`` has no single right answer: the grader runs the policy on the simulated engine on
timed workloads and compares its time to first token with first come, first served (``policy_grading``).

From a terminal: ``nanovllm-teach exercises`` lists them with their templates; copy one, fill it in, and
``nanovllm-teach grade decode_slot my_decode_slot.py``. From a notebook::

    from nanovllm_teach.exercises import check, hint
    check("decode_slot", decode_slot)      # prints the verdict, returns a GradeResult
    print(hint("decode_slot", 1))          # stuck? a first hint; hint("decode_slot", 2) says more

The student's code runs only in a child process, under a time limit; the reference is the engine as
shipped, recorded once per process (``references``); the verdict is computed from the traces (see
``engine_grading``). Grading is mostly start-up (importing torch and transformers): the first grade in a
process takes a few seconds, the next ones a fraction of a second.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nanovllm_teach.exercises.base import DEFAULT_TIME_LIMIT_S, Exercise, GradeResult
from nanovllm_teach.exercises.engine_exercises import (
    ALLOCATE, BLOCK_HASH, CAN_APPEND, DECODE_SLOT, KV_CACHE_BLOCKS, SCHEDULE_DECODE, SCHEDULING_POLICY,
)
from nanovllm_teach.exercises.references import reference_trace
from nanovllm_teach.exercises.scheduler_exercises import POSTPROCESS, SCHEDULE_PREFILL
from nanovllm_teach.exercises.solution_files import load_solution
from nanovllm_teach.exercises.trace_quiz import TRACE_QUIZ, quiz_trace

EXERCISES: dict[str, Exercise] = {ex.name: ex for ex in [
    SCHEDULE_PREFILL, SCHEDULE_DECODE, POSTPROCESS, CAN_APPEND, ALLOCATE, BLOCK_HASH, DECODE_SLOT,
    KV_CACHE_BLOCKS, TRACE_QUIZ, SCHEDULING_POLICY,
]}


def get_exercise(name: str) -> Exercise:
    if name not in EXERCISES:
        raise KeyError(f"unknown exercise {name!r}; the exercises are: {', '.join(EXERCISES)}")
    return EXERCISES[name]


def hint(exercise: str, level: int = 1) -> str:
    """Hint ``level`` of ``exercise``: 1 says where to look, 2 says how; none of them is the code."""
    return get_exercise(exercise).hint(level)


def grade(exercise: str, solution: str | Path | dict[str, Any], model: str | Path | None = None,
          time_limit: float = DEFAULT_TIME_LIMIT_S) -> GradeResult:
    """Grade a solution file (or the names a solution defines) against ``exercise``.

    The file is executed only in the grading child process; a file that cannot be loaded there (a syntax
    error, a failing import) fails with the reason. ``time_limit``: the most seconds one call of the
    solution's code may take.
    """
    ex = get_exercise(exercise)
    if isinstance(solution, (str, Path)):
        solution = Path(solution)
        if not solution.is_file():
            raise FileNotFoundError(f"no such solution file: {solution}")
    return ex.grade(solution, model, time_limit)


def check(exercise: str, *functions: Any, model: str | Path | None = None,
          time_limit: float = DEFAULT_TIME_LIMIT_S, **named: Any) -> GradeResult:
    """Grade functions defined in a notebook; prints the verdict and returns it.

    Pass the exercise's functions in order (``check("can_append", can_append, may_append)``) or by name
    (``check("can_append", may_append=mine, can_append=other)``). The quiz takes its answers dict (or a
    function of the trace): ``check("trace_quiz", {"num_steps": 42, ...})``.
    """
    ex = get_exercise(exercise)
    if len(functions) > len(ex.functions):
        raise TypeError(f"{ex.name} takes {len(ex.functions)} function(s): {', '.join(ex.functions)}")
    solution = dict(zip(ex.functions, functions))
    solution.update(named)
    result = ex.grade(solution, model, time_limit)
    print(result.message)
    return result


__all__ = ["EXERCISES", "Exercise", "GradeResult", "check", "get_exercise", "grade", "hint", "load_solution",
           "quiz_trace", "reference_trace"]
