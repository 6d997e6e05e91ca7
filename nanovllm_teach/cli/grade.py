"""Command line: ``grade``, one learner's self-check, or a whole class, or Gradescope's autograder bundle.

``grade EXERCISE FILE`` grades one solution and prints what the code printed (quoted) and then the
verdict, exit 0 on PASS, 1 otherwise; a learner's own self-check may run without a sandbox, and then its
verdict says so on stdout. ``grade EXERCISE PATH...`` with a class (``classroom.collect``) grades every
submission, ``--jobs`` at a time, with a progress bar, prints one line per student in a fixed order and a
summary, and writes the gradebook (``--csv``, ``--html``) and, for one submission, Gradescope's results
(``--gradescope``). A grade that counts (a class, a class folder, ``--csv``, ``--html``) needs bubblewrap and a
user id per submission (the grader as root), ``--gradescope`` the user id at least (its container may forbid
bubblewrap's namespaces); without them it is refused, exit 2, and ``--gradescope`` writes a results.json
saying why. ``grade --check-isolation`` prints what this machine gives (``selftest``), exit 0 when a class can
be graded here, 2 otherwise. ``grade EXERCISE --gradescope-bundle out.zip`` writes the autograder bundle
(``gradescope``). EXERCISE ``build-N`` grades chapter N of the build track, each student's folder one that
``build start`` wrote (``track/grading``), with the same gradebook and the same refusals.
A mistake in what was asked is a ``UsageError`` (``cli/arguments.py``). Emits no events.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from nanovllm_teach.cli.arguments import (CANNOT_WRITE, EXERCISE_NAME_HELP, MODEL_FOLDER_HELP, UsageError,
                                          exercise_named, model_folder, number_at_least_zero, positive_int)
from nanovllm_teach.exercises.base import DEFAULT_TIME_LIMIT_S
from nanovllm_teach.i18n import Text, say

NO_SUBMISSIONS = Text(en="no submissions in {paths}: give solution files, or a class folder holding one file or "
                         "folder per student",
                      zh="{paths} 中没有作业：请给出解答文件，或一个每个学生占一个文件或文件夹的班级文件夹")
NO_SUCH_PATH = Text(en="no such file or folder: {path}", zh="没有这个文件或文件夹：{path}")
NEEDS_ISOLATION = Text(en="a grade that counts runs other people's code: it needs bubblewrap (Debian/Ubuntu: apt-get "
                          "install bubblewrap) and a user id per submission (run the grader as root, e.g. in a "
                          "container); see nanovllm-teach grade --check-isolation",
                       zh="计分的评分要运行别人的代码：需要 bubblewrap（Debian/Ubuntu：apt-get install bubblewrap）"
                          "以及每份作业一个用户 id（以 root 运行评分器，例如在容器里）；见 nanovllm-teach grade "
                          "--check-isolation")
GRADESCOPE_REFUSED = Text(en="not graded: this machine cannot isolate a submission (what it gives is below); ask your "
                             "teacher",
                          zh="未评分：这台机器无法隔离作业（它能提供什么见下文）；请联系老师")
ONE_FOR_GRADESCOPE = Text(en="--gradescope writes one submission's results, and {count} were found",
                          zh="--gradescope 只写一份作业的结果，而这里找到了 {count} 份")
NOTHING_TO_DO = Text(en="give the solution file(s) to grade, or --gradescope-bundle", zh="请给出要评分的解答文件，或 --gradescope-bundle")
NO_EXERCISE = Text(en="give the exercise's name (see: nanovllm-teach exercises)", zh="请给出练习的名字（见：nanovllm-teach exercises）")
NOT_ISOLATED = Text(en="  note: a self-check: your code ran in a plain process on this machine, not in a sandbox "
                       "(a class is never graded so)",
                    zh="  注意：这是自查，你的代码在这台机器上的普通进程中运行，没有沙箱（全班评分绝不会这样）")
USER_ID_ONLY = Text(en="  note: bubblewrap cannot start here, so this submission ran as a user id of its own with its "
                       "limits, not in a sandbox (see the --check-isolation output above it)",
                    zh="  注意：这里无法启动 bubblewrap，所以这份作业以单独的用户 id 在限制下运行，没有沙箱（见前面 "
                       "--check-isolation 的输出）")
PRINTED = Text(en="your code printed (quoted, not a verdict):", zh="你的代码打印了（引用，不是评语）：")
ROW = Text(en="{verdict} {student}: {reason}", zh="{verdict} {student}：{reason}")
BUNDLE_WRITTEN = Text(en="wrote {path}: upload it as the assignment's autograder (Gradescope: Configure Autograder, "
                         "zip file upload)",
                      zh="已写出 {path}：把它上传为作业的自动评分器（Gradescope：Configure Autograder，上传 zip 文件）")


def add_grade_parser(subparsers: Any) -> argparse.ArgumentParser:
    """The ``grade`` subcommand on ``subparsers`` (what ``add_subparsers`` returned)."""
    grd = subparsers.add_parser("grade", help=say(Text(
        en="grade a solution file, or a class: each submission in a sandbox",
        zh="给一个解答文件或全班评分：每份作业都在沙箱里运行")))
    grd.add_argument("exercise", nargs="?", help=say(EXERCISE_NAME_HELP))
    grd.add_argument("solution", nargs="*", metavar="PATH", help=say(Text(
        en="a solution file, a student's folder, or a class folder of student files or folders",
        zh="一个解答文件、一个学生的文件夹，或装着各个学生文件或文件夹的班级文件夹")))
    grd.add_argument("--model", default=None, help=say(MODEL_FOLDER_HELP))
    grd.add_argument("--time-limit", type=number_at_least_zero, default=DEFAULT_TIME_LIMIT_S, help=say(Text(
        en="seconds one call of the learner's code may take (default: {limit:g})",
        zh="学习者代码的一次调用最多可用的秒数（默认：{limit:g}）"), limit=DEFAULT_TIME_LIMIT_S))
    grd.add_argument("--jobs", type=positive_int, default=1, help=say(Text(
        en="submissions graded at once (default: 1)", zh="同时评分的作业份数（默认：1）")))
    grd.add_argument("--csv", type=Path, default=None, help=say(Text(en="write the gradebook as CSV",
                                                                     zh="把成绩册写成 CSV")))
    grd.add_argument("--html", type=Path, default=None, help=say(Text(en="write the gradebook as an HTML page",
                                                                      zh="把成绩册写成 HTML 页面")))
    grd.add_argument("--gradescope", type=Path, default=None, help=say(Text(
        en="write Gradescope's results.json for the one submission", zh="为这一份作业写出 Gradescope 的 results.json")))
    grd.add_argument("--gradescope-bundle", type=Path, default=None, help=say(Text(
        en="write the Gradescope autograder bundle (a .zip) for EXERCISE and stop",
        zh="为 EXERCISE 写出 Gradescope 的自动评分包（.zip）后结束")))
    grd.add_argument("--check-isolation", action="store_true", help=say(Text(
        en="say what this machine gives the sandbox, and whether a class can be graded here",
        zh="说明这台机器能给沙箱提供什么，以及能否在这里给全班评分")))
    grd.set_defaults(func=_grade)
    return grd


def _grade(args: argparse.Namespace) -> int:
    if args.check_isolation:
        from nanovllm_teach.exercises.selftest import check, screen

        found = check()
        print(screen(found))
        return 0 if found.class_ready else 2
    if args.exercise is None:
        raise UsageError(say(NO_EXERCISE))
    exercise = _exercise(args.exercise)
    if args.gradescope_bundle is not None:
        from nanovllm_teach.exercises.gradescope import write_bundle

        try:
            write_bundle(exercise.name, args.gradescope_bundle)
        except OSError as error:
            raise UsageError(say(CANNOT_WRITE, path=args.gradescope_bundle, why=error.strerror or error)) from None
        print(say(BUNDLE_WRITTEN, path=args.gradescope_bundle))
        return 0
    if not args.solution:
        raise UsageError(say(NOTHING_TO_DO))
    submissions = _submissions(exercise, [Path(p) for p in args.solution], args.gradescope is not None)
    model = model_folder(args.model)
    _refuse_unisolated(args, submissions)
    from nanovllm_teach.exercises.references import recorded_here

    with recorded_here():  # every submission runs in its own worker: nothing of a learner's runs here
        if len(submissions) == 1 and args.csv is None and args.html is None:
            return _self_check(exercise, submissions[0], model, args)
        return _grade_class(exercise, submissions, model, args)


def _exercise(name: str) -> Any:
    """A classroom exercise, or a chapter of the build track (``build-N``: ``track/grading``)."""
    from nanovllm_teach.track.grading import chapter_exercise, is_chapter_name

    return chapter_exercise(name) if is_chapter_name(name) else exercise_named(name)


def _refuse_unisolated(args: argparse.Namespace, submissions: list[Any]) -> None:
    """A grade that counts never runs a submission outside a sandbox: a class (several submissions, a class
    folder), ``--csv`` or ``--html`` needs bubblewrap and the uid drop, ``--gradescope`` the uid drop (its results
    then say why it was refused, with the ``--check-isolation`` screen). Only a learner's own self-check may run
    without them."""
    import json
    import os

    from nanovllm_teach.exercises import isolation

    folders = [Path(os.path.abspath(p)) for p in args.solution if Path(p).is_dir()]
    in_class = len(submissions) > 1 or any(s.student != f.name for s in submissions for f in folders)
    if (in_class or args.csv is not None or args.html is not None) and not (
            isolation.available() and isolation.uid_drop()):
        raise UsageError(say(NEEDS_ISOLATION))
    if args.gradescope is None:
        return
    from nanovllm_teach.exercises.selftest import check, screen

    found = check()  # the probe, started exactly as this submission would be
    if not found.gradescope_ready:
        refusal = {"score": 0.0, "output": say(GRADESCOPE_REFUSED) + "\n\n" + screen(found), "visibility": "visible",
                   "tests": []}
        try:
            args.gradescope.write_text(json.dumps(refusal, ensure_ascii=False), encoding="utf-8")
        except OSError as error:
            raise UsageError(say(CANNOT_WRITE, path=args.gradescope, why=error.strerror or error)) from None
        raise UsageError(say(NEEDS_ISOLATION))


def _submissions(exercise: Any, paths: list[Path], one_each: bool) -> list[Any]:
    from nanovllm_teach.exercises.base import NO_SOLUTION_FILE
    from nanovllm_teach.exercises.classroom import collect, one_submission

    for path in paths:
        if not path.exists() and not path.is_symlink():
            raise UsageError(say(NO_SOLUTION_FILE if path.suffix == ".py" else NO_SUCH_PATH, path=path))
    from nanovllm_teach.track import grading

    if isinstance(exercise, grading.ChapterExercise):  # a student's build start folder, not a file
        found = grading.collect(exercise, paths)
    else:
        found = [one_submission(exercise, p) for p in paths] if one_each else collect(exercise, paths)
    if not found:
        raise UsageError(say(NO_SUBMISSIONS, paths=", ".join(map(str, paths))))
    if one_each and len(found) != 1:
        raise UsageError(say(ONE_FOR_GRADESCOPE, count=len(found)))
    return found


def _grader(exercise: Any, model: str | None, args: argparse.Namespace, in_class: bool) -> Any:
    """Grades one file (in bubblewrap wherever there is one: a class without it was refused before); in a class
    an exercise graded once (the trace quiz) gives no hints (they would let a blind search pass)."""
    def grade(path: Path) -> Any:
        if in_class and exercise.graded_once:
            return exercise.grade(path, model, args.time_limit, hints=False)
        return exercise.grade(path, model, args.time_limit)

    return grade


def _self_check(exercise: Any, submission: Any, model: str | None, args: argparse.Namespace) -> int:
    from nanovllm_teach.exercises.classroom import grade_one, printable

    started = time.monotonic()
    row = grade_one(exercise, submission, _grader(exercise, model, args, in_class=False))
    result = row.result
    if result is not None and result.output:
        print(say(PRINTED))
        print(result.output)
    print(printable(result.message if result is not None else f"ERROR {exercise.name}: {row.reason}"))
    if result is not None and result.isolated is False:  # an indented line of the verdict
        print(say(NOT_ISOLATED if args.gradescope is None else USER_ID_ONLY))
    _write(exercise, [row], args, time.monotonic() - started)
    return 0 if row.verdict == "PASS" else 1


def _grade_class(exercise: Any, submissions: list[Any], model: str | None, args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from nanovllm_teach.exercises.base import visible
    from nanovllm_teach.exercises.classroom import grade_class
    from nanovllm_teach.exercises.engine_grading import EngineExercise
    from nanovllm_teach.exercises.references import PendingReferences

    if isinstance(exercise, EngineExercise):
        PendingReferences(exercise.workloads, model).traces()  # recorded once, here, before any submission
    started = time.monotonic()
    with tqdm(total=len(submissions), unit="submission", file=sys.stderr, leave=False) as bar:
        rows = grade_class(exercise, submissions, _grader(exercise, model, args, in_class=True), args.jobs, bar)
    for row in rows:
        print(say(ROW, verdict=row.verdict, student=visible(row.student), reason=row.reason))
    from nanovllm_teach.exercises.gradebook import summary

    print(summary(rows))
    _write(exercise, rows, args, time.monotonic() - started)
    return 0


def _write(exercise: Any, rows: list[Any], args: argparse.Namespace, seconds: float) -> None:
    from nanovllm_teach.exercises.gradebook import carried_over, write_csv, write_gradescope, write_html

    try:
        rows = carried_over(rows, exercise, args.csv)  # a late or resubmitted folder updates its own row
    except ValueError as error:
        raise UsageError(str(error)) from None
    for path, write in ((args.csv, lambda p: write_csv(rows, p)), (args.html, lambda p: write_html(rows, exercise.name, p)),
                        (args.gradescope, lambda p: write_gradescope(rows[0], seconds, p))):
        if path is not None:
            try:
                write(path)
            except OSError as error:
                raise UsageError(say(CANNOT_WRITE, path=path, why=error.strerror or error)) from None
