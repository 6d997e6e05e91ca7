"""The words a learner reads around a run, in both languages: the demo's closing account, ``replay --text``,
the comparison's printout and picture, the HTML report, the scenarios' lessons, the reference run's notes
and the command's errors. Each is checked in English and in Chinese (the one language's words there, the
other's absent), every text is held to the glossary, and a damaged reference file is refused in one
clear sentence naming the bad field.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from nanovllm_teach import cli, scenarios
from nanovllm_teach.cli import arguments, exercises, record, traces
from nanovllm_teach.i18n import Text, speaking
from nanovllm_teach.i18n.notebooks import pair_problems
from nanovllm_teach.reference import REFERENCE_FILE, ReferenceFormatError, load_reference_run, read_reference_run
from nanovllm_teach.trace import console, load_trace
from nanovllm_teach.trace.console import format_run_account, text_width
from nanovllm_teach.viz import page_words, report, words
from nanovllm_teach.viz.compare import compare, format_summaries, summarize
from nanovllm_teach.viz.report import html_report

TRACES = Path(__file__).resolve().parents[1] / "traces"
CJK = re.compile(r"[\u4e00-\u9fff]")


def _texts(*tables) -> list[Text]:
    found = []
    for table in tables:
        if isinstance(table, Text):
            found.append(table)
        elif isinstance(table, dict):
            found += _texts(*table.values())
    return found


def _module_texts(module) -> list[Text]:
    return _texts(*(value for name, value in vars(module).items() if name.isupper()))


# ---- the demo's account -------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["preemption", "prefix_cache", "chunked_prefill", "walkthrough"])
def test_the_run_account_in_both_languages(name):
    trace = load_trace(TRACES / f"{name}.jsonl")
    en, zh = ("\n".join(format_run_account(trace, lang=lang)) for lang in ("en", "zh"))
    assert en.startswith("What the engine did:") and not CJK.search(en)
    assert zh.startswith("引擎做了什么：") and "What the engine did" not in zh
    assert len(en.splitlines()) == len(zh.splitlines())  # the same account, line for line
    for word_en, word_zh in (("KV use: peak", "KV 使用："), ("continuous batching", "连续批处理"),
                             ("prefill", "预填充"), ("finished at step", "步结束")):
        assert word_en in en and word_zh in zh and word_en not in zh
    # The numbers are the same in both.
    assert re.findall(r"\d+", en.split("\n", 1)[0])[:3] == re.findall(r"\d+", zh.split("\n", 1)[0])[:3]
    if name == "preemption":
        assert "抢占了序列" in zh and "再次预填充序列" in zh
    if name == "chunked_prefill":
        assert "分块预填充" in zh
    if name == "prefix_cache":
        assert "来自前缀缓存" in zh


def test_the_account_lines_up_its_columns_in_chinese_too():
    trace = load_trace(TRACES / "preemption.jsonl")
    for lang in ("en", "zh"):
        stretches = [line for line in format_run_account(trace, lang=lang)[2:-1] if "->" not in line]
        # "batch" starts in the same terminal column on every stretch line, wide characters counted twice.
        columns = {text_width(line[:line.index("batch ")]) for line in stretches}
        assert len(columns) == 1, (lang, stretches)


def test_the_demo_ends_with_its_account_in_chinese(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("NANOVLLM_TEACH_LANG", "zh")  # the environment chooses, as for a learner
    assert cli.main(["demo", "--out", str(tmp_path), "--max-tokens", "16"]) == 0
    out = capsys.readouterr().out
    assert out.index("回答：") < out.index("引擎做了什么") < out.index("时间线图：")
    assert "准入序列 0、1" in out and "KV 使用：" in out and "完整 TEACHING 日志" in out
    for english in ("What the engine did", "Completion:", "timeline:", "admitted", "the full TEACHING log"):
        assert english not in out


def test_replay_text_says_its_columns_in_the_chosen_language(capsys):
    trace = str(TRACES / "walkthrough.jsonl")
    assert cli.main(["replay", trace, "--text", "--lang", "zh"]) == 0
    zh = capsys.readouterr().out
    assert "bs：batch 大小" in zh and "首 token 延迟" in zh and "batch size;" not in zh
    assert cli.main(["replay", trace, "--text", "--lang", "en"]) == 0
    en = capsys.readouterr().out
    assert "bs: batch size" in en and "time to first token" in en and not CJK.search(en)


def test_a_mistake_is_told_in_the_chosen_language(tmp_path, capsys):
    missing = tmp_path / "missing.jsonl"
    assert cli.main(["replay", str(missing), "--lang", "zh"]) == 2
    err = capsys.readouterr().err
    assert err == f"nanovllm-teach: error: 没有这个 trace 文件：{missing}\n"
    assert cli.main(["record", "nope", "--lang", "zh"]) == 2
    assert "没有场景 'nope'；可选：walkthrough" in capsys.readouterr().err
    assert cli.main(["replay", str(missing), "--lang", "en"]) == 2
    assert capsys.readouterr().err == f"nanovllm-teach: error: no such trace file: {missing}\n"


# ---- the comparison -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def arrivals():
    return load_trace(TRACES / "static_arrivals.jsonl"), load_trace(TRACES / "continuous_arrivals.jsonl")


def test_the_compare_printout_in_both_languages(arrivals, capsys):
    summaries = [summarize(t) for t in arrivals]
    en, zh = format_summaries(summaries, "en"), format_summaries(summaries, "zh")
    assert "mean TTFT (ms)" in en and "late-joining waste (slot-steps)" in en and not CJK.search(en)
    assert "平均首 token 延迟（ms）" in zh and "静态批处理" in zh and "连续批处理" in zh
    assert "TTFT" not in zh and "waste" not in zh and "policy" not in zh
    # Every line of the Chinese table is as wide as its header, wide characters counted twice.
    header = zh.splitlines()[0]
    assert {text_width(line) for line in zh.splitlines()} == {text_width(header)}
    # The same numbers in both.
    assert [line.split()[-2:] for line in en.splitlines()[2:]] == [line.split()[-2:] for line in zh.splitlines()[2:]]
    paths = [str(TRACES / "static_arrivals.jsonl"), str(TRACES / "continuous_arrivals.jsonl")]
    assert cli.main(["compare", *paths, "--lang", "zh"]) == 0
    assert capsys.readouterr().out.rstrip("\n") == zh


def _figure_words(figure) -> str:
    """Every word drawn: the texts, and the summary table's cells."""
    from matplotlib.table import Table
    from matplotlib.text import Text as Words

    texts = [t.get_text() for t in figure.findobj(Words)]
    texts += [cell.get_text().get_text() for table in figure.findobj(Table) for cell in table.get_celld().values()]
    return "\n".join(texts)


def test_the_compare_picture_in_both_languages(arrivals):
    en, zh = (_figure_words(compare(*arrivals, lang=lang).figure) for lang in ("en", "zh"))
    assert "static_arrivals (static): 167 steps" in en and "tokens/step" in en
    assert "static_arrivals（静态批处理）：167 步" in zh and "连续批处理" in zh
    for word_en, word_zh in ((words.SUMMARY_ROW["mean_ttft_ms"].en, words.SUMMARY_ROW["mean_ttft_ms"].zh),
                             (words.BATCH_SIZE.en, words.BATCH_SIZE.zh), (words.ENGINE_STEP.en, words.ENGINE_STEP.zh)):
        assert word_en in en and word_zh in zh and word_en not in zh
    assert "tokens/step" not in zh and "early-finished" not in zh


# ---- the report ---------------------------------------------------------------------------------------

def test_the_report_in_both_languages():
    trace = load_trace(TRACES / "preemption.jsonl")
    en, zh = html_report(trace, lang="en"), html_report(trace, lang="zh")
    assert '<html lang="en">' in en and '<html lang="zh">' in zh
    assert "<h2>Summary</h2>" in en and "<h2>概要</h2>" in zh and "Summary" not in zh
    assert "(peak use)" in en and "占用最多的一步" in zh and "peak use" not in zh
    assert f"<p>{scenarios.LESSONS['preemption'].en}</p>" in en
    assert f"<p>{scenarios.LESSONS['preemption'].zh}</p>" in zh
    assert "mean TTFT (ms)" in en and "平均首 token 延迟（ms）" in zh and "mean TTFT" not in zh
    assert "时间线与请求甘特图" in zh  # the pictures' alt text
    # The header table keeps the trace's own record: the English lesson, as the trace holds it.
    assert trace.header["lesson"] == scenarios.LESSONS["preemption"].en


def test_the_report_follows_the_chosen_language():
    trace = load_trace(TRACES / "walkthrough.jsonl")
    with speaking("zh"):
        assert '<html lang="zh">' in html_report(trace)
    assert '<html lang="en">' in html_report(trace)  # the tests read English


# ---- the scenarios' lessons ---------------------------------------------------------------------------

def test_every_scenario_has_its_lesson_in_both_languages():
    assert set(scenarios.LESSONS) == set(scenarios.SCENARIOS)
    for name, workload in scenarios.SCENARIOS.items():
        assert workload.description == scenarios.LESSONS[name].en  # what a trace's header records
        assert scenarios.lesson(name, "zh") == scenarios.LESSONS[name].zh and CJK.search(scenarios.lesson(name, "zh"))
    with pytest.raises(ValueError, match="unknown scenario 'nope'"):
        scenarios.lesson("nope")


@pytest.mark.parametrize("name", sorted(scenarios.LESSONS))
def test_a_shipped_trace_tells_its_lesson_in_the_chosen_language(name):
    header = load_trace(TRACES / f"{name}.jsonl").header
    assert header["lesson"] == scenarios.LESSONS[name].en  # recorded as it was: readable by every reader
    assert scenarios.trace_lesson(header, "en") == scenarios.LESSONS[name].en
    assert scenarios.trace_lesson(header, "zh") == scenarios.LESSONS[name].zh


def test_a_lesson_of_ones_own_is_shown_as_written():
    assert scenarios.trace_lesson({"scenario": "mine", "lesson": "my own run"}, "zh") == "my own run"
    edited = {"scenario": "walkthrough", "lesson": "an edited lesson"}
    assert scenarios.trace_lesson(edited, "zh") == "an edited lesson"
    assert scenarios.trace_lesson({"scenario": "walkthrough"}, "zh") is None


# ---- the reference run's notes ------------------------------------------------------------------------

def test_the_reference_notes_in_both_languages():
    en, zh = load_reference_run("en"), load_reference_run("zh")
    assert [s.step for s in en.steps] == [s.step for s in zh.steps]
    for a, b in zip(en.steps, zh.steps):
        assert a.note == a.note_text.en == b.note_text.en and b.note == a.note_text.zh
        assert not CJK.search(a.note) and CJK.search(b.note)
    assert en.step(148).note == "seq 4 samples its EOS token and leaves the batch"
    assert zh.step(148).note.startswith("序列 4") and "EOS" in zh.step(148).note
    assert "nano-vllm" in zh.description and CJK.search(zh.description) and not CJK.search(en.description)
    assert (en.model, en.requests, en.num_steps) == (zh.model, zh.requests, zh.num_steps)  # the numbers


def test_the_reference_loader_follows_the_chosen_language():
    with speaking("zh"):
        assert load_reference_run().step(256).note == "序列 5 达到 max_tokens，被截断"
    assert load_reference_run().step(256).note == "seq 5 reaches max_tokens and is cut"


def _damaged(tmp_path: Path, change) -> Path:
    raw = json.loads(REFERENCE_FILE.read_text(encoding="utf-8"))
    change(raw)
    path = tmp_path / "reference.json"
    path.write_text(json.dumps(raw), encoding="utf-8")
    return path


@pytest.mark.parametrize("change, says", [
    (lambda raw: raw["steps"][2]["note"].pop("zh"), r"reference\.json: steps\[2\]\.note must be \{\"en\": \"...\", "
                                                    r"\"zh\": \"...\"\}, got \['en'\]"),
    (lambda raw: raw.__setitem__("description", "only English"), r"reference\.json: description must be .*got str"),
    (lambda raw: raw["steps"][0]["note"].__setitem__("zh", 3), r"steps\[0\]\.note must be .*Expected `str`, got `int`"),
    (lambda raw: raw["steps"][1].__setitem__("latency_ms", "fast"), r"reference\.json: .*`\$\.steps\[1\]\.latency_ms`"),
    (lambda raw: raw["model"].pop("head_dim"), r"reference\.json: .*missing required field `head_dim` - at `\$\.model`"),
])
def test_a_damaged_reference_file_is_refused_naming_the_bad_field(tmp_path, change, says):
    with pytest.raises(ReferenceFormatError, match=says) as refused:
        read_reference_run(_damaged(tmp_path, change))
    assert "\n" not in str(refused.value)


def test_a_reference_file_that_is_not_json_is_refused(tmp_path):
    path = tmp_path / "reference.json"
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(ReferenceFormatError, match=r"reference\.json: not JSON"):
        read_reference_run(path)


# ---- the glossary -------------------------------------------------------------------------------------

def test_every_new_text_keeps_to_the_glossary():
    """The texts of this file's modules and the reference's notes, held to the glossary (the first-use
    bracket rule is for documents, not one-line sentences)."""
    commands = [text for module in (arguments, record, traces, exercises) for text in _module_texts(module)]
    texts = [*_module_texts(console), *commands, *_module_texts(report), *_module_texts(words),
             *scenarios.LESSONS.values()]
    reference = load_reference_run()
    texts += [reference.description_text, *(step.note_text for step in reference.steps)]
    assert len(texts) > 80
    problems = []
    for text in texts:
        if not re.search(r"[A-Za-z]{3}", re.sub(r"\{[^}]*\}", "", text.en)):
            continue  # a separator or a name, the same in both languages
        if text.en == text.zh:
            problems.append(f"{text.en!r} is the same in both languages")
        problems += [p for p in pair_problems(text.en, text.zh, repr(text.en[:50]), set()) if "in brackets" not in p]
    assert problems == []


def test_each_picture_word_is_written_once():
    """The pictures' words are one table (``viz/words.py``): no two of its entries say the same thing, and
    every word the replay page and the live view are sent is one of its entries, not a copy."""
    entries = _texts(*(value for name, value in vars(words).items() if name.isupper()))
    said: dict[tuple[str, str], Text] = {}
    for text in entries:
        first = said.setdefault((text.en.lower(), text.zh), text)
        assert first is text, f"{text.en!r} is written twice"
    for table in (page_words.REPLAY_WORDS, page_words.LIVE_WORDS):
        for key, text in table.items():
            assert any(text is entry for entry in entries), f"the page's {key!r} is not an entry of viz/words.py"


def test_the_glossary_check_can_fail():
    """The same check finds a slip: 'preempted' said without 抢占."""
    slip = Text(en="preempted {seqs} at step {step}", zh="第 {step} 步踢出了{seqs}")
    assert pair_problems(slip.en, slip.zh, "slip", set())
