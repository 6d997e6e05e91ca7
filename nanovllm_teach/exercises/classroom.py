"""Grading a class: collect the submissions under the paths a teacher gives, grade each, one row per student.

Role: grading (the teacher's side). Emits no events.

A path is a solution file, one student's folder, or a class folder whose entries are students. What cannot
be graded (no solution, a binary or huge file, a link out of the folder given, a stray ``<exercise>.py`` at
the top of a class folder) becomes that student's ERROR row: one student's trouble is never the class's.
A row's reason is one line, made ``visible``; ``printable`` is a whole verdict as the grader shows it.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nanovllm_teach.exercises.base import Exercise, GradeResult, visible
from nanovllm_teach.exercises.similarity import Likeness, likeness
from nanovllm_teach.i18n import Text, say

MAX_SOLUTION_BYTES = 256 << 10  # a solution is a few dozen lines; a quarter of a megabyte is not one

NO_SOLUTION = Text(en="no solution: the folder has no .py file (name it {file})",
                   zh="没有解答：文件夹里没有 .py 文件（请命名为 {file}）")
SEVERAL_FILES = Text(en="several .py files and none named {file}: which one is the solution?",
                     zh="有多个 .py 文件，却没有一个叫 {file}：哪一个是解答？")
LINK_OUTSIDE = Text(en="a link pointing outside {folder}: not graded", zh="指向 {folder} 之外的链接：不予评分")
UNREADABLE = Text(en="cannot be read ({error}): not graded", zh="无法读取（{error}）：不予评分")
STRAY_FILE = Text(en="{file} lies at the top of the class folder, beside the students: it is nobody's submission "
                     "(move it into its student's folder): not graded",
                  zh="{file} 放在班级文件夹的顶层、与学生们并列：它不属于任何人的作业（请把它移进对应学生的文件夹）：不予评分")
TOO_LARGE = Text(en="the file has {size} bytes, more than a solution can have ({limit}): not graded",
                 zh="文件有 {size} 字节，超过解答可能的大小（{limit}）：不予评分")
NOT_TEXT = Text(en="not a Python text file (binary, or not UTF-8): not graded",
                zh="不是 Python 文本文件（二进制，或不是 UTF-8）：不予评分")
NOT_PYTHON = Text(en="not a .py file: not graded", zh="不是 .py 文件：不予评分")
NOT_A_FILE = Text(en="not a file or a folder: not graded", zh="既不是文件也不是文件夹：不予评分")
GRADER_FAILED = Text(en="the grader failed on this submission: {type}: {message}",
                     zh="评分器在这份作业上出错：{type}：{message}")


@dataclass(frozen=True)
class Submission:
    """One student's work: ``path`` the file to grade, or ``problem`` why there is none to grade."""

    student: str
    path: Path | None
    problem: str | None = None


@dataclass
class Row:
    """One line of the gradebook. ``result``: the verdict (None for ERROR, and for a row read back from an
    earlier gradebook); ``latency``: a scheduling policy's mean time to first token against FCFS's."""

    student: str
    exercise: str
    verdict: str  # PASS, FAIL or ERROR
    score: float
    seconds: float
    reason: str
    result: GradeResult | None = field(default=None, repr=False)
    latency: float | None = None
    rank: int | None = None
    attempts: int = 1
    likeness: Likeness | None = None


def _problem(path: Path, inside: Path) -> str | None:
    """Why ``path`` (given inside the folder ``inside``) cannot be graded (None: it can be)."""
    try:
        Path(os.path.realpath(path, strict=True)).relative_to(os.path.realpath(inside))
    except ValueError:
        return say(LINK_OUTSIDE, folder=inside)
    if path.suffix != ".py":
        return say(NOT_PYTHON)
    if not path.is_file():
        return say(NOT_A_FILE)
    size = path.stat().st_size
    if size > MAX_SOLUTION_BYTES:
        return say(TOO_LARGE, size=size, limit=MAX_SOLUTION_BYTES)
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        return say(NOT_TEXT)
    return say(NOT_TEXT) if "\0" in text else None


def _file(student: str, path: Path, inside: Path) -> Submission:
    problem = _problem(path, inside)
    return Submission(student, None if problem else path, problem)


def _student_folder(exercise: Exercise, folder: Path, inside: Path | None = None) -> Submission:
    """One student's folder: ``<exercise>.py`` in it, else its only ``.py`` file."""
    named, student = folder / f"{exercise.name}.py", Path(os.path.abspath(folder)).name
    if named.exists() or named.is_symlink():
        return _file(student, named, inside or folder)
    files = sorted(p for p in folder.iterdir() if p.suffix == ".py" and not p.name.startswith("."))
    if not files:
        return Submission(student, None, say(NO_SOLUTION, file=named.name))
    if len(files) > 1:
        return Submission(student, None, say(SEVERAL_FILES, file=named.name))
    return _file(student, files[0], inside or folder)


def folded(name: str) -> tuple[str, str]:
    """The order of students: by name without case (``str.casefold``: "alice" before "Zhang Wei"), the exact
    name breaking ties; other scripts by code point (Chinese names are not put in pinyin order)."""
    return name.casefold(), name


def _entries(folder: Path) -> list[Path]:
    return sorted((p for p in folder.iterdir() if not p.name.startswith((".", "__pycache__"))),
                  key=lambda p: folded(p.name))


def _one_student(exercise: Exercise, folder: Path) -> bool:
    """Whether ``folder`` is one student's: it holds ``<exercise>.py`` and no other ``.py`` file or folder (a
    class folder with a stray ``<exercise>.py`` is still a class: nobody is dropped)."""
    named = f"{exercise.name}.py"
    entries = _entries(folder)
    return named in {p.name for p in entries} and not any(
        p.name != named and (p.suffix == ".py" or p.is_dir()) for p in entries)


def _class_entry(exercise: Exercise, entry: Path, room: Path) -> Submission:
    if entry.is_dir() and not entry.is_symlink():
        return _student_folder(exercise, entry, room)
    if entry.name == f"{exercise.name}.py":
        return Submission(entry.name, None, say(STRAY_FILE, file=entry.name))
    return _file(entry.stem if entry.suffix == ".py" else entry.name, entry, room)


def _guarded(student: str, find: Any) -> Submission:
    """``find()``, or a submission with the reason it could not be looked at (a loop of links, an unreadable
    folder): one student's trouble is that student's row."""
    try:
        return find()
    except Exception as error:
        return Submission(student, None, say(UNREADABLE, error=visible(str(error))))


def one_submission(exercise: Exercise, path: Path) -> Submission:
    """``path`` as one student's work, a file or a folder, with the checks of a class."""
    where = Path(os.path.abspath(path))
    if path.is_dir():
        return _guarded(where.name, lambda: _student_folder(exercise, path, None))
    # A file named after the exercise is its folder's student's.
    student = where.parent.name if where.stem == exercise.name else where.stem
    return _guarded(student, lambda: _file(student, path, path.absolute().parent))


def collect(exercise: Exercise, paths: list[Path]) -> list[Submission]:
    """The submissions under ``paths``, in the order given, each class folder's students by name (``folded``)."""
    found: list[Submission] = []
    for path in paths:
        if path.is_dir() and not _one_student(exercise, path):
            found += [_guarded(entry.name, lambda: _class_entry(exercise, entry, path)) for entry in _entries(path)]
        else:
            found.append(one_submission(exercise, path))
    return found


def printable(message: str) -> str:
    """A verdict as the grader shows it: its first line (the grader's ``PASS``/``FAIL``/``ERROR`` prefix), every
    later line indented, each made ``visible``: no line of it can pass for another verdict."""
    first, *rest = message.split("\n")
    return "\n".join([visible(first)] + [visible(line if line[:1] in ("", " ") else "  " + line) for line in rest])


def grade_one(exercise: Exercise, submission: Submission, grade: Any) -> Row:
    """``submission``'s row; ``grade(path)`` grades a file (whatever the grading raises is an ERROR row)."""
    if submission.path is None:
        return Row(submission.student, exercise.name, "ERROR", 0.0, 0.0, submission.problem or "")
    started = time.monotonic()
    try:
        return _row(exercise, submission, grade(submission.path), time.monotonic() - started)
    except Exception as error:  # the grader itself, not the student: one row, and the class goes on
        return Row(submission.student, exercise.name, "ERROR", 0.0, time.monotonic() - started,
                   say(GRADER_FAILED, type=type(error).__name__, message=visible(str(error))))


def _row(exercise: Exercise, submission: Submission, result: GradeResult, seconds: float) -> Row:
    reason = result.message.split(":", 1)[1].strip() if ":" in result.message else result.message
    reason = reason.split("\n\n")[0]  # the verdict's sentences, not a table after them
    reason = visible(" / ".join(line.strip() for line in reason.split("\n") if line.strip()))
    row = Row(submission.student, exercise.name, "PASS" if result.passed else "FAIL",
              1.0 if result.passed else 0.0, seconds, reason, result)
    scores = getattr(result, "scores", None)
    if scores:
        row.latency = sum(s.mean_ratio for s in scores) / len(scores)
    return row


def rank(rows: list[Row]) -> None:
    """The class leaderboard of a scheduling policy: every policy that ran, rank 1 the lowest latency."""
    ranked = sorted((r for r in rows if r.latency is not None), key=lambda r: (r.latency, r.student))
    for number, row in enumerate(ranked, 1):
        row.rank = number


def grade_class(exercise: Exercise, submissions: list[Submission], grade: Any, jobs: int = 1,
                progress: Any = None) -> list[Row]:
    """Every submission's row, in the order of ``submissions``; ``progress`` (a tqdm bar, or None) advances as
    each one ends."""
    rows: list[Row | None] = [None] * len(submissions)
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = {pool.submit(grade_one, exercise, s, grade): k for k, s in enumerate(submissions)}
        for future in as_completed(futures):  # in this thread, as each one ends
            rows[futures[future]] = future.result()
            if progress is not None:
                progress.update(1)
    done = [row for row in rows if row is not None]
    rank(done)
    alike = likeness([s.student for s in submissions], [s.path for s in submissions], exercise.solution_path,
                     exercise.template_path, exercise.alike_to_reference)
    for row, found in zip(done, alike, strict=True):
        row.likeness = found
    return done
