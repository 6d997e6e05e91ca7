"""What every exercise is (its functions, template, hints, verdict), and what a solution may not be.

Role: grading. Emits no events.

A solution is a file (``Path``: executed only in the sandboxed worker) or a notebook's names (a ``dict``).
The reference solutions are installed with every student's package: a file that names them anywhere is
refused before it runs, and so are functions borrowed from their files, however they were brought in.
``Exercise.grade`` is ``EngineExercise``'s (``engine_grading``) or an exercise folder's own ``grading.py``.
"""

from __future__ import annotations

import ast
import importlib.util
import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from nanovllm_teach.i18n import Text, say
from nanovllm_teach.trace.diff import Divergence

# The names a solution defines (its functions, or the quiz's answers), or the file that defines them.
Solution = dict[str, Any]
SolutionSource = Path | Solution

HERE = Path(__file__).resolve().parent
EXERCISES_PACKAGE = "nanovllm_teach.exercises"
SOLUTION_FILE = "solution.py"  # in every exercise's folder: the reference, which no submission may use

# The longest one call of the student's code (or loading their file) may run before the grader stops it, by
# the wall clock. A file that imports torch (the engine's modules do) takes 3-4 s to load on two idle cores and
# 9-13 s on a busy machine: at 10 s an honest file was failed as "did not finish loading" at load 10.
DEFAULT_TIME_LIMIT_S = 30.0

# Raised (as FileNotFoundError) when a solution is named by a path with no file there. The CLI says the same
# words itself, before it imports the exercises (``cli.NO_SOLUTION_FILE``).
NO_SOLUTION_FILE = Text(en="no such solution file: {path}", zh="没有这个解答文件：{path}")

NO_SUCH_HINT = Text(en="{exercise} has hints 1 to {count}, not {level!r}",
                    zh="{exercise} 的提示编号是 1 到 {count}，没有 {level!r}")
NAME_SEPARATOR = Text(en=", ", zh="、")  # between the names of a list in a sentence

# Said to a notebook and a shell alike: both ways to ask for a hint.
NOT_IMPLEMENTED = Text(en="you have not implemented {function} yet (stuck? hint({name!r}, 1) in Python, or "
                          "nanovllm-teach hint {name} 1 in a shell, gives a first hint; level 2 a stronger one)",
                       zh="你还没有实现 {function}（卡住了？在 Python 里用 hint({name!r}, 1)，或在命令行用 "
                          "nanovllm-teach hint {name} 1，给出第一条提示；第 2 级更具体）")
REFUSED = Text(en="your solution uses the reference solutions ({package}.<exercise>.solution): the grader refuses "
                  "it; write the code yourself",
               zh="你的解答用到了参考答案（{package}.<exercise>.solution）：评分器不接受；请自己写代码")
MISSING_ONE = Text(en="your solution defines no function named {names}: write it with exactly that name",
                   zh="你的解答没有定义名为 {names} 的函数：请用一模一样的名字写出它")
MISSING_MANY = Text(en="your solution defines no function named {names}: write them with exactly those names",
                    zh="你的解答没有定义名为 {names} 的函数：请用一模一样的名字写出它们")


def is_reference_module(name: str) -> bool:
    """Is the module ``name`` one of the reference solutions (``nanovllm_teach.exercises.<name>.solution``)?"""
    parts = name.split(".")
    return len(parts) == 4 and ".".join(parts[:2]) == EXERCISES_PACKAGE and parts[3] == "solution"


def visible(text: str) -> str:
    """``text`` on one line, every character that is not printable shown as its escape (``\\r``, ``\\n``,
    ``\\x1b``): what a student wrote can then neither start a line of the grader's output nor move its cursor."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


@dataclass
class GradeResult:
    """The verdict on one exercise; ``workload`` and ``divergence`` say where a failing solution went wrong.
    ``isolated``: whether the learner's code ran in the bubblewrap sandbox (None: none of it ran, as with
    the quiz's answers given as a dict); ``output``: what it printed, quoted (``remote.quoted``)."""

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
        """Hint number ``level`` (1 = the gentlest), in ``lang`` (None: the chosen language, ``i18n``)."""
        if isinstance(level, bool) or not isinstance(level, int) or not 1 <= level <= len(self.hints):
            raise ValueError(say(NO_SUCH_HINT, exercise=self.name, count=len(self.hints), level=level))
        return say(self.hints[level - 1], lang)

    def fail(self, message: str, workload: str | None = None, divergence: Divergence | None = None) -> GradeResult:
        # The FAIL prefix stays in English in every language: graders parse it.
        return GradeResult(self.name, False, f"FAIL {self.name}: {message}", workload, divergence)

    def grade(self, solution: SolutionSource, model: str | Path | None = None,
              time_limit: float = DEFAULT_TIME_LIMIT_S) -> GradeResult:
        raise NotImplementedError


def not_implemented(exercise: Exercise, function: str) -> GradeResult:
    """The verdict on a function still raising ``NotImplementedError``: what to do next, no answer."""
    return exercise.fail(say(NOT_IMPLEMENTED, function=function, name=exercise.name))


_module_numbers = itertools.count()


def load_solution(path: str | Path) -> Solution:
    """Execute a solution file in this process and return the names it defines (read again at each load)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(say(NO_SOLUTION_FILE, path=path))
    spec = importlib.util.spec_from_file_location(f"_nanovllm_teach_solution_{next(_module_numbers)}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return vars(module)


def _names_solutions(node: ast.AST) -> bool:
    if isinstance(node, ast.Import):
        return any(is_reference_module(alias.name) for alias in node.names)
    if isinstance(node, ast.ImportFrom):
        module = node.module or ""
        return is_reference_module(module) or (
            module.startswith(EXERCISES_PACKAGE + ".") and any(a.name == "solution" for a in node.names))
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return re.search(r"exercises[./\\]\w+[./\\]solution\b", node.value) is not None
    return False


def imports_reference_solutions(path: Path) -> str | None:
    """``REFUSED`` (said) if the file at ``path`` names the reference solutions anywhere, else None (a file that
    does not parse is left to the loader, which says why)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"), filename=str(path))
    except SyntaxError:
        return None
    return say(REFUSED, package=EXERCISES_PACKAGE) if any(_names_solutions(node) for node in ast.walk(tree)) else None


def _source_file(value: Any) -> Path | None:
    """The file a function, method or module was written in, if it is one of those."""
    fn = getattr(value, "__func__", value)
    code = getattr(fn, "__code__", None)
    where = code.co_filename if code is not None else getattr(value, "__file__", None)
    return Path(where).resolve() if isinstance(where, str) else None


def borrowed_from_solutions(solution: Solution) -> str | None:
    """``REFUSED`` (said) if a function or module among a notebook's names comes from a reference solution's
    file, however it got there; else None."""
    for value in list(solution.values()):
        where = _source_file(value)
        if where is not None and where.name == SOLUTION_FILE and where.parent.parent == HERE:
            return say(REFUSED, package=EXERCISES_PACKAGE)
    return None


def missing_functions(solution: Solution, names: tuple[str, ...]) -> str | None:
    """What is missing if the solution lacks one of ``names`` (or it is not callable), else None."""
    missing = [name for name in names if not callable(solution.get(name))]
    return missing_sentence(missing) if missing else None


def missing_sentence(missing: list[str]) -> str:
    return say(MISSING_ONE if len(missing) == 1 else MISSING_MANY, names=say(NAME_SEPARATOR).join(missing))
