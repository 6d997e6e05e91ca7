"""The README of a learner's folder: what the folder is, its chapters, how to check them, what runs until a
function is written, the finish line (`build check DIR final`), and where the notebooks are.

Role: teaching (the track). Emits no events.

``build start`` writes it as ``README.md`` in the learner's language (``--lang``, else the environment, else
the locale), the language of the stubs' contracts and of ``build check``'s sentences beside it: one file the
learner reads, never two copies of which one goes stale when they edit it. Its text is one ``Text`` per part
(both languages from one source); the chapters' rows come from ``chapters.CHAPTERS``.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from nanovllm_teach.i18n import Text, say
from nanovllm_teach.track.seams import PACKAGE, Chapter

README = "README.md"

INTRO = Text(
    en="# {name}: your own nano-vllm, chapter by chapter\n\n"
       "This folder is yours: `nanovllm-teach build start` wrote it. The package `{package}/` is laid out like "
       "nano-vllm's. Each chapter is one file, and each file holds that chapter's functions, its *seams*: the "
       "signature and the contract (the docstring) are the engine's, the body is yours to write.",
    zh="# {name}：一章一章写出你自己的 nano-vllm\n\n"
       "这个文件夹归你所有：它由 `nanovllm-teach build start` 写出。包 `{package}/` 的布局与 nano-vllm 相同。每一章"
       "是一个文件，文件里是这一章要写的函数，也就是它的*接缝*（seam）：函数签名和契约（docstring）来自引擎，函数体"
       "由你来写。")
TABLE = Text(en="## The chapters\n\n| chapter | file | functions | notebook |\n|---|---|---|---|",
             zh="## 各章\n\n| 章 | 文件 | 函数 | notebook |\n|---|---|---|---|")
ROW = Text(en="| {number} · {title} | `{file}` | {names} | {notebook} |",
           zh="| 第 {number} 章 · {title} | `{file}` | {names} | {notebook} |")
CHECK = Text(
    en="## Checking your work\n\n"
       "```\nnanovllm-teach build check {folder} 1    # one chapter, by its number or its name (norms)\n"
       "nanovllm-teach build check {folder}      # every chapter\n```\n\n"
       "Every function you have written is compared with the engine's own. Chapters 1-5: on random tensors and on "
       "the tensors the engine hands it when it runs the shipped model, within the tolerance the message states "
       "(the first element that differs is named, with its position and both values); the sampler by the "
       "frequencies of many seeded draws against the softmax. Chapters 6 and 7: what your cache writes and reads "
       "against the engine's paged attention on the same keys and values. Chapters 8-10: the engine runs with "
       "your functions in place on workloads where the behaviour happens (a shared prefix, a prompt longer than "
       "the token budget, a cache too small for everyone), and the check names the first decision that differs "
       "from the engine's own run, with the sequence around it. The check exits 0 when every chapter it checked passes, 1 "
       "otherwise. Your code runs in the class grader's sandbox (bubblewrap, a user id of its own) where this "
       "machine has one; where it has none (a laptop), it runs in a plain process, and the check says so in one "
       "line. A teacher grades a class's folders per chapter with `nanovllm-teach grade build-N CLASS/` (chapters "
       "1-5 for now).",
    zh="## 检查你的代码\n\n"
       "```\nnanovllm-teach build check {folder} 1    # 一章，用编号或名字（norms）\n"
       "nanovllm-teach build check {folder}      # 所有章\n```\n\n"
       "你写好的每个函数都会与引擎自己的实现对照。第 1-5 章：用随机张量，也用引擎运行随附模型时传给它的真实张量，"
       "误差在消息写明的容差之内（第一个不一致的元素会连同位置和两边的值一起指出）；采样器则用许多次带 seed 的抽样，"
       "比较抽到各 token 的频率与 softmax 的概率。第 6、7 章：在同样的 K/V 上，把你的缓存写入和读出的内容与引擎的"
       "分页注意力对照。第 8-10 章：在能让相应行为发生的工作负载上（共享的前缀、比 token 预算更长的 prompt、装不下"
       "所有请求的缓存），把你的函数换进引擎运行，检查会指出第一个与引擎自己的运行不同的决策，以及当时那条序列的"
       "状态。检查的各章都通过时退出码为 0，否则为 1。在有沙箱的机器上，你的"
       "代码运行在全班评分用的同一个沙箱里（bubblewrap，单独的用户 id）；没有沙箱的机器（比如笔记本电脑）上，它在"
       "普通进程中运行，检查会用一行说明这一点。老师用 `nanovllm-teach grade build-N CLASS/` 按章给全班的文件夹评分（目前限第 1-5 章）。")
FALLBACK = Text(
    en="## Until you write a function\n\n"
       "A function that still raises `NotImplementedError`, as `build start` wrote it, is *not written yet*: "
       "wherever the engine needs it, the engine's own function runs in its place (in chapter 6, which the engine "
       "has no counterpart for, the track's own contiguous cache), so the engine runs from the first chapter on, "
       "your written pieces included. Once you write its body, the engine run on your pieces "
       "(the notebooks run it so) calls yours wherever it called its own (your `rms_norm` normalises every RMSNorm "
       "of the model, the query and key heads too); "
       "`build check` says which functions are yours and which are still the engine's. A chapter passes when "
       "all its functions are yours and right.",
    zh="## 在你写好一个函数之前\n\n"
       "仍然像 `build start` 写下时那样抛出 `NotImplementedError` 的函数算作*还没有写*：引擎在需要它的地方用自己的"
       "实现代替（第 6 章在引擎里没有对应的函数，由课程自带的连续缓存实现代替），所以从第一章起引擎就能运行，并且用上你已经写好的部分。你写好函数体之后，用你的部件运行的引擎"
       "（notebook 就是这样运行的）凡是原来调用自己实现的地方都改为调用你的（你的 `rms_norm` 会用于模型里的每一个 RMSNorm，包括 query 和 key 各个头的归一化）；"
       "`build check` 会说明哪些函数是你的、哪些仍是引擎的。一章的函数全部由你写出且正确时，这一章才算通过。")
FINISH_LINE = Text(
    en="## The finish line\n\n"
       "```\nnanovllm-teach build check {folder} final\n```\n\n"
       "runs your engine alone: the glue in `{package}/glue/` (the engine's modules you do not write, copied by "
       "`build start`, marked so at the top of each file) with every function of chapters 1-5 and 7-10 yours, in "
       "the sandbox, where importing the reference's `nanovllm_teach.engine`, `.layers` or `.models` is refused "
       "(the message names your file and line). It generates greedily on the shipped model, on a workload where "
       "prefix-cache hits, a chunked prefill and preemptions all happen (each is counted in your trace), and "
       "passes when every request's tokens are the reference engine's and transformers' and \"0 decisions "
       "differ\" between your trace and the reference's. Both traces are written into `{folder}/traces/`: open "
       "them side by side with `nanovllm-teach compare`, or step through them with `nanovllm-teach replay "
       "--html` or `nanovllm_teach.viz.Player`.\n\n"
       "A correct rebuild resembles the engine by design: when a class is graded, the similarity report compares "
       "your files with the other learners', not with the reference.",
    zh="## 终点线\n\n"
       "```\nnanovllm-teach build check {folder} final\n```\n\n"
       "只运行你自己的引擎：`{package}/glue/` 里的胶水代码（你不需要写的引擎模块，由 `build start` 复制而来，每个"
       "文件开头都有标注），加上第 1-5 章和第 7-10 章全部由你写的函数，在沙箱中运行；在那里导入参考实现的 "
       "`nanovllm_teach.engine`、`.layers` 或 `.models` 会被拒绝（消息会指出是你的哪个文件、哪一行）。它在随附模型"
       "上做贪心生成，所用的工作负载会让前缀缓存命中、分块预填充和抢占都发生（每一种都在你的 trace 里计数）；每个"
       "请求的 token 都与参考引擎和 transformers 的一致、并且你的 trace 与参考实现的 trace 之间“0 个决策不同”时才算"
       "通过。两个 trace 都写在 `{folder}/traces/` 里：可以用 `nanovllm-teach compare` 并排对比，也可以用 "
       "`nanovllm-teach replay --html` 或 `nanovllm_teach.viz.Player` 逐步查看。\n\n"
       "正确的重写本来就会与引擎相似：给全班评分时，相似度报告把你的文件与其他同学的对比，而不是与参考实现对比。")
NOTEBOOK_PART = Text(
    en="## The notebooks\n\n"
       "Each chapter has a notebook, in English (`notebooks/en/`) and in Chinese (`notebooks/zh/`) in the "
       "course's repository: what the engine does with the piece, which TEACHING events show it, and the engine "
       "run on your own pieces, so that you see your own trace.",
    zh="## notebook\n\n"
       "每一章都有一个 notebook，在课程仓库的 `notebooks/zh/`（中文）和 `notebooks/en/`（英文）里：讲引擎用这个部件"
       "做什么、哪些 TEACHING 事件能看到它，并让引擎用你写的部件运行，让你看到自己的 trace。")


def _notebook(chapter: Chapter, lang: str) -> str:
    """The chapter's notebook in the learner's language."""
    return f"`notebooks/{'zh' if lang == 'zh' else 'en'}/{chapter.notebook}.ipynb`"


def readme(folder: Path, chapters: Iterable[Chapter], lang: str) -> str:
    """The folder's README in ``lang``; the commands in it name ``folder`` as the learner gave it."""
    rows = [say(ROW, lang, number=c.number, title=say(c.title, lang), file=c.file, notebook=_notebook(c, lang),
                names=", ".join(f"`{s.qualname}`" for s in c.seams)) for c in chapters]
    parts = [say(INTRO, lang, name=folder.name, package=PACKAGE), "\n".join([say(TABLE, lang), *rows]),
             say(CHECK, lang, folder=folder), say(FALLBACK, lang), say(FINISH_LINE, lang, folder=folder, package=PACKAGE),
             say(NOTEBOOK_PART, lang)]
    return "\n\n".join(parts) + "\n"


def write_readme(folder: Path, chapters: Iterable[Chapter], lang: str) -> Path:
    """Write ``README.md`` into the learner's folder (``build start`` made it just before)."""
    path = folder / README
    path.write_text(readme(folder, chapters, lang), encoding="utf-8")
    return path
