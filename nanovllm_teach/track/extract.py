"""The learner's chapter files, written from the engine's own source: the stubs and the solutions.

Role: teaching (the track). Emits no events.

A solution is never a second copy kept in step with the engine: ``inspect`` finds each seam's function in
the engine, ``ast`` splits it into its signature, its docstring and its body, and the body is copied as it
is written there (comments included). The names the body uses that are not its own (``torch``, a helper
of the engine's module) become imports from the engine's module, so the copy runs exactly as the original.
A stub has the same signature, the chapter's contract as its docstring, and ``raise NotImplementedError``;
``is_written`` tells the two apart by that body.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import pkgutil
import sys
import textwrap
import types
from collections.abc import Iterable
from pathlib import Path
from dataclasses import dataclass, field
from typing import Any, Callable

from nanovllm_teach.i18n import Text, say
from nanovllm_teach.track.glue import glue_files, glue_modules, glue_name, is_blocked, signature
from nanovllm_teach.track.messages import ALREADY_WRITTEN
from nanovllm_teach.track.seams import PACKAGE, Chapter, Seam

NOT_WRITTEN = Text(en="not written yet: {name} (chapter {number})", zh="还没有写：{name}（第 {number} 章）")
FILE_HEADER = Text(
    en="Chapter {number}: {title}.\n\nWrite the functions below; until you do, the reference runs in their "
       "place (the folder's README says which).\nCheck them with: nanovllm-teach build check {folder} {number}",
    zh="第 {number} 章：{title}。\n\n把下面的函数写出来；写好之前，由参考实现代替它们（文件夹里的 README 说明是哪一个）。\n"
       "检查：nanovllm-teach build check {folder} {number}")
SOLUTIONS_HEADER = Text(
    en="Chapter {number}: {title}.\n\nThe engine's own code, copied from its source by build start --with-solutions.\n"
       "Check it with: nanovllm-teach build check {folder} {number}",
    zh="第 {number} 章：{title}。\n\n这是引擎自己的代码，由 build start --with-solutions 从它的源码中复制而来。\n"
       "检查：nanovllm-teach build check {folder} {number}")
TRACKS_OWN_HEADER = Text(
    en="Chapter {number}: {title}.\n\nThe track's own code (the engine has no such piece), copied from its source "
       "by build start --with-solutions.\nCheck it with: nanovllm-teach build check {folder} {number}",
    zh="第 {number} 章：{title}。\n\n这是本系列自己的代码（引擎里没有这一部分），由 build start --with-solutions 从它的源码中"
       "复制而来。\n检查：nanovllm-teach build check {folder} {number}")
_BUILTINS = set(dir(builtins))


def reference(seam: Seam) -> Callable[..., Any]:
    """The engine's function behind ``seam`` (for a method: the function in the class, unbound)."""
    return pkgutil.resolve_name(seam.point)


def _function_node(fn: Callable[..., Any]) -> tuple[ast.FunctionDef, list[str]]:
    """``fn``'s definition, parsed from its dedented source, and that source's lines."""
    source = textwrap.dedent(inspect.getsource(fn))
    node = ast.parse(source).body[0]
    assert isinstance(node, ast.FunctionDef), fn
    return node, source.splitlines()


def _has_docstring(node: ast.FunctionDef) -> bool:
    first = node.body[0]
    return isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str)


def is_written(fn: Callable[..., Any]) -> bool:
    """False for a stub as ``build start`` writes it: a body that is only a docstring and a raise of
    ``NotImplementedError``."""
    return is_written_node(_function_node(fn)[0])


def is_written_node(node: ast.FunctionDef) -> bool:
    """``is_written`` of a parsed definition."""
    body = node.body[1:] if _has_docstring(node) else node.body
    if len(body) != 1 or not isinstance(body[0], ast.Raise) or body[0].exc is None:
        return True
    raised = body[0].exc.func if isinstance(body[0].exc, ast.Call) else body[0].exc
    return not (isinstance(raised, ast.Name) and raised.id == "NotImplementedError")


def _body(node: ast.FunctionDef, lines: list[str]) -> list[str]:
    """The body's source lines as written, comments included, without the docstring, at its own indent."""
    first = node.body[1] if _has_docstring(node) else node.body[0]
    start = first.lineno - 1  # the first statement's line, 0-based, with the comments just above it
    while start > 0 and lines[start - 1].strip().startswith("#"):
        start -= 1
    return textwrap.dedent("\n".join(lines[start:node.end_lineno])).splitlines()


def _free_names(nodes: Iterable[ast.AST], node: ast.FunctionDef) -> set[str]:
    """The names ``nodes`` read that the function ``node`` does not define (its parameters, its assignments,
    its loops and comprehensions, its own imports) and Python does not provide."""
    args = node.args
    own = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
    own |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
    read: set[str] = set()
    for part in nodes:
        for sub in ast.walk(part):
            if isinstance(sub, ast.Name):
                (read if isinstance(sub.ctx, ast.Load) else own).add(sub.id)
            elif isinstance(sub, (ast.Import, ast.ImportFrom)):
                own |= {(alias.asname or alias.name).split(".")[0] for alias in sub.names}
            elif isinstance(sub, (ast.FunctionDef, ast.Lambda)) and sub is not node:
                own |= {a.arg for a in sub.args.args}
    return read - own - _BUILTINS


@dataclass
class _Imports:
    """What a learner's file imports: modules by the name the file uses, and names by their module."""

    modules: dict[str, str] = field(default_factory=dict)
    names: dict[str, set[str]] = field(default_factory=dict)

    def add(self, name: str, fn: Callable[..., Any]) -> None:
        """``name`` as ``fn``'s module has it: a module under that name, or anything else from the shortest
        module path that holds it (``safetensors`` rather than its private extension), else from ``fn``'s
        own module (a helper or constant of the engine's)."""
        value = fn.__globals__[name]
        if isinstance(value, types.ModuleType):
            self.modules[name] = value.__name__
            return
        parts = (getattr(value, "__module__", None) or fn.__module__).split(".")
        home = next((".".join(parts[:depth]) for depth in range(1, len(parts) + 1)
                     if getattr(sys.modules.get(".".join(parts[:depth])), name, None) is value), fn.__module__)
        self.names.setdefault(home, set()).add(name)

    def lines(self) -> list[str]:
        """The import statements; the engine's modules named as the glue's copies (``track/glue``)."""
        glued = glue_modules()
        plain = []
        for alias, module in sorted(self.modules.items()):
            if module in glued:
                parent, _, last = glue_name(module).rpartition(".")
                plain.append(f"from {parent} import {last}" + ("" if last == alias else f" as {alias}"))
            else:
                plain.append(f"import {module}" if module == alias else f"import {module} as {alias}")
        named = [f"from {glue_name(module) if module in glued else module} import {', '.join(sorted(names))}"
                 for module, names in sorted(self.names.items())]
        assert not any(is_blocked(module) and module not in glued for module in [*self.modules.values(), *self.names])
        return sorted(plain) + named


def _engine_alias(module: str) -> str:
    return f"engine_{module.rsplit('.', 1)[-1]}"


def chapter_source(chapter: Chapter, folder_name: str, with_solutions: bool, lang: str) -> str:
    """The chapter's file: every seam a stub, or (``with_solutions``) the engine's own body."""
    own = {seam.qualname for seam in chapter.seams if seam.owner is None}
    imports = _Imports()
    blocks: dict[str | None, list[str]] = {}
    for seam in chapter.seams:
        fn = reference(seam)
        node, lines = _function_node(fn)
        used = [node.args, node.returns] if node.returns else [node.args]
        if with_solutions:
            used = [node]
        for name in sorted(_free_names(used, node) - own):
            if name in fn.__globals__:
                imports.add(name, fn)
        contract = textwrap.fill(say(seam.contract, lang), 100, break_on_hyphens=False)
        if with_solutions:
            body = _body(node, lines)
        else:
            body = [f"raise NotImplementedError({say(NOT_WRITTEN, lang, name=seam.qualname, number=chapter.number)!r})"]
        text = [signature(node), textwrap.indent(f'"""{contract}"""', "    ")] + ["    " + line if line else ""
                                                                              for line in body]
        if seam.owner is not None:
            imports.modules[_engine_alias(seam.module)] = seam.module
        blocks.setdefault(seam.owner and f"{seam.module}:{seam.owner}", []).append("\n".join(text))
    parts = []
    for owner, functions in blocks.items():
        if owner is None:
            parts += functions
            continue
        module, cls = owner.split(":")
        methods = "\n\n".join(textwrap.indent(f, "    ") for f in functions)
        parts.append(f"class {cls}({_engine_alias(module)}.{cls}):\n{methods}")
    tracks_own = all(seam.module.startswith("nanovllm_teach.track.") for seam in chapter.seams)
    solved = TRACKS_OWN_HEADER if tracks_own else SOLUTIONS_HEADER
    header = say(solved if with_solutions else FILE_HEADER, lang, number=chapter.number,
                 title=say(chapter.title, lang), folder=folder_name)
    return ("\n".join([f'"""{header}\n"""', "", "from __future__ import annotations", "", *imports.lines()])
            + "\n\n\n" + "\n\n\n".join(parts) + "\n")


def package_files(chapters: Iterable[Chapter], folder_name: str, with_solutions: bool,
                  lang: str) -> dict[str, str]:
    """Every file of the learner's package by its path in the folder: the chapters' files, the
    ``__init__.py`` of each package folder they lie in, and the glue (``track/glue``)."""
    files: dict[str, str] = {}
    chapters = list(chapters)
    for chapter in chapters:
        files[chapter.file] = chapter_source(chapter, folder_name, with_solutions, lang)
        parts = chapter.file.split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            files.setdefault("/".join(parts[:depth]) + "/__init__.py", "")
    assert f"{PACKAGE}/__init__.py" in files
    in_engine = [(seam, chapter.number, chapter.file) for chapter in chapters for seam in chapter.seams
                 if is_blocked(seam.module)]
    return files | glue_files(in_engine, lang)


FOLDER_EXISTS = Text(en="{folder} already exists: build start writes a new folder and never overwrites one",
                     zh="{folder} 已经存在：build start 只写新的文件夹，从不覆盖已有的")


def write_package(folder: Path, chapters: Iterable[Chapter], with_solutions: bool, lang: str) -> list[Path]:
    """Write the learner's package into the new folder ``folder`` (``ValueError`` if it exists): the files
    it wrote, in order."""
    if folder.exists():
        raise ValueError(say(FOLDER_EXISTS, folder=folder))
    written = []
    for relative, text in package_files(chapters, folder.name, with_solutions, lang).items():
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def replace_stub(folder: Path, chapter: Chapter, qualname: str, body: str) -> None:
    """Write ``body`` (unindented source lines) in place of the stub of ``qualname`` in ``chapter``'s file in
    ``folder``, as a learner would: how the notebooks show a mistake and what the check says of it."""
    path = folder / chapter.file
    text = path.read_text(encoding="utf-8")
    tree = ast.parse(text)
    owner, _, name = qualname.rpartition(".")
    scope = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == owner).body if owner else tree.body
    node = next(n for n in scope if isinstance(n, ast.FunctionDef) and n.name == name)
    stub = node.body[-1]
    if is_written_node(node):
        raise ValueError(say(ALREADY_WRITTEN, qualname=qualname, path=path))
    lines = text.splitlines()
    indent = " " * stub.col_offset
    lines[stub.lineno - 1:stub.end_lineno] = [indent + line if line else "" for line in body.strip("\n").splitlines()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
