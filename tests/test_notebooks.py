"""Notebooks are tests: each one, in each language, runs top to bottom in a real Jupyter kernel, and none is
stored with outputs (so diffs stay readable). The notebooks are built from one source each (``notebooks/src/``,
see ``nanovllm_teach.i18n.notebooks``; ``tests/test_i18n.py`` checks the build). The two languages of a
notebook run at the same time, each in its own kernel: a notebook's cells compute on one thread (the shipped
model is below the thread rule's size for two) or wait on a server or a subprocess, and the suite has two
cores (half the suite's time went to the notebooks run one after another)."""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

FOLDER = Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOKS = sorted(FOLDER.glob("en/*.ipynb")) + sorted(FOLDER.glob("zh/*.ipynb"))
IDS = [f"{p.parent.name}/{p.stem}" for p in NOTEBOOKS]
STEMS = sorted(p.stem for p in FOLDER.glob("en/*.ipynb"))
# The kernel gets the environment a learner's Jupyter gives it: conftest.py's TRITON_INTERPRET=1 is for the
# test process, and a notebook that needs Triton's interpreter must switch it on itself.
LEARNER_ENV = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
WARNING = re.compile(r"^\S.*:\d+: \w*Warning: ", re.M)  # warnings.showwarning's "file:line: Category: message"


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


@pytest.mark.parametrize("stem", STEMS)
def test_notebook_runs_top_to_bottom_in_both_languages(stem):
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
    assert problems == [], "\n\n".join(problems)


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
