"""An exercise is its folder: every folder under ``nanovllm_teach/exercises`` is checked for what an exercise
needs (its place in the course, its definition, a template in both languages naming the file the grader
expects, a reference, hints in both languages), with nothing to add elsewhere; and ``nanovllm-teach
exercises start`` copies a template where the learner works, under that name, never over their work.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

from nanovllm_teach.cli import main
from nanovllm_teach.exercises import EXERCISES
from nanovllm_teach.exercises.base import HERE
from nanovllm_teach.exercises.worker import resolve_wire_type

FOLDERS = sorted(p for p in HERE.iterdir() if (p / "__init__.py").is_file() and not p.name.startswith("_"))
REPO = Path(__file__).resolve().parents[1]


def test_every_folder_with_a_definition_is_an_exercise_and_each_has_its_own_place():
    assert [p.name for p in FOLDERS] == sorted(EXERCISES)
    orders = [importlib.import_module(f"nanovllm_teach.exercises.{p.name}").ORDER for p in FOLDERS]
    assert all(isinstance(order, int) for order in orders) and len(set(orders)) == len(orders)
    assert list(EXERCISES) == [p.name for _, p in sorted(zip(orders, FOLDERS))]


@pytest.mark.parametrize("folder", FOLDERS, ids=[p.name for p in FOLDERS])
def test_an_exercise_folder_is_complete(folder):
    name, exercise = folder.name, EXERCISES[folder.name]
    assert exercise.template_path.is_file() and exercise.solution_path.is_file()
    template = exercise.template_path.read_text(encoding="utf-8")
    tree = ast.parse(template)
    stubs = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    if name != "trace_quiz":  # the quiz's template is a dict of answers or a function of the trace
        assert set(exercise.functions) <= set(stubs), name
        assert all("NotImplementedError" in ast.unparse(stubs[f]) for f in exercise.functions)
    # Both languages, and the file name the grader looks for in a student's folder, in both.
    english, chinese = template.split("中文说明", 1)
    for part in (english, chinese):
        assert f"nanovllm-teach grade {name} {name}.py" in part, (name, part[-400:])
    assert len(exercise.hints) >= 2 and all(h.en and h.zh for h in exercise.hints)
    assert exercise.title.en and exercise.title.zh


def test_the_course_order_is_not_kept_anywhere_else():
    for path in (REPO / "nanovllm_teach").rglob("*.py"):
        assert "COURSE_ORDER" not in path.read_text(encoding="utf-8"), path
    for guide in ("docs/teaching.md", "docs/teaching.zh-CN.md", "README.md", "README.zh-CN.md"):
        assert "COURSE_ORDER" not in (REPO / guide).read_text(encoding="utf-8"), guide


def test_the_worker_lists_no_exercise_s_types_it_finds_them_from_the_contract():
    # The types a piece's wire names are builtins or "module:Type" records kept in the exercise's folder: the
    # worker lists none of them (it once listed WaitingSeq and MemoryNumbers), so a new exercise adds its own.
    worker_source = (HERE / "worker.py").read_text(encoding="utf-8")
    assert not [p.name for p in FOLDERS if p.name in worker_source]
    assert "WaitingSeq" not in worker_source and "MemoryNumbers" not in worker_source
    named = [kind for exercise in EXERCISES.values() for piece in getattr(exercise, "pieces", ())
             for kind in piece.wire or () if ":" in kind]
    assert len(named) >= 3, named
    for kind in named:
        inner = kind.removeprefix("list[").removesuffix("]")
        assert inner.startswith("nanovllm_teach.exercises.") or inner.startswith("nanovllm_teach.engine."), kind
        assert resolve_wire_type(kind) is not None


def test_start_copies_the_template_under_the_name_the_grader_expects(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["exercises", "start", "decode_slot", "work"]) == 0
    written = tmp_path / "work" / "decode_slot.py"
    assert written.read_text(encoding="utf-8") == EXERCISES["decode_slot"].template_path.read_text(encoding="utf-8")
    out = capsys.readouterr().out
    assert f"nanovllm-teach grade decode_slot {Path('work') / 'decode_slot.py'}" in out
    assert main(["exercises", "start", "can_append", "--lang", "zh"]) == 0
    assert (tmp_path / "can_append.py").is_file()
    assert "填好后评分：nanovllm-teach grade can_append can_append.py" in capsys.readouterr().out
    assert main(["exercises", "--lang", "zh", "start", "allocate"]) == 0
    assert "填好后评分：nanovllm-teach grade allocate allocate.py" in capsys.readouterr().out


def test_start_never_writes_over_the_learners_work(tmp_path, capsys):
    mine = tmp_path / "decode_slot.py"
    mine.write_text("my work\n")
    assert main(["exercises", "start", "decode_slot", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "is already there: your work is not written over" in err and len(err.strip().splitlines()) == 1
    assert mine.read_text() == "my work\n"
    # Nor through a link someone left there.
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "tp_slice.py").symlink_to(tmp_path / "target.py")
    assert main(["exercises", "start", "tp_slice", str(tmp_path / "other")]) == 2
    assert not (tmp_path / "target.py").exists()
    (tmp_path / "a_file").write_text("")
    assert main(["exercises", "start", "decode_slot", str(tmp_path / "a_file")]) == 2
    assert "cannot write" in capsys.readouterr().err
    assert main(["exercises", "start", "no_such_exercise"]) == 2
    assert re.search(r"unknown exercise|no_such_exercise", capsys.readouterr().err)
