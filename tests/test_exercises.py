"""The classroom exercises and their autograder.

For every exercise: the reference solution passes, the untouched template fails saying what is not
implemented yet, and a solution with a planted classic bug fails with a message naming the step and the
event where its run parted from the reference (slot mapping off by one, preemption from the head instead
of the tail, a can_append that ignores the block boundary, an unchained block hash, a block size missing
the factor 2, a wrong quiz answer). Expected numbers are read from the reference traces, not hard-coded:
they depend on the workloads, never on the shipped model's weights. Then what a student's code must not be
able to do to the grader (import the reference, replace its judge, patch the engine, exit, hang), the
hints, and the engine's exercise points.
"""

from __future__ import annotations

import pkgutil
import re
import textwrap
import tokenize
from pathlib import Path

import pytest
import torch

import nanovllm_teach
from nanovllm_teach.cli import main
from nanovllm_teach.exercises import EXERCISES, check, grade, load_solution, quiz_trace, reference_trace
from nanovllm_teach.exercises.kv_cache_blocks.workloads import MEMORY_BOUND
from nanovllm_teach.exercises.references import graded_workloads
from nanovllm_teach.runs import Workload
from nanovllm_teach.step_workloads import CACHED_UNDER_BUDGET, MAX_STEPS, SHARED_PREFIXES, TIGHT_CACHE

NAMES = list(EXERCISES)
# The reference functions' annotations name engine classes, and may_append returns a decision record.
FUTURE = "from __future__ import annotations\nfrom nanovllm_teach.engine.decisions import Allocated\n"


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


def _reference_function(exercise: str, function: str) -> str:
    """The source of one reference function, as a student who wrote the same code would have it."""
    source = EXERCISES[exercise].solution_path.read_text()
    start = source.index(f"def {function}(")
    end = source.find("\ndef ", start + 1)
    return source[start:] if end < 0 else source[start:end + 1]


def _first(trace, name: str, **stats):
    return next(e for e in trace.events if e.event == name and all(e.stats.get(k) == v for k, v in stats.items()))


# ---- the three cases, for every exercise --------------------------------------------------------------

@pytest.mark.parametrize("name", NAMES)
def test_reference_solution_passes(name):
    result = grade(name, EXERCISES[name].solution_path)
    assert result.passed, result.message
    assert result.message.startswith(f"PASS {name}")
    assert result.isolated is True  # every exercise: the learner's file in bubblewrap


@pytest.mark.parametrize("name", NAMES)
def test_untouched_template_fails_saying_what_is_missing(name):
    ex = EXERCISES[name]
    result = grade(name, ex.template_path)
    assert not result.passed
    assert result.message == (f"FAIL {name}: you have not implemented {ex.functions[0]} yet (stuck? hint({name!r}, "
                              f"1) in Python, or nanovllm-teach hint {name} 1 in a shell, gives a first hint; level 2 "
                              f"a stronger one)")


def test_slot_mapping_off_by_one(tmp_path):
    result = grade("decode_slot", _solution(tmp_path, "slot", """
        def decode_slot(seq, block_size):
            return seq.block_table[-1] * block_size + (seq.num_tokens - 1) % block_size + 1  # one too far
        """))
    right = _first(reference_trace(TIGHT_CACHE), "PREPARE_DECODE_TENSORS")
    slots = right.stats["slot_mapping"]
    assert not result.passed and result.workload == "tight_cache"
    assert f"in step {right.step} (PREPARE_DECODE_TENSORS)" in result.message
    assert (f"step {right.step}, PREPARE_DECODE_TENSORS.slot_mapping: you wrote {[s + 1 for s in slots]}, "
            f"the reference {slots}") in result.message
    # The exercise's own feedback (its folder's context): the sequence behind the first wrong slot, in values.
    assert re.search(rf"seq \d+ \(number 1 in the decode batch\) had \d+ tokens and the block table \[[\d, ]+\], "
                     rf"with blocks of \d+ tokens: you stored its newest token's K/V in slot {slots[0] + 1}, the "
                     rf"reference in slot {slots[0]}", result.message), result.message


def test_a_graph_too_large_says_the_size_of_the_batch(tmp_path):
    result = grade("graph_bucket", _solution(tmp_path, "largest", """
        def choose_graph_batch_size(is_prefill, batch_size, graph_sizes):
            return None if is_prefill or batch_size > graph_sizes[-1] else graph_sizes[-1]
        """))
    assert not result.passed and "(CUDAGRAPH_REPLAY)" in result.message, result.message
    assert re.search(r"that step's decode batch had \d+ sequences", result.message), result.message


def test_preemption_from_the_head_instead_of_the_tail(tmp_path):
    source = EXERCISES["schedule_decode"].solution_path.read_text()
    buggy = source.replace("scheduler.preempt(scheduler.running.pop(), needed_by=seq)",
                           "scheduler.preempt(scheduler.running.popleft(), needed_by=seq)")
    assert buggy != source
    result = grade("schedule_decode", _solution(tmp_path, "head", buggy))
    first = _first(reference_trace(TIGHT_CACHE), "PREEMPT")
    assert not result.passed
    assert f"in step {first.step} (BLOCK_FREE)" in result.message
    match = re.search(rf"step {first.step}: you preempted seq (\d+) \(freeing blocks \[[\d, ]+\]\), "
                      rf"the reference preempted seq {first.stats['seq_id']} ", result.message)
    assert match and int(match.group(1)) != first.stats["seq_id"], result.message


# A scheduler method returns its decisions now (it used to write them to a log and return the sequences):
# the reference written the old way must fail with the sentence saying what changed, not crash the engine.
OLD_CONTRACT = [
    ("schedule_prefill", "    return scheduled, allocations\n", "    return scheduled\n",
     "it returns two things, (the scheduled sequences, the decisions taken on the way)"),
    ("schedule_decode", "    return scheduled, decisions\n", "    return scheduled\n",
     "it returns two things, (the scheduled sequences, the decisions taken on the way)"),
    ("postprocess", "    return decisions\n", "    return [scheduler.accepted.get(e.seq_id) for e in batch.seqs]\n",
     "it returns the decisions it took, a list of records"),
]


@pytest.mark.parametrize("name, new, old, sentence", OLD_CONTRACT, ids=[case[0] for case in OLD_CONTRACT])
def test_a_function_written_to_the_old_contract_is_told_what_changed(tmp_path, name, new, old, sentence):
    source = EXERCISES[name].solution_path.read_text()
    assert new in source
    result = grade(name, _solution(tmp_path, "old", source.replace(new, old)))
    assert not result.passed and sentence in result.message, result.message
    assert "Traceback" not in result.message


def test_can_append_that_ignores_the_block_boundary(tmp_path):
    reference_may_append = FUTURE + _reference_function("can_append", "may_append")
    result = grade("can_append", _solution(tmp_path, "boundary", reference_may_append + """
def can_append(bm, seq):
    return bm.num_free_blocks > 0  # as if every token started a new block
"""))
    assert not result.passed
    match = re.search(r"in step (\d+) \(\w+\):\n  step (\d+): you preempted seq \d+ .*, "
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
    assert f"in step {right.step} (PREFIX_CACHE_HIT)" in result.message
    assert re.search(rf"step {right.step}: you reused the cached blocks \[{right.stats['block_ids'][0]}, \d+\] "
                     rf"for seq 2 \(8 tokens\), the reference reused the cached blocks "
                     rf"{re.escape(str(right.stats['block_ids']))} for seq 2", result.message), result.message


def test_key_lengths_that_forget_the_cached_prefix(tmp_path):
    source = EXERCISES["prepare_prefill"].solution_path.read_text()
    result = grade("prepare_prefill", _solution(tmp_path, "keys", source.replace("cu_seqlens_k[-1] + end)",
                                                                                  "cu_seqlens_k[-1] + new)")))
    first = next(e for e in reference_trace(CACHED_UNDER_BUDGET).events
                 if e.event == "PREPARE_PREFILL_TENSORS" and e.stats["max_seqlen_k"] > e.stats["max_seqlen_q"])
    assert not result.passed and result.workload == "cached_under_budget"
    assert f"in step {first.step} (PREPARE_PREFILL_TENSORS)" in result.message, result.message
    assert "PREPARE_PREFILL_TENSORS.max_seqlen_k: you wrote" in result.message


def test_block_size_missing_the_factor_two(tmp_path):
    reference_blocks = FUTURE + _reference_function("kv_cache_blocks", "kv_cache_blocks")
    result = grade("kv_cache_blocks", _solution(tmp_path, "factor", reference_blocks + """
def kv_block_bytes(num_layers, block_size, num_kv_heads, head_dim, dtype_bytes):
    return num_layers * block_size * num_kv_heads * head_dim * dtype_bytes  # only the keys
"""))
    right = _first(reference_trace(MEMORY_BOUND), "KV_BUDGET_ESTIMATE").stats
    blocks, size = right["num_blocks"], right["block_bytes"]
    assert not result.passed
    assert "the reference's at start-up (KV_BUDGET_ESTIMATE)" in result.message
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

def test_the_engine_in_this_process_is_untouched_whatever_the_student_code_does(tmp_path):
    all_points = [piece.point for ex in EXERCISES.values() for piece in getattr(ex, "pieces", ())]
    originals = {point: pkgutil.resolve_name(point) for point in all_points}
    result = grade("schedule_decode", _solution(tmp_path, "crash", """
        def schedule_decode(scheduler):
            victim = scheduler.running[99]
        """))
    assert not result.passed
    assert re.search(r"in step \d+, your schedule_decode raised IndexError: deque index out of range "
                     r"\(crash\.py, line 3: victim = scheduler.running\[99\]\)", result.message), result.message
    for name in ("can_append", "block_hash", "kv_cache_blocks"):
        assert not grade(name, EXERCISES[name].template_path).passed
    assert {point: pkgutil.resolve_name(point) for point in all_points} == originals


def test_results_the_engine_cannot_use_are_refused_with_a_sentence():
    result = check("decode_slot", lambda seq, block_size: seq.block_table[-1] * block_size / 1)
    assert "your decode_slot returned float" in result.message and "(use //, not /)" in result.message

    def kv_block_bytes(num_layers, block_size, num_kv_heads, head_dim, dtype_bytes):
        return 2 * num_layers * block_size * num_kv_heads * head_dim * dtype_bytes

    def kv_cache_blocks(reading, utilization, block_bytes, cpu_cap_bytes):
        return reading.total  # bytes, not blocks
    result = check("kv_cache_blocks", kv_block_bytes, kv_cache_blocks)
    assert "while the engine was starting, your kv_cache_blocks returned" in result.message
    assert "the grader stops here instead of allocating it" in result.message


def test_check_takes_functions_in_order_or_by_name(tmp_path, capsys):
    mine = load_solution(_solution(tmp_path, "mine", EXERCISES["can_append"].solution_path.read_text()))
    result = check("can_append", mine["can_append"], mine["may_append"])
    assert result.passed and capsys.readouterr().out.startswith("PASS can_append")
    assert check("can_append", may_append=mine["may_append"], can_append=mine["can_append"]).passed
    assert repr(result) == "<GradeResult can_append: PASS>"
    missing = check("can_append", mine["can_append"])
    assert missing.message == "FAIL can_append: your solution defines no function named may_append: write it " \
                              "with exactly that name"
    with pytest.raises(TypeError, match="takes 2 function"):
        check("can_append", mine["can_append"], mine["may_append"], mine["may_append"])
    with pytest.raises(KeyError, match="unknown exercise 'nope'"):
        check("nope", mine["can_append"])


def test_a_file_that_does_not_load_fails_with_the_reason(tmp_path):
    result = grade("decode_slot", _solution(tmp_path, "broken", "def decode_slot(seq, block_size)\n    return 0\n"))
    assert result.message.startswith("FAIL decode_slot: your file could not be loaded: SyntaxError")
    # The quiz's answers load the same way, and say the same.
    result = grade("trace_quiz", _solution(tmp_path, "broken_quiz", "answer_quiz = {\n"))
    assert result.message.startswith("FAIL trace_quiz: your file could not be loaded: SyntaxError")


def test_cli_grade_and_exercises(tmp_path, capsys):
    assert main(["grade", "decode_slot", str(EXERCISES["decode_slot"].solution_path)]) == 0
    assert capsys.readouterr().out.startswith("PASS decode_slot")
    assert main(["grade", "decode_slot", str(EXERCISES["decode_slot"].template_path)]) == 1
    assert "you have not implemented decode_slot yet" in capsys.readouterr().out
    assert main(["grade", "nope", str(EXERCISES["decode_slot"].template_path)]) == 2
    assert capsys.readouterr().err.startswith("nanovllm-teach: error: unknown exercise 'nope'; choose from: ")
    assert main(["grade", "decode_slot", str(tmp_path / "missing.py")]) == 2
    assert capsys.readouterr().err == f"nanovllm-teach: error: no such solution file: {tmp_path / 'missing.py'}\n"
    assert main(["grade", "decode_slot", str(tmp_path)]) == 2
    assert "no submissions in" in capsys.readouterr().err
    assert main(["hint", "decode_slot", "2"]) == 0
    assert capsys.readouterr().out.strip() == EXERCISES["decode_slot"].hint(2)
    assert main(["exercises"]) == 0
    listing = capsys.readouterr().out
    assert all(f"{name} " in listing for name in NAMES) and "decode_slot/template.py" in listing


# ---- what a student's code cannot do to the grader (each of these printed PASS or hung before) ---------

WRONG_SLOT = """
def decode_slot(seq, block_size):
    return 0
"""


def test_the_engines_own_function_is_unavailable_where_it_is_defined_too(tmp_path):
    # model_runner imports kv_block_bytes from utils.memory: a learner importing it from there gets no answer.
    result = grade("kv_cache_blocks", _solution(tmp_path, "borrowed", FUTURE + """
from nanovllm_teach.utils.memory import kv_block_bytes as engines

def kv_block_bytes(num_layers, block_size, num_kv_heads, head_dim, dtype_bytes):
    return engines(num_layers, block_size, num_kv_heads, head_dim, dtype_bytes)
""" + _reference_function("kv_cache_blocks", "kv_cache_blocks")))
    assert not result.passed and result.isolated is True
    assert "the engine's own kv_block_bytes is not available while grading" in result.message, result.message


@pytest.mark.parametrize("call", [
    "token_slot(seq.block_table, seq.num_tokens - 1, block_size)",
    "prefill_layout([seq.num_tokens - 1], [1], [seq.block_table], block_size)[3][0]",
])
def test_the_engines_other_copy_of_the_slot_formula_gives_no_answer(tmp_path, call):
    # The prefill's slots and the decode step's come from one formula (utils.kv_slots.token_slot): calling the
    # prefill's layout for the newest token, or the formula itself, passed decode_slot before.
    result = grade("decode_slot", _solution(tmp_path, "second_copy", f"""
from nanovllm_teach.engine.prefill_layout import prefill_layout
from nanovllm_teach.utils.kv_slots import token_slot

def decode_slot(seq, block_size):
    return {call}
"""))
    assert not result.passed and result.isolated is True
    assert "is not available while grading" in result.message, result.message


def test_the_package_has_one_copy_of_the_slot_formula():
    # models/step_cost.py (which may not import the engine) kept its own copy beside prefill_layout's: every
    # copy but one answers for a learner while decode_slot is graded. Docstrings and comments may show it.
    formula = re.compile(r"\*\s*block_size\s*\+[\w\s.()-]*%\s*block_size")
    package = Path(nanovllm_teach.__file__).parent
    copies = []
    for path in package.rglob("*.py"):
        # The references and templates are the exercise; the attention backends gather whole grids of slots as
        # tensors (a kernel's work, not an int a learner's function returns).
        if path.relative_to(package).parts[0] in ("exercises", "layers", "kernels"):
            continue
        with path.open("rb") as file:
            code = " ".join(t.string for t in tokenize.tokenize(file.readline)
                            if t.type not in (tokenize.STRING, tokenize.COMMENT, tokenize.ENCODING))
        if formula.search(code):
            copies.append(path.relative_to(package).as_posix())
    assert copies == ["utils/kv_slots.py"]


@pytest.mark.parametrize("call", [
    "kv_block_bytes_per_rank(shape, dtype_bytes, 1, block_size)",
    "ModelShape.kv_bytes_per_token(shape, dtype_bytes) * block_size",
])
def test_the_simulators_copy_of_the_block_size_gives_no_answer(tmp_path, call):
    result = grade("kv_cache_blocks", _solution(tmp_path, "simulated", FUTURE + f"""
from types import SimpleNamespace
from nanovllm_teach.sim.budget import kv_block_bytes_per_rank
from nanovllm_teach.sim.cost_model import ModelShape

def kv_block_bytes(num_layers, block_size, num_kv_heads, head_dim, dtype_bytes):
    shape = SimpleNamespace(num_layers=num_layers, num_kv_heads=num_kv_heads, head_dim=head_dim)
    return {call}
""" + _reference_function("kv_cache_blocks", "kv_cache_blocks")))
    assert not result.passed and result.isolated is True
    assert "is not available while grading" in result.message, result.message


def test_importing_the_reference_solutions_is_refused(tmp_path):
    direct = _solution(tmp_path, "direct", "from nanovllm_teach.exercises.decode_slot.solution import decode_slot\n")
    result = grade("decode_slot", direct)
    assert not result.passed and "uses the reference solutions" in result.message
    # Hidden from a reading of the file: absent where it runs, the grading copy of the package.
    hidden = _solution(tmp_path, "hidden", """
        import importlib

        def decode_slot(seq, block_size):
            module = importlib.import_module("nanovllm_teach.exercises.decode_slot" + "." + "solu" + "tion")
            return module.decode_slot(seq, block_size)
        """)
    result = grade("decode_slot", hidden)
    assert not result.passed and "ModuleNotFoundError" in result.message, result.message
    # In a notebook: the reference's own functions handed to check().
    from nanovllm_teach.exercises.decode_slot import solution as reference
    assert "uses the reference solutions" in check("decode_slot", reference.decode_slot).message
    # In a notebook, the import inside the function, at call time: it runs in a process forked from the notebook,
    # where the reference solutions are importable unless refused there (the grading child's refusal, where no
    # learner's code runs, let it pass).

    def decode_slot(seq, block_size):
        from nanovllm_teach.exercises.decode_slot.solution import decode_slot as borrowed
        return borrowed(seq, block_size)

    result = check("decode_slot", decode_slot)
    assert not result.passed and "(a reference solution) cannot be imported while grading" in result.message


def test_replacing_the_graders_judge_or_diff_cannot_pass(tmp_path):
    result = grade("decode_slot", _solution(tmp_path, "judge", textwrap.dedent("""
        import nanovllm_teach.exercises.engine_grading as grading
        import nanovllm_teach.exercises.verdict as verdict
        import nanovllm_teach.trace.diff as diff

        grading.judge = verdict.judge = lambda *args, **kwargs: None
        diff.diff_traces = verdict.diff_traces = lambda *args, **kwargs: None
        """) + WRONG_SLOT))
    assert not result.passed and "PREPARE_DECODE_TENSORS.slot_mapping" in result.message


def test_patching_the_engine_at_import_time_cannot_pass(tmp_path):
    # Before, the reference was recorded after the student's file ran: it used the student's function too.
    result = grade("decode_slot", _solution(tmp_path, "patch", WRONG_SLOT + """
import nanovllm_teach.engine.model_runner as model_runner
model_runner.decode_slot = decode_slot
"""))
    assert not result.passed and "PREPARE_DECODE_TENSORS.slot_mapping" in result.message


@pytest.mark.parametrize("body, raised", [
    ("raise SystemExit(0)", "SystemExit: 0"),
    ("raise KeyboardInterrupt", "KeyboardInterrupt"),
    ("raise BaseException('mine')", "BaseException: mine"),
])
def test_system_exit_and_other_base_exceptions_are_verdicts(tmp_path, body, raised):
    result = grade("decode_slot", _solution(tmp_path, "base", f"def decode_slot(seq, block_size):\n    {body}\n"))
    assert not result.passed
    assert re.search(rf"in step \d+, your decode_slot raised {raised}", result.message), result.message


def test_a_file_that_exits_gets_a_verdict_and_exit_status_1(tmp_path, capsys):
    top_level = _solution(tmp_path, "exits", "import sys\nsys.exit(0)\n")
    assert main(["grade", "decode_slot", str(top_level)]) == 1
    assert capsys.readouterr().out == "FAIL decode_slot: your file could not be loaded: SystemExit: 0\n"
    hard = _solution(tmp_path, "hard", "import os\n\ndef decode_slot(seq, block_size):\n    os._exit(0)\n")
    result = grade("decode_slot", hard)
    assert not result.passed and "the grading process ended while your decode_slot ran (exit code 0)" in result.message
    top_level_hard = _solution(tmp_path, "top_hard", "import os\nos._exit(3)\n")
    assert grade("decode_slot", top_level_hard).message == (
        "FAIL decode_slot: your file ended the grading process while it was loading (exit code 3): does it call "
        "os._exit?")


def test_code_that_never_returns_is_stopped_with_a_verdict(tmp_path):
    loop = _solution(tmp_path, "loop", "def decode_slot(seq, block_size):\n    while True:\n        pass\n")
    result = grade("decode_slot", loop, time_limit=1)
    assert not result.passed
    assert re.search(r"in step \d+, your decode_slot did not return within 1 s: the grader stopped it",
                     result.message), result.message
    top_level = _solution(tmp_path, "forever", "while True:\n    pass\n")
    result = grade("decode_slot", top_level, time_limit=1)
    assert result.message == ("FAIL decode_slot: your file did not finish loading within 1 s (does it run "
                              "something forever at the top level?): the grader stopped it")
    result = check("trace_quiz", lambda trace: [0 for _ in iter(int, 1)], time_limit=1)
    assert result.message == "FAIL trace_quiz: your answer_quiz did not return within 1 s: the grader stopped it"


def test_a_scheduler_that_never_finishes_is_stopped_after_max_steps(tmp_path):
    # Preempting everyone every step: the run never ends.
    result = grade("schedule_decode", _solution(tmp_path, "forever", """
        def schedule_decode(scheduler):
            seq = scheduler.running.popleft()
            scheduler.preempt(seq, needed_by=seq)
            first = scheduler.running.popleft() if scheduler.running else None
            if first is None:
                return []
            first.num_scheduled_tokens = 1
            scheduler.running.appendleft(first)
            return [first]
        """))
    assert not result.passed
    steps = [w for w in graded_workloads().values() if isinstance(w, Workload)]
    assert all(4 * len(reference_trace(w).steps) < MAX_STEPS for w in steps)


# ---- hints, templates and the engine's exercise points ------------------------------------------------

@pytest.mark.parametrize("name", NAMES)
def test_hints_come_in_two_levels_and_templates_hold_no_reference_code(name):
    ex = EXERCISES[name]
    first, second = ex.hint(1), ex.hint(2)
    assert first and second and first != second
    with pytest.raises(ValueError, match=f"{name} has hints 1 to 2, not 3"):
        ex.hint(3)
    template = ex.template_path.read_text()
    assert "raise NotImplementedError\n" in template and "NotImplementedError(" not in template
    assert f'hint("{name}", 1)' in template
    for line in _reference_code_lines(ex.solution_path.read_text()):
        assert line not in template, f"the template of {name} gives away: {line}"


def _reference_code_lines(source: str) -> list[str]:
    """The lines of the reference functions' bodies that are code, not the contract: the event a function
    must emit is shown in its template on purpose."""
    import ast

    lines = source.splitlines()
    code: list[str] = []
    for fn in [node for node in ast.walk(ast.parse(source)) if isinstance(node, ast.FunctionDef)]:
        for stmt in ast.walk(fn):
            is_emit = (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
                       and getattr(stmt.value.func, "attr", None) == "record")
            is_guard = isinstance(stmt, ast.If) and "rec.enabled" in ast.unparse(stmt.test)
            if not isinstance(stmt, ast.stmt) or stmt is fn or is_emit or is_guard:
                continue
            compound = isinstance(stmt, (ast.If, ast.While, ast.For, ast.With, ast.Try))
            end = stmt.lineno if compound else stmt.end_lineno  # a block's own statements come one by one
            code += [line.strip() for line in lines[stmt.lineno - 1:end]
                     if len(line.strip()) > 12 and not line.strip().startswith("#")]
    return code


def test_grader_feedback_never_shows_the_reference_code(tmp_path):
    wrong = check("kv_cache_blocks", lambda *args: 1000, lambda reading, utilization, block_bytes, cap: 1)
    code = EXERCISES["kv_cache_blocks"].solution_path.read_text()
    assert not wrong.passed and "budget" not in wrong.message and "peak" not in wrong.message
    assert "reading.total * utilization" in code


@pytest.mark.parametrize("name", [n for n in NAMES if n != "trace_quiz"])
def test_each_exercise_point_exists_and_takes_the_templates_arguments(name):
    import inspect

    template = load_solution(EXERCISES[name].template_path)
    for piece in EXERCISES[name].pieces:
        point = piece.point
        engine = list(inspect.signature(pkgutil.resolve_name(point)).parameters)
        student = list(inspect.signature(template[piece.function]).parameters)
        is_method = "." in point.partition(":")[2]
        assert (engine[1:] if is_method else engine) == (student[1:] if is_method else student), point
