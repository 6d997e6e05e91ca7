"""The README is the front door, in English and in Chinese: its commands and Python examples must keep
working, and the Chinese README (``README.zh-CN.md``) shows the same code, says the same in Chinese and
keeps to the glossary."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
README_ZH = README.with_name("README.zh-CN.md")


def _blocks(lang: str, readme: Path = README) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", readme.read_text(encoding="utf-8"), flags=re.S)


def _examples(lang: str) -> list[str]:
    """Every distinct ``lang`` block of either README, in order: the Chinese README's run too (once, where
    they are the same code, as ``test_the_chinese_readme_shows_the_same_code`` requires)."""
    return list(dict.fromkeys(_blocks(lang, README) + _blocks(lang, README_ZH)))


@pytest.mark.parametrize("index", range(len(_examples("python"))))
def test_python_examples_run(index, capsys, tmp_path, monkeypatch):
    # Run where a reader would (the repository root, seen through a scratch folder for written files).
    (tmp_path / "traces").symlink_to(README.parent / "traces")
    monkeypatch.chdir(tmp_path)
    exec(compile(_examples("python")[index], f"README python block {index}", "exec"), {})
    assert capsys.readouterr().out.strip(), "an example should show the reader something"


@pytest.mark.parametrize("index", range(len(_examples("shell"))))
def test_shell_examples_run(index, tmp_path):
    """The README's shell examples, run as written, with ``nanovllm-teach`` meaning this checkout's CLI and
    ``python`` this interpreter (the README's venv's); a stream shows more than one piece of text."""
    bin_folder = tmp_path / "bin"
    bin_folder.mkdir()
    for name, command in (("nanovllm-teach", f"{sys.executable} -m nanovllm_teach.cli"), ("python", sys.executable)):
        (bin_folder / name).write_text(f'#!/bin/sh\nexec {command} "$@"\n')
        (bin_folder / name).chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_folder}{os.pathsep}{os.environ['PATH']}"}
    example = _examples("shell")[index]
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", example], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    if '"stream": true' in example:
        assert len(_streamed_pieces(done.stdout)) > 1, done.stdout[-2000:]


def _streamed_pieces(output: str) -> list[str]:
    """The non-empty pieces of text that Server-Sent Events in ``output`` carried (completions or chat)."""
    import json

    pieces = []
    for data in re.findall(r"data: (\{.*\})$", output, flags=re.M):
        for choice in json.loads(data).get("choices", []):
            piece = choice.get("text") or (choice.get("delta") or {}).get("content")
            if piece:
                pieces.append(piece)
    return pieces


def test_a_stream_that_ends_at_once_shows_no_pieces():
    """What the README's stream used to show: one chunk with empty text, then the end."""
    ended = 'data: {"choices": [{"index": 0, "text": "", "finish_reason": "stop"}]}\n\ndata: [DONE]\n'
    assert _streamed_pieces(ended) == []
    counting = "".join(f'data: {{"choices": [{{"index": 0, "delta": {{"content": "{n}, "}}}}]}}\n\n' for n in (1, 2))
    assert _streamed_pieces('{"id": "x"}' + counting) == ["1, ", "2, "]


def test_ci_runs_the_readme_test_command():
    ci = (README.parent / ".ci" / "run").read_text()
    assert "<!-- test-command -->" in ci or "test-command" in ci
    commands = _blocks("bash")
    assert len(commands) == 2, "exactly two set-up commands: the demo and the tests"
    demo, tests = commands
    assert "nanovllm-teach demo" in demo and "pytest" in tests
    assert "torch==2.13.0" in demo and "torch==2.13.0" in tests  # never a multi-GB CUDA build on CPU


def test_the_chinese_readme_shows_the_same_code():
    """The same commands and examples, block for block, and the test command in the same marked block
    (``.ci/run`` reads README.md's only)."""
    for lang in ("bash", "python", "shell"):
        assert _blocks(lang, README_ZH) == _blocks(lang, README), f"the two READMEs' {lang} blocks differ"
    marked = r"<!-- test-command -->\n```bash\n(.*?)```\n<!-- /test-command -->"
    assert re.findall(marked, README_ZH.read_text(encoding="utf-8"), flags=re.S) == \
        re.findall(marked, README.read_text(encoding="utf-8"), flags=re.S) != []


def test_the_two_readmes_point_at_each_other():
    assert "(README.zh-CN.md)" in README.read_text(encoding="utf-8").splitlines()[1]
    assert "(README.md)" in README_ZH.read_text(encoding="utf-8").split("\n\n")[1]


def test_the_chinese_readme_is_the_whole_readme_in_chinese():
    """Section for section, every term of the glossary the English uses said the glossary's way, with
    the English in brackets the first time; the quick start shows the demo in Chinese."""
    from nanovllm_teach.i18n.notebooks import pair_problems

    en, zh = README.read_text(encoding="utf-8"), README_ZH.read_text(encoding="utf-8")
    assert len(re.findall(r"^## ", zh, flags=re.M)) == len(re.findall(r"^## ", en, flags=re.M))
    # The English README names the language it links to ("中文"): not a slip.
    problems = [p for p in pair_problems(en, zh, "README.zh-CN.md", set()) if "English cell has Chinese" not in p]
    assert problems == []
    quick_start = zh.split("\n## ")[1]
    assert "nanovllm-teach demo --lang zh" in quick_start


def test_the_teachers_guide_is_the_same_guide_in_chinese():
    """docs/teaching.md and docs/teaching.zh-CN.md: section for section, the glossary's terms said its way,
    with the English in brackets the first time, and the same commands."""
    from nanovllm_teach.i18n.notebooks import pair_problems

    docs = README.parent / "docs"
    en, zh = (docs / "teaching.md").read_text(encoding="utf-8"), (docs / "teaching.zh-CN.md").read_text(encoding="utf-8")
    assert len(re.findall(r"^#+ ", zh, flags=re.M)) == len(re.findall(r"^#+ ", en, flags=re.M))
    # The English guide names the language it links to ("中文"): not a slip.
    problems = [p for p in pair_problems(en, zh, "docs/teaching.zh-CN.md", set()) if "English cell has Chinese" not in p]
    assert problems == []
    commands = re.compile(r"nanovllm-teach [a-z-]+")
    assert sorted(set(commands.findall(zh))) == sorted(set(commands.findall(en)))


def test_the_grading_page_is_the_same_page_in_chinese():
    """docs/grading.md and docs/grading.zh-CN.md: section for section, the glossary's terms said its way, the
    same commands, and each linked from its language's teaching guide."""
    from nanovllm_teach.i18n.notebooks import pair_problems

    docs = README.parent / "docs"
    en, zh = (docs / "grading.md").read_text(encoding="utf-8"), (docs / "grading.zh-CN.md").read_text(encoding="utf-8")
    assert len(re.findall(r"^#+ ", zh, flags=re.M)) == len(re.findall(r"^#+ ", en, flags=re.M))
    problems = [p for p in pair_problems(en, zh, "docs/grading.zh-CN.md", set()) if "English cell has Chinese" not in p]
    assert problems == []
    commands = re.compile(r"nanovllm-teach [a-z-]+|--[a-z-]+")
    assert sorted(set(commands.findall(zh))) == sorted(set(commands.findall(en)))
    assert "(grading.md)" in (docs / "teaching.md").read_text(encoding="utf-8")
    assert "(grading.zh-CN.md)" in (docs / "teaching.zh-CN.md").read_text(encoding="utf-8")
