"""Solutions as the grader receives them: a file to execute (in the grading child only), or the functions.

Before anything runs, a file is read for imports of the reference solutions (refused with a sentence);
once loaded, functions that were borrowed from the reference solutions' files are refused too, however
they were brought in.
"""

from __future__ import annotations

import ast
import importlib.util
import itertools
import re
from pathlib import Path
from typing import Any

from nanovllm_teach.exercises.base import EXERCISES_PACKAGE, Solution, is_reference_file, is_reference_module

REFUSED = (f"your solution uses the reference solutions ({EXERCISES_PACKAGE}.<exercise>.solution): the grader "
           f"refuses it; write the code yourself")

_module_numbers = itertools.count()


def load_solution(path: str | Path) -> Solution:
    """Execute a solution file and return the names it defines (each load reads the file again)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such solution file: {path}")
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
    """``REFUSED`` if the file at ``path`` names the reference solutions anywhere, else None (a file that
    does not parse is left to the loader, which says why)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"), filename=str(path))
    except SyntaxError:
        return None
    return REFUSED if any(_names_solutions(node) for node in ast.walk(tree)) else None


def _source_file(value: Any) -> Path | None:
    """The file a function, method or module was written in, if it is one of those."""
    fn = getattr(value, "__func__", value)
    code = getattr(fn, "__code__", None)
    where = code.co_filename if code is not None else getattr(value, "__file__", None)
    return Path(where).resolve() if isinstance(where, str) else None


def borrowed_from_solutions(solution: Solution, own_file: Path | None = None) -> str | None:
    """``REFUSED`` if a function or module among the solution's names comes from a reference solution's
    file (other than ``own_file``, the file being graded), however it got there; else None."""
    own = own_file.resolve() if own_file is not None else None
    for value in list(solution.values()):
        where = _source_file(value)
        if where is not None and where != own and is_reference_file(where):
            return REFUSED
    return None


def missing_functions(solution: Solution, names: tuple[str, ...]) -> str | None:
    """What is missing if the solution lacks one of ``names`` (or it is not callable), else None."""
    missing = [name for name in names if not callable(solution.get(name))]
    if not missing:
        return None
    return (f"your solution defines no function named {', '.join(missing)}: write "
            f"{'it' if len(missing) == 1 else 'them'} with exactly that name")
