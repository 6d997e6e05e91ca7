"""Every error a learner or a user can meet is in English and Chinese, from one source: a ``Text`` constant
said with ``say`` (the glossary check of every ``Text`` is ``tests/test_i18n.py``'s).

The scan reads the package's source (no import): a ``raise`` of a user-facing exception whose message is
written in place, a string or an f-string, is English only. The behavioural checks make real mistakes
(a bad sampling parameter, a bad setting, a prompt too long, a bad HTTP request, a bad CLI value) and read
the Chinese under ``speaking("zh")`` and the English otherwise.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from nanovllm_teach import LLM, SamplingParams, i18n
from nanovllm_teach.cli import main
from nanovllm_teach.i18n import speaking
from serve_helpers import MODEL, running_server

PACKAGE = Path(__file__).resolve().parents[1] / "nanovllm_teach"
# The exceptions whose text a user reads (the CLI prints a ValueError, TypeError or UsageError as its one
# line; a KeyError, FileNotFoundError or RuntimeError reaches a notebook; a TraitError a widget), and every
# exception class the package defines on one of them or on Exception, found by the scan.
USER_FACING = {"ValueError", "UsageError", "TypeError", "KeyError", "FileNotFoundError", "RuntimeError",
               "TimeoutError", "TraitError",
               "ApiError"}  # ApiError: its message is the HTTP client's error body
# Files whose written-in-place messages stay English, each with why: no learner, teacher or user reads them.
ALLOWED_FILES = {
    # Checks of the shipped published.json: only a maintainer adding a measured case edits it, and no command
    # reads another file (the benchmark and sim/engine.py read the shipped one).
    "sim/published.py": "the shipped data file's own checks, for its maintainers",
    # The channel to the exercises' sandboxed worker: every reader of a FrameError drops its text and reports
    # the worker's exit or time-out instead (remote.py, worker.py).
    "exercises/worker.py": "never shown: its readers report the worker's exit, not this text",
}
# One raise, by its file and the start of its message as written (f-string fields as {}), with why.
ALLOWED = {
    # A Text written with other fields in its two languages: a mistake in the package's (or a notebook
    # author's) own source, refused when the module is imported.
    ("i18n/__init__.py", "the two languages of a text must use the same fields"): "for the package's authors",
    # The glossary asked for a term it lacks: the notebook build's and the tests' own lookup.
    ("i18n/glossary.py", "the glossary has no term"): "for the package's authors",
    # An exercise's piece declared with neither or both of its ways into the sandbox: the exercise's author's
    # mistake, refused when the exercise is defined (a ValueError, not an assert: it keeps a learner's code
    # from running beside the engine, so it holds under python -O too).
    ("exercises/engine_grading.py", "piece {} needs exactly one of wire="): "for the exercises' authors",
    # A client that hung up while sending its body: the server's log line for its operator, never sent back
    # (the client is gone).
    ("serve/http.py", "{}: left after {} bytes of its body"): "the operator's log only",
}


def _user_facing_exceptions() -> set[str]:
    """``USER_FACING`` and every class of the package that derives from one of them or from Exception."""
    bases: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                bases[node.name] = {ast.unparse(base).rsplit(".", 1)[-1] for base in node.bases}
    names = set(USER_FACING)
    while grown := {name for name, parents in bases.items() if parents & (names | {"Exception"})} - names:
        names |= grown
    return names


def _written_in_place(node: ast.expr) -> bool:
    """A message written where it is raised: a string, an f-string, or one of them joined or chosen."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.JoinedStr):
        return True
    if isinstance(node, ast.BinOp):
        return _written_in_place(node.left) or _written_in_place(node.right)
    if isinstance(node, ast.IfExp):
        return _written_in_place(node.body) or _written_in_place(node.orelse)
    return False


def _as_written(node: ast.expr) -> str:
    """The message's text, an f-string's fields as ``{}``."""
    if isinstance(node, ast.JoinedStr):
        return "".join(part.value if isinstance(part, ast.Constant) else "{}" for part in node.values)
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else ast.unparse(node)


def english_only_raises(source: str, exceptions: set[str]) -> list[tuple[int, str, str]]:
    """(line, exception, message) of each raise in ``source`` of one of ``exceptions`` whose message is
    written in place."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call)):
            continue
        name = ast.unparse(node.exc.func).rsplit(".", 1)[-1]
        messages = [arg for arg in node.exc.args if _written_in_place(arg)]
        if name in exceptions and messages:
            found.append((node.lineno, name, _as_written(messages[0])))
    return sorted(found)


def test_no_user_facing_message_is_english_only():
    exceptions = _user_facing_exceptions()
    english_only = []
    for path in sorted(PACKAGE.rglob("*.py")):
        where = path.relative_to(PACKAGE).as_posix()
        if where in ALLOWED_FILES:
            continue
        for line, name, text in english_only_raises(path.read_text(encoding="utf-8"), exceptions):
            if not any(where == file and text.startswith(start) for file, start in ALLOWED):
                english_only.append(f"{where}:{line}: {name}: {text[:80]}")
    assert english_only == []


def test_the_allowed_raises_are_still_there():
    """An entry of the allowlist whose raise has gone (translated, moved) is taken off it, not left to hide one."""
    exceptions = _user_facing_exceptions()
    for file in ALLOWED_FILES:
        assert english_only_raises((PACKAGE / file).read_text(encoding="utf-8"), exceptions), file
    for file, start in ALLOWED:
        texts = [text for _, _, text in english_only_raises((PACKAGE / file).read_text(encoding="utf-8"), exceptions)]
        assert any(text.startswith(start) for text in texts), (file, start)


def test_the_scan_finds_a_message_written_in_place():
    """The scan itself: an f-string, a string joined to one, a package subclass's message; a Text said is left."""
    exceptions = _user_facing_exceptions() | {"BadFile"}
    assert {"FrameError", "Refused", "UsageError", "ApiError"} <= exceptions  # the package's own, found
    source = ("def f(x):\n"
              "    if x == 1:\n        raise ValueError(f'x is {x}')\n"
              "    if x == 2:\n        raise errors.BadFile('path', 'line ' + str(x))\n"
              "    raise ValueError(say(BAD, x=x))\n")
    assert [(line, name) for line, name, _ in english_only_raises(source, exceptions)] == [
        (3, "ValueError"), (5, "BadFile")]


# ---- real mistakes, in both languages ------------------------------------------------------------------

def _refusal(make, lang: str) -> str:
    with speaking(lang), pytest.raises((ValueError, TypeError)) as refused:
        make()
    return str(refused.value)


@pytest.mark.parametrize(("make", "en", "zh"), [
    (lambda: SamplingParams(temperature=-1), "temperature must be a finite number >= 0 (0 means greedy), got -1",
     "temperature 必须是 >= 0 的有限数（0 表示贪心解码），收到的是 -1"),
    (lambda: SamplingParams(stop=["ok", ""]), "every stop string must be a non-empty str, got ''",
     "stop 中的每个字符串都必须是非空的 str，收到的是 ''"),
    (lambda: LLM(max_num_seqs=0), "max_num_seqs must be a positive int, got 0", "max_num_seqs 必须是正整数，收到的是 0"),
    (lambda: LLM(no_such_setting=1), "unknown engine setting(s): no_such_setting", "未知的引擎设置：no_such_setting"),
    (lambda: LLM(device="tpu"), "device must be auto, cpu or cuda[:N], got 'tpu'",
     "device 必须是 auto、cpu 或 cuda[:N]，收到的是 'tpu'"),
])
def test_a_bad_value_is_refused_in_the_language_chosen(make, en, zh):
    assert en in _refusal(make, "en")
    assert zh in _refusal(make, "zh")


def test_a_prompt_too_long_is_refused_by_the_engine_in_both_languages():
    llm = LLM("qwen3-0.6b", runner="simulated", hardware="h100-sxm", max_model_len=64)
    try:
        too_long = [[1] * 65]
        assert "prompt has 65 tokens, more than max_model_len=64" in _refusal(lambda: llm.generate(too_long), "en")
        assert "prompt 有 65 个 token，超过了 max_model_len=64" in _refusal(lambda: llm.generate(too_long), "zh")
        assert llm.is_finished()  # refused before anything was queued
    finally:
        llm.close()


def test_the_cli_prints_an_engine_refusal_in_chinese_on_one_line(capsys):
    assert main(["simulate", "--lang", "zh", "--max-num-seqs", "0"]) == 2
    err = capsys.readouterr().err
    assert err == "nanovllm-teach: error: max_num_seqs 必须是正整数，收到的是 0\n"
    assert main(["simulate", "--max-num-seqs", "0"]) == 2
    assert "max_num_seqs must be a positive int, got 0" in capsys.readouterr().err


def test_the_server_refuses_in_its_own_language_in_openai_s_shape():
    """The API process checks the sampling parameters, the engine core the prompt: both speak the server's
    language (the core is told it when it starts), and the error body keeps OpenAI's shape."""
    pytest.importorskip("fastapi")  # the serve extra
    httpx = pytest.importorskip("httpx")
    bad = {"model": MODEL, "prompt": "Hi", "temperature": -1.0}
    too_long = {"model": MODEL, "prompt": [1] * 600, "max_tokens": 1}
    with speaking("zh"), running_server() as (url, _):
        zh = httpx.post(url + "/v1/completions", json=bad, timeout=60)
        zh_long = httpx.post(url + "/v1/completions", json=too_long, timeout=60)
        with speaking("en"):
            en = httpx.post(url + "/v1/completions", json=bad, timeout=60)
    assert zh.status_code == en.status_code == 400
    assert zh.json() == {"error": {"message": "temperature 必须是 >= 0 的有限数（0 表示贪心解码），收到的是 -1.0",
                                   "type": "invalid_request_error", "param": "temperature", "code": None}}
    assert en.json()["error"]["message"] == "temperature must be a finite number >= 0 (0 means greedy), got -1.0"
    assert en.json()["error"]["param"] == "temperature"
    assert zh_long.status_code == 400
    assert "prompt 有 600 个 token，超过了 max_model_len=512" in zh_long.json()["error"]["message"], zh_long.text


# ---- the simulator, the planner, the pictures, the exercises, the language itself ----------------------

def _one_chinese_line(err: str, expected: str) -> None:
    assert expected in err and err.count("\n") == 1 and "Traceback" not in err, err


def test_simulate_refuses_a_bad_value_in_chinese(capsys):
    assert main(["--lang", "zh", "simulate", "--shared-prefix", "x"]) == 2
    _one_chinese_line(capsys.readouterr().err, "--shared-prefix 的格式必须是 GROUPS:LEN（两个整数），收到的是 'x'")


def test_plan_refuses_a_bad_value_in_chinese(capsys):
    assert main(["plan", "--rate", "10", "--gpus", "tpu-v5", "--lang", "zh"]) == 2
    _one_chinese_line(capsys.readouterr().err, "--gpus：没有名为 'tpu-v5' 的 GPU；可选：")


def test_a_workload_trace_that_cannot_be_read_is_refused_in_chinese(tmp_path, capsys):
    missing = tmp_path / "missing.jsonl"
    assert main(["plan", "--rate", "10", "--workload-trace", str(missing), "--lang", "zh"]) == 2
    _one_chinese_line(capsys.readouterr().err, f"--workload-trace {missing}：无法读取（")


def test_the_simulator_s_own_errors_follow_the_language():
    from nanovllm_teach.sim.hardware import get_device

    with speaking("zh"), pytest.raises(ValueError, match="没有名为 'h100' 的硬件；可选："):
        get_device("h100")


def test_a_picture_refuses_a_bad_argument_in_chinese():
    from nanovllm_teach.viz.diagrams.kv_cache import block_table_slots, hash_chain

    with speaking("zh"):
        with pytest.raises(ValueError, match="token_ids 为空：一个 prompt 至少有一个 token"):
            hash_chain([], 4)
        with pytest.raises(ValueError, match=r"position 必须在 \[0, 5\) 之内，收到的是 9"):
            block_table_slots([0, 1], 5, 4, position=9)
    with speaking("en"), pytest.raises(ValueError, match="token_ids is empty"):
        hash_chain([], 4)


def test_an_exercise_s_hint_that_does_not_exist_is_refused_in_chinese():
    from nanovllm_teach.exercises import get_exercise, hint

    with speaking("zh"):
        with pytest.raises(KeyError, match="没有练习 'nope'"):
            get_exercise("nope")
        with pytest.raises(ValueError, match="的提示编号是 1 到"):
            hint("can_append", 99)


@pytest.mark.usefixtures("no_language_chosen")
def test_a_bad_language_variable_is_refused_in_the_locale_s_language(monkeypatch):
    """``NANOVLLM_TEACH_LANG`` itself is the mistake, so the locale says which language refuses it."""
    monkeypatch.setenv(i18n.ENV_VAR, "fr")
    monkeypatch.setenv("LC_ALL", "zh_CN.UTF-8")
    with pytest.raises(ValueError, match=f"{i18n.ENV_VAR} 必须是 en, zh 之一，收到的是 'fr'"):
        i18n.resolve_lang()
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    with pytest.raises(ValueError, match=f"{i18n.ENV_VAR} must be one of en, zh, got 'fr'"):
        i18n.resolve_lang()
