"""Command line: ``exercises`` (the classroom exercises and their templates), ``exercises start NAME [DIR]``
(a template copied where the learner works, named as the grader expects) and ``hint EXERCISE [LEVEL]``.

Grading a solution is the ``grade`` command (``cli/grade.py``).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from nanovllm_teach.cli.arguments import (CANNOT_WRITE, EXERCISE_NAME_HELP, UsageError, add_lang_option, exercise_named,
                                          positive_int)
from nanovllm_teach.i18n import Text, say

EXERCISE_LINE = Text(en="{number}. {name:<16} {title}  [{replaces}]\n   template: {template}",
                     zh="{number}. {name:<16} {title}  [{replaces}]\n   模板：{template}")
EXERCISES_NEXT = Text(en="\nStart one: nanovllm-teach exercises start EXERCISE (it writes EXERCISE.py here), fill it "
                         "in, then: nanovllm-teach grade EXERCISE EXERCISE.py\n"
                         "Stuck? nanovllm-teach hint EXERCISE 1 (then 2) gives a hint.",
                      zh="\n开始一个练习：nanovllm-teach exercises start EXERCISE（在当前文件夹写出 EXERCISE.py），填好，"
                         "然后运行：nanovllm-teach grade EXERCISE EXERCISE.py\n"
                         "卡住了？nanovllm-teach hint EXERCISE 1（再 2）会给出提示。")
STARTED = Text(en="wrote {path}: fill it in, then grade it: nanovllm-teach grade {name} {path}\n"
                  "Stuck? nanovllm-teach hint {name} 1 (then 2) gives a hint.",
               zh="已写出 {path}：填好后评分：nanovllm-teach grade {name} {path}\n"
                  "卡住了？nanovllm-teach hint {name} 1（再 2）会给出提示。")
ALREADY_THERE = Text(en="{path} is already there: your work is not written over (grade it, or start in another "
                        "folder: nanovllm-teach exercises start {name} FOLDER)",
                     zh="{path} 已经存在：不会覆盖你的作业（给它评分，或换个文件夹开始：nanovllm-teach exercises start "
                        "{name} FOLDER）")


def add_exercises_parser(subparsers: Any) -> argparse.ArgumentParser:
    """The ``exercises`` subcommand (and its ``start``) on ``subparsers`` (what ``add_subparsers`` returned)."""
    exs = subparsers.add_parser("exercises", help=say(Text(
        en="list the classroom exercises and their templates; 'exercises start NAME' copies one to work on",
        zh="列出课堂练习及其模板；'exercises start NAME' 复制一个出来做")))
    exs.set_defaults(func=_exercises)
    start = exs.add_subparsers(dest="action").add_parser("start", help=say(Text(
        en="copy an exercise's template to DIR/NAME.py, where the grader expects it",
        zh="把练习的模板复制到 DIR/NAME.py，评分器在那里找它")))
    start.add_argument("exercise", help=say(EXERCISE_NAME_HELP))
    start.add_argument("folder", nargs="?", type=Path, default=Path("."), metavar="DIR", help=say(Text(
        en="where to write NAME.py (default: this folder; made if missing)",
        zh="NAME.py 写到哪里（默认：当前文件夹；不存在就新建）")))
    add_lang_option(start)  # also after ``start``'s arguments, where a learner types it
    start.set_defaults(func=_start)
    return exs


def add_hint_parser(subparsers: Any) -> argparse.ArgumentParser:
    """The ``hint`` subcommand on ``subparsers`` (what ``add_subparsers`` returned)."""
    hnt = subparsers.add_parser("hint", help=say(Text(en="a hint for an exercise: level 1 says where to look, 2 how",
                                                      zh="练习的提示：1 级说看哪里，2 级说怎么做")))
    hnt.add_argument("exercise", help=say(EXERCISE_NAME_HELP))
    hnt.add_argument("level", nargs="?", type=positive_int, default=1, help=say(Text(
        en="1 (the default) says where to look; each level says a little more",
        zh="1（默认）说看哪里；每高一级多说一点")))
    hnt.set_defaults(func=_hint)
    return hnt


def _exercises(args: argparse.Namespace) -> int:
    from nanovllm_teach.exercises import EXERCISES

    for number, ex in enumerate(EXERCISES.values(), 1):
        print(say(EXERCISE_LINE, number=number, name=ex.name, title=say(ex.title), replaces=say(ex.replaces),
                  template=ex.template_path))
    print(say(EXERCISES_NEXT))
    return 0


def _start(args: argparse.Namespace) -> int:
    exercise = exercise_named(args.exercise)
    target = args.folder / f"{exercise.name}.py"  # the name a student's folder is graded by
    try:
        args.folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:  # a file of that name, a folder that cannot be made
        raise UsageError(say(CANNOT_WRITE, path=args.folder, why=error.strerror or error)) from None
    try:
        with target.open("x", encoding="utf-8") as file:  # "x": never over a learner's work, nor through a link
            file.write(exercise.template_path.read_text(encoding="utf-8"))
    except FileExistsError:
        raise UsageError(say(ALREADY_THERE, path=target, name=exercise.name)) from None
    except OSError as error:
        raise UsageError(say(CANNOT_WRITE, path=target, why=error.strerror or error)) from None
    print(say(STARTED, path=target, name=exercise.name))
    return 0


def _hint(args: argparse.Namespace) -> int:
    print(exercise_named(args.exercise).hint(args.level))
    return 0
