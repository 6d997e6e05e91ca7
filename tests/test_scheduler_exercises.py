"""The scheduler's exercises: the reference solutions pass, and the usual mistakes fail where they should."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from nanovllm_teach.exercises import EXERCISES, grade

EXERCISES_DIR = Path(__file__).resolve().parents[1] / "nanovllm_teach" / "exercises"


def _variant(tmp_path: Path, name: str, old: str, new: str) -> Path:
    """The reference solution of ``name`` with one line changed: a student's typical mistake."""
    source = (EXERCISES_DIR / name / "solution.py").read_text()
    assert old in source, old
    path = tmp_path / f"my_{name}.py"
    path.write_text(source.replace(old, new))
    return path


@pytest.mark.parametrize("name", ["schedule_prefill", "postprocess"])
def test_the_reference_solution_passes_and_the_template_is_not_done(name, tmp_path):
    assert grade(name, EXERCISES[name].solution_path).passed
    result = grade(name, EXERCISES[name].template_path)
    assert not result.passed and "not implemented" in result.message


@pytest.mark.parametrize("old, new, workload", [
    # The cached prefix computed again: more tokens than the budget allows, and K/V written twice.
    ("num_tokens = seq.num_tokens - num_cached_blocks * bm.block_size", "num_tokens = seq.num_tokens",
     "cached_under_budget"),
    # Any sequence chunked, not only the first of the step.
    ("if num_tokens > remaining and scheduled:", "if num_tokens > remaining and False:", "small_budget"),
])
def test_schedule_prefill_mistakes_fail_on_the_workload_that_shows_them(old, new, workload, tmp_path):
    result = grade("schedule_prefill", _variant(tmp_path, "schedule_prefill", old, new))
    assert not result.passed and result.workload == workload, result.message


@pytest.mark.parametrize("old, new, workload", [
    ("if not seq.ignore_eos and token_id == scheduler.eos:", "if token_id == scheduler.eos:", "finish_reasons"),
    ("elif seq.num_tokens >= scheduler.max_model_len:", "elif False:", "model_len"),
    ("if seq.num_cached_tokens < seq.num_tokens:", "if False:", "model_len"),  # a chunk's token appended
])
def test_postprocess_mistakes_fail_on_the_workload_that_shows_them(old, new, workload, tmp_path):
    result = grade("postprocess", _variant(tmp_path, "postprocess", old, new))
    assert not result.passed and result.workload == workload, result.message


def test_postprocess_must_return_only_decisions_about_its_batch(tmp_path):
    """A finish made up for a sequence that waits (not in the step's batch) is refused before the engine
    takes it."""
    path = _variant(tmp_path, "postprocess", "    return decisions\n",
                    "    waiting = [i for i in scheduler.accepted if i not in batch.seq_ids][:1]\n"
                    "    return decisions + [Finished(i, 'eos', 0) for i in waiting]\n")
    path.write_text(path.read_text().replace("import Decision\n", "import Decision, Finished\n"))
    result = grade("postprocess", path)
    assert not result.passed and re.search(r"returned a decision about seq \d+, which is not in the batch",
                                           result.message), result.message
    source = textwrap.dedent(EXERCISES["postprocess"].template_path.read_text())
    assert "scheduler.eos" in source and "ignore_eos" in source  # the template states the rules it grades
