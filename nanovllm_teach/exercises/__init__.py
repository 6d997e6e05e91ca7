"""Classroom exercises with an autograder: what a learner calls (``check``, ``grade``, ``hint``).

Role: grading. Emits no events.

Every exercise is a folder here, found automatically: ``<name>/__init__.py`` defines ``EXERCISE`` and its
``ORDER`` in the course, ``template.py`` is where the learner starts, ``solution.py`` the reference, and an
exercise graded its own way keeps its grader there (``grading.py``); adding an exercise is adding a folder.
The modules here are the machinery every exercise shares; docs/grading.md draws how a submission is run.
From a notebook::

    from nanovllm_teach.exercises import check, hint
    check("decode_slot", decode_slot)      # prints the verdict, returns a GradeResult
    print(hint("decode_slot", 1))          # stuck? a first hint; hint("decode_slot", 2) says more
"""

from __future__ import annotations

import functools
import importlib
from pathlib import Path
from typing import Any

from nanovllm_teach.exercises.base import (DEFAULT_TIME_LIMIT_S, HERE, NO_SOLUTION_FILE, Exercise, GradeResult,
                                          load_solution)
from nanovllm_teach.i18n import Text, say

UNKNOWN_EXERCISE = Text(en="unknown exercise {name!r}; the exercises are: {names}", zh="没有练习 {name!r}；现有的练习：{names}")
TOO_MANY_FUNCTIONS = Text(en="{exercise} takes {count} function(s): {names}", zh="{exercise} 只接受 {count} 个函数：{names}")


@functools.cache
def _discover() -> dict[str, Exercise]:
    """Every exercise folder here, by its ``ORDER`` in the course, the name breaking ties."""
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
_LATER = {"quiz_trace": "trace_quiz.grading", "reference_trace": "references"}


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
    """Hint ``level`` of ``exercise``: 1 says where to look, 2 says how; none of them is the code."""
    return get_exercise(exercise).hint(level, lang)


def grade(exercise: str, solution: str | Path | dict[str, Any], model: str | Path | None = None,
          time_limit: float = DEFAULT_TIME_LIMIT_S) -> GradeResult:
    """Grade a solution file (run only in the sandboxed worker) or the names a solution defines."""
    ex = get_exercise(exercise)
    if isinstance(solution, (str, Path)):
        solution = Path(solution)
        if not solution.is_file():
            raise FileNotFoundError(say(NO_SOLUTION_FILE, path=solution))
    return ex.grade(solution, model, time_limit)


def check(exercise: str, *functions: Any, model: str | Path | None = None,
          time_limit: float = DEFAULT_TIME_LIMIT_S, **named: Any) -> GradeResult:
    """Grade functions defined in a notebook, in order or by name; prints the verdict and returns it. The
    quiz takes its answers dict: ``check("trace_quiz", {"num_steps": 42, ...})``."""
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
