"""A chapter of the build track graded as a class exercise is: ``nanovllm-teach grade build-N CLASS/``.

Role: teaching (the track), the teacher's side; the class's gradebook is the exercises' (``classroom``,
``gradebook``). Emits no events.

Every chapter of ``chapters.CHAPTERS`` is gradeable under the name ``build-<number>`` (``build-1`` for the
norms ... ``build-5`` for the sampler): adding a chapter there is all it takes. Not yet the chapters checked
beside the learner's code (``Chapter.checked_beside``: 6-10), whose references would be computed in the
student's own sandbox: ``grade`` refuses them, saying so. ``ChapterExercise`` is that
chapter as an ``Exercise``: its ``grade`` judges one student's ``build start`` folder in the sandbox
(``verdict.judge_chapter``, where the engine's own functions of the chapter raise, as an exercise's points do)
and gives the ``GradeResult`` a class row is made of: PASS when every piece of
the chapter is the student's and matches the engine's, FAIL otherwise (not written yet, a wrong piece, a file
that does not load). ``collect`` finds the students: each path is one student's folder (it holds the package
``myvllm/``) or a class folder of them; what cannot be graded (no package, no chapter file, a link out, a
file too large or not text) is that student's ERROR row. The similarity report compares a student's chapter
file with the other students' only (``alike_to_reference`` False): a correct rebuild resembles the engine by
design, so no share in common with the generated solution is given; a copy of its text word for word, or a
link to it, is still flagged. The skeleton's stub is what every submission shares and is taken out first.
"""

from __future__ import annotations

import atexit
import dataclasses
import functools
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from nanovllm_teach.exercises.base import DEFAULT_TIME_LIMIT_S, Exercise, GradeResult, SolutionSource
from nanovllm_teach.exercises.classroom import Submission, folded, one_submission
from nanovllm_teach.i18n import Text, say
from nanovllm_teach.track.chapters import CHAPTERS
from nanovllm_teach.track.seams import PACKAGE, Chapter

PREFIX = "build-"

UNKNOWN = Text(en="unknown chapter exercise {name!r}; choose from: {names}", zh="没有章节练习 {name!r}；可选：{names}")
NOT_A_BUILD_FOLDER = Text(en="no {package}/ folder: not a folder build start wrote", zh="没有 {package}/ 文件夹：不是 "
                                                                                     "build start 写出的文件夹")
NO_CHAPTER_FILE = Text(en="no {file}: the chapter's file is missing", zh="没有 {file}：缺少这一章的文件")
NOT_GRADEABLE = Text(
    en="{name} cannot be graded for a class yet: its check runs the engine beside the student's code, where a "
       "student could change the reference; learners check it with nanovllm-teach build check DIR {number}",
    zh="{name} 暂时不能给全班评分：它的检查在学生代码旁边运行引擎，学生可以改动参考实现；学习者可用 nanovllm-teach "
       "build check DIR {number} 自查")
NO_FILES = Text(en="not graded: a chapter is graded from a student's folder (see nanovllm-teach build start)",
                zh="不予评分：章节按学生的文件夹评分（见 nanovllm-teach build start）")


@dataclass(frozen=True)
class ChapterExercise(Exercise):
    """``chapter`` graded as an exercise; a submission is the chapter's file in a student's folder."""

    chapter: Chapter
    alike_to_reference: ClassVar[bool] = False  # a correct rebuild resembles the engine: compared between students

    @property
    def solution_path(self) -> Path:
        return _generated(True) / self.chapter.file

    @property
    def template_path(self) -> Path:
        return _generated(False) / self.chapter.file

    def grade(self, solution: SolutionSource, model: str | Path | None = None,
              time_limit: float = DEFAULT_TIME_LIMIT_S) -> GradeResult:
        """Judge the folder the chapter's file ``solution`` is in. ``model`` is not used: every chapter is
        checked on the shipped checkpoint, whose tensors the checks' cases are."""
        from nanovllm_teach.track.verdict import judge_chapter

        assert isinstance(solution, Path), "a chapter is graded from a student's folder"
        folder = solution.parents[len(Path(self.chapter.file).parts) - 1]
        verdict = judge_chapter(folder, self.chapter, time_limit, graded=True)
        detail = "\n".join(line.strip() for line in (verdict.lines[1:] or verdict.lines))
        passed = verdict.status == "pass"
        verdict_word = "PASS" if passed else "FAIL"  # in English in every language: graders parse it
        return GradeResult(self.name, passed, f"{verdict_word} {self.name}: {detail}", isolated=verdict.isolated,
                           output=verdict.printed)


def is_chapter_name(name: str) -> bool:
    return name.startswith(PREFIX)


def chapter_exercise(name: str) -> ChapterExercise:
    """The chapter called ``name`` (``build-<number>``) as an exercise; ``ValueError`` naming every one there is."""
    for chapter in CHAPTERS:
        if name == f"{PREFIX}{chapter.number}":
            if chapter.checked_beside:
                raise ValueError(say(NOT_GRADEABLE, name=name, number=chapter.number))
            return ChapterExercise(name, chapter.title, chapter.file, tuple(s.qualname for s in chapter.seams), (),
                                   chapter)
    raise ValueError(say(UNKNOWN, name=name, names=", ".join(f"{PREFIX}{c.number}" for c in CHAPTERS)))


@functools.cache
def _generated(with_solutions: bool) -> Path:
    """The package as ``build start`` writes it (with the solutions, or the stubs), once per process."""
    from nanovllm_teach.track.extract import write_package

    folder = Path(tempfile.mkdtemp(prefix="nanovllm_teach_chapters_"))
    atexit.register(shutil.rmtree, folder, True)
    write_package(folder / "package", CHAPTERS, with_solutions, "en")
    return folder / "package"


def _student(exercise: ChapterExercise, folder: Path) -> Submission:
    """One student's folder: the chapter's file in it, checked as a class's files are (``one_submission``)."""
    student = Path(os.path.abspath(folder)).name
    if not (folder / PACKAGE).is_dir():
        return Submission(student, None, say(NOT_A_BUILD_FOLDER, package=PACKAGE))
    path = folder / exercise.chapter.file
    if not path.exists() and not path.is_symlink():
        return Submission(student, None, say(NO_CHAPTER_FILE, file=exercise.chapter.file))
    return dataclasses.replace(one_submission(exercise, path), student=student)


def collect(exercise: ChapterExercise, paths: list[Path]) -> list[Submission]:
    """The students under ``paths``, in the order given, each class folder's by name (``classroom.folded``)."""
    found: list[Submission] = []
    for path in paths:
        if not path.is_dir() or (path / PACKAGE).is_dir():
            found.append(_guarded(path, lambda: _student(exercise, path)) if path.is_dir()
                         else Submission(path.name, None, say(NO_FILES)))
            continue
        entries = sorted((p for p in path.iterdir() if not p.name.startswith(".")), key=lambda p: folded(p.name))
        for entry in entries:
            found.append(_guarded(entry, lambda: _student(exercise, entry)) if entry.is_dir() and not entry.is_symlink()
                         else Submission(entry.name, None, say(NO_FILES)))
    return found


def _guarded(folder: Path, find: Any) -> Submission:
    from nanovllm_teach.exercises.base import visible
    from nanovllm_teach.exercises.classroom import UNREADABLE

    try:
        return find()
    except OSError as error:  # an unreadable folder, a loop of links: that student's row
        return Submission(folder.name, None, say(UNREADABLE, error=visible(str(error))))
