"""``grade build-N CLASS/``: a class's build folders graded per chapter with the exercises' gradebook.

Each student's folder is one ``build start`` wrote; the rows are PASS (every piece the student's and right),
FAIL (graded: not written yet, or wrong, with the check's sentence) and ERROR (nothing to grade), in the class's
order, in the same CSV as an exercise's; a function that hands the engine's own back fails (the engine's functions
of the chapter are not there to call while grading); without the sandbox a class is refused.
"""

from __future__ import annotations

import csv

from nanovllm_teach.cli import main
from nanovllm_teach.exercises import isolation
from nanovllm_teach.track.chapters import CHAPTERS, chapter_named
from nanovllm_teach.track.extract import replace_stub, write_package


def a_class(room):
    for student, solutions in (("alice", True), ("Bob", False), ("carol", True)):
        write_package(room / student, CHAPTERS, with_solutions=solutions, lang="en")
    norms = room / "carol" / "myvllm" / "layers" / "norms.py"  # carol forgot the weight
    forgot = norms.read_text(encoding="utf-8").replace("return weight * torch.rms_norm(", "return torch.rms_norm(")
    norms.write_text(forgot, encoding="utf-8")
    (room / "dave").mkdir()  # an empty folder: nothing to grade
    write_package(room / "eve", CHAPTERS, with_solutions=False, lang="en")  # eve hands the engine's own back
    replace_stub(room / "eve", chapter_named("1"), "rms_norm",
                 "from nanovllm_teach.layers.layernorm import rms_norm as engine\nreturn engine(x, weight, eps)")
    replace_stub(room / "eve", chapter_named("1"), "silu_and_mul",
                 "import nanovllm_teach.layers.activation as engine\nreturn engine.silu_and_mul(x)")
    return room


def test_a_class_is_graded_per_chapter_in_the_gradebook(tmp_path, capsys, uid_drop_ready):
    room = a_class(tmp_path / "class")
    gradebook = tmp_path / "build-1.csv"
    assert main(["grade", "build-1", str(room), "--csv", str(gradebook), "--lang", "en"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == ("PASS alice: chapter 1 · RMSNorm and SiLU-and-mul: PASS (rms_norm, silu_and_mul match the "
                      "engine's)")
    assert out[1].startswith("FAIL Bob: chapter 1 · RMSNorm and SiLU-and-mul: not written yet (rms_norm, silu_and_mul")
    assert out[2].startswith("FAIL carol: your rms_norm on random bfloat16 tensors: element [0, 0] is ")
    assert out[3] == "ERROR dave: no myvllm/ folder: not a folder build start wrote"
    assert out[4].startswith("FAIL eve: your rms_norm raised RuntimeError on random tensors: the engine's own "
                             "rms_norm is not available while grading: write your own code")
    assert out[5] == "5 graded: 1 PASS, 3 FAIL, 1 ERROR"
    with gradebook.open(encoding="utf-8-sig") as file:
        rows = list(csv.DictReader(file))
    assert [(r["student"], r["exercise"], r["verdict"], r["score"]) for r in rows] == [
        ("alice", "build-1", "PASS", "1"), ("Bob", "build-1", "FAIL", "0"), ("carol", "build-1", "FAIL", "0"),
        ("dave", "build-1", "ERROR", "0"), ("eve", "build-1", "FAIL", "0")]
    assert "copied" in rows[0]["similarity_flags"]  # the generated solution is the reference, word for word


def test_a_chapter_that_is_not_there_or_a_class_without_the_sandbox_is_refused(tmp_path, capsys, monkeypatch):
    room = a_class(tmp_path / "class")
    assert main(["grade", "build-99", str(room), "--lang", "en"]) == 2
    assert "unknown chapter exercise 'build-99'; choose from: build-1, build-2" in capsys.readouterr().err
    # Chapters 6-10 check the engine beside the student's code, in the student's sandbox: not a class's grade.
    assert main(["grade", "build-9", str(room), "--lang", "en"]) == 2
    assert "build-9 cannot be graded for a class yet" in capsys.readouterr().err
    monkeypatch.setattr(isolation, "available", lambda: False)
    assert main(["grade", "build-1", str(room), "--lang", "en"]) == 2
    assert "a grade that counts runs other people's code: it needs bubblewrap" in capsys.readouterr().err


def test_one_students_folder_is_graded_alone_and_for_gradescope(tmp_path, capsys, uid_drop_ready):
    import json

    room = a_class(tmp_path / "class")
    results = tmp_path / "results.json"
    assert main(["grade", "build-1", str(room / "carol"), "--gradescope", str(results), "--lang", "en"]) == 1
    assert capsys.readouterr().out.startswith("FAIL build-1: your rms_norm on random bfloat16 tensors: element [0, 0]")
    written = json.loads(results.read_text(encoding="utf-8"))
    assert written["score"] == 0 and written["tests"][0]["name"] == "build-1"


def test_a_chapter_is_compared_between_students_not_with_the_reference(tmp_path):
    """A correct rebuild resembles the engine by design: the similarity report gives a chapter no share in
    common with the reference (nor a flag for it), only with the other students."""
    import ast

    from nanovllm_teach.exercises.similarity import likeness
    from nanovllm_teach.track.grading import chapter_exercise

    exercise = chapter_exercise("build-4")
    tree = ast.parse(exercise.solution_path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):  # the solution retyped: its docstrings and comments gone
        body = getattr(node, "body", None)
        if isinstance(body, list) and len(body) > 1 and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant):
            node.body = body[1:]
    retyped = ast.unparse(tree)
    paths = []
    for student in ("alice", "bob"):
        (tmp_path / f"{student}.py").write_text(retyped, encoding="utf-8")
        paths.append(tmp_path / f"{student}.py")
    alice, bob = likeness(["alice", "bob"], paths, exercise.solution_path, exercise.template_path,
                          exercise.alike_to_reference)
    assert alice.reference is None and not any("reference" in flag for flag in alice.flags), alice
    assert alice.closest == "bob" and alice.closest_share > 0.9 and any("bob" in flag for flag in alice.flags)
