"""Grading a class: collect the submissions under the paths a teacher gives, grade each, one row per student.

Role: grading (the teacher's side). Emits no events.

``collect(exercise, paths)``: each path is a solution file, one student's folder (it holds
``<exercise>.py``) or a class folder, whose entries (sorted by name) are students: a file, or a folder
holding ``<exercise>.py`` or a single ``.py`` file. What cannot be graded (a folder with no solution, a
binary or huge file, a link pointing outside the class folder) becomes a submission with a ``problem``;
names are kept as they are (spaces, any letters). ``grade_class`` grades them, ``jobs`` at a time, and
returns one ``Row`` per submission in the order collected: PASS, FAIL (graded: the reason is the
verdict), or ERROR (not gradeable: the reason says why).
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nanovllm_teach.exercises.base import Exercise, GradeResult
from nanovllm_teach.i18n import Text, say

MAX_SOLUTION_BYTES = 256 << 10  # a solution is a few dozen lines; a quarter of a megabyte is not one

NO_SOLUTION = Text(en="no solution: the folder has no .py file (name it {file})",
                   zh="没有解答：文件夹里没有 .py 文件（请命名为 {file}）")
SEVERAL_FILES = Text(en="several .py files and none named {file}: which one is the solution?",
                     zh="有多个 .py 文件，却没有一个叫 {file}：哪一个是解答？")
LINK_OUTSIDE = Text(en="a link pointing outside the class folder: not graded",
                    zh="指向班级文件夹之外的链接：不予评分")
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
    """One line of the gradebook. ``score``: 1 for PASS, 0 otherwise; ``result``: the verdict (None for
    ERROR); ``latency``: a scheduling policy's mean time to first token against FCFS's (lower is better)."""

    student: str
    exercise: str
    verdict: str  # PASS, FAIL or ERROR
    score: float
    seconds: float
    reason: str
    result: GradeResult | None = field(default=None, repr=False)
    latency: float | None = None
    rank: int | None = None


def _problem(path: Path, inside: Path | None) -> str | None:
    """Why ``path`` cannot be graded (None: it can be)."""
    if inside is not None and path.is_symlink():
        try:
            path.resolve(strict=True).relative_to(inside.resolve())
        except (ValueError, OSError):
            return say(LINK_OUTSIDE)
    if not path.is_file():
        return say(NOT_A_FILE)
    size = path.stat().st_size
    if size > MAX_SOLUTION_BYTES:
        return say(TOO_LARGE, size=size, limit=MAX_SOLUTION_BYTES)
    data = path.read_bytes()
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return say(NOT_TEXT)
    return say(NOT_TEXT) if b"\0" in data else None


def _file(student: str, path: Path, inside: Path | None) -> Submission:
    problem = say(NOT_PYTHON) if inside is not None and path.suffix != ".py" else _problem(path, inside)
    return Submission(student, None if problem else path, problem)


def student_folder(exercise: Exercise, folder: Path, inside: Path | None = None) -> Submission:
    """One student's folder: ``<exercise>.py`` in it, else its only ``.py`` file."""
    named = folder / f"{exercise.name}.py"
    if named.exists() or named.is_symlink():
        return _file(folder.name, named, inside or folder)
    if inside is not None and folder.is_symlink():
        return Submission(folder.name, None, _problem(folder, inside))
    files = sorted(p for p in folder.iterdir() if p.suffix == ".py" and not p.name.startswith("."))
    if not files:
        return Submission(folder.name, None, say(NO_SOLUTION, file=named.name))
    if len(files) > 1:
        return Submission(folder.name, None, say(SEVERAL_FILES, file=named.name))
    return _file(folder.name, files[0], inside or folder)


def collect(exercise: Exercise, paths: list[Path]) -> list[Submission]:
    """The submissions under ``paths``, in the order given, each class folder's students by name."""
    found: list[Submission] = []
    for path in paths:
        if path.is_dir() and not (path / f"{exercise.name}.py").exists():
            for entry in sorted(p for p in path.iterdir() if not p.name.startswith((".", "__pycache__"))):
                if entry.is_dir() and not entry.is_symlink():
                    found.append(student_folder(exercise, entry, path))
                else:
                    found.append(_file(entry.stem if entry.suffix == ".py" else entry.name, entry, path))
        elif path.is_dir():
            found.append(student_folder(exercise, path, None))
        else:
            found.append(_file(path.stem, path, None))
    return found


def _one_line(text: str) -> str:
    return " / ".join(line.strip() for line in text.splitlines() if line.strip())


def grade_one(exercise: Exercise, submission: Submission, grade: Any) -> Row:
    """``submission``'s row; ``grade(path)`` grades a file (whatever it raises is an ERROR row)."""
    if submission.path is None:
        return Row(submission.student, exercise.name, "ERROR", 0.0, 0.0, submission.problem or "")
    started = time.monotonic()
    try:
        result = grade(submission.path)
    except Exception as error:  # the grader itself, not the student: one row, and the class goes on
        return Row(submission.student, exercise.name, "ERROR", 0.0, time.monotonic() - started,
                   say(GRADER_FAILED, type=type(error).__name__, message=error))
    seconds = time.monotonic() - started
    reason = result.message.split(":", 1)[1].strip() if ":" in result.message else result.message
    reason = reason.split("\n\n")[0]  # the verdict's sentences, not a table after them
    row = Row(submission.student, exercise.name, "PASS" if result.passed else "FAIL",
              1.0 if result.passed else 0.0, seconds, _one_line(reason), result)
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
    """Every submission's row, in the order of ``submissions`` whatever order they finish in; ``progress``
    (a tqdm bar, or None) advances as each one ends."""
    rows: list[Row | None] = [None] * len(submissions)
    lock = threading.Lock()
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = {pool.submit(grade_one, exercise, s, grade): k for k, s in enumerate(submissions)}
        for future in as_completed(futures):
            rows[futures[future]] = future.result()
            if progress is not None:
                with lock:
                    progress.update(1)
    done = [row for row in rows if row is not None]
    rank(done)
    return done
