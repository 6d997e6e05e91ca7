"""``build check DIR final``, the track's finish line: the learner's engine alone, against the reference engine
and ``transformers``.

Role: teaching (the track). Emits no events (the engines it runs emit their own).

The learner's package runs in the sandbox ``build check`` uses (``sandbox``, ``final_inside``), with the
reference's engine, layers and models refused, on ``final_inside.FINAL``: greedy, token-id prompts, settings
under which prefix-cache hits, a chunked prefill and preemptions all happen. Out here it must then hold that:
each of the three happened in the learner's TEACHING trace (counted); every request's tokens are the
reference engine's and ``transformers``' (its own Qwen3, greedy, nothing stopping at EOS, as ``ignore_eos``);
and the learner's decisions are the reference's, one for one (``trace.diff.diff_decisions``, said as the
exercises say a difference: "0 decisions differ" when none does). Both traces are written into
``DIR/traces/`` for the learner to open side by side (``compare``, ``replay --html``, ``viz.Player``).
"""

from __future__ import annotations

import functools
import tempfile
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from nanovllm_teach.exercises.base import visible
from nanovllm_teach.i18n import Text, say
from nanovllm_teach.track.final_inside import FINAL, final_chapters, run_engine
from nanovllm_teach.track.learner import NOT_LOADED
from nanovllm_teach.track.verdict import NO_FOLDER, ChapterVerdict

if TYPE_CHECKING:
    from nanovllm_teach.trace.schema import TraceEvent

FINAL_LIMIT_S = 240.0  # the learner's whole run on one CPU of the sandbox: the model loaded, about 40 steps
PART = "final"
MAX_TOKENS = 1000  # of one request, as the sandbox sends them: the workload's longest asks for 18
YOURS_FILE, REFERENCE_FILE = "traces/final_yours.jsonl", "traces/final_reference.jsonl"

TITLE = Text(en="final · your engine alone", zh="final · 只运行你自己的引擎")
PASSED = Text(en="{title}: PASS: every request's tokens are the reference engine's and transformers'; prefix-cache "
                 "hits {hits}, chunked prefills {chunked}, preemptions {preempted}; 0 decisions differ",
              zh="{title}：通过：每个请求的 token 都与参考引擎和 transformers 的一致；前缀缓存命中 {hits} 次，"
                 "分块预填充 {chunked} 次，抢占 {preempted} 次；0 个决策不同")
FAILED = Text(en="{title}: FAIL", zh="{title}：未通过")
NOT_WRITTEN = Text(en="{title}: not written yet: your engine needs every chapter but 6", zh="{title}：还没有写完："
                      "你的引擎需要除第 6 章之外的每一章")
CHAPTER_TO_WRITE = Text(en="  chapter {number}: {names}", zh="  第 {number} 章：{names}")
RAISED = Text(en="  your engine raised {type} on workload {workload!r}: {message}",
              zh="  你的引擎在工作负载 {workload!r} 上抛出了 {type}：{message}")
NEVER = Text(en="  {what} never happened in your engine's run (the reference's has {count}): the workload is "
                "made so that it must",
             zh="  你的引擎运行时从没有发生{what}（参考实现有 {count} 次）：这个工作负载就是为让它发生而设计的")
HAPPENINGS = {"hits": Text(en="a prefix-cache hit", zh="前缀缓存命中"),
              "chunked": Text(en="a chunked prefill", zh="分块预填充"),
              "preempted": Text(en="a preemption", zh="抢占")}
OTHER_TOKENS = Text(en="  request {seq}: your engine generated {got}, {whose} {want} (token {index} first differs)",
                    zh="  请求 {seq}：你的引擎生成了 {got}，{whose}是 {want}（第 {index} 个 token 起不同）")
REFERENCE_ENGINE = Text(en="the reference engine", zh="参考引擎")
TRANSFORMERS = Text(en="transformers' Qwen3", zh="transformers 的 Qwen3")
DAMAGED_TRACE = Text(en="  your engine's trace cannot be read: {error}", zh="  你的引擎写出的 trace 无法读取：{error}")
TRACES = Text(
    en="  the two traces: {yours} (yours) and {reference} (the reference's)\n"
       "  side by side: nanovllm-teach compare {yours} {reference} --out final.png\n"
       "  step by step: nanovllm-teach replay {yours} --html yours.html (the same for the reference's), "
       "or in a notebook: nanovllm_teach.viz.Player(nanovllm_teach.trace.load_trace(PATH))",
    zh="  两个 trace：{yours}（你的）和 {reference}（参考实现的）\n"
       "  并排对比：nanovllm-teach compare {yours} {reference} --out final.png\n"
       "  逐步回放：nanovllm-teach replay {yours} --html yours.html（参考实现的同样），"
       "或在 notebook 中：nanovllm_teach.viz.Player(nanovllm_teach.trace.load_trace(PATH))")


def happened(events: list[TraceEvent]) -> dict[str, int]:
    """How many prefix-cache hits, chunked prefills and preemptions a run's events hold."""
    counts = Counter(event.event for event in events)
    chunked = sum(1 for event in events if event.event == "SCHEDULE_PREFILL" and any(event.stats.get("chunked", ())))
    return {"hits": counts["PREFIX_CACHE_HIT"], "chunked": chunked, "preempted": counts["PREEMPT"]}


@functools.cache
def reference_run() -> tuple[list[list[int]], str]:
    """The reference engine's tokens and trace (JSONL text) on ``FINAL``."""
    from nanovllm_teach import default_model_path

    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "reference.jsonl"
        tokens = run_engine("nanovllm_teach", str(default_model_path()), path)
        return tokens, path.read_text(encoding="utf-8")


@functools.cache
def transformers_tokens() -> list[list[int]]:
    """``transformers``' own Qwen3 on ``FINAL``'s prompts, greedy, EOS not stopping it (``ignore_eos``)."""
    import torch
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as transformers_logging

    from nanovllm_teach import default_model_path

    transformers_logging.disable_progress_bar()  # the command prints its verdict only

    model = AutoModelForCausalLM.from_pretrained(default_model_path(), dtype=torch.float32).eval()
    tokens = []
    with torch.inference_mode():
        for prompt, params in zip(FINAL.prompts, FINAL.params):
            out = model.generate(torch.tensor([prompt]), max_new_tokens=params.max_tokens, do_sample=False,
                                 eos_token_id=None, pad_token_id=0)
            tokens.append(out[0, len(prompt):].tolist())
    return tokens


def _said(value: object, limit: int) -> str:
    """What came from the sandbox, as a line a learner can read: bounded, its control characters visible."""
    return visible(str(value)[:limit])[:limit]  # cut before (a long text) and after (escapes lengthen it)


def _tokens_of(value: object, requests: int) -> list[list[int]]:
    """The run's tokens as they came from the sandbox: a list of ints per request, at most ``MAX_TOKENS`` each;
    anything else counts as no tokens (every request then differs)."""
    def ints(seq: object) -> list[int] | None:
        if not isinstance(seq, list) or len(seq) > MAX_TOKENS or not all(type(t) is int for t in seq):
            return None
        return seq

    if not isinstance(value, list) or len(value) != requests or any(ints(seq) is None for seq in value):
        return [[] for _ in range(requests)]
    return value


def _token_problems(got: list[list[int]], want: list[list[int]], whose: Text) -> list[str]:
    problems = []
    for seq, (mine, theirs) in enumerate(zip(got, want)):
        if mine != theirs:
            index = next((i for i, (a, b) in enumerate(zip(mine, theirs)) if a != b), min(len(mine), len(theirs)))
            problems.append(say(OTHER_TOKENS, seq=seq, got=mine, whose=say(whose), want=theirs, index=index))
    return problems


def _compared(folder: Path, tokens: object, trace_text: str) -> tuple[list[str], dict[str, int]]:
    """The problems of a finished run (``tokens`` and ``trace_text`` as the sandbox sent them), the traces
    written into ``folder``; and what happened in it."""
    from nanovllm_teach.trace import TraceFormatError, load_trace
    from nanovllm_teach.track.checks_decisions import first_decision_difference

    want, reference_text = reference_run()
    yours, reference = folder / YOURS_FILE, folder / REFERENCE_FILE
    yours.parent.mkdir(exist_ok=True)
    yours.write_text(trace_text, encoding="utf-8")
    reference.write_text(reference_text, encoding="utf-8")
    try:
        trace = load_trace(yours)
    except (TraceFormatError, ValueError) as error:
        return [say(DAMAGED_TRACE, error=visible(str(error)[:300]))], {}
    ref_trace = load_trace(reference)
    counts, ref_counts = happened(trace.events), happened(ref_trace.events)
    problems = [say(NEVER, what=say(HAPPENINGS[key]), count=ref_counts[key]) for key, n in counts.items() if not n]
    tokens = _tokens_of(tokens, len(want))
    problems += _token_problems(tokens, want, REFERENCE_ENGINE)
    problems += _token_problems(tokens, transformers_tokens(), TRANSFORMERS)
    sentence = first_decision_difference(trace, ref_trace, FINAL)
    if sentence:
        problems.append("  " + sentence)
    return problems, counts


def judge_final(folder: Path, time_limit: float = FINAL_LIMIT_S) -> ChapterVerdict:
    """The finish line's verdict on ``folder`` (``ValueError`` for a folder that is not there)."""
    from nanovllm_teach.track.sandbox import ChapterSandbox, SandboxEnded

    if not folder.is_dir():
        raise ValueError(say(NO_FOLDER, folder=folder))
    title = say(TITLE)
    try:
        sandbox = ChapterSandbox(folder, PART, time_limit)
    except ValueError as refused:  # a folder too large to check
        return ChapterVerdict(PART, "fail", [say(FAILED, title=title), "  " + str(refused)])
    with sandbox:
        try:
            answer = sandbox.result()
        except SandboxEnded as ended:
            answer = {"ended": str(ended)}
    # Everything in the answer was made where the learner's code ran: each part is checked for its shape and
    # shown bounded, its control characters visible.
    answer = answer if isinstance(answer, dict) else {"ended": _said(repr(answer), 200)}
    lines, status = [say(FAILED, title=title)], "fail"
    unwritten, loaded, raised = (answer.get(key) for key in ("not_written", "load_error", "raised"))
    if isinstance(unwritten, list) and all(isinstance(entry, list) and len(entry) == 2 for entry in unwritten):
        status, lines = "not_written", [say(NOT_WRITTEN, title=title)]
        lines += [say(CHAPTER_TO_WRITE, number=_said(number, 4), names=_said(", ".join(map(str, names)), 500))
                  for number, names in unwritten[:len(final_chapters())]]
    elif "refused" in answer:
        lines.append("  " + _said(answer["refused"], 500))
    elif isinstance(loaded, list) and len(loaded) == 2:
        lines.append("  " + say(NOT_LOADED, file=_said(loaded[0], 200), error=_said(loaded[1], 500)))
    elif isinstance(raised, list) and len(raised) == 2:
        lines.append(say(RAISED, type=_said(raised[0], 80), workload=FINAL.name, message=_said(raised[1], 300)))
    elif "tokens" in answer and isinstance(answer.get("trace"), str):
        problems, counts = _compared(folder, answer["tokens"], answer["trace"])
        if problems:
            lines += problems
        else:
            status, lines = "pass", [say(PASSED, title=title, **counts)]
        lines += say(TRACES, yours=folder / YOURS_FILE, reference=folder / REFERENCE_FILE).splitlines()
    else:
        lines.append(_said(answer.get("ended", answer), 500))
    return ChapterVerdict(PART, status, lines, sandbox.printed, sandbox.isolated)
