"""Notebooks are tests: each one, in each language, runs top to bottom in a real Jupyter kernel, and none is
stored with outputs (so diffs stay readable). The notebooks are built from one source each (``notebooks/src/``,
see ``nanovllm_teach.i18n.notebooks``; ``tests/test_i18n.py`` checks the build). The two languages of a
notebook run at the same time, each in its own kernel: a notebook's cells compute on one thread (the shipped
model is below the thread rule's size for two) or wait on a server or a subprocess, and the suite has two
cores (half the suite's time went to the notebooks run one after another). The Chinese notebook's outputs
from that same run are read for English prose left in them (``_english_prose``)."""

from __future__ import annotations

import asyncio
import bisect
import os
import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from nanovllm_teach.i18n.notebooks import english_runs

FOLDER = Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOKS = sorted(FOLDER.glob("en/*.ipynb")) + sorted(FOLDER.glob("zh/*.ipynb"))
IDS = [f"{p.parent.name}/{p.stem}" for p in NOTEBOOKS]
STEMS = sorted(p.stem for p in FOLDER.glob("en/*.ipynb"))
# The kernel gets the environment a learner's Jupyter gives it: conftest.py's TRITON_INTERPRET=1 is for the
# test process, and a notebook that needs Triton's interpreter must switch it on itself.
LEARNER_ENV = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
WARNING = re.compile(r"^\S.*:\d+: \w*Warning: ", re.M)  # warnings.showwarning's "file:line: Category: message"
# An exception's message ("ValueError: ...", also quoted inside a Chinese verdict: "IndexError：..."): the
# package's errors, like Python's and torch's, are in English.
EXCEPTION = re.compile(r"\b\w+(?:Error|Exception)[:：].*")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_is_stored_without_outputs(path):
    nb = nbformat.read(path, as_version=4)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            assert not cell.outputs and cell.execution_count is None, f"{path.name} cell {i} has stored output"


def _warnings(nb: nbformat.NotebookNode) -> list[str]:
    """What the warnings module printed in ``nb``'s outputs. A learner reads every warning as something gone
    wrong: a notebook shows none (progress bars also write to stderr, so only warnings count)."""
    return [f"cell {i}: {output.text.strip()[:300]}" for i, cell in enumerate(nb.cells) if cell.cell_type == "code"
            for output in cell.outputs
            if output.output_type == "stream" and output.name == "stderr" and WARNING.search(output.text)]


MIN_CUT_LINE = 24
# The package's source, line by line: a notebook shows the engine's code and docstrings as they are (code, in
# English in both languages), and a line it prints from them is no sentence of its own.
SOURCE_LINES = sorted({text for path in (FOLDER.parent / "nanovllm_teach").rglob("*.py")
                       for line in path.read_text(encoding="utf-8").splitlines() if line.strip()
                       for text in (line.strip(), re.sub(r'^[rbu]?("""|\'\'\')', "", line.strip())) if text})


def _is_source(line: str) -> bool:
    """``line``, or all of it but its first column (a module's name, then its docstring's first line cut),
    begins a line of the package's source."""
    shown = line.strip()
    return any(_begins_a_source_line(text) for text in (shown, *re.split(r"\s{2,}", shown, maxsplit=1)[1:]))


def _begins_a_source_line(text: str) -> bool:
    """A line of the source is ``text``, or begins with it where ``text`` is long enough to be that line cut
    (a short English line could begin many a docstring's line)."""
    at = bisect.bisect_left(SOURCE_LINES, text)
    return at < len(SOURCE_LINES) and (SOURCE_LINES[at] == text
                                       or len(text) >= MIN_CUT_LINE and SOURCE_LINES[at].startswith(text))


def _english_prose(nb: nbformat.NotebookNode) -> list[str]:
    """English sentences in what a Chinese notebook printed or showed as text: three English words in a row
    that are not code, a glossary term or a name (``english_runs``), in a line that is not the package's own
    source. Warnings are counted apart."""
    found = []
    for i, cell in enumerate(nb.cells):
        for output in cell.get("outputs", []):
            if output.output_type == "stream":
                text = "" if WARNING.search(output.text) else output.text
            else:
                text = output.get("data", {}).get("text/plain", "")
            found += [f"cell {i}: {run!r} in {line.strip()[:160]!r}" for line in text.splitlines()
                      if not _is_source(line) for run in english_runs(EXCEPTION.sub("", line))]
    return found


@pytest.mark.parametrize("stem", STEMS)
def test_notebook_runs_top_to_bottom_in_both_languages(stem):
    """Both languages run; the Chinese one prints no English prose (checked on this run's outputs: the
    notebooks are executed once, here)."""
    paths = [FOLDER / lang / f"{stem}.ipynb" for lang in ("en", "zh")]
    notebooks = [nbformat.read(path, as_version=4) for path in paths]
    clients = [NotebookClient(nb, timeout=600, kernel_name="python3",
                              resources={"metadata": {"path": str(path.parent)}}) for nb, path in zip(notebooks, paths)]

    async def run_both() -> list[BaseException | None]:
        return await asyncio.gather(*(client.async_execute(env=LEARNER_ENV) for client in clients),
                                    return_exceptions=True)

    # A failing cell raises CellExecutionError naming the cell and its traceback.
    results = asyncio.run(run_both())
    problems = [f"{path.parent.name}/{path.name}: {result}" for path, result in zip(paths, results)
                if isinstance(result, BaseException)]
    problems += [f"{path.parent.name}/{path.name} warned: {line}" for path, nb in zip(paths, notebooks)
                 for line in _warnings(nb)]
    problems += [f"zh/{stem}.ipynb printed English: {line}" for line in _english_prose(notebooks[1])]
    assert problems == [], "\n\n".join(problems)


def test_english_prose_in_a_chinese_notebook_s_output_is_caught():
    """What the check reads and what it lets pass: a notebook's own English line fails it; the engine's source
    shown as it is, an exception's message and a Chinese line with names and numbers pass."""
    nb = nbformat.v4.new_notebook()
    printed = ("the engine cut it into [64, 64, 22]\n"  # the notebook's own sentence, left in English
               "        return StepResult([(seq.seq_id, seq.completion_token_ids) for seq in finished], num_tokens,\n"
               "ValueError: tensor_parallel_size=3 must divide the model's num_attention_heads=4\n"
               "引擎把它切成 [64, 64, 22]，TTFT p50 12.5 ms\n")
    output = nbformat.v4.new_output("stream", name="stdout", text=printed)
    nb.cells = [nbformat.v4.new_code_cell("...", outputs=[output])]
    assert _english_prose(nb) == ["cell 0: 'the engine cut it into' in 'the engine cut it into [64, 64, 22]'"]


def test_the_readme_lists_every_notebook_in_both_languages():
    readme = (FOLDER / "README.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"\]\(((?:en|zh)/[\w.-]+\.ipynb)\)", readme))
    assert NOTEBOOKS and listed == {f"{p.parent.name}/{p.name}" for p in NOTEBOOKS}


def test_a_picture_is_a_cell_value(tmp_path):
    """A learner's own cell ``plot_timelines(trace)`` shows the picture, not ``<Figure size ...>``, in a real
    kernel where pyplot was never imported."""
    trace = Path(__file__).resolve().parents[1] / "traces" / "preemption.jsonl"
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(f"from nanovllm_teach.trace import load_trace\n"
                                          f"from nanovllm_teach.viz import plot_timelines\n"
                                          f"plot_timelines(load_trace({str(trace)!r}))")]
    NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    (result,) = [o for o in nb.cells[0].outputs if o.output_type == "execute_result"]
    assert "image/png" in result.data
