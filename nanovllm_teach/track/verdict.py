"""A chapter's verdict: which of its pieces are the learner's, and whether they match the engine's.

Role: teaching (the track). Emits no events.

The learner's code runs in a child process of its own (``python -m nanovllm_teach.track.verdict``), one per
chapter, stopped after ``TIME_LIMIT_S``: an endless loop or a crash in a learner's file ends that chapter's
check, with a sentence, not the command. The child writes its verdict as JSON to a file the parent names;
the parent reads it and says it (``checked``). The child is a plain process: the grading sandbox
(``exercises/isolation.py``) runs a learner's functions behind a channel of small JSON frames, not the
tensors a chapter's pieces take and return.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from nanovllm_teach.i18n import ENV_VAR, Text, resolve_lang, say, speaking
from nanovllm_teach.track.chapters import chapter_named
from nanovllm_teach.track.seams import Chapter
from nanovllm_teach.track.learner import NOT_LOADED, chapter_file

TIME_LIMIT_S = 120.0  # a chapter's check takes seconds; this is for a learner's endless loop
PRINTED_CHARS = 2000

PASSED = Text(en="chapter {number} · {title}: PASS ({names} match the engine's)",
              zh="第 {number} 章 · {title}：通过（{names} 与引擎的实现一致）")
FAILED = Text(en="chapter {number} · {title}: FAIL", zh="第 {number} 章 · {title}：未通过")
NOT_WRITTEN_YET = Text(en="chapter {number} · {title}: not written yet ({names}; the engine's own run in their place)",
                       zh="第 {number} 章 · {title}：还没有写（{names}；目前由引擎自己的实现代替）")
STILL_TO_WRITE = Text(en="  not written yet: {names} (the engine's own run in their place)",
                      zh="  还没有写：{names}（目前由引擎自己的实现代替）")
YOURS = Text(en="  yours: {names}", zh="  你的：{names}")
MISSING = Text(en="  {name} is missing from {file}: keep its definition (build start wrote it)",
               zh="  {file} 里没有 {name}：请保留它的定义（build start 写下的）")
STOPPED = Text(en="  the check was stopped after {limit:g} s: does your code loop forever?",
               zh="  检查在 {limit:g} 秒后被停止：你的代码是否陷入了死循环？")
ENDED = Text(en="  the check ended without a verdict (exit code {code}): does your code end the process?",
             zh="  检查没有给出结论就结束了（退出码 {code}）：你的代码是否结束了这个进程？")
PRINTED = Text(en="  printed while checking:", zh="  检查时打印的内容：")
NO_FOLDER = Text(en="{folder}: no such folder (make one with: nanovllm-teach build start {folder})",
                 zh="{folder}：没有这个文件夹（先运行：nanovllm-teach build start {folder}）")


@dataclass
class ChapterVerdict:
    number: int
    status: str  # "pass", "fail" or "not_written"
    lines: list[str] = field(default_factory=list)


def _title(chapter: Chapter) -> dict[str, object]:
    return {"number": chapter.number, "title": say(chapter.title)}


def judge_chapter(folder: Path, chapter: Chapter) -> ChapterVerdict:
    """Load the chapter's file and check every written piece (in this process: the child's)."""
    from nanovllm_teach.track.checks import check_seam  # torch: only the child loads it, never the parent

    loaded = chapter_file(folder, chapter)
    if loaded.load_error is not None:
        not_loaded = "  " + say(NOT_LOADED, file=chapter.file, error=loaded.load_error)
        return ChapterVerdict(chapter.number, "fail", [say(FAILED, **_title(chapter)), not_loaded])
    problems, yours, unwritten = [], [], []
    for piece in loaded.pieces:
        name = piece.seam.qualname
        if piece.function is None:
            problems.append(say(MISSING, name=name, file=chapter.file))
        elif not piece.written:
            unwritten.append(name)
        else:
            yours.append(name)
            problem = check_seam(piece.seam, piece.function)
            if problem:
                problems.append("  " + problem)
    names = ", ".join(unwritten)
    if not yours and not problems:
        return ChapterVerdict(chapter.number, "not_written", [say(NOT_WRITTEN_YET, **_title(chapter), names=names)])
    if problems or unwritten:
        lines = [say(FAILED, **_title(chapter)), *problems]
        lines += [say(YOURS, names=", ".join(yours))] if yours else []
        lines += [say(STILL_TO_WRITE, names=names)] if unwritten else []
        return ChapterVerdict(chapter.number, "fail", lines)
    return ChapterVerdict(chapter.number, "pass", [say(PASSED, **_title(chapter), names=", ".join(yours))])


def checked(folder: Path, chapter: Chapter, time_limit: float = TIME_LIMIT_S) -> ChapterVerdict:
    """The chapter's verdict from a child process running ``judge_chapter``, stopped after ``time_limit``."""
    with tempfile.TemporaryDirectory(prefix="nanovllm-build-check-") as scratch:
        result = Path(scratch) / "verdict.json"
        command = [sys.executable, "-m", "nanovllm_teach.track.verdict", str(folder), str(chapter.number), str(result)]
        try:
            child = subprocess.run(command, env={**os.environ, ENV_VAR: resolve_lang()}, timeout=time_limit,
                                   check=False, capture_output=True)
        except subprocess.TimeoutExpired as stopped:
            return ChapterVerdict(chapter.number, "fail", [say(FAILED, **_title(chapter)),
                                                           say(STOPPED, limit=time_limit),
                                                           *_printed(stopped.stdout, stopped.stderr)])
        printed = _printed(child.stdout, child.stderr)
        if not result.is_file():
            return ChapterVerdict(chapter.number, "fail", [say(FAILED, **_title(chapter)),
                                                           say(ENDED, code=child.returncode), *printed])
        verdict = ChapterVerdict(**json.loads(result.read_text(encoding="utf-8")))
        verdict.lines += printed
        return verdict


def _printed(*streams: bytes | None) -> list[str]:
    """What the learner's code printed, its last ``PRINTED_CHARS`` characters, each line quoted."""
    text = "".join((s or b"").decode("utf-8", "replace") for s in streams).strip()
    if not text:
        return []
    return [say(PRINTED)] + ["  | " + line for line in text[-PRINTED_CHARS:].splitlines()]


def check_folder(folder: Path, chapters: list[Chapter]) -> list[ChapterVerdict]:
    """Every chapter's verdict, in order; ``ValueError`` for a folder that is not there."""
    if not folder.is_dir():
        raise ValueError(say(NO_FOLDER, folder=folder))
    return [checked(folder, chapter) for chapter in chapters]


def _child(argv: list[str]) -> None:
    folder, chapter, result = Path(argv[0]), chapter_named(argv[1]), Path(argv[2])
    with speaking(None):
        verdict = judge_chapter(folder, chapter)
    result.write_text(json.dumps(asdict(verdict), ensure_ascii=False), encoding="utf-8")


if __name__ == "__main__":
    _child(sys.argv[1:])
