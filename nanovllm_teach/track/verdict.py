"""A chapter's verdict: which of its pieces are the learner's, and whether they match the engine's.

Role: teaching (the track). Emits no events.

The learner's code runs in the class grader's sandbox (``sandbox``: bubblewrap, a job slot's own user id, a
cgroup, the exercises' limits), one process per chapter; the checks (``checks``) run here, compute the
references here, and call the learner's functions through the sandbox's proxies, each call stopped after
``TIME_LIMIT_S``: an endless loop or a crash in a learner's file ends that chapter's check, with a sentence, not
the command. Where this machine has no bubblewrap or no uid drop (a learner's laptop), the chapter runs in a
plain process with the same limits, and the verdict says so in one line (``NOT_ISOLATED``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from nanovllm_teach.i18n import Text, say
from nanovllm_teach.track.learner import NOT_LOADED
from nanovllm_teach.track.seams import Chapter

TIME_LIMIT_S = 60.0  # one call of a learner's function (or the loading of their file); a busy machine's torch import

PASSED = Text(en="chapter {number} · {title}: PASS ({names} match the engine's)",
              zh="第 {number} 章 · {title}：通过（{names} 与引擎的实现一致）")
FAILED = Text(en="chapter {number} · {title}: FAIL", zh="第 {number} 章 · {title}：未通过")
# The reference that stands in is the engine's own, except chapter 6's: the engine has no contiguous cache, and
# the track's ``contiguous_cache`` stands in there.
NOT_WRITTEN_YET = Text(en="chapter {number} · {title}: not written yet ({names}; the reference runs in their place)",
                       zh="第 {number} 章 · {title}：还没有写（{names}；目前由参考实现代替）")
STILL_TO_WRITE = Text(en="  not written yet: {names} (the reference runs in their place)",
                      zh="  还没有写：{names}（目前由参考实现代替）")
YOURS = Text(en="  yours: {names}", zh="  你的：{names}")
MISSING = Text(en="  {name} is missing from {file}: keep its definition (build start wrote it)",
               zh="  {file} 里没有 {name}：请保留它的定义（build start 写下的）")
PRINTED = Text(en="  printed while checking (quoted):", zh="  检查时打印的内容（引用）：")
NOT_ISOLATED = Text(en="  note: no sandbox here (bubblewrap or a user id of its own is missing): your code ran in a "
                       "plain process on this machine (a class is never graded so)",
                    zh="  注意：这里没有沙箱（缺少 bubblewrap 或单独的用户 id）：你的代码在这台机器上的普通进程中运行"
                       "（全班评分绝不会这样）")
NO_FOLDER = Text(en="{folder}: no such folder (make one with: nanovllm-teach build start {folder})",
                 zh="{folder}：没有这个文件夹（先运行：nanovllm-teach build start {folder}）")


@dataclass
class ChapterVerdict:
    """``lines``: the verdict (its first line the chapter's status); ``printed``: what the learner's code printed,
    quoted ("" if nothing); ``isolated``: whether it ran in bubblewrap."""

    part: str  # the chapter's number, or "final"
    status: str  # "pass", "fail" or "not_written"
    lines: list[str] = field(default_factory=list)
    printed: str = ""
    isolated: bool = True

    def shown(self) -> list[str]:
        """What ``build check`` prints: the verdict, what the code printed, and a line where it was not isolated."""
        return [*self.lines, *([say(PRINTED), self.printed] if self.printed else []),
                *([] if self.isolated else [say(NOT_ISOLATED)])]


def _title(chapter: Chapter) -> dict[str, object]:
    return {"number": chapter.number, "title": say(chapter.title)}


def judge_chapter(folder: Path, chapter: Chapter, time_limit: float = TIME_LIMIT_S,
                  graded: bool = False) -> ChapterVerdict:
    """Start the chapter's file in the sandbox and check every written piece against the engine's; ``graded``
    (a class's grade): the engine's own functions of the chapter are not there to call."""
    from nanovllm_teach.track.checks import check_seam  # torch: only what checks imports it
    from nanovllm_teach.track.sandbox import ChapterSandbox, SandboxEnded

    try:
        sandbox = ChapterSandbox(folder, str(chapter.number), time_limit, graded)
    except ValueError as refused:  # a folder too large to check
        return ChapterVerdict(str(chapter.number), "fail", [say(FAILED, **_title(chapter)), "  " + str(refused)])
    problems, yours, unwritten = [], [], []
    with sandbox:
        try:
            sandbox.load()
            found = {name: (present, written) for name, present, written in sandbox.pieces}
            for seam in chapter.seams:  # the chapter's names, not the sandbox's: what it says is only looked up
                name = seam.qualname
                present, written = found.get(name, (False, False))
                if sandbox.load_error is not None:
                    break
                if not present:
                    problems.append(say(MISSING, name=name, file=chapter.file))
                elif not written:
                    unwritten.append(name)
                else:
                    yours.append(name)
                    problem = (sandbox.check_beside(seam) if chapter.checked_beside
                               else check_seam(seam, sandbox.proxy(seam)))
                    if problem:
                        problems.append("  " + problem)
        except SandboxEnded as ended:
            problems.append(str(ended))
    if sandbox.load_error is not None:
        problems.append("  " + say(NOT_LOADED, file=chapter.file, error=sandbox.load_error))
    names = ", ".join(unwritten)
    if not yours and not problems:
        status, lines = "not_written", [say(NOT_WRITTEN_YET, **_title(chapter), names=names)]
    elif problems or unwritten:
        status, lines = "fail", [say(FAILED, **_title(chapter)), *problems]
        lines += [say(YOURS, names=", ".join(yours))] if yours else []
        lines += [say(STILL_TO_WRITE, names=names)] if unwritten else []
    else:
        status, lines = "pass", [say(PASSED, **_title(chapter), names=", ".join(yours))]
    return ChapterVerdict(str(chapter.number), status, lines, sandbox.printed, sandbox.isolated)


def check_folder(folder: Path, chapters: list[Chapter]) -> list[ChapterVerdict]:
    """Every chapter's verdict, in order; ``ValueError`` for a folder that is not there."""
    if not folder.is_dir():
        raise ValueError(say(NO_FOLDER, folder=folder))
    return [judge_chapter(folder, chapter) for chapter in chapters]
