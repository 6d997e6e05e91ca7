"""Shipped files are portable: no trace, notebook, doc or package data file carries a path of the machine
it was made on (a trace header names its model by folder name and config hash, never by path)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# An absolute path as a machine writes it: a POSIX home, work or temp folder, or a Windows drive.
MACHINE_PATH = re.compile(r'(?<![\w.:/])(?:/(?:home|Users|root|work|tmp|private|mnt|opt)/[\w.-]+|[A-Za-z]:\\\\[\w.-]+)')
SHIPPED = sorted([*ROOT.glob("traces/*.jsonl"), *ROOT.glob("notebooks/*"), *ROOT.glob("docs/*"),
                  *ROOT.glob("nanovllm_teach/**/*.json"), *ROOT.glob("nanovllm_teach/**/*.md"), ROOT / "README.md"])


def test_the_pattern_finds_machine_paths_and_nothing_else():
    assert MACHINE_PATH.search('"model": "/work/main/nanovllm_teach/assets/qwen3-tiny"')
    assert MACHINE_PATH.search("C:\\\\Users\\\\ana\\\\run.jsonl")
    assert not MACHINE_PATH.search("see https://github.com/GeeeekExplorer/nano-vllm and out/demo_trace.jsonl")


@pytest.mark.parametrize("path", [p for p in SHIPPED if p.is_file()], ids=lambda p: str(p.relative_to(ROOT)))
def test_no_shipped_file_holds_a_machine_path(path):
    text = path.read_text(encoding="utf-8", errors="replace")
    found = sorted({m.group(0) for m in MACHINE_PATH.finditer(text)})
    assert not found, f"{path.relative_to(ROOT)} holds machine paths: {found[:5]}"
