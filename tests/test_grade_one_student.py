"""One student never sinks the class: whatever one student hands in (a loop of links, a link to the reference
solution or out of the class, a file nobody can read, a FIFO, a stray exercise file at the top of the class
folder, a submission the grader itself trips over), that student gets one ERROR row with a reason and the
others are graded, the exit code, the CSV and the HTML page as usual. Files named one by one get the same
checks as a folder, and every row is named after its student, never after the exercise."""

from __future__ import annotations

import csv
import os
from pathlib import Path

import pytest

from nanovllm_teach.cli import main
from nanovllm_teach.exercises import EXERCISES
from nanovllm_teach.exercises.classroom import collect

HOSTILE = Path(__file__).parent / "data" / "hostile"
DECODE_SLOT = EXERCISES["decode_slot"]


def _rows(path: Path) -> dict[str, dict[str, str]]:
    with path.open(encoding="utf-8-sig", newline="") as file:
        return {row["student"]: row for row in csv.DictReader(file)}


def _troubled_class(root: Path) -> Path:
    room = root / "class"
    for name in ("alice", "bob", "carl", "dora", "eve", "frank", "gus"):
        (room / name).mkdir(parents=True)
    (room / "alice" / "decode_slot.py").write_text((HOSTILE / "honest_right.py").read_text())
    (room / "bob" / "decode_slot.py").symlink_to("decode_slot.py")  # a link to itself
    (room / "carl" / "decode_slot.py").symlink_to(DECODE_SLOT.solution_path)
    os.mkfifo(room / "dora" / "decode_slot.py")
    (room / "eve" / "decode_slot.py").write_text("def decode_slot(seq, block_size):\n    return 0\n")
    (room / "frank" / "decode_slot.py").write_text("def decode_slot(seq, block_size):\n    return 0\n")
    (room / "gus" / "decode_slot.py").symlink_to("/etc/hostname")
    (room / "decode_slot.py").write_text((HOSTILE / "honest_right.py").read_text())  # the teacher's stray copy
    return room


def test_one_students_trouble_is_one_error_row_and_the_class_goes_on(tmp_path, monkeypatch, capsys):
    room = _troubled_class(tmp_path)
    read_bytes, grade = Path.read_bytes, type(DECODE_SLOT).grade

    def unreadable(path: Path) -> bytes:  # as root every file is readable: eve's is not, here
        if path.parent.name == "eve":
            raise PermissionError(13, "Permission denied", str(path))
        return read_bytes(path)

    def grader_trips(self, solution, *args, **kwargs):  # the grader's own bug, on frank's file only
        if Path(solution).parent.name == "frank":
            raise RuntimeError("Symlink loop from 'somewhere'")
        return grade(self, solution, *args, **kwargs)

    monkeypatch.setattr(Path, "read_bytes", unreadable)
    monkeypatch.setattr(type(DECODE_SLOT), "grade", grader_trips)
    out_csv, out_html = tmp_path / "class.csv", tmp_path / "class.html"
    assert main(["grade", "decode_slot", str(room), "--csv", str(out_csv), "--html", str(out_html)]) == 0
    rows = _rows(out_csv)
    assert sorted(rows) == ["alice", "bob", "carl", "decode_slot.py", "dora", "eve", "frank", "gus"]
    assert rows["alice"]["verdict"] == "PASS"
    expected = {"bob": "Too many levels of symbolic links", "carl": "a link pointing outside",
                "gus": "a link pointing outside", "dora": "not a file or a folder", "eve": "Permission denied",
                "frank": "the grader failed on this submission: RuntimeError",
                "decode_slot.py": "decode_slot.py lies at the top of the class folder"}
    for student, reason in expected.items():
        assert rows[student]["verdict"] == "ERROR" and reason in rows[student]["reason"], rows[student]
    assert "alice" in out_html.read_text(encoding="utf-8")
    assert "8 graded: 1 PASS, 0 FAIL, 7 ERROR" in capsys.readouterr().out


def test_a_stray_exercise_file_at_the_top_makes_no_one_student_class(tmp_path):
    room = tmp_path / "class"
    (room / "alice").mkdir(parents=True)
    (room / "alice" / "decode_slot.py").write_text("x = 1\n")
    (room / "bob.py").write_text("x = 1\n")
    (room / "decode_slot.py").write_text("x = 1\n")
    found = {s.student: s for s in collect(DECODE_SLOT, [room])}
    assert sorted(found) == ["alice", "bob", "decode_slot.py"]
    assert found["decode_slot.py"].path is None and "top of the class folder" in found["decode_slot.py"].problem
    # One student's own folder, their file and notes in it, is still one student.
    (tmp_path / "zoe").mkdir()
    (tmp_path / "zoe" / "decode_slot.py").write_text("x = 1\n")
    (tmp_path / "zoe" / "notes.txt").write_text("done\n")
    assert [(s.student, s.path is not None) for s in collect(DECODE_SLOT, [tmp_path / "zoe"])] == [("zoe", True)]


def test_files_named_one_by_one_get_the_checks_of_a_folder_and_their_students_names(tmp_path, capsys):
    room = _troubled_class(tmp_path)
    files = [room / name / "decode_slot.py" for name in ("alice", "bob", "carl", "dora", "eve", "frank", "gus")]
    found = {s.student: s for s in collect(DECODE_SLOT, files)}
    assert sorted(found) == ["alice", "bob", "carl", "dora", "eve", "frank", "gus"]  # never "decode_slot"
    for student in ("carl", "gus"):  # a link to the reference solution, a link to a file of the machine's
        assert found[student].path is None and "a link pointing outside" in found[student].problem
    assert found["bob"].path is None and found["alice"].path is not None
    # A learner's self-check on a link to the reference is refused too, and shows nothing of what it points to.
    assert main(["grade", "decode_slot", str(room / "carl" / "decode_slot.py")]) == 1
    assert main(["grade", "decode_slot", str(room / "gus" / "decode_slot.py")]) == 1
    out = capsys.readouterr().out
    assert out.count("a link pointing outside") == 2 and Path("/etc/hostname").read_text().strip() not in out


@pytest.mark.parametrize("given", ["folder", "file"])
def test_a_gradescope_submission_is_named_after_its_folder_or_file(tmp_path, given):
    from nanovllm_teach.cli.grade import _submissions

    folder = tmp_path / "submission"
    folder.mkdir()
    (folder / "decode_slot.py").write_text("x = 1\n")
    path = folder if given == "folder" else folder / "decode_slot.py"
    (submission,) = _submissions(DECODE_SLOT, [path], True)
    assert submission.student == "submission" and submission.path is not None
