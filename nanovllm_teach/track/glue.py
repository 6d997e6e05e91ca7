"""The glue of the learner's package: the engine's modules the learner does not write, copied into
``myvllm/glue/`` so that their engine runs without the reference (``build check DIR final``).

Role: teaching (the track). Emits no events.

``build start`` writes, beside the chapter files, a copy of every module of the engine that the engine loop
needs and that is, or imports, ``nanovllm_teach.engine``, ``.layers`` or ``.models`` (``glue_modules``):
the engine's own source, copied by ``ast``, with two changes. Its imports of those modules name their copies
(``nanovllm_teach.engine.scheduler`` becomes ``myvllm.glue.engine.scheduler``); the rest of the package (the
tokenizer's and the trace's modules, settings, i18n) is imported as it is. Each seam's function keeps its
signature and raises ``NotImplementedError``: ``final`` puts the learner's own function there.

The chapter files import what they use from the glue too. For chapters 1 to 10, which check each piece
inside the reference engine, ``GlueIsTheEngine`` makes ``myvllm.glue.X`` mean the engine's ``nanovllm_teach.X``
(the glue is the engine's code, so nothing changes); ``final`` loads the copies themselves.
"""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.abc
import importlib.machinery
import re
import textwrap
import types
from collections.abc import Sequence as Seq
from pathlib import Path

from nanovllm_teach.i18n import Text, say
from nanovllm_teach.track.seams import PACKAGE, Seam

GLUE = f"{PACKAGE}.glue"
ENGINE = "nanovllm_teach"
BLOCKED = tuple(f"{ENGINE}.{part}" for part in ("engine", "layers", "models"))  # what the learner rebuilds
# The engine loop and what it builds (the config names the attention backends and the model's shapes).
ROOTS = (f"{ENGINE}.engine.llm_engine", f"{ENGINE}.engine.model_runner", f"{ENGINE}.config")

GLUE_HEADER = Text(
    en="Glue: the engine's {module}, copied by build start with its imports of the engine turned to {glue}.\n"
       "You do not write this file. The functions marked 'yours' raise here; build check DIR final puts your "
       "own in their place (your chapter files).",
    zh="胶水代码：引擎的 {module}，由 build start 复制而来，其中对引擎的导入改成了 {glue}。\n"
       "这个文件不需要你写。标为“你的”的函数在这里只会抛出异常；build check DIR final 会换上你自己写的"
       "（在你的各章文件里）。")
GLUE_PACKAGE = Text(
    en="Glue: the engine's modules you do not write, copied by build start; build check DIR final runs your "
       "engine on them with your chapter files' functions in place.",
    zh="胶水代码：你不需要写的引擎模块，由 build start 复制而来；build check DIR final 在它们之上运行你的引擎，"
       "并换上你各章文件里的函数。")
YOURS_HERE = Text(en="yours: {name}, chapter {number} ({file}); build check DIR final puts it here",
                  zh="你的：{name}，第 {number} 章（{file}）；build check DIR final 会把它放到这里")


def is_blocked(name: str) -> bool:
    """Whether ``name`` is a module of the reference that ``final`` refuses."""
    return any(name == blocked or name.startswith(blocked + ".") for blocked in BLOCKED)


def glue_name(module: str) -> str:
    """The copy's name of the engine's ``module`` (``nanovllm_teach.engine.x`` -> ``myvllm.glue.engine.x``)."""
    return GLUE + module.removeprefix(ENGINE)


_ROOT = Path(__file__).resolve().parents[1]  # the package's folder: its modules are found without importing them


def _source_file(module: str) -> Path | None:
    """The source of the package's ``module`` (a package: its ``__init__.py``), or None if it is not one."""
    if module != ENGINE and not module.startswith(ENGINE + "."):
        return None
    relative = _ROOT.joinpath(*module.split(".")[1:])
    return next((path for path in (relative.with_suffix(".py"), relative / "__init__.py") if path.is_file()), None)


def _imports(module: str) -> set[str]:
    """The package's modules ``module``'s source imports, anywhere in it (a lazy import too)."""
    path = _source_file(module)
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names  # a submodule imported by name
                      if _source_file(f"{node.module}.{alias.name}") is not None}
    return {name for name in found if name == ENGINE or name.startswith(ENGINE + ".")}


def _parents(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:depth]) for depth in range(2, len(parts))]


@functools.cache
def glue_modules() -> tuple[str, ...]:
    """The engine's modules the glue copies: those the engine loop (``ROOTS``) reaches that are blocked or
    import, at any depth, a blocked one; with their packages."""
    reached: dict[str, set[str]] = {}
    todo = list(ROOTS)
    while todo:
        name = todo.pop()
        if name in reached or _source_file(name) is None:
            continue
        reached[name] = _imports(name) - {ENGINE}
        todo += [*reached[name], *_parents(name)]
    tainted = {name for name in reached if is_blocked(name)}
    while True:
        more = {name for name, uses in reached.items() if uses & tainted} - tainted
        if not more:
            break
        tainted |= more
    return tuple(sorted(tainted | {parent for name in tainted for parent in _parents(name)}))


def glue_file(module: str) -> str:
    """Where the copy of ``module`` lies in the folder ``build start`` writes."""
    relative = module.removeprefix(ENGINE + ".").replace(".", "/")
    is_package = _source_file(module).name == "__init__.py"
    return f"{PACKAGE}/glue/{relative}/__init__.py" if is_package else f"{PACKAGE}/glue/{relative}.py"


def _renamed(text: str, glued: Seq[str]) -> str:
    """``text`` (an import statement) with each engine module of ``glued`` named as its copy (the longest
    dotted name that is one; ``nanovllm_teach.trace.events`` is not, and stays)."""
    def rename(match: re.Match[str]) -> str:
        parts = match.group(0).split(".")
        for depth in range(len(parts), 1, -1):
            if ".".join(parts[:depth]) in glued:
                return ".".join([glue_name(".".join(parts[:depth])), *parts[depth:]])
        return match.group(0)

    return re.sub(rf"\b{ENGINE}(?:\.\w+)+", rename, text)


def signature(node: ast.FunctionDef) -> str:
    """``node``'s ``def`` line, without its decorators and body."""
    header = ast.FunctionDef(name=node.name, args=node.args, body=[ast.Pass()], decorator_list=[],
                             returns=node.returns, type_comment=None)
    return ast.unparse(ast.fix_missing_locations(header)).splitlines()[0]


def _placeholder(node: ast.FunctionDef, lines: list[str], message: str) -> list[str]:
    """A seam's definition kept to its decorators and signature, its body a raise saying whose it is."""
    indent = " " * node.col_offset
    decorators = lines[node.decorator_list[0].lineno - 1:node.lineno - 1] if node.decorator_list else []
    return [*decorators, indent + signature(node), f"{indent}    raise NotImplementedError({message!r})"]


def glue_source(module: str, seams: Seq[tuple[Seam, int, str]], lang: str) -> str:
    """The copy of ``module``: its imports renamed, each of ``seams`` (a seam, its chapter's number and
    file) a placeholder, a header saying what it is."""
    glued = glue_modules()
    text = _source_file(module).read_text(encoding="utf-8")
    lines = text.splitlines()
    tree = ast.parse(text)
    replacements: dict[int, tuple[int, list[str]]] = {}  # first line (0-based): (end, new lines)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            span = lines[node.lineno - 1:node.end_lineno]
            replacements[node.lineno - 1] = (node.end_lineno, _renamed("\n".join(span), glued).splitlines())
    for seam, number, file in seams:
        owner, _, name = seam.qualname.rpartition(".")
        scope = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == owner).body if owner else tree.body
        node = next(n for n in scope if isinstance(n, ast.FunctionDef) and n.name == name)
        start = (node.decorator_list[0].lineno if node.decorator_list else node.lineno) - 1
        message = say(YOURS_HERE, lang, name=seam.qualname, number=number, file=file)
        replacements[start] = (node.end_lineno, _placeholder(node, lines, message))
    out, index = [], 0
    for start in sorted(replacements):
        end, new = replacements[start]
        out += lines[index:start] + new
        index = end
    out += lines[index:]
    header = [wrapped for line in say(GLUE_HEADER, lang, module=module, glue=glue_name(module)).splitlines()
              for wrapped in textwrap.wrap(line, 100, break_on_hyphens=False)]
    return "\n".join([*(f"# {line}" for line in header), *out]) + "\n"


def glue_files(seams: Seq[tuple[Seam, int, str]], lang: str) -> dict[str, str]:
    """Every file of ``myvllm/glue/`` by its path in the folder: each module of ``glue_modules``, the
    chapters' ``seams`` (a seam, its chapter's number and file) placeholders in them."""
    by_module: dict[str, list[tuple[Seam, int, str]]] = {}
    for entry in seams:
        by_module.setdefault(entry[0].module, []).append(entry)
    files = {f"{PACKAGE}/glue/__init__.py": f'"""{say(GLUE_PACKAGE, lang)}"""\n'}
    for module in glue_modules():
        files[glue_file(module)] = glue_source(module, by_module.get(module, []), lang)
    missing = set(by_module) - set(glue_modules())
    assert not missing, f"seams outside the glue: {missing}"
    return files


def _engine_name(glued: str) -> str:
    return ENGINE + glued.removeprefix(GLUE)


class GlueIsTheEngine(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """``myvllm.glue.X`` imported as the engine's ``nanovllm_teach.X`` itself (chapters 1 to 10, whose checks
    run the learner's pieces inside the reference engine)."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> importlib.machinery.ModuleSpec | None:
        if name != GLUE and not name.startswith(GLUE + "."):
            return None
        source = _source_file(_engine_name(name)) if name != GLUE else None
        if name != GLUE and source is None:
            return None
        return importlib.machinery.ModuleSpec(name, self, is_package=name == GLUE or source.name == "__init__.py")

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        if spec.name == GLUE:
            module = types.ModuleType(GLUE)
            module.__path__ = []
            return module
        engine = importlib.import_module(_engine_name(spec.name))
        self._spec = engine.__spec__  # the import system sets __spec__ on what this returns: put back in exec_module
        return engine

    def exec_module(self, module: types.ModuleType) -> None:
        if module.__name__ != GLUE:
            module.__spec__ = self._spec


def use_engine_as_glue() -> None:
    """Install ``GlueIsTheEngine`` (once) first on ``sys.meta_path``."""
    import sys

    if not any(isinstance(finder, GlueIsTheEngine) for finder in sys.meta_path):
        sys.meta_path.insert(0, GlueIsTheEngine())
