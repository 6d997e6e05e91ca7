"""The grader's verdicts and the trace diff's sentences in both languages.

Every kind of divergence ``diff_traces`` reports is said in English (no Chinese in it) and in Chinese (with
the same numbers: the same step, the same seqs, the same blocks), in the grader's voice and in the neutral
one of ``nanovllm-teach diff A B``; an engine exercise's verdict, the sentences the grading child words
itself, a template not implemented yet, a refused solution and the policy leaderboard are said in the
chosen language, with the ``PASS``/``FAIL <exercise>:`` prefix in English. So are what each exercise's checks
say of a result they refuse (called directly, with small fake arguments), the quiz's marking, a missing
solution file and ``measure``'s refusal. Every ``Text`` of these modules and of the exercise folders keeps
to the glossary.

The traces are ``data/small_trace.jsonl`` (a real run: a preemption in step 2) and copies of it with one
thing changed, as in ``test_trace_diff.py``.
"""

from __future__ import annotations

import copy
import re
import textwrap
import unicodedata
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest

from nanovllm_teach import i18n, step_workloads
from nanovllm_teach.cli import main
from nanovllm_teach.engine.block_manager import NO_HASH
from nanovllm_teach.engine.decisions import Finished
from nanovllm_teach.engine.sequence import Sequence
from nanovllm_teach.exercises import EXERCISES, base, check, engine_grading, grade
from nanovllm_teach.exercises import references, remote, schedule_prefill, verdict
from nanovllm_teach.exercises import load_solution
from nanovllm_teach.exercises.references import graded_workloads, reference_trace
from nanovllm_teach.exercises.scheduling_policy import grading as policy_grading
from nanovllm_teach.exercises.scheduling_policy import workloads as policy_workloads
from nanovllm_teach.exercises.scheduling_policy.grading import PolicyMetrics, WorkloadScore, leaderboard, measure
from nanovllm_teach.exercises.scheduling_policy.workloads import POLICY_WORKLOADS
from nanovllm_teach.i18n import Text, speaking
from nanovllm_teach.i18n.notebooks import pair_problems
from nanovllm_teach.sampling_params import SamplingParams
from nanovllm_teach.step_workloads import TIGHT_CACHE
from nanovllm_teach.trace import Trace, diff, load_trace
from nanovllm_teach.trace.diff import Voice, diff_traces
from nanovllm_teach.trace.events import PAYLOADS, CudagraphCapture, CudagraphReplay, DecodeCompile, RequestAbort
from nanovllm_teach.trace.payload import Payload

TRACE = Path(__file__).resolve().parent / "data" / "small_trace.jsonl"
CJK = re.compile(r"[\u4e00-\u9fff]")
FIELDS = re.compile(r"\{[^{}]*\}")
# What English left in a Chinese sentence would look like (names such as seq_ids or trace are not words).
ENGLISH_WORDS = re.compile(r"\b(?:you|yours|your|reference|did not|instead|step|seqs?|blocks?|workloads?|"
                           r"had|wrote|sampled|the)\b")


pytestmark = pytest.mark.usefixtures("no_language_chosen")


def _numbers(text: str) -> list[str]:
    return sorted(re.findall(r"\d+(?:\.\d+)?", text))


def _same_in_both(en: str, zh: str) -> None:
    """``en`` is English, ``zh`` Chinese, and they say the same numbers."""
    assert not CJK.search(en), en
    assert CJK.search(zh) and not ENGLISH_WORDS.search(zh), zh
    assert _numbers(en) == _numbers(zh), (en, zh)


# ---- the trace diff -------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def reference() -> Trace:
    return load_trace(TRACE)


def _copy(trace: Trace) -> Trace:
    return Trace(copy.deepcopy(trace.header), copy.deepcopy(trace.events))


def _index(trace: Trace, name: str, **where) -> int:
    return next(k for k, e in enumerate(trace.events)
                if e.event == name and all(getattr(e, key) == value for key, value in where.items()))


def _one_more(ref: Trace) -> tuple[Trace, Trace]:
    """Yours preempts as the reference does; the reference's BLOCK_FREE of it is missing."""
    theirs = _copy(ref)
    del theirs.events[_index(theirs, "BLOCK_FREE", step=2, reason="preempted")]
    return ref, theirs


def _one_fewer(ref: Trace) -> tuple[Trace, Trace]:
    yours = _copy(ref)
    del yours.events[_index(yours, "BLOCK_FREE", step=2, reason="preempted")]
    return yours, ref


def _another_preemption(ref: Trace) -> tuple[Trace, Trace]:
    """Where the reference schedules step 3's decode, yours preempts."""
    yours = _copy(ref)
    preempt = copy.deepcopy(yours.events[_index(yours, "PREEMPT", step=2)])
    preempt.step = 3
    yours.events[_index(yours, "SCHEDULE_DECODE", step=3)] = preempt
    return yours, ref


def _missing_preemption(ref: Trace) -> tuple[Trace, Trace]:
    yours = _copy(ref)
    yours.events = [e for e in yours.events if not (e.step == 2 and e.event in ("BLOCK_FREE", "PREEMPT"))]
    return yours, ref


def _something_else(ref: Trace) -> tuple[Trace, Trace]:
    """Two events of different kinds, neither done to a sequence."""
    yours = _copy(ref)
    yours.events[_index(yours, "SCHEDULE_DECODE", step=3)] = copy.deepcopy(yours.events[_index(yours, "STEP_DONE")])
    return yours, ref


def _changed(name: str, key: str, value, **where):
    def change(ref: Trace) -> tuple[Trace, Trace]:
        yours = _copy(ref)
        yours.events[_index(yours, name, **where)].stats[key] = value
        return yours, ref
    return change


def _slot_off_by_one(ref: Trace) -> tuple[Trace, Trace]:
    yours = _copy(ref)
    event = yours.events[_index(yours, "PREPARE_DECODE_TENSORS")]
    event.stats["slot_mapping"] = [slot + 1 for slot in event.stats["slot_mapping"]]
    return yours, ref


def _long_tensor(ref: Trace) -> tuple[Trace, Trace]:
    yours = _copy(ref)
    yours.events[_index(yours, "PREPARE_PREFILL_TENSORS")].stats["slot_mapping"][40] += 1
    return yours, ref


def _two_fields(ref: Trace) -> tuple[Trace, Trace]:
    yours = _copy(ref)
    stats = yours.events[_index(yours, "STEP_DONE", step=4)].stats
    stats.update(used_blocks=stats["used_blocks"] + 1, free_blocks=stats["free_blocks"] - 1)
    return yours, ref


def _header(ref: Trace) -> tuple[Trace, Trace]:
    yours = _copy(ref)
    yours.header["config"]["kvcache_block_size"] = 32
    return yours, ref


def _header_key_missing(ref: Trace) -> tuple[Trace, Trace]:
    yours = _copy(ref)
    del yours.header["config"]["kvcache_block_size"]
    return yours, ref


def _yours_ends_early(ref: Trace) -> tuple[Trace, Trace]:
    return Trace(ref.header, ref.events[:100]), ref


def _theirs_ends_early(ref: Trace) -> tuple[Trace, Trace]:
    return ref, Trace(ref.header, ref.events[:100])


# Each kind of divergence, with the sentence's English beginning (which says the kind was recognised).
DIVERGENCES = {
    "one event more": (_one_more, "step 2: you preempted seq 1 (freeing blocks [2, 3]), the reference did not"),
    "one event fewer": (_one_fewer, "step 2: the reference preempted seq 1 (freeing blocks [2, 3]), you did not"),
    "a preemption instead": (_another_preemption, "step 3: you preempted seq 1, the reference did not (it "),
    "no preemption": (_missing_preemption, "step 2: the reference preempted seq 1 (freeing blocks [2, 3]), you did "
                                           "not (you "),
    "something else": (_something_else, "step 3: the reference scheduled seqs [0] for decode, you ended the step"),
    "another victim": (_changed("PREEMPT", "seq_id", 0), "step 2: you preempted seq 0, the reference preempted seq 1"),
    "a different block": (_changed("BLOCK_ALLOCATE", "block_ids", [7, 8]), "step 1: you allocated blocks [7, 8]"),
    "a cache hit": (_changed("PREFIX_CACHE_HIT", "block_ids", [5]), "step 13: you reused the cached blocks [5]"),
    "a longer prompt": (_changed("REQUEST_ENQUEUE", "prompt_len", 26), "between steps: you enqueued seq 0"),
    "a smaller cache": (_changed("KV_BUDGET_ESTIMATE", "num_blocks", 3), "at start-up: you sized the KV cache"),
    "a tensor field": (_slot_off_by_one, "step 2, PREPARE_DECODE_TENSORS.slot_mapping: you wrote [26], the "
                                         "reference [25]"),
    "a long tensor": (_long_tensor, "step 1, PREPARE_PREFILL_TENSORS.slot_mapping: you wrote […, "),
    "two fields": (_two_fields, "step 4, STEP_DONE.used_blocks: you had 3, the reference 2 (and 1 more: "),
    "a sampled token": (_changed("SAMPLE", "token_ids", [36, 319]), "step 1: you sampled token 319 for seq 1, the "
                                                                    "reference sampled token 318"),
    "a header": (_header, "before the first event, the trace headers differ at config.kvcache_block_size: you had 32"),
    "a header key missing": (_header_key_missing, "before the first event, the trace headers differ at "
                                                  "config.kvcache_block_size: you had (nothing)"),
    "your trace ends early": (_yours_ends_early, "step 16: your trace ends here, the reference goes on: it "),
    "the reference ends early": (_theirs_ends_early, "step 16: the reference trace ends here, yours goes on: you "),
}


@pytest.mark.parametrize("kind", list(DIVERGENCES))
def test_each_divergence_is_said_in_english_and_in_chinese_with_the_same_numbers(reference, kind):
    make, beginning = DIVERGENCES[kind]
    yours, theirs = make(reference)
    en = diff_traces(yours, theirs, lang="en")
    with speaking("zh"):
        zh = diff_traces(yours, theirs)  # the chosen language
    assert en.message.startswith(beginning), en.message
    _same_in_both(en.message, zh.message)
    assert (zh.index, zh.step, zh.event, zh.fields) == (en.index, en.step, en.event, en.fields)
    named_en = diff_traces(yours, theirs, voice=Voice.named("run_a.jsonl", "run_b.jsonl"), lang="en")
    named_zh = diff_traces(yours, theirs, voice=Voice.named("run_a.jsonl", "run_b.jsonl"), lang="zh")
    _same_in_both(named_en.message, named_zh.message)
    for message in (named_en.message, named_zh.message):
        assert "run_a.jsonl" in message or "run_b.jsonl" in message
        assert not re.search(r"\b(?:you|yours|reference)\b|你|参考实现", message), message


def test_the_chinese_sentences_are_chinese_sentences(reference):
    said = {kind: diff_traces(*make(reference), lang="zh").message for kind, (make, _) in DIVERGENCES.items()}
    assert said["one event fewer"] == "第 2 步：参考实现抢占了序列 1（释放块 [2, 3]），你没有"
    assert said["one event more"] == "第 2 步：你抢占了序列 1（释放块 [2, 3]），参考实现没有"
    assert said["another victim"] == "第 2 步：你抢占了序列 0，参考实现抢占了序列 1"
    assert said["a sampled token"] == "第 1 步：你为序列 1 采样了 token 319，参考实现采样的是 token 318"
    assert said["a tensor field"] == ("第 2 步，PREPARE_DECODE_TENSORS.slot_mapping：你写入的是 [26]，"
                                      "参考实现写入的是 [25]")
    assert said["a long tensor"].endswith("（第一处不同在下标 40，共 57 个）")
    assert said["two fields"].endswith("（另有 1 个字段不同：free_blocks）")
    assert said["a header"] == ("还没到第一个事件，两份 trace 的头部就在 config.kvcache_block_size 处不同：你的是 32，"
                                "参考实现的是 16（两次运行用了不同的设置）")
    assert said["your trace ends early"].startswith("第 16 步：你的 trace 到此结束，参考实现还在继续：它为序列 [1] ")
    # Where: step 7, at start-up, between steps, in the header.
    wheres = {kind: diff_traces(*DIVERGENCES[kind][0](reference), lang="zh").where
              for kind in ("a tensor field", "a smaller cache", "a longer prompt", "a header")}
    assert wheres == {"a tensor field": "第 2 步", "a smaller cache": "启动时", "a longer prompt": "两步之间",
                      "a header": "trace 头部"}


def test_two_runs_by_name_are_spaced_from_the_chinese_around_them(reference):
    yours, theirs = DIVERGENCES["another victim"][0](reference)
    assert diff_traces(yours, theirs, voice=Voice.named("run_a.jsonl", "B"), lang="zh").message == (
        "第 2 步：run_a.jsonl 抢占了序列 0，B 抢占了序列 1")
    assert diff_traces(*_yours_ends_early(reference), voice=Voice.named("A", "B"), lang="zh").message.startswith(
        "第 16 步：A 的 trace 到此结束，B 还在继续：B 为序列 ")
    with pytest.raises(ValueError, match="names both traces or neither"):
        Voice("A")


def test_cli_diff_speaks_the_language_asked_for(reference, tmp_path, capsys):
    import json

    def write(trace: Trace, path: Path) -> Path:
        path.write_text("\n".join([json.dumps(trace.header)] + [json.dumps(e.to_dict()) for e in trace.events]) + "\n")
        return path

    yours, _ = DIVERGENCES["another victim"][0](reference)
    args = ["diff", str(write(yours, tmp_path / "run_a.jsonl")), str(write(reference, tmp_path / "same.jsonl"))]
    assert main([*args, "--lang", "zh"]) == 1
    assert capsys.readouterr().out.splitlines()[0] == "第 2 步：run_a.jsonl 抢占了序列 0，same.jsonl 抢占了序列 1"
    assert main([*args, "--lang", "en"]) == 1
    assert capsys.readouterr().out.splitlines()[0] == "step 2: run_a.jsonl preempted seq 0, same.jsonl preempted seq 1"


# The events a CPU run of the small trace does not have, as such a run would record them.
NOT_IN_THE_SMALL_TRACE = {
    "CUDAGRAPH_CAPTURE": (CudagraphCapture(batch_sizes=[1, 2, 4], seconds=0.5, memory_bytes=1024), "graphs_captured"),
    "DECODE_COMPILE": (DecodeCompile(seconds=2.0, batch_sizes=[1, 2]), "decode_compiled"),
    "CUDAGRAPH_REPLAY": (CudagraphReplay(mode="graph", batch_size=3, num_tokens=3, graph_batch_size=4), "replay"),
    "REQUEST_ABORT": (RequestAbort(seq_id=3, num_completion_tokens=5), "aborted"),
}


@pytest.mark.parametrize("name", list(PAYLOADS))
def test_every_event_says_what_it_did_in_both_languages(reference, name):
    said = [(e.stats, e.reason) for e in reference.events if e.event == name] or [NOT_IN_THE_SMALL_TRACE[name]]
    for stats, reason in said:
        en, zh = stats.did(reason, "en"), stats.did(reason, "zh")
        _same_in_both(en, zh)
        assert CJK.match(zh), f"{name}: a Chinese verb phrase starts with its verb, right after the subject: {zh}"
        assert stats.did(reason) == en  # did(reason): the chosen language
        with speaking("zh"):
            assert stats.did(reason) == zh
    # The variants: a preemption's BLOCK_FREE, an allocation that shares cached blocks.
    if name == "BLOCK_ALLOCATE":
        stats = copy.deepcopy(said[0][0])
        stats["shared_block_ids"] = [4]
        _same_in_both(stats.did("", "en"), stats.did("", "zh"))
        assert stats.did("", "zh").endswith("（并共享了已缓存的块 [4]）")
    if name == "BLOCK_FREE":
        assert {stats.did(reason, "zh").startswith("抢占了序列") for stats, reason in said} == {True, False}


# ---- the verdicts -----------------------------------------------------------------------------------------

OFF_BY_ONE = """
def decode_slot(seq, block_size):
    return seq.block_table[-1] * block_size + (seq.num_tokens - 1) % block_size + 1  # one too far
"""


@pytest.fixture(scope="module")
def off_by_one_verdicts(tmp_path_factory):
    """One wrong decode_slot graded in each language (the verdict is worded when it is made)."""
    path = tmp_path_factory.mktemp("verdicts") / "slot.py"
    path.write_text(textwrap.dedent(OFF_BY_ONE))
    with speaking("zh"):
        zh = grade("decode_slot", path)
    with speaking("en"):
        en = grade("decode_slot", path)
    return en, zh


def test_an_engine_exercises_verdict_is_said_in_the_chosen_language(off_by_one_verdicts):
    en, zh = off_by_one_verdicts
    step = next(e for e in reference_trace(TIGHT_CACHE).events if e.event == "PREPARE_DECODE_TENSORS").step
    assert en.message.startswith(f"FAIL decode_slot: workload 'tight_cache' ({TIGHT_CACHE.description.en}):\n")
    assert f"first differ from the reference's in step {step} (PREPARE_DECODE_TENSORS)" in en.message
    assert zh.message.startswith(f"FAIL decode_slot: 工作负载 'tight_cache'（{TIGHT_CACHE.description.zh}）：\n")
    assert f"你的运行所做的决策最早在第 {step} 步与参考实现不同（PREPARE_DECODE_TENSORS）：" in zh.message
    assert f"第 {step} 步，PREPARE_DECODE_TENSORS.slot_mapping：你写入的是 [" in zh.message
    # The same verdict: the same workload, steps, slots (and the engine's own error, which is torch's).
    assert (en.workload, en.divergence.index, en.divergence.fields) == (zh.workload, zh.divergence.index,
                                                                      zh.divergence.fields)
    assert _numbers(en.message) == _numbers(zh.message)
    assert not CJK.search(en.message)
    engine_error = re.compile(r"IndexError.*$", re.M)  # torch's words, in both
    assert not ENGLISH_WORDS.search(engine_error.sub("", zh.message.removeprefix("FAIL decode_slot:"))), zh.message


def test_what_the_grading_child_words_is_in_the_parents_language(tmp_path, monkeypatch):
    # The parent chose Chinese by name; the environment (which the child inherits) says English.
    monkeypatch.setenv(i18n.ENV_VAR, "en")
    hidden = tmp_path / "hidden.py"
    hidden.write_text(textwrap.dedent("""
        from nanovllm_teach.engine import model_runner

        def decode_slot(seq, block_size):
            return model_runner.decode_slot(seq, block_size)
        """))
    with speaking("zh"):
        refused = grade("decode_slot", hidden).message
        not_a_list = check("schedule_decode", lambda scheduler: None).message
    assert re.search(r"在第 \d+ 步，你的 decode_slot 抛出了 RuntimeError：评分期间不能使用引擎自己的 decode_slot："
                     r"请写你自己的代码（hidden\.py 第 5 行：return model_runner\.decode_slot\(", refused), refused
    assert re.search(r"，你的 schedule_decode 返回了 NoneType None：它要返回两样东西，\(被调度的序列, 途中做出的决策\)",
                     not_a_list), not_a_list
    assert not CJK.search(check("schedule_decode", lambda scheduler: None).message)


def test_not_implemented_and_refused_solutions_in_both_languages(tmp_path):
    exercise = EXERCISES["decode_slot"]
    en = base.not_implemented(exercise, "decode_slot").message
    with speaking("zh"):
        zh = base.not_implemented(exercise, "decode_slot").message
    assert en == ("FAIL decode_slot: you have not implemented decode_slot yet (stuck? hint('decode_slot', 1) in "
                  "Python, or nanovllm-teach hint decode_slot 1 in a shell, gives a first hint; level 2 a stronger one)")
    assert zh == ("FAIL decode_slot: 你还没有实现 decode_slot（卡住了？在 Python 里用 hint('decode_slot', 1)，或在命令行用 "
                  "nanovllm-teach hint decode_slot 1，给出第一条提示；第 2 级更具体）")
    direct = tmp_path / "direct.py"
    direct.write_text("from nanovllm_teach.exercises.decode_slot.solution import decode_slot\n")
    from nanovllm_teach.exercises.decode_slot import solution
    for lang in ("en", "zh"):
        with speaking(lang):
            said = [grade("decode_slot", direct).message, check("decode_slot", solution.decode_slot).message,
                    check("can_append", lambda bm, seq: True).message]
        assert all(message.startswith("FAIL ") for message in said)
        if lang == "en":
            assert "uses the reference solutions" in said[0] and said[0] == said[1]
            assert said[2] == ("FAIL can_append: your solution defines no function named may_append: write it with "
                               "exactly that name")
            assert not CJK.search("".join(said))
        else:
            assert said[0] == said[1] == ("FAIL decode_slot: 你的解答用到了参考答案（nanovllm_teach.exercises."
                                          "<exercise>.solution）：评分器不接受；请自己写代码")
            assert said[2] == "FAIL can_append: 你的解答没有定义名为 may_append 的函数：请用一模一样的名字写出它"


def _metrics(mean: float, worst: float, finished: int = 12) -> PolicyMetrics:
    return PolicyMetrics(num_requests=12, num_finished=finished, mean_ttft_ms=mean, p99_ttft_ms=worst,
                         max_ttft_ms=worst, slowest_seq=3, slowest_prompt_len=1800, mean_tpot_ms=9.5,
                         tokens_per_s=880.0)


def _columns(line: str) -> int:
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in line)


def test_the_policy_leaderboard_and_its_problems_in_both_languages():
    first, second = list(POLICY_WORKLOADS.values())[:2]
    scores = [WorkloadScore(first, _metrics(80.0, 100.0), _metrics(40.0, 95.0)),
              WorkloadScore(second, _metrics(50.0, 80.0), _metrics(52.5, 200.0, finished=11))]
    en = leaderboard(scores)
    with speaking("zh"):
        zh = leaderboard(scores)
        zh_problems = scores[1].problems()
    en_problems = scores[1].problems()
    assert en.splitlines()[0].split() == ["workload", "policy", "mean", "TTFT", "p99", "TTFT", "max", "TTFT", "mean",
                                          "TPOT", "tokens/s", "mean", "<=", "0.8x", "FCFS", "max", "<=", "1.5x",
                                          "FCFS", "max"]
    assert "yes (0.50x)" in en and "NO (1.05x)" in en and "NO (2.50x)" in en
    assert zh.splitlines()[0].split()[:3] == ["工作负载", "策略", "首"] and "均值（ms）" in zh.splitlines()[1]
    assert "是（0.50 倍）" in zh and "否（1.05 倍）" in zh and "否（2.50 倍）" in zh and "你的" in zh
    _same_in_both(en, zh.replace("FCFS", ""))  # FCFS is FCFS in both; every number is the same
    # A fixed-width table in terminal columns: the policy's rows end where the last heading ends (both are
    # right-aligned in the last column), FCFS's rows all end at the tokens/s column.
    for table in (en, zh):
        lines = table.splitlines()
        heads, fcfs_rows, policy_rows = lines[:2], lines[2::2], lines[3::2]
        assert all(row.split()[1] == "FCFS" for row in fcfs_rows) and len(policy_rows) == len(scores), table
        assert len({_columns(row) for row in fcfs_rows}) == 1, table
        assert {_columns(row) for row in policy_rows} == {max(map(_columns, heads))}, table
    assert len(en_problems) == 3 and len(zh_problems) == 3
    for e, z in zip(en_problems, zh_problems):
        _same_in_both(e, z.replace("FCFS", "").replace("prompt", "").replace("token", ""))
    assert zh_problems[0] == "12 个请求中只有 11 个完成了"
    assert zh_problems[1] == ("首 token 延迟的均值为 52.5 ms，比 FCFS 的 50.0 ms 高 5%；它必须比 FCFS 的至少低 20%")
    assert zh_problems[2].startswith("序列 3（prompt 长 1800 个 token）等了 200.0 ms 才得到第一个 token")


# ---- every Text of these modules keeps to the glossary -----------------------------------------------------

MODULES: tuple[ModuleType, ...] = (diff, verdict, engine_grading, policy_grading, base, remote, schedule_prefill,
                                   step_workloads, policy_workloads, references)


def _texts(value, where: str):
    if isinstance(value, Text):
        yield where, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _texts(item, f"{where}[{key!r}]")
    elif isinstance(value, (tuple, list)):
        for k, item in enumerate(value):
            yield from _texts(item, f"{where}[{k}]")


def _all_texts() -> list[tuple[str, Text]]:
    found = [pair for module in MODULES for name, value in vars(module).items()
             for pair in _texts(value, f"{module.__name__}.{name}")]
    for cls in (Payload, *PAYLOADS.values()):
        found += [pair for name, value in vars(cls).items() for pair in _texts(value, f"{cls.__name__}.{name}")]
    found += [(f"workload {w.name}", w.description) for w in graded_workloads().values()]
    return found


def test_every_text_keeps_to_the_glossary():
    texts = _all_texts()
    assert len(texts) > 100  # the walk finds them: the diff's, every event's, the verdicts', the workloads'
    problems = []
    for where, text in texts:
        if text.en == text.zh:
            problems.append(f"{where}: the Chinese is a copy of the English")
        if not re.search("[A-Za-z]", FIELDS.sub("", text.en)):
            continue  # words only in its fields (a separator, "{where}: {a} {did_a}, ..."): nothing to translate
        problems += [p for p in pair_problems(text.en, text.zh, where, set()) if "in brackets" not in p]
    assert problems == []
    # Every workload a verdict names is described in both languages.
    assert all(isinstance(w.description, Text) for w in graded_workloads().values())


# ---- what each exercise's checks say about a result --------------------------------------------------------

# Names from the code in a Chinese sentence (seq.num_cached_tokens): not English left untranslated.
CODE_NAMES = re.compile(r"\b[A-Za-z_]\w*(?:\.\w+)+")


def _seq(seq_id: int, num_tokens: int) -> Sequence:
    return Sequence(seq_id, list(range(num_tokens)), SamplingParams(), 16)


def _block_manager(**changes) -> SimpleNamespace:
    return SimpleNamespace(num_blocks=8, block_size=16, blocks=[SimpleNamespace(ref_count=1) for _ in range(8)],
                           **changes)


def _allocated(block_table: list, num_cached_tokens: int = 0) -> SimpleNamespace:
    return SimpleNamespace(seq_id=3, block_table=block_table, num_blocks=2, num_tokens=20,
                           num_cached_tokens=num_cached_tokens)


def _holderless() -> SimpleNamespace:
    bm = _block_manager()
    bm.blocks[1].ref_count = 0
    return bm


# (exercise, function): [(the check's arguments, the result it refuses, what it says in English), ...]
REFUSED_RESULTS = {
    ("schedule_prefill", "schedule_prefill"): [
        ((None,), None, "returned NoneType None: it returns two things, (the scheduled sequences, the decisions taken "
                        "on the way): the records that allocate, may_append and preempt return. The scheduler keeps no "
                        "log of its decisions any more; what it decided is what it returns")],
    ("schedule_decode", "schedule_decode"): [
        ((None,), ([], []), "scheduled no sequence: a decode step must run at least one (when every other one is "
                            "preempted, the last one left runs)")],
    ("postprocess", "postprocess"): [
        ((None, SimpleNamespace(seq_ids=[0, 1]), [7, 8]), None,
         "returned NoneType None: it returns the decisions it took, a list of records (what finish returns: Finished, "
         "then Freed), not the batch's sequences. The scheduler keeps no log of its decisions any more; what it "
         "decided is what it returns"),
        ((None, SimpleNamespace(seq_ids=[0, 1]), [7, 8]), [Finished(5, "eos", 2)],
         "returned a decision about seq 5, which is not in the batch [0, 1]")],
    ("can_allocate", "can_allocate"): [
        ((None, _seq(3, 40)), 3, "returned 3 for seq 3 (40 tokens in 3 blocks): it must return -1 (it does not fit) "
                                 "or the number of its leading blocks that are cached, an int from 0 to 2 (its last "
                                 "token is always computed)")],
    ("can_append", "can_append"): [((None, None), None, "returned None: it must return True or False")],
    ("allocate", "allocate"): [
        ((_block_manager(), _allocated([0, 9]), 0), None,
         "left seq 3 a block table [0, 9]: it must be a list of block ids (ints from 0 to 7)"),
        ((_block_manager(), _allocated([1, 1]), 0), None,
         "gave seq 3 the block table [1, 1] for its 20 tokens, which need 2 different blocks of 16"),
        ((_holderless(), _allocated([0, 1]), 0), None,
         "gave seq 3 blocks [0, 1] and left some of them with no holder (ref_count 0)"),
        ((_block_manager(), _allocated([0, 1], num_cached_tokens=0), 1), None,
         "left seq.num_cached_tokens at 0, but its 1 cached block(s) already hold the K/V of 16 tokens")],
    ("block_hash", "compute_block_hash"): [
        (([1, 2], NO_HASH), 2.5, "returned float 2.5: a block hash must be an int"),
        (([1, 2], NO_HASH), NO_HASH, f"returned {NO_HASH}, which the block manager reserves for 'no hash' (NO_HASH)")],
    ("decode_slot", "decode_slot"): [
        ((None, 16), 8.0, "returned float 8.0: a cache slot is an int (use //, not /)")],
    ("graph_bucket", "choose_graph_batch_size"): [
        ((False, 5, [1, 2, 4, 8]), 5, "returned 5: it must return one of the captured batch sizes [1, 2, 4, 8], or "
                                      "None to run the step eagerly"),
        ((False, 5, [1, 2, 4, 8]), 4, "returned 4 for a batch of 5 sequences: a graph of 4 cannot hold them")],
    ("kv_cache_blocks", "kv_block_bytes"): [
        ((None,), 0, "returned 0: the size of one block must be a positive int (bytes)")],
    ("kv_cache_blocks", "kv_cache_blocks"): [
        ((SimpleNamespace(total=1000), 0.9, 100, None), 2.5,
         "returned 2.5: the number of blocks must be an int >= 0 (whole blocks: use //)"),
        ((SimpleNamespace(total=1000), 0.9, 100, None), 11,
         "returned 11 blocks of 100 bytes = 1100 bytes, more than the machine's whole memory (1000 bytes); the "
         "grader stops here instead of allocating it")],
    ("prepare_prefill", "prefill_layout"): [
        (([0, 4], [3, 2], [[5], [2, 7]], 4), [[0, 1, 2, 4, 5], [0, 3, 5]],
         "returned [[0, 1, 2, 4, 5], [0, 3, 5]]: it must return four lists of ints (positions, cu_seqlens_q, "
         "cu_seqlens_k, slot_mapping)"),
        (([0, 4], [3, 2], [[5], [2, 7]], 4), ([0, 1, 2, 4, 5], [0, 3, 5], [3, 9], [20, 21, 22, 28, 29]),
         "returned cu_seqlens_k with 2 entries for 2 sequences computing 5 new tokens: it needs 3"),
        (([0, 4], [3, 2], [[5], [2, 7]], 4), ([0, 1, 2, 4, 5], [0, 3, 5], [0, 3, 9], [20, 21, 22, 12, 13]),
         "put a token's K/V in slot 12, outside every block the batch holds (blocks [2, 5, 7] of 4 slots)")],
    ("tp_slice", "rank_slice"): [
        (("row", [16, 32], [16], 0, 2, 1), (1, 16, 16), "returned (1, 16, 16): it must return four ints (dim, start, "
                                                        "length, offset), or None when the rank keeps none of the tensor"),
        (("row", [16], [16], 0, 2, 0), (1, 0, 16, 0), "returned dim 1, but the tensor of shape [16] has dimensions 0 to 0"),
        (("column", [16, 16], [32, 16, 16], 1, 2, 1), (0, 16, 8, 24),
         "returned start 16 and length 8 along dim 0, outside the tensor's 16 entries there (shape [16, 16])"),
        (("column", [16, 16], [32, 16, 16], 1, 2, 1), (0, 8, 8, -8),
         "returned offset -8: a place in the rank's parameter counts from 0")],
    ("scheduling_policy", "choose_next"): [
        (([_seq(0, 4), _seq(1, 4), _seq(2, 4)],), 3,
         "returned 3: it must return the index (an int from 0 to 2) of one of the 3 waiting sequences")],
}


def _check(exercise: str, function: str):
    return next(p.check for p in EXERCISES[exercise].pieces if p.function == function)


def test_every_check_of_every_exercise_is_tried_here():
    checked = {(name, piece.function) for name, exercise in EXERCISES.items()
               for piece in getattr(exercise, "pieces", ()) if piece.check is not None}
    assert checked == set(REFUSED_RESULTS)


@pytest.mark.parametrize("exercise,function", list(REFUSED_RESULTS))
def test_each_check_says_what_it_refuses_in_english_and_in_chinese(exercise, function):
    check_result = _check(exercise, function)
    for args, result, english in REFUSED_RESULTS[(exercise, function)]:
        assert check_result(args, result) == english  # no language chosen: English
        with speaking("en"):
            assert check_result(args, result) == english
        with speaking("zh"):
            chinese = check_result(args, result)
        _same_in_both(english, CODE_NAMES.sub("", chinese))
        # Said right after "你的 <function> ": a verb phrase (or what it did to), never the English subject.
        assert not chinese.startswith(("你", "it", "your")), chinese


def test_the_chinese_of_the_checks_reads_as_a_sentence():
    said = {}
    with speaking("zh"):
        for key, cases in REFUSED_RESULTS.items():
            said[key] = [_check(*key)(args, result) for args, result, _ in cases]
    assert said[("decode_slot", "decode_slot")] == ["返回了 float 8.0：缓存槽位必须是 int（用 //，不要用 /）"]
    assert said[("allocate", "allocate")] == [
        "给序列 3 留下的块表是 [0, 9]：它必须是由块 id 组成的 list（0 到 7 的 int）",
        "给序列 3 的块表是 [1, 1]，但它的 20 个 token 需要 2 个互不相同的块（每块 16 个 token）",
        "给了序列 3 块 [0, 1]，却让其中一些块没有持有者（ref_count 为 0）",
        "把 seq.num_cached_tokens 留在了 0，但这个序列已缓存的 1 个块里已经存着 16 个 token 的 K/V"]
    assert said[("schedule_decode", "schedule_decode")] == [
        "没有调度任何序列：一个解码步至少要运行一个序列（其他序列都被抢占时，剩下的最后一个照样运行）"]
    assert said[("postprocess", "postprocess")][1] == "返回了关于序列 5 的决策，但它不在这一批 [0, 1] 中"
    assert said[("scheduling_policy", "choose_next")] == [
        "返回了 3：它必须返回 3 个等待中的序列之一的下标（0 到 2 的 int）"]


def test_a_refused_result_in_the_verdict_follows_your_function_in_the_chosen_language():
    with speaking("zh"):
        zh = check("decode_slot", lambda seq, block_size: 8.0).message
    en = check("decode_slot", lambda seq, block_size: 8.0).message
    assert re.search(r"^  在第 \d+ 步，你的 decode_slot 返回了 float 8\.0：缓存槽位必须是 int（用 //，不要用 /）$", zh,
                     re.M), zh
    assert re.search(r"^  in step \d+, your decode_slot returned float 8\.0: a cache slot is an int \(use //, not /\)$",
                     en, re.M), en


def test_the_quiz_says_a_wrong_answer_in_both_languages(reference):
    quiz = EXERCISES["trace_quiz"]
    answers = {"num_steps": 1000, "no_such_question": 1}
    en = quiz._mark(answers, reference).message
    with speaking("zh"):
        zh = quiz._mark(answers, reference).message
    assert en.startswith("FAIL trace_quiz: 0 of ") and "num_steps: 1000 is too high" in en
    assert zh.startswith("FAIL trace_quiz: ") and "num_steps：1000 偏大" in zh, zh
    _same_in_both(en.removeprefix("FAIL trace_quiz:"), CODE_NAMES.sub("", zh.removeprefix("FAIL trace_quiz:")))


def test_a_missing_solution_file_is_said_in_the_chosen_language(tmp_path):
    missing = tmp_path / "missing.py"
    with pytest.raises(FileNotFoundError, match="^no such solution file: "):
        grade("decode_slot", missing)
    with speaking("zh"):
        with pytest.raises(FileNotFoundError, match="^没有这个解答文件：.*missing.py$"):
            grade("decode_slot", missing)
        with pytest.raises(FileNotFoundError, match="^没有这个解答文件："):
            load_solution(missing)


def test_measure_refuses_a_trace_nobody_got_a_token_from_in_the_chosen_language(reference):
    nobody = Trace(reference.header, [])
    with pytest.raises(ValueError, match=r"^trace \(in memory\) has no request that got a first token$"):
        measure(nobody)
    with speaking("zh"), pytest.raises(ValueError, match="^这份（内存中的）trace 中没有任何请求得到过第一个 token$"):
        measure(nobody)
    with speaking("zh"), pytest.raises(ValueError, match="^trace nobody.jsonl 中没有任何请求得到过第一个 token$"):
        measure(Trace(reference.header, [], Path("nobody.jsonl")))


def test_every_text_of_the_exercise_folders_keeps_to_the_glossary():
    import importlib

    problems, found = [], 0
    for name in EXERCISES:
        module = importlib.import_module(f"nanovllm_teach.exercises.{name}")
        for where, text in [pair for key, value in vars(module).items()
                            for pair in _texts(value, f"{module.__name__}.{key}")]:
            found += 1
            problems += [p for p in pair_problems(text.en, text.zh, where, set()) if "in brackets" not in p]
    assert found > 3 * len(EXERCISES)  # a title, hints, and what the checks say
    assert problems == []
