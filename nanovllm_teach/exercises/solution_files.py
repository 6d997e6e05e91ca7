"""Solutions as the grader receives them: a file to execute (in the sandboxed worker only), or the functions.

Before anything runs, a file is read for imports of the reference solutions (refused with a sentence);
once loaded, functions that were borrowed from the reference solutions' files are refused too, however
they were brought in. The sentences are ``Text`` in both languages, said in the chosen one.
"""

from __future__ import annotations

import ast
import importlib.util
import itertools
import re
from pathlib import Path
from typing import Any

from nanovllm_teach.exercises.base import (EXERCISES_PACKAGE, NO_SOLUTION_FILE, Solution, is_reference_file,
                                          is_reference_module)
from nanovllm_teach.i18n import Text, say

REFUSED = Text(en="your solution uses the reference solutions ({package}.<exercise>.solution): the grader refuses "
                  "it; write the code yourself",
               zh="你的解答用到了参考答案（{package}.<exercise>.solution）：评分器不接受；请自己写代码")
MISSING_ONE = Text(en="your solution defines no function named {names}: write it with exactly that name",
                   zh="你的解答没有定义名为 {names} 的函数：请用一模一样的名字写出它")
MISSING_MANY = Text(en="your solution defines no function named {names}: write them with exactly those names",
                    zh="你的解答没有定义名为 {names} 的函数：请用一模一样的名字写出它们")
NAME_SEPARATOR = Text(en=", ", zh="、")


def refused() -> str:
    """The verdict's sentence on a solution that uses the reference solutions, in the chosen language."""
    return say(REFUSED, package=EXERCISES_PACKAGE)

_module_numbers = itertools.count()


def load_solution(path: str | Path) -> Solution:
    """Execute a solution file and return the names it defines (each load reads the file again)."""
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
    return refused() if any(_names_solutions(node) for node in ast.walk(tree)) else None


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
        if where is not None and is_reference_file(where):
            return refused()
    return None


def missing_functions(solution: Solution, names: tuple[str, ...]) -> str | None:
    """What is missing if the solution lacks one of ``names`` (or it is not callable), else None."""
    missing = [name for name in names if not callable(solution.get(name))]
    return missing_sentence(missing) if missing else None


def missing_sentence(missing: list[str]) -> str:
    """The verdict's sentence on a solution lacking the functions ``missing``."""
    return say(MISSING_ONE if len(missing) == 1 else MISSING_MANY, names=say(NAME_SEPARATOR).join(missing))
