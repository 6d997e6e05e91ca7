"""A learner has this repository and nothing else: no text in it (notebooks, Markdown, docstrings and
comments, the HTML report's template, shipped trace headers) may point at a document it does not ship.

Two kinds of reference are caught:

- the background articles the project was first written from ("seed 000", "the seed's log", "section
  2.4.3", "seeds/..."), by patterns precise enough to leave sampling seeds (``seed=3``, ``random.seed``,
  "a per-request seed") alone;
- any ``NAME.md`` (or ``.rst``/``.pdf``) a text names that exists nowhere in the repository, such
  as ``DESIGN.md``. Web addresses are skipped: a public page is cited by its address on purpose.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
THIS_FILE = Path(__file__).resolve()

SKIP_DIRS = {"__pycache__", "build", "dist", "out", "node_modules"}
TEXT_SUFFIXES = {".py", ".md", ".ipynb", ".html", ".txt", ".toml", ".cfg", ".json"}
# Data, not prose: the tokenizer's vocabulary is arbitrary strings.
SKIP_FILES = {"tokenizer.json"}

_BACKGROUND = [
    (re.compile(r"\bseeds?\s+(?:0\d\d\b|\d+\.\d)", re.I), "a background article by number"),
    (re.compile(r"\bseed's\b", re.I), "the background article's (possessive)"),
    (re.compile(r"\bseeds?/", re.I), "a folder of background articles"),
    (re.compile(r"\bseed\s+walkthrough\b", re.I), "the background article's walkthrough"),
    (re.compile(r"\bnano-vllm\s+walkthrough\b", re.I), "an article about nano-vllm that is not shipped"),
    # "the seed" as a text that says, shows or contains something; "the seed of the generator" or
    # "pass the seed to SamplingParams" do not match.
    (re.compile(r"\b(?:in|as in|like|than|of|from) the seed\b(?!\s*(?:=|of\b|value|parameter|argument|for\b))"
                r"|\bthe seed\b(?=\s*[,:;)]|\s+(?:log|logs|run|runs|article|walkthrough|draws?|drew|describes?|"
                r"described|attributes?|shows?|showed|says|said|tells|told|walks|explains?|prints?|printed)\b)",
                re.I), "the background article"),
    (re.compile(r"\bsections?\s+\d+\.\d+", re.I), "a numbered section of an outside article"),
    (re.compile(r"§\s*\d"), "a numbered section of an outside article"),
]
_DOC_NAME = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w-]+\.(?:md|rst|pdf))\b")
_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+", re.I)


def background_references(text: str) -> list[tuple[int, str, str]]:
    """``(offset, matched text, what it refers to)`` for every reference to a background article in
    ``text``, in the order they appear."""
    found = {m.start(): (m.start(), m.group(0), why) for pattern, why in _BACKGROUND for m in pattern.finditer(text)}
    return [found[start] for start in sorted(found)]


def named_documents(text: str) -> list[tuple[int, str]]:
    """``(offset, name)`` of every document file name ``text`` mentions outside web addresses."""
    masked = _URL.sub(lambda m: " " * len(m.group(0)), text)
    return [(m.start(), m.group(1)) for m in _DOC_NAME.finditer(masked)]


def _text_files() -> list[Path]:
    files = []
    for folder, dirs, names in os.walk(ROOT):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in SKIP_DIRS
                         and not d.endswith(".egg-info"))
        for name in sorted(names):
            path = Path(folder) / name
            if path == THIS_FILE or name in SKIP_FILES:
                continue
            if path.suffix in TEXT_SUFFIXES or path.suffix == ".jsonl":
                files.append(path)
    return files


def _prose(path: Path) -> str:
    """The text of ``path`` a reader sees: a notebook's cell sources, a trace's header line, else all of it."""
    if path.suffix == ".ipynb":
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        return "\n".join("".join(cell["source"]) for cell in cells)
    if path.suffix == ".jsonl":
        with path.open(encoding="utf-8") as f:
            return f.readline()
    return path.read_text(encoding="utf-8", errors="replace")


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


FILES = _text_files()
SHIPPED_DOCS = {p.relative_to(ROOT).as_posix() for p in FILES} | {
    p.relative_to(ROOT).as_posix() for p in ROOT.rglob("*.pdf") if ".git" not in p.parts}
SHIPPED_NAMES = {Path(p).name for p in SHIPPED_DOCS}


def _is_shipped(name: str, mentioned_in: Path) -> bool:
    if "/" not in name:
        return name in SHIPPED_NAMES
    here = (mentioned_in.parent / name).resolve()
    return name.lstrip("./") in SHIPPED_DOCS or (here.is_file() and ROOT in here.parents)


def test_no_text_refers_to_a_background_article():
    found = []
    for path in FILES:
        text = _prose(path)
        for offset, fragment, why in background_references(text):
            found.append(f"{path.relative_to(ROOT)}:{_line_of(text, offset)}: {fragment!r} ({why})")
    assert not found, "texts that point at documents the repository does not ship:\n" + "\n".join(found)


def test_every_named_document_is_shipped():
    found = []
    for path in FILES:
        text = _prose(path)
        for offset, name in named_documents(text):
            if not _is_shipped(name, path):
                found.append(f"{path.relative_to(ROOT)}:{_line_of(text, offset)}: {name}")
    assert not found, "documents named but not in the repository:\n" + "\n".join(found)


@pytest.mark.parametrize("text", [
    "the walkthrough in seed 000 (section 2.4.3) does",
    "nano-vllm allows this for the head only (seed\n003)",
    "lengths after the first token (seed 2.4.1)",
    "In the seed's GPU run a prefill took 772 ms",
    "In the seed, the first answer ended on EOS",
    "The same sampling parameters as in the seed, plus",
    "the console log of the seed, as tables",
    "The seed draws four requests A, B, C, D",
    "the seed attributes the slow step to that graph",
    "see /work/shared/seeds/000.txt",
    "the seed walkthrough reproduced on the shipped model",
    "in the shape of the nano-vllm walkthrough",
    "as seed 000 does in sections 2.7.2 and 2.7.3",
    "000 §2.4",
])
def test_background_references_are_caught(text):
    assert background_references(text)


@pytest.mark.parametrize("text", [
    "SamplingParams(temperature=0.6, max_tokens=256, seed=i)",
    "random.seed(0); torch.manual_seed(0)",
    "plus a per-request `seed` so that this notebook samples the same tokens",
    "the same seed always yields the same list",
    "a seeded request's noise depends only on its seed and its position",
    "poisson_arrivals(12, mean_gap_steps=8, seed=3, at_start=4)",
    "the value of the seed of the generator",
    "pass the seed to SamplingParams for a reproducible run",
    "Fresh questions of the other skills (a different seed; with so few",
    "preemption, section 4.",
    "the reference nano-vllm run (Qwen3-0.6B on a GPU)",
])
def test_sampling_seeds_are_not_references(text):
    assert not background_references(text)


def test_document_names_are_found_outside_web_addresses():
    text = "see DESIGN.md and notebooks/README.md, or https://github.com/GeeeekExplorer/nano-vllm/blob/main/README.md"
    assert [name for _, name in named_documents(text)] == ["DESIGN.md", "notebooks/README.md"]
    assert not _is_shipped("DESIGN.md", ROOT / "README.md")
    assert not _is_shipped("DEVELOPERS.md", ROOT / "README.md")
    assert _is_shipped("notebooks/README.md", ROOT / "README.md")
    assert _is_shipped("README.md", ROOT / "notebooks" / "README.md")


# The figures that replace the background articles ship with the package, load without torch, and agree
# with each other the way the notebooks use them.

def test_the_reference_run_loads_without_torch():
    import subprocess
    import sys
    code = ("import sys; from nanovllm_teach.reference import load_reference_run; run = load_reference_run(); "
            "assert 'torch' not in sys.modules, 'the reference loader imported torch'; print(run.model.name)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Qwen3-0.6B"


def test_the_reference_data_is_package_data():
    from nanovllm_teach.reference import REFERENCE_FILE
    pattern = REFERENCE_FILE.relative_to(ROOT / "nanovllm_teach").parent.as_posix() + "/*.json"
    # tomllib is Python 3.11+; the package supports 3.10, so read the one line.
    line = next(line for line in (ROOT / "pyproject.toml").read_text().splitlines()
                if line.startswith('"nanovllm_teach" = ['))
    assert f'"{pattern}"' in line


def test_the_reference_figures_agree_with_each_other():
    from nanovllm_teach.reference import load_reference_run
    run = load_reference_run()
    m, mem, block_size = run.model, run.memory_gib, run.settings["kvcache_block_size"]
    assert run.kv_block_bytes == 2 * m.num_hidden_layers * block_size * m.num_key_value_heads * m.head_dim * m.dtype_bytes
    available_gib = (mem["total"] * run.settings["gpu_memory_utilization"] - (mem["total"] - mem["free"])
                     - mem["peak"] + mem["current"])
    assert int(available_gib * 2**30 // run.kv_block_bytes) == run.num_kvcache_blocks
    assert run.cuda_graph_batch_sizes == [1, 2, 4, 8] + list(range(16, run.settings["max_num_seqs"] + 1, 16))
    assert 0.55e9 < m.num_parameters < 0.65e9  # "0.6B"
    prefill = run.step(1)
    assert prefill.num_tokens_stat == sum(r.prompt_len for r in run.requests) + prefill.batch_size
    assert sorted(r.finish_reason for r in run.requests) == ["eos", "length"]
    for r in run.requests:  # admitted in step 1, never preempted: the n-th token comes at step n
        assert r.finish_step == r.num_completion_tokens and run.step(r.finish_step).finished == [r.seq_id]
    assert run.num_steps["total"] == max(r.num_completion_tokens for r in run.requests)
    assert run.step(149).batch_size == 1 and run.step(148).batch_size == 2
    with pytest.raises(KeyError, match="not among the reference steps"):
        run.step(3)
