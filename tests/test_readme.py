"""The README is the front door: its commands and Python examples must keep working."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README.read_text(), flags=re.S)


@pytest.mark.parametrize("index", range(len(_blocks("python"))))
def test_python_examples_run(index, capsys, tmp_path, monkeypatch):
    # Run where a reader would (the repository root, seen through a scratch folder for written files).
    (tmp_path / "traces").symlink_to(README.parent / "traces")
    monkeypatch.chdir(tmp_path)
    exec(compile(_blocks("python")[index], f"README.md python block {index}", "exec"), {})
    assert capsys.readouterr().out.strip(), "an example should show the reader something"


@pytest.mark.parametrize("index", range(len(_blocks("shell"))))
def test_shell_examples_run(index, tmp_path):
    """The README's shell examples, run as written, with ``nanovllm-teach`` meaning this checkout's CLI."""
    shim = tmp_path / "bin" / "nanovllm-teach"
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\nexec {sys.executable} -m nanovllm_teach.cli "$@"\n')
    shim.chmod(0o755)
    env = {**os.environ, "PATH": f"{shim.parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", _blocks("shell")[index]], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


def test_ci_runs_the_readme_test_command():
    ci = (README.parent / ".ci" / "run").read_text()
    assert "<!-- test-command -->" in ci or "test-command" in ci
    commands = _blocks("bash")
    assert len(commands) == 2, "exactly two set-up commands: the demo and the tests"
    demo, tests = commands
    assert "nanovllm-teach demo" in demo and "pytest" in tests
    assert "torch==2.13.0" in demo and "torch==2.13.0" in tests  # never a multi-GB CUDA build on CPU
