"""Command line: ``exercises`` (the classroom exercises and their templates) and ``hint EXERCISE [LEVEL]``.

Grading a solution is the ``grade`` command (``cli/grade.py``).
"""

from __future__ import annotations

import argparse
from typing import Any

from nanovllm_teach.cli.arguments import exercise_named, positive_int
from nanovllm_teach.i18n import Text, say

EXERCISE_LINE = Text(en="{number}. {name:<16} {title}  [{replaces}]\n   template: {template}",
                     zh="{number}. {name:<16} {title}  [{replaces}]\n   模板：{template}")
EXERCISES_NEXT = Text(en="\nCopy a template, fill it in, then: nanovllm-teach grade EXERCISE your_file.py\n"
                         "Stuck? nanovllm-teach hint EXERCISE 1 (then 2) gives a hint.",
                      zh="\n复制一份模板，填好，然后运行：nanovllm-teach grade EXERCISE your_file.py\n"
                         "卡住了？nanovllm-teach hint EXERCISE 1（再 2）会给出提示。")


def add_exercises_parser(subparsers: Any) -> argparse.ArgumentParser:
    """The ``exercises`` subcommand on ``subparsers`` (what ``add_subparsers`` returned)."""
    exs = subparsers.add_parser("exercises", help="list the classroom exercises and their templates")
    exs.set_defaults(func=_exercises)
    return exs


def add_hint_parser(subparsers: Any) -> argparse.ArgumentParser:
    """The ``hint`` subcommand on ``subparsers`` (what ``add_subparsers`` returned)."""
    hnt = subparsers.add_parser("hint", help="a hint for an exercise: level 1 says where to look, 2 how")
    hnt.add_argument("exercise", help="the exercise's name (see: nanovllm-teach exercises)")
    hnt.add_argument("level", nargs="?", type=positive_int, default=1,
                     help="1 (the default) says where to look; each level says a little more")
    hnt.set_defaults(func=_hint)
    return hnt


def _exercises(args: argparse.Namespace) -> int:
    from nanovllm_teach.exercises import EXERCISES

    for number, ex in enumerate(EXERCISES.values(), 1):
        print(say(EXERCISE_LINE, number=number, name=ex.name, title=say(ex.title), replaces=say(ex.replaces),
                  template=ex.template_path))
    print(say(EXERCISES_NEXT))
    return 0


def _hint(args: argparse.Namespace) -> int:
    print(exercise_named(args.exercise).hint(args.level))
    return 0
