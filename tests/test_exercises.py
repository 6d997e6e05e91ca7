"""The classroom exercises and their autograder.

For every exercise: the reference solution passes, the untouched template fails saying what is not
implemented yet, and a solution with a planted classic bug fails with a message naming the step and the
event where its run parted from the reference (slot mapping off by one, preemption from the head instead
of the tail, a can_append that ignores the block boundary, an unchained block hash, a block size missing
the factor 2, a wrong quiz answer). Expected numbers are read from the reference traces, not hard-coded:
they depend on the workloads, never on the shipped model's weights.
"""

from __future__ import annotations

import re
import textwrap

import pytest
import torch

from nanovllm_teach.cli import main
from nanovllm_teach.engine import block_manager, model_runner
from nanovllm_teach.engine.block_manager import BlockManager
from nanovllm_teach.engine.scheduler import Scheduler
from nanovllm_teach.exercises import EXERCISES, check, grade, quiz_trace
from nanovllm_teach.exercises.grading import reference_trace
from nanovllm_teach.exercises.workloads import MEMORY_BOUND, SHARED_PREFIXES, TIGHT_CACHE

NAMES = list(EXERCISES)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Tiny models on a busy machine: one thread is faster than fighting over cores."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _solution(tmp_path, name: str, source: str):
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(source))
    return path


def _first(trace, name: str, **stats):
    return next(e for e in trace.events if e.event == name and all(e.stats.get(k) == v for k, v in stats.items()))


# ---- the three cases, for every exercise --------------------------------------------------------------

@pytest.mark.parametrize("name", NAMES)
def test_reference_solution_passes(name):
    result = grade(name, EXERCISES[name].solution_path)
    assert result.passed, result.message
    assert result.message.startswith(f"PASS {name}")


@pytest.mark.parametrize("name", NAMES)
def test_untouched_template_fails_saying_what_is_missing(name):
    ex = EXERCISES[name]
    result = grade(name, ex.template_path)
    assert not result.passed
    assert result.message.startswith(f"FAIL {name}: you have not implemented {ex.functions[0]} yet (hint: ")


def test_slot_mapping_off_by_one(tmp_path):
    result = grade("decode_slot", _solution(tmp_path, "slot", """
        def decode_slot(seq, block_size):
            return seq.block_table[-1] * block_size + seq.last_block_num_tokens  # forgot the - 1
        """))
    right = _first(reference_trace(TIGHT_CACHE), "PREPARE_DECODE_TENSORS")
    slots = right.stats["slot_mapping"]
    assert not result.passed and result.workload == "tight_cache"
    assert f"at event #{right.i} (PREPARE_DECODE_TENSORS, step {right.step})" in result.message
    assert (f"step {right.step}, PREPARE_DECODE_TENSORS.slot_mapping: you wrote {[s + 1 for s in slots]}, "
            f"the reference {slots}") in result.message


def test_preemption_from_the_head_instead_of_the_tail(tmp_path):
    source = EXERCISES["schedule_decode"].solution_path.read_text()
    buggy = source.replace("scheduler.preempt(scheduler.running.pop(), needed_by=seq)",
                           "scheduler.preempt(scheduler.running.popleft(), needed_by=seq)")
    assert buggy != source
    result = grade("schedule_decode", _solution(tmp_path, "head", buggy))
    first = _first(reference_trace(TIGHT_CACHE), "PREEMPT")
    assert not result.passed
    assert f"(BLOCK_FREE, step {first.step})" in result.message
    match = re.search(rf"step {first.step}: you preempted seq (\d+) \(freeing blocks \[[\d, ]+\]\), "
                      rf"the reference preempted seq {first.stats['seq_id']} ", result.message)
    assert match and int(match.group(1)) != first.stats["seq_id"], result.message


def test_can_append_that_ignores_the_block_boundary(tmp_path):
    result = grade("can_append", _solution(tmp_path, "boundary", """
        from nanovllm_teach.exercises.solutions.can_append import may_append

        def can_append(bm, seq):
            return bm.num_free_blocks > 0  # as if every token started a new block
        """))
    assert not result.passed
    match = re.search(r"at event #\d+ \(\w+, step (\d+)\):\n  step (\d+): you preempted seq \d+ .*, "
                      r"the reference did not", result.message)
    assert match and match.group(1) == match.group(2), result.message
    # It preempts before the reference ever had to: in the reference, nobody is preempted by then.
    step = int(match.group(1))
    assert all(e.step >= step for e in reference_trace(TIGHT_CACHE).events_named("PREEMPT"))


def test_unchained_hash_reuses_blocks_cached_under_another_prefix(tmp_path):
    result = grade("block_hash", _solution(tmp_path, "unchained", """
        from array import array
        import xxhash

        def compute_block_hash(token_ids, prefix_hash=-1):
            return xxhash.xxh64(array("q", token_ids).tobytes()).intdigest()  # prefix_hash forgotten
        """))
    # Seq 2 starts like seq 0; its second block also follows a different prefix in seq 1.
    right = _first(reference_trace(SHARED_PREFIXES), "PREFIX_CACHE_HIT", seq_id=2)
    assert not result.passed and result.workload == "shared_prefixes"
    assert f"(PREFIX_CACHE_HIT, step {right.step})" in result.message
    assert re.search(rf"step {right.step}: you reused the cached blocks \[{right.stats['block_ids'][0]}, \d+\] "
                     rf"for seq 2 \(8 tokens\), the reference reused the cached blocks "
                     rf"{re.escape(str(right.stats['block_ids']))} for seq 2", result.message), result.message


def test_block_size_missing_the_factor_two(tmp_path):
    result = grade("kv_cache_blocks", _solution(tmp_path, "factor", """
        from nanovllm_teach.exercises.solutions.kv_cache_blocks import kv_cache_blocks

        def kv_block_bytes(num_layers, block_size, num_kv_heads, head_dim, dtype_bytes):
            return num_layers * block_size * num_kv_heads * head_dim * dtype_bytes  # only the keys
        """))
    right = _first(reference_trace(MEMORY_BOUND), "KV_BUDGET_ESTIMATE").stats
    blocks, size = right["num_blocks"], right["block_bytes"]
    assert not result.passed
    assert "(KV_BUDGET_ESTIMATE, at start-up)" in result.message
    assert (f"at start-up: you sized the KV cache at {2 * blocks} blocks of {size // 2} bytes, the reference sized "
            f"the KV cache at {blocks} blocks of {size} bytes") in result.message


def test_wrong_quiz_answers_get_hints_not_answers():
    right = EXERCISES["trace_quiz"].questions
    answers = {q.key: q.answer(quiz_trace()) for q in right}
    answers["num_steps"] += 1
    answers["first_preempted_seq"] = None
    result = check("trace_quiz", answers)
    assert not result.passed
    lines = result.message.splitlines()
    assert lines[0] == f"FAIL trace_quiz: {len(right) - 2} of {len(right)} answers are right"
    assert lines[1] == (f"  num_steps: {answers['num_steps']} is too high. How many engine steps did the run take? "
                        "Hint: trace.steps has one row per completed step (one STEP_DONE event each).")
    assert lines[2].startswith("  first_preempted_seq: no answer yet.")
    assert check("trace_quiz", None).message.startswith("FAIL trace_quiz: answer_quiz must be a dict of answers")
    assert grade("trace_quiz", {}).message.startswith("FAIL trace_quiz: your solution defines no answer_quiz")


# ---- what the grader does around the student's code ---------------------------------------------------

def test_the_engine_is_restored_whatever_the_student_code_does(tmp_path):
    originals = (Scheduler._schedule_decode, BlockManager.can_append, BlockManager.may_append,
                 block_manager.compute_block_hash, model_runner.decode_slot, model_runner.kv_block_bytes,
                 model_runner.kv_cache_blocks, model_runner.read_memory)
    result = grade("schedule_decode", _solution(tmp_path, "crash", """
        def schedule_decode(scheduler):
            victim = scheduler.running[99]
        """))
    assert not result.passed
    assert re.search(r"in step \d+, your schedule_decode raised IndexError: deque index out of range "
                     r"\(crash\.py, line 3: victim = scheduler.running\[99\]\)", result.message), result.message
    for name in ("can_append", "block_hash", "kv_cache_blocks"):
        assert not grade(name, EXERCISES[name].template_path).passed
    assert (Scheduler._schedule_decode, BlockManager.can_append, BlockManager.may_append,
            block_manager.compute_block_hash, model_runner.decode_slot, model_runner.kv_block_bytes,
            model_runner.kv_cache_blocks, model_runner.read_memory) == originals


def test_results_the_engine_cannot_use_are_refused_with_a_sentence():
    from nanovllm_teach.exercises.solutions import kv_cache_blocks as kv_solution

    result = check("decode_slot", lambda seq, block_size: seq.block_table[-1] * block_size / 1)
    assert "your decode_slot returned float" in result.message and "(use //, not /)" in result.message

    def kv_cache_blocks(reading, utilization, block_bytes, cpu_cap_bytes):
        return reading.total  # bytes, not blocks
    result = check("kv_cache_blocks", kv_solution.kv_block_bytes, kv_cache_blocks)
    assert "while the engine was starting, your kv_cache_blocks returned" in result.message
    assert "the grader stops here instead of allocating it" in result.message


def test_check_takes_functions_in_order_or_by_name(capsys):
    from nanovllm_teach.exercises.solutions import can_append as ref

    result = check("can_append", ref.can_append, ref.may_append)
    assert result.passed and capsys.readouterr().out.startswith("PASS can_append")
    assert check("can_append", may_append=ref.may_append, can_append=ref.can_append).passed
    assert repr(result) == "<GradeResult can_append: PASS>"
    missing = check("can_append", ref.can_append)
    assert missing.message == "FAIL can_append: your solution defines no function named may_append: write it " \
                              "with exactly that name"
    with pytest.raises(TypeError, match="takes 2 function"):
        check("can_append", ref.can_append, ref.may_append, ref.may_append)
    with pytest.raises(KeyError, match="unknown exercise 'nope'"):
        check("nope", ref.can_append)


def test_a_file_that_does_not_load_fails_with_the_reason(tmp_path):
    result = grade("decode_slot", _solution(tmp_path, "broken", "def decode_slot(seq, block_size)\n    return 0\n"))
    assert result.message.startswith("FAIL decode_slot: your file could not be loaded: SyntaxError")


def test_cli_grade_and_exercises(tmp_path, capsys):
    assert main(["grade", "decode_slot", str(EXERCISES["decode_slot"].solution_path)]) == 0
    assert capsys.readouterr().out.startswith("PASS decode_slot")
    assert main(["grade", "decode_slot", str(EXERCISES["decode_slot"].template_path)]) == 1
    assert "you have not implemented decode_slot yet" in capsys.readouterr().out
    assert main(["grade", "nope", str(EXERCISES["decode_slot"].template_path)]) == 2
    assert "choose from: schedule_decode" in capsys.readouterr().err
    assert main(["grade", "decode_slot", str(tmp_path / "missing.py")]) == 2
    assert "no such solution file" in capsys.readouterr().err
    assert main(["exercises"]) == 0
    listing = capsys.readouterr().out
    assert all(f"{name} " in listing for name in NAMES) and "templates/decode_slot.py" in listing
