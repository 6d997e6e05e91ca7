"""What every exercise is: its name, the functions a student writes, a template, hints, and a verdict.

``Exercise.grade`` is implemented by three kinds: ``EngineExercise`` (``engine_grading``) runs the real
engine with the student's functions plugged in and compares traces; ``QuizExercise`` (``trace_quiz``)
compares answers read off a trace; ``ShardExercise`` (``tp_slice/grading.py``) compares what every
tensor-parallel rank holds after loading weights with the student's function. All return a ``GradeResult``.

A solution is handed over either as a file (``Path``: it is executed only in the sandboxed worker, ``remote``) or
as the functions themselves (a ``dict`` of name to function, from a notebook).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from nanovllm_teach.exercises.messages import NO_SUCH_HINT
from nanovllm_teach.i18n import Text, say
from nanovllm_teach.trace.diff import Divergence

# The names a solution defines (its functions, or the quiz's answers), or the file that defines them.
Solution = dict[str, Any]
SolutionSource = Path | Solution

HERE = Path(__file__).resolve().parent
EXERCISES_PACKAGE = "nanovllm_teach.exercises"
SOLUTION_FILE = "solution.py"  # in every exercise's folder: the reference, which no submission may use


def is_reference_module(name: str) -> bool:
    """Is the module ``name`` one of the reference solutions (``nanovllm_teach.exercises.<name>.solution``)?"""
    parts = name.split(".")
    return len(parts) == 4 and ".".join(parts[:2]) == EXERCISES_PACKAGE and parts[3] == "solution"


def is_reference_file(path: Path) -> bool:
    """Is ``path`` one of the reference solutions' files?"""
    return path.name == SOLUTION_FILE and path.parent.parent == HERE

def visible(text: str) -> str:
    """``text`` on one line, every character that is not printable shown as its escape (``\\r``, ``\\n``,
    ``\\x1b``): what a student wrote can then neither start a line of the grader's output nor move its cursor."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


# The longest one call of the student's code (or loading their file) may run before the grader stops it, by
# the wall clock. A file that imports torch (the engine's modules do) takes 3-4 s to load on two idle cores and
# 9-13 s on a busy machine: at 10 s an honest file was failed as "did not finish loading" at load 10.
DEFAULT_TIME_LIMIT_S = 30.0


@dataclass
class GradeResult:
    """The verdict on one exercise: ``passed``, and ``message``, the sentence a student reads.

    ``workload`` and ``divergence`` say where a failing solution went wrong (None for other failures).
    ``isolated``: whether the learner's code ran in the bubblewrap sandbox (None: none of it ran, as with
    the quiz's answers given as a dict); ``output``: what it printed, quoted (``remote.quoted``), "" if nothing.
    """

    exercise: str
    passed: bool
    message: str
    workload: str | None = None
    divergence: Divergence | None = None
    isolated: bool | None = field(default=None, kw_only=True)
    output: str = field(default="", kw_only=True)

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"<GradeResult {self.exercise}: {'PASS' if self.passed else 'FAIL'}>"


@dataclass(frozen=True)
class Exercise:
    """One classroom exercise: ``functions`` the student writes, a template to start from, a reference
    solution, ``hints`` revealed one level at a time, and a grader (``grade``)."""

    name: str
    title: Text
    # The piece of the engine the student rewrites, as a learner finds it in the code: a name (str), or a Text
    # where a sentence goes with it.
    replaces: Text | str
    functions: tuple[str, ...]
    hints: tuple[Text, ...]  # in both languages, from the gentlest to the strongest
    # In a class only the first graded answer counts, later ones are counted as attempts (``gradebook``), and
    # ``grade`` is given ``hints=False``: for answers a blind search could find.
    graded_once: ClassVar[bool] = False
    # False: the class's similarity report gives no share of code in common with the reference, only with the
    # other students (a build track chapter: a correct rebuild resembles the engine by design).
    alike_to_reference: ClassVar[bool] = True

    @property
    def folder(self) -> Path:
        return HERE / self.name

    @property
    def template_path(self) -> Path:
        return self.folder / "template.py"

    @property
    def solution_path(self) -> Path:
        return self.folder / SOLUTION_FILE

    def hint(self, level: int, lang: str | None = None) -> str:
        """Hint number ``level`` (1 = the gentlest), in ``lang`` (None: the chosen language, ``i18n``); each
        one says a little more than the one before."""
        if isinstance(level, bool) or not isinstance(level, int) or not 1 <= level <= len(self.hints):
            raise ValueError(say(NO_SUCH_HINT, exercise=self.name, count=len(self.hints), level=level))
        return say(self.hints[level - 1], lang)

    def fail(self, message: str, workload: str | None = None, divergence: Divergence | None = None) -> GradeResult:
        # The FAIL prefix stays in English in every language: graders parse it.
        return GradeResult(self.name, False, f"FAIL {self.name}: {message}", workload, divergence)

    def grade(self, solution: SolutionSource, model: str | Path | None = None,
              time_limit: float = DEFAULT_TIME_LIMIT_S) -> GradeResult:
        raise NotImplementedError


# Raised (as FileNotFoundError) when a solution is named by a path with no file there. The CLI says the same
# words itself, before it imports the exercises (``cli.NO_SOLUTION_FILE``).
NO_SOLUTION_FILE = Text(en="no such solution file: {path}", zh="没有这个解答文件：{path}")

# Said to a notebook and a shell alike: both ways to ask for a hint.
NOT_IMPLEMENTED = Text(en="you have not implemented {function} yet (stuck? hint({name!r}, 1) in Python, or "
                          "nanovllm-teach hint {name} 1 in a shell, gives a first hint; level 2 a stronger one)",
                       zh="你还没有实现 {function}（卡住了？在 Python 里用 hint({name!r}, 1)，或在命令行用 "
                          "nanovllm-teach hint {name} 1，给出第一条提示；第 2 级更具体）")


def not_implemented(exercise: Exercise, function: str) -> GradeResult:
    """The verdict on a function still raising ``NotImplementedError``: what to do next, no answer."""
    return exercise.fail(say(NOT_IMPLEMENTED, function=function, name=exercise.name))
