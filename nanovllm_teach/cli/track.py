"""Command line: ``build start DIR [--with-solutions]`` and ``build check DIR [CHAPTER]``, the build-it-yourself
track (``nanovllm_teach/track``).

``build start`` writes a new folder with the learner's package (every function to write a stub whose docstring
is its contract; ``--with-solutions``: the engine's own bodies) and its README (``track/readme``), and refuses a
folder that exists. ``build check`` checks each chapter's written functions against the engine's, the
learner's code in the grading sandbox (``track/sandbox``), a process per chapter; ``build check DIR final``
runs the learner's engine alone there (``track/final``). Exit 0 when every chapter checked (or the finish
line) passes, 1 when one fails or is not written yet, 2 for a mistake in the command.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from nanovllm_teach.cli.arguments import add_lang_option
from nanovllm_teach.i18n import Text, resolve_lang, say

WROTE = Text(en="wrote {count} files into {folder}:", zh="已在 {folder} 中写入 {count} 个文件：")
CHAPTER_LINE = Text(en="  chapter {number} · {title}: {file} ({names})", zh="  第 {number} 章 · {title}：{file}（{names}）")
START_NEXT = Text(en="Write a chapter's functions, then: nanovllm-teach build check {folder} CHAPTER\n"
                     "Until you write one, the engine's own runs in its place.",
                  zh="写好一章的函数后运行：nanovllm-teach build check {folder} CHAPTER\n"
                     "在你写好之前，引擎用它自己的实现代替。")
SUMMARY = Text(en="{passed} of {count} chapters pass", zh="{count} 章中通过 {passed} 章")


def add_build_parser(subparsers: Any) -> argparse.ArgumentParser:
    """The ``build`` subcommand and its ``start`` and ``check`` on ``subparsers``."""
    build = subparsers.add_parser("build", help=say(Text(
        en="build the engine yourself, chapter by chapter: start a folder, check a chapter",
        zh="自己动手一章一章地搭建引擎：新建文件夹，检查某一章")))
    steps = build.add_subparsers(dest="step", required=True)
    start = steps.add_parser("start", help=say(Text(en="write a new folder with the package you will fill in",
                                                    zh="新建一个文件夹，里面是你要填写的包")))
    start.add_argument("folder", type=Path, metavar="DIR", help=say(Text(en="the folder to create (must not exist)",
                                                                         zh="要新建的文件夹（不能已存在）")))
    start.add_argument("--with-solutions", action="store_true", help=say(Text(
        en="fill every function with the engine's own code (a reference to read)",
        zh="每个函数都填上引擎自己的代码（供对照阅读的参考答案）")))
    start.set_defaults(func=_start)
    check = steps.add_parser("check", help=say(Text(en="check your functions against the engine's, chapter by chapter",
                                                    zh="一章一章地拿你的函数和引擎的对照检查")))
    check.add_argument("folder", type=Path, metavar="DIR", help=say(Text(en="the folder build start wrote",
                                                                         zh="build start 写出的文件夹")))
    check.add_argument("chapter", nargs="?", default=None, help=say(Text(
        en="a chapter's number or name (1 'norms', 2 'rope', 3 'attention', 4 'qwen3', 5 'sampler', 6 'kvcache', "
           "7 'paged', 8 'blocks', 9 'scheduler', 10 'loop'; default: all), or 'final': your engine alone, against "
           "the reference engine and transformers",
        zh="章的编号或名字（1 'norms'、2 'rope'、3 'attention'、4 'qwen3'、5 'sampler'、6 'kvcache'、7 'paged'、"
           "8 'blocks'、9 'scheduler'、10 'loop'；默认：全部），或 'final'：只运行你自己的引擎，与参考引擎和 "
           "transformers 对照")))
    check.set_defaults(func=_check)
    for step in (start, check):  # the language option is the command's too: ``build check DIR --lang zh``
        add_lang_option(step)
    return build


def _start(args: argparse.Namespace) -> int:
    from nanovllm_teach.track.chapters import CHAPTERS
    from nanovllm_teach.track.extract import write_package
    from nanovllm_teach.track.readme import write_readme

    written = write_package(args.folder, CHAPTERS, args.with_solutions, resolve_lang())
    written.append(write_readme(args.folder, CHAPTERS, resolve_lang()))
    print(say(WROTE, count=len(written), folder=args.folder))
    for chapter in CHAPTERS:
        names = ", ".join(seam.qualname for seam in chapter.seams)
        print(say(CHAPTER_LINE, number=chapter.number, title=say(chapter.title), file=chapter.file, names=names))
    print(say(START_NEXT, folder=args.folder))
    return 0


def _check(args: argparse.Namespace) -> int:
    from nanovllm_teach.track.chapters import CHAPTERS, chapter_named
    from nanovllm_teach.track.verdict import check_folder

    if args.chapter == "final":
        from nanovllm_teach.track.final import judge_final

        verdict = judge_final(args.folder)
        print("\n".join(verdict.shown()))
        return 0 if verdict.status == "pass" else 1
    chapters = [chapter_named(args.chapter)] if args.chapter is not None else list(CHAPTERS)
    passed = 0
    for verdict in check_folder(args.folder, chapters):
        print("\n".join(verdict.shown()))
        passed += verdict.status == "pass"
    if len(chapters) > 1:
        print(say(SUMMARY, passed=passed, count=len(chapters)))
    return 0 if passed == len(chapters) else 1
