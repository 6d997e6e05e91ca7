"""The exercises in both languages: every template states its task in English and then in Chinese (under
``中文说明：``), the trace quiz asks its questions in both, and its verdict is said in the chosen language
(the ``PASS``/``FAIL trace_quiz:`` prefix stays in English, for the graders that parse it)."""

from __future__ import annotations

import ast
import re
import unicodedata

import pytest

from nanovllm_teach import i18n
from nanovllm_teach.exercises import EXERCISES, check, grade, quiz_trace
from nanovllm_teach.exercises.trace_quiz.grading import QUESTIONS
from nanovllm_teach.i18n import Text, speaking
from nanovllm_teach.i18n.notebooks import english_runs, pair_problems

CJK = re.compile(r"[\u4e00-\u9fff]")
LITERAL = re.compile(r"``.*?``", re.DOTALL)  # reST code spans: names, not prose
CHINESE_PART = "\n中文说明：\n\n"
MAX_COLUMNS = 110


pytestmark = pytest.mark.usefixtures("no_language_chosen")


def _statement(name: str) -> tuple[str, str]:
    """The English and the Chinese part of the template's docstring."""
    doc = ast.get_docstring(ast.parse(EXERCISES[name].template_path.read_text()), clean=False)
    assert doc is not None and doc.count(CHINESE_PART) == 1, f"{name}: the docstring needs one {CHINESE_PART!r}"
    en, zh = doc.split(CHINESE_PART)
    return en, zh


def _columns(line: str) -> int:
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in line)


@pytest.mark.parametrize("name", list(EXERCISES))
def test_every_template_states_its_task_in_english_then_in_chinese(name):
    en, zh = _statement(name)
    assert en.strip() and not CJK.search(en), f"{name}: the English part has Chinese in it"
    assert CJK.search(LITERAL.sub(" ", zh)), f"{name}: the Chinese part is not in Chinese"
    # The same commands, names unchanged.
    assert f'hint("{name}", 1)' in zh and f'hint("{name}", 2)' in zh, name
    assert f"nanovllm-teach grade {name} {name}.py" in zh, name
    # The glossary's terms, with the English in brackets at first use.
    assert pair_problems(en, zh, name, set()) == []
    wide = [line for line in zh.splitlines() if _columns(line) > MAX_COLUMNS]
    assert not wide, f"{name}: Chinese lines wider than {MAX_COLUMNS} columns: {wide}"


def test_the_list_of_exercises_says_in_chinese_what_each_one_replaces():
    """``exercises --lang zh`` lists each exercise's title and the piece it replaces: names, or Chinese (the
    trace quiz's "no engine code: ..." and tp_slice's "called by the linear layers' weight_loader" were
    English)."""
    with speaking("zh"):
        said = {name: f"{i18n.say(ex.title)} [{i18n.say(ex.replaces)}]" for name, ex in EXERCISES.items()}
    assert {name: english_runs(line) for name, line in said.items() if english_runs(line)} == {}


def test_the_quiz_template_lists_every_question_in_both_languages():
    en, zh = _statement("trace_quiz")
    for q in QUESTIONS:
        assert f"``{q.key}``: " in en and f"``{q.key}``：" in zh, q.key


def test_every_quiz_question_and_hint_is_in_both_languages():
    for q in QUESTIONS:
        for text in (q.text, q.hint):
            assert isinstance(text, Text), q.key
            assert CJK.search(text.zh) and not CJK.search(text.en) and text.en != text.zh, (q.key, text)
        assert pair_problems(q.text.en, q.text.zh, q.key, set()) == [], q.key


def _some_wrong_answers() -> dict[str, object]:
    trace = quiz_trace()
    answers: dict[str, object] = {q.key: q.answer(trace) for q in QUESTIONS}
    answers["num_steps"] += 1
    answers["first_preempted_seq"] = None
    answers["num_preemptions"] = "3"
    answers["no_such_key"] = 1
    return answers


def test_a_wrong_quiz_answer_is_marked_in_chinese_when_chinese_is_chosen(monkeypatch):
    answers = _some_wrong_answers()
    first = QUESTIONS[0]
    monkeypatch.setenv(i18n.ENV_VAR, "zh")
    result = check("trace_quiz", answers)
    assert not result.passed
    lines = result.message.splitlines()
    total = len(QUESTIONS)
    assert lines[0] == f"FAIL trace_quiz: {total} 个答案中有 {total - 3} 个正确"
    assert lines[1] == f"  num_steps：{answers['num_steps']} 偏大。{first.text.zh}提示：{first.hint.zh}。"
    assert lines[2].startswith("  first_preempted_seq：还没有作答。")
    assert lines[3] == "  num_preemptions：请用 int 作答，而不是 str '3'。"
    assert lines[4].startswith("  no_such_key：没有这道题（题目的键是：") and "、" in lines[4]
    assert not re.search(r"\b(?:is too|Hint|answers are right|no answer yet)\b", result.message)

    assert check("trace_quiz", None).message.startswith("FAIL trace_quiz: answer_quiz 必须是由答案组成的 dict")
    assert grade("trace_quiz", {}).message.startswith("FAIL trace_quiz: 你的解答没有定义 answer_quiz")
    right = {q.key: q.answer(quiz_trace()) for q in QUESTIONS}
    assert check("trace_quiz", right).message == f"PASS trace_quiz: {total} 个答案全部正确"


def test_a_wrong_quiz_answer_is_marked_in_english_when_english_is_chosen(monkeypatch):
    answers = _some_wrong_answers()
    first = QUESTIONS[0]
    monkeypatch.setenv(i18n.ENV_VAR, "zh")  # asked for by name, English wins over the environment
    with speaking("en"):
        result = check("trace_quiz", answers)
    lines = result.message.splitlines()
    total = len(QUESTIONS)
    assert lines[0] == f"FAIL trace_quiz: {total - 3} of {total} answers are right"
    assert lines[1] == (f"  num_steps: {answers['num_steps']} is too high. {first.text.en} "
                        f"Hint: {first.hint.en}.")
    assert lines[3] == "  num_preemptions: answer with an int, not str '3'."
    assert lines[4].startswith("  no_such_key: there is no such question (the questions are: ")
    assert not CJK.search(result.message)


def test_the_grading_childs_failures_are_said_in_the_language_too(monkeypatch):
    def broken(trace):
        raise ValueError("no table")

    with speaking("zh"):
        assert check("trace_quiz", broken).message == "FAIL trace_quiz: 你的 answer_quiz 抛出了 ValueError：no table"
    assert check("trace_quiz", broken).message == "FAIL trace_quiz: your answer_quiz raised ValueError: no table"
