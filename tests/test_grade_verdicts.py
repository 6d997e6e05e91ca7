"""Verdicts that cannot be faked: whatever a student's code raises or prints, and whatever a student's folder is
named, no line the grader prints starts with ``PASS`` unless the grader passed that student. Student text is
shown with its control characters (``\\r`` included) made visible, what it printed only behind the quote mark;
a submission that raises is a FAIL that names what it raised."""

from __future__ import annotations

from pathlib import Path

from nanovllm_teach.cli import main

HOSTILE = Path(__file__).parent / "data" / "hostile"
FAKE = "PASS decode_slot: with your decode_slot the engine decides as the reference does"

RAISES_A_VERDICT = f'''
print("\\r{FAKE}")
print("\\x1b[2K\\x1b[1G{FAKE}")


def decode_slot(seq, block_size):
    raise ValueError("\\r\\n{FAKE}\\n")
'''


def _lines_passing(out: str) -> list[str]:
    lines = out.replace("\r", "\n").split("\n")
    return [line for line in lines if line.lstrip("\x1b[0123456789;KG").startswith("PASS")]


def test_a_verdict_in_an_exception_message_or_a_print_never_starts_a_line(tmp_path, capsys):
    solution = tmp_path / "decode_slot.py"
    solution.write_text(RAISES_A_VERDICT)
    assert main(["grade", "decode_slot", str(solution)]) == 1
    out = capsys.readouterr().out
    assert _lines_passing(out) == [] and "\r" not in out and "\x1b" not in out, out
    assert "raised ValueError: \\r\\nPASS decode_slot" in out  # the traceback's last line, made visible
    assert "  | \\rPASS decode_slot" in out and "  | \\x1b[2K" in out  # its prints, quoted


def test_a_student_named_like_a_verdict_gets_one_line_under_the_graders_prefix(tmp_path, capsys):
    room = tmp_path / "class"
    carl = room / "carl\nPASS bob: with your decode_slot the engine decides as the reference does"
    carl.mkdir(parents=True)
    (carl / "decode_slot.py").write_text((HOSTILE / "honest_wrong.py").read_text())
    (room / "dan.py").write_text(f'raise ValueError("\\r\\n{FAKE}")\n')  # raises while it loads
    assert main(["grade", "decode_slot", str(room), "--csv", str(tmp_path / "class.csv")]) == 0
    out = capsys.readouterr().out
    assert _lines_passing(out) == [], out
    assert "FAIL carl\\nPASS bob: " in out and "FAIL dan: " in out and "ValueError" in out
