"""Every error a learner or a user can meet is in English and Chinese, from one source: a ``Text`` constant
said with ``say`` (the glossary check of every ``Text`` is ``tests/test_i18n.py``'s).

The scan reads the package's source (no import): a ``raise`` of a user-facing exception whose message is
written in place, a string or an f-string, is English only. The behavioural checks make real mistakes
(a bad sampling parameter, a bad setting, a prompt too long, a bad HTTP request, a bad CLI value) and read
the Chinese under ``speaking("zh")`` and the English otherwise.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from nanovllm_teach import LLM, SamplingParams
from nanovllm_teach.cli import main
from nanovllm_teach.i18n import speaking
from serve_helpers import MODEL, running_server

PACKAGE = Path(__file__).resolve().parents[1] / "nanovllm_teach"
# The parts of the package whose messages are held to both languages (paths under nanovllm_teach/).
AREAS = ["engine", "sampling_params.py", "config.py", "settings.py", "llm.py", "workload", "models", "layers",
         "kernels", "trace", "serve", "scenarios.py", "runs.py", "utils", "logprobs.py", "outputs.py",
         "reference", "tinymodel"]
# The exceptions whose text a user reads (the CLI prints a ValueError, TypeError or UsageError as its one
# line; a KeyError or FileNotFoundError reaches a notebook); every subclass the package defines is added.
USER_FACING = {"ValueError", "UsageError", "TypeError", "KeyError", "FileNotFoundError",
               "ApiError"}  # ApiError: its message is the HTTP client's error body
# (file, exception, the message's start) of a message left in English on purpose, each with its reason
# beside it: one only the package's own developers could meet. None in these areas: the package's own
# invariants are asserts.
ALLOWED: set[tuple[str, str, str]] = set()


def _files(areas: list[str]) -> list[Path]:
    found = []
    for area in areas:
        path = PACKAGE / area
        found += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return found


def _user_facing_exceptions() -> set[str]:
    """``USER_FACING`` and every class of the package that derives from one of them, however deep."""
    bases: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                bases[node.name] = {ast.unparse(base).rsplit(".", 1)[-1] for base in node.bases}
    names = set(USER_FACING)
    while grown := {name for name, parents in bases.items() if parents & names} - names:
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


def english_only_raises(areas: list[str]) -> list[tuple[str, str, str]]:
    """(file, exception, the message's start) of each raise in ``areas`` whose message is written in place."""
    exceptions = _user_facing_exceptions()
    found = []
    for path in _files(areas):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call)):
                continue
            name = ast.unparse(node.exc.func).rsplit(".", 1)[-1]
            messages = [arg for arg in node.exc.args if _written_in_place(arg)]
            if name in exceptions and messages:
                found.append((str(path.relative_to(PACKAGE)), name, ast.unparse(messages[0])[:40]))
    return found


def test_no_user_facing_message_is_english_only():
    assert [raised for raised in english_only_raises(AREAS) if raised not in ALLOWED] == []


def test_the_scan_finds_a_message_written_in_place(tmp_path, monkeypatch):
    """The scan itself: it catches an f-string, a string joined to one, and a package subclass's message."""
    (tmp_path / "bad.py").write_text(
        "class BadFile(ValueError):\n    pass\n"
        "def f(x):\n"
        "    if x == 1:\n        raise ValueError(f'x is {x}')\n"
        "    if x == 2:\n        raise BadFile('path', 'line ' + str(x))\n"
        "    raise RuntimeError('a bug of the package: not held to two languages')\n")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", tmp_path)
    assert [name for _, name, _ in english_only_raises(["bad.py"])] == ["ValueError", "BadFile"]


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
