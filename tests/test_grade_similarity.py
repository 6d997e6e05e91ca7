"""The gradebook's similarity report, each student's output and log, and a gradebook written again.

``similarity.likeness`` on hand-made submissions of ``can_allocate`` (long enough to compare) and
``decode_slot`` (too short, except for a copy of the reference's text): a verbatim copy, a copy with its
names changed, two students sharing code and a hard link are flagged; an honest answer written another way
and a one-line answer are not. Then a class graded into CSV and HTML (the copy flagged, a student's print
quoted, the logs), a late folder graded into the same gradebook, and the quiz, whose first answer stays.
"""

from __future__ import annotations

import csv
import os
import re
from pathlib import Path

import pytest

from nanovllm_teach.cli import main
from nanovllm_teach.exercises import EXERCISES
from nanovllm_teach.exercises.classroom import Row
from nanovllm_teach.exercises.gradebook import carried_over, write_csv, write_html
from nanovllm_teach.exercises.similarity import MIN_TOKENS, likeness
from nanovllm_teach.i18n import speaking

HOSTILE = Path(__file__).parent / "data" / "hostile"
CAN_ALLOCATE = EXERCISES["can_allocate"]
DECODE_SLOT = EXERCISES["decode_slot"]

# can_allocate written another way than the reference: a while loop, counters, its own names.
OWN_WAY = '''from nanovllm_teach.engine.block_manager import NO_HASH, BlockManager, compute_block_hash
from nanovllm_teach.engine.sequence import Sequence


def can_allocate(bm: BlockManager, seq: Sequence) -> int:
    cached = 0
    reused = []
    if bm.enable_prefix_caching:
        prev_hash = NO_HASH
        full_blocks = (seq.num_tokens - 1) // bm.block_size
        i = 0
        while i < full_blocks:
            tokens = seq.block(i)
            prev_hash = compute_block_hash(tokens, prev_hash)
            found = bm.hash_to_block_id.get(prev_hash)
            if found is None:
                break
            if bm.blocks[found].token_ids != tokens:
                break
            reused.append(found)
            cached += 1
            i += 1
    fresh = seq.num_blocks - cached
    for b in reused:
        if bm.blocks[b].ref_count == 0:
            fresh += 1
    if fresh > bm.num_free_blocks:
        return -1
    return cached
'''
# Another student's copy of OWN_WAY, every name changed.
SHARED = re.sub(r"\b(cached|reused|fresh|prev_hash|found)\b", lambda m: m.group(1) + "_mine", OWN_WAY)
ONE_LINE = ("def decode_slot(seq, block_size):\n    return seq.block_table[(seq.num_tokens - 1) // block_size] * "
            "block_size + (seq.num_tokens - 1) % block_size\n")


def _renamed(source: str) -> str:
    """The reference with its comments and docstring gone and its local names changed."""
    source = re.sub(r'^""".*?"""\n', "", source, flags=re.S)
    source = re.sub(r"\s*#.*", "", source)
    return re.sub(r"\b(hits|needed|block_id|h)\b", lambda m: "my_" + m.group(1), source)


def _likeness(exercise, folder: Path, files: dict[str, str]):
    paths = []
    for name, text in files.items():
        (folder / f"{name}.py").write_text(text)
        paths.append(folder / f"{name}.py")
    return dict(zip(files, likeness(list(files), paths, exercise.solution_path, exercise.template_path)))


def test_copies_are_flagged_and_an_answer_written_its_own_way_is_not(tmp_path):
    reference = CAN_ALLOCATE.solution_path.read_text()
    found = _likeness(CAN_ALLOCATE, tmp_path, {"verbatim": reference, "renamed": _renamed(reference),
                                               "alice": OWN_WAY, "bob": SHARED})
    assert "copied (100% of it word for word)" in found["verbatim"].note
    renamed = found["renamed"]
    assert renamed.reference == pytest.approx(1.0) and "is the reference's, names aside" in renamed.note
    assert "word for word" not in renamed.note  # its text differs: the tokens alone match
    assert found["alice"].closest == "bob" and found["alice"].closest_share == pytest.approx(1.0)
    assert "in common with bob's" in found["alice"].note and "in common with alice's" in found["bob"].note
    assert found["alice"].reference < 0.5 and "reference" not in found["alice"].note
    with speaking("zh"):
        zh = _likeness(CAN_ALLOCATE, tmp_path, {"verbatim": reference, "alice": OWN_WAY, "bob": SHARED})
    assert "照抄了参考答案的原文" in zh["verbatim"].note and "的代码与 bob 的相同" in zh["alice"].note


def test_a_short_answer_is_not_compared_but_a_copy_of_the_reference_is_flagged(tmp_path):
    found = _likeness(DECODE_SLOT, tmp_path, {"short": ONE_LINE, "same": ONE_LINE,
                                              "copy": DECODE_SLOT.solution_path.read_text()})
    for name in ("short", "same"):  # two identical one-liners: the right answer, not a copy
        assert found[name].tokens < MIN_TOKENS and found[name].reference is None and found[name].flags == ()
        assert found[name].note == f"too short to compare ({found[name].tokens} tokens, fewer than {MIN_TOKENS})"
    assert found["copy"].reference is None and "copied (100% of it word for word)" in found["copy"].note


def test_a_hard_link_to_the_reference_is_flagged_as_its_copy(tmp_path):
    reference = tmp_path / "reference.py"
    reference.write_text(DECODE_SLOT.solution_path.read_text())
    os.link(reference, tmp_path / "linked.py")
    (found,) = likeness(["linked"], [tmp_path / "linked.py"], reference, DECODE_SLOT.template_path)
    assert found.flags == ("the reference solution's text, copied (100% of it word for word)",)


def _rows(path: Path) -> dict[str, dict[str, str]]:
    with path.open(encoding="utf-8-sig", newline="") as file:
        return {row["student"]: row for row in csv.DictReader(file)}


def test_a_class_gradebook_shows_copies_output_and_logs_and_a_late_folder_updates_its_row(tmp_path, capsys):
    room = tmp_path / "class"
    for name, text in {"Zhang Wei": DECODE_SLOT.solution_path.read_text(),
                       "bob": 'print("hello\\rPASS")\n' + (HOSTILE / "honest_right.py").read_text(),
                       "alice": (HOSTILE / "honest_wrong.py").read_text()}.items():
        (room / name).mkdir(parents=True)
        (room / name / "decode_slot.py").write_text(text)
    book, page = tmp_path / "book.csv", tmp_path / "book.html"
    assert main(["grade", "decode_slot", str(room), "--csv", str(book), "--html", str(page)]) == 0
    rows = _rows(book)
    assert list(rows) == ["alice", "bob", "Zhang Wei"]  # by name without case
    assert "reference solution's text, copied" in rows["Zhang Wei"]["similarity_flags"]
    assert rows["bob"]["verdict"] == "PASS" and rows["bob"]["similarity_flags"] == ""
    assert {r["attempts"] for r in rows.values()} == {"1"}
    text = page.read_text(encoding="utf-8")
    assert 'id="similarity"' in text and "hello\\rPASS" in text  # bob's print, quoted and made visible
    links = re.findall(r'href="(book_logs/\d{3}\.txt)"', text)
    assert len(links) == 3
    log = (tmp_path / links[1]).read_text(encoding="utf-8")
    assert log.startswith("bob\nPASS decode_slot") and "hello\\rPASS" in log and "\r" not in log
    # alice hands in again, late: her folder alone, into the same gradebook.
    (room / "alice" / "decode_slot.py").write_text((HOSTILE / "honest_right.py").read_text())
    assert main(["grade", "decode_slot", str(room / "alice"), "--csv", str(book)]) == 0
    again = _rows(book)
    assert list(again) == ["alice", "bob", "Zhang Wei"]
    assert (again["alice"]["verdict"], again["alice"]["attempts"]) == ("PASS", "2")
    assert again["bob"] == rows["bob"] and again["Zhang Wei"] == rows["Zhang Wei"]
    # A file that is no gradebook of this exercise is not written over.
    capsys.readouterr()
    (tmp_path / "notes.csv").write_text("name,mark\nbob,3\n")
    assert main(["grade", "decode_slot", str(room / "alice"), "--csv", str(tmp_path / "notes.csv")]) == 2
    said = capsys.readouterr().err.strip().split("\r")[-1]  # after the progress bar: one line, no traceback
    assert "is not a gradebook of decode_slot" in said and "Traceback" not in said and "\n" not in said.strip()
    assert (tmp_path / "notes.csv").read_text() == "name,mark\nbob,3\n"


def test_the_quiz_keeps_a_students_first_answer_and_counts_the_others(tmp_path):
    quiz, book = EXERCISES["trace_quiz"], tmp_path / "quiz.csv"
    write_csv([Row("bob", "trace_quiz", "FAIL", 0.0, 1.0, "3 of 8 answers are right"),
               Row("alice", "trace_quiz", "PASS", 1.0, 1.0, "")], book)
    merged = carried_over([Row("bob", "trace_quiz", "PASS", 1.0, 1.0, "")], quiz, book)
    assert [(r.student, r.verdict, r.attempts) for r in merged] == [("alice", "PASS", 1), ("bob", "FAIL", 2)]
    page = tmp_path / "quiz.html"
    write_html(merged, "trace_quiz", page)  # bob's log says the verdict that counts, from the gradebook's words
    assert (tmp_path / "quiz_logs" / "002.txt").read_text(encoding="utf-8").startswith(
        "bob\nFAIL trace_quiz: 3 of 8 answers are right")
    # Any other exercise takes the new answer.
    write_csv([Row("bob", "decode_slot", "FAIL", 0.0, 1.0, "slot")], book)
    merged = carried_over([Row("bob", "decode_slot", "PASS", 1.0, 1.0, "")], DECODE_SLOT, book)
    assert [(r.student, r.verdict, r.attempts) for r in merged] == [("bob", "PASS", 2)]


def test_a_gradebook_that_cannot_be_read_is_said_in_one_sentence(tmp_path):
    with pytest.raises(ValueError, match="cannot read the gradebook"):
        carried_over([Row("bob", "decode_slot", "PASS", 1.0, 1.0, "")], DECODE_SLOT, tmp_path)  # a folder
    (tmp_path / "old.csv").write_text("student,exercise\nbob,decode_slot\n")  # another version's columns
    with pytest.raises(ValueError, match="is not a gradebook of decode_slot"):
        carried_over([], DECODE_SLOT, tmp_path / "old.csv")
