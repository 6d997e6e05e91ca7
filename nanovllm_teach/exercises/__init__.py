"""Classroom exercises with an autograder.

Each exercise removes one piece of the engine: the learner rewrites it from a template, and the grader
plugs the learner's code into the real engine, runs fixed workloads, and compares what the engine decided
with what the reference engine decided, step by step, in the TEACHING vocabulary. A failure names the step
and the decision where the two runs first part ways, in plain words ("step 12: you preempted seq 1 (…),
the reference preempted seq 4 (…)").

Every exercise is a folder here, found automatically: ``<name>/__init__.py`` defines it (``EXERCISE``: what
the learner writes, the engine point it replaces, the checks on what it returns, the hints, the graded
workloads), ``<name>/template.py`` is where the learner starts and ``<name>/solution.py`` the reference.
``nanovllm-teach exercises`` lists them (in the order each folder's ``ORDER`` gives) and
``nanovllm-teach exercises start NAME`` copies a template; adding an exercise is adding a folder, and
nothing else (see the teachers' section of the README).

``tp_slice`` is graded by what every tensor-parallel rank holds once the weights are loaded with the
learner's slices (``tp_slice/grading.py``). ``scheduling_policy`` has no single right answer: the grader runs the
policy on the simulated engine on timed workloads and compares its time to first token with first come,
first served (``scheduling_policy/grading.py``). An exercise graded its own way keeps its grader in its
folder (``grading.py``); the modules here are the machinery every exercise shares.

From a terminal: ``nanovllm-teach exercises start decode_slot`` writes ``decode_slot.py``; fill it in, and
``nanovllm-teach grade decode_slot decode_slot.py``.
From a notebook::

    from nanovllm_teach.exercises import check, hint
    check("decode_slot", decode_slot)      # prints the verdict, returns a GradeResult
    print(hint("decode_slot", 1))          # stuck? a first hint; hint("decode_slot", 2) says more

The learner's code runs in a bubblewrap sandbox where it can (``isolation``, ``worker``: the engine stays
outside and calls it with plain data), else in a child process, under time limits; the reference is the
engine as shipped, recorded once per process (``references``); the verdict is computed from the two runs
(see ``engine_grading``). ``nanovllm-teach grade EXERCISE CLASS/`` grades a class (``classroom``,
``gradebook``, ``gradescope``; a teacher's guide: ``docs/teaching.md``). Grading is mostly start-up
(importing torch and transformers): the first grade in a process takes a few seconds, the next ones a
fraction of a second.
"""

from __future__ import annotations

import functools
import importlib
from pathlib import Path
from typing import Any

from nanovllm_teach.exercises.base import DEFAULT_TIME_LIMIT_S, HERE, NO_SOLUTION_FILE, Exercise, GradeResult
from nanovllm_teach.exercises.messages import TOO_MANY_FUNCTIONS, UNKNOWN_EXERCISE
from nanovllm_teach.i18n import say

@functools.cache
def _discover() -> dict[str, Exercise]:
    """Every folder here with an ``__init__.py`` that defines ``EXERCISE``, in the course's order: each
    folder's ``ORDER`` (a number; the scheduler's step first, then the block manager, the model runner,
    reading and design), the name breaking ties."""
    names = sorted(p.name for p in HERE.iterdir() if (p / "__init__.py").is_file() and not p.name.startswith("_"))
    modules = {name: importlib.import_module(f"{__name__}.{name}") for name in names}
    found = {}
    for name in sorted(names, key=lambda n: (modules[n].ORDER, n)):
        exercise = modules[name].EXERCISE
        assert exercise.name == name, f"exercise folder {name}/ defines an exercise named {exercise.name!r}"
        found[name] = exercise
    return found


# Found on first use, not at import: importing a module of this package (the command line does, to add
# ``grade``) must not import the engine and torch.
_LATER = {"quiz_trace": "trace_quiz.grading", "reference_trace": "references", "load_solution": "solution_files"}


def __getattr__(name: str) -> Any:
    if name == "EXERCISES":  # dict[str, Exercise], in the course's order
        return _discover()
    if name in _LATER:
        return getattr(importlib.import_module(f"{__name__}.{_LATER[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def get_exercise(name: str) -> Exercise:
    exercises = _discover()
    if name not in exercises:
        raise KeyError(say(UNKNOWN_EXERCISE, name=name, names=", ".join(exercises)))
    return exercises[name]


def hint(exercise: str, level: int = 1, lang: str | None = None) -> str:
    """Hint ``level`` of ``exercise``: 1 says where to look, 2 says how; none of them is the code. In
    ``lang`` (None: the chosen language, see ``nanovllm_teach.i18n``)."""
    return get_exercise(exercise).hint(level, lang)


def grade(exercise: str, solution: str | Path | dict[str, Any], model: str | Path | None = None,
          time_limit: float = DEFAULT_TIME_LIMIT_S) -> GradeResult:
    """Grade a solution file (or the names a solution defines) against ``exercise``.

    The file is executed only in the sandboxed worker (``remote``); a file that cannot be loaded there (a syntax
    error, a failing import) fails with the reason. ``time_limit``: the most seconds one call of the
    solution's code may take.
    """
    ex = get_exercise(exercise)
    if isinstance(solution, (str, Path)):
        solution = Path(solution)
        if not solution.is_file():
            raise FileNotFoundError(say(NO_SOLUTION_FILE, path=solution))
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
        raise TypeError(say(TOO_MANY_FUNCTIONS, exercise=ex.name, count=len(ex.functions),
                            names=", ".join(ex.functions)))
    solution = dict(zip(ex.functions, functions))
    solution.update(named)
    result = ex.grade(solution, model, time_limit)
    print(result.message)
    return result


__all__ = ["EXERCISES", "Exercise", "GradeResult", "check", "get_exercise", "grade", "hint", "load_solution",
           "quiz_trace", "reference_trace"]
