"""Every error a learner, a teacher or a user can read from the pictures, the simulator, the planner, the
command line, the exercises, the build track and the language choice exists in English and Chinese, from one
``Text`` (``raise ValueError(say(NAME, field=value))``): a scan of the source for a ``raise`` of a bare string,
and a few errors met the way a user meets them, in Chinese."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from nanovllm_teach import i18n
from nanovllm_teach.cli import main
from nanovllm_teach.i18n import speaking

PACKAGE = Path(__file__).resolve().parent.parent / "nanovllm_teach"
# This helper's part of the package; the engine and its core are scanned by test_messages_bilingual.py.
AREAS = ["viz", "sim", "plan", "cli", "exercises", "track", "i18n", "assets", "__init__.py"]
# The errors whose text a learner or a user reads (with what the package defines on them, found by the scan).
SCANNED = {"ValueError", "UsageError", "TypeError", "KeyError", "FileNotFoundError", "RuntimeError", "TimeoutError",
           "TraitError"}

# Raises of a bare string that stay English, each with why: no learner, teacher or user reads them.
# A whole file: every bare-string raise in it.
ALLOWED_FILES = {
    # Checks of the shipped published.json: only a maintainer adding a measured case edits it, and no command
    # reads another file (the benchmark and sim/engine.py read the shipped one).
    "sim/published.py": "the shipped data file's own checks, for its maintainers",
    # The channel to the exercises' sandboxed worker: every reader of a FrameError drops its text and reports
    # the worker's exit or time-out instead (remote.py, worker.py).
    "exercises/worker.py": "never shown: its readers report the worker's exit, not this text",
}
# One raise, by its file and the start of its text.
ALLOWED = {
    # A Text written with other fields in its two languages: a mistake in the package's (or a notebook
    # author's) own source, refused when the module is imported.
    ("i18n/__init__.py", "the two languages of a text must use the same fields"): "for the package's authors",
    # The glossary asked for a term it lacks: the notebook build's and the tests' own lookup.
    ("i18n/glossary.py", "the glossary has no term"): "for the package's authors",
    # An exercise's piece declared with neither or both of its ways into the sandbox: the exercise's author's
    # mistake, refused when the exercise is defined (a ValueError, not an assert: it keeps a learner's code
    # from running beside the engine, so it holds under python -O too).
    ("exercises/pieces.py", "piece {} needs exactly one of wire="): "for the exercises' authors",
}


def _sources() -> list[Path]:
    files = []
    for area in AREAS:
        path = PACKAGE / area
        files += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return files


def _error_classes() -> set[str]:
    """``SCANNED`` and every exception class the package defines on one of them, or on ``Exception``."""
    bases: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                bases[node.name] = {b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", "")
                                    for b in node.bases}
    found = set(SCANNED)
    while grown := {name for name, of in bases.items() if name not in found and of & (found | {"Exception"})}:
        found |= grown
    return found


def bare_string_raises(source: str, errors: set[str]) -> list[tuple[int, str]]:
    """(line, text) of each ``raise E("...")`` or ``raise E(f"...")`` in ``source`` with E in ``errors``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args):
            continue
        func, first = node.exc.func, node.exc.args[0]
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name in errors and isinstance(first, (ast.Constant, ast.JoinedStr)):
            text = first.value if isinstance(first, ast.Constant) else "".join(
                part.value if isinstance(part, ast.Constant) else "{}" for part in first.values)
            found.append((node.lineno, str(text)))
    return sorted(found)


def test_the_scan_finds_a_bare_string_and_leaves_a_text_alone():
    errors = _error_classes()
    assert {"FrameError", "StudentError", "UsageError"} <= errors  # the package's own, found
    source = ('def f(x):\n    if x:\n        raise ValueError(f"bad {x}")\n    raise errors.UsageError("no")\n'
              'def g(x):\n    raise ValueError(say(BAD, x=x))\n')
    assert bare_string_raises(source, errors) == [(3, "bad {}"), (4, "no")]


def test_every_error_of_this_part_is_a_text_in_both_languages():
    errors = _error_classes()
    english_only = []
    for path in _sources():
        where = path.relative_to(PACKAGE).as_posix()
        if where in ALLOWED_FILES:
            continue
        for line, text in bare_string_raises(path.read_text(encoding="utf-8"), errors):
            if not any(where == file and text.startswith(start) for file, start in ALLOWED):
                english_only.append(f"{where}:{line}: {text[:80]}")
    assert english_only == []


def test_the_allowed_raises_are_still_there():
    """An entry of the allowlist whose raise has gone (translated, moved) is taken off it, not left to hide one."""
    errors = _error_classes()
    for file in ALLOWED_FILES:
        assert bare_string_raises((PACKAGE / file).read_text(encoding="utf-8"), errors), file
    for file, start in ALLOWED:
        texts = [text for _, text in bare_string_raises((PACKAGE / file).read_text(encoding="utf-8"), errors)]
        assert any(text.startswith(start) for text in texts), (file, start)


def _one_chinese_line(err: str, expected: str) -> None:
    assert expected in err and err.count("\n") == 1 and "Traceback" not in err, err


def test_simulate_refuses_a_bad_value_in_chinese(capsys):
    assert main(["--lang", "zh", "simulate", "--shared-prefix", "x"]) == 2
    _one_chinese_line(capsys.readouterr().err, "--shared-prefix 的格式必须是 GROUPS:LEN（两个整数），收到的是 'x'")


def test_plan_refuses_a_bad_value_in_chinese(capsys):
    assert main(["plan", "--rate", "10", "--gpus", "tpu-v5", "--lang", "zh"]) == 2
    _one_chinese_line(capsys.readouterr().err, "--gpus：没有名为 'tpu-v5' 的 GPU；可选：")


def test_a_workload_trace_that_cannot_be_read_is_refused_in_chinese(tmp_path, capsys):
    missing = tmp_path / "missing.jsonl"
    assert main(["plan", "--rate", "10", "--workload-trace", str(missing), "--lang", "zh"]) == 2
    _one_chinese_line(capsys.readouterr().err, f"--workload-trace {missing}：无法读取（")


def test_the_simulator_s_own_errors_follow_the_language():
    from nanovllm_teach.sim.hardware import get_device

    with speaking("zh"), pytest.raises(ValueError, match="没有名为 'h100' 的硬件；可选："):
        get_device("h100")


def test_a_picture_refuses_a_bad_argument_in_chinese():
    from nanovllm_teach.viz.diagrams.kv_cache import block_table_slots, hash_chain

    with speaking("zh"):
        with pytest.raises(ValueError, match="token_ids 为空：一个 prompt 至少有一个 token"):
            hash_chain([], 4)
        with pytest.raises(ValueError, match=r"position 必须在 \[0, 5\) 之内，收到的是 9"):
            block_table_slots([0, 1], 5, 4, position=9)
    with speaking("en"), pytest.raises(ValueError, match="token_ids is empty"):
        hash_chain([], 4)


def test_an_exercise_s_hint_that_does_not_exist_is_refused_in_chinese():
    from nanovllm_teach.exercises import get_exercise, hint

    with speaking("zh"):
        with pytest.raises(KeyError, match="没有练习 'nope'"):
            get_exercise("nope")
        with pytest.raises(ValueError, match="的提示编号是 1 到"):
            hint("can_append", 99)


@pytest.mark.usefixtures("no_language_chosen")
def test_a_bad_language_variable_is_refused_in_the_locale_s_language(monkeypatch):
    """``NANOVLLM_TEACH_LANG`` itself is the mistake, so the locale says which language refuses it."""
    monkeypatch.setenv(i18n.ENV_VAR, "fr")
    monkeypatch.setenv("LC_ALL", "zh_CN.UTF-8")
    with pytest.raises(ValueError, match=f"{i18n.ENV_VAR} 必须是 en, zh 之一，收到的是 'fr'"):
        i18n.resolve_lang()
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    with pytest.raises(ValueError, match=f"{i18n.ENV_VAR} must be one of en, zh, got 'fr'"):
        i18n.resolve_lang()
