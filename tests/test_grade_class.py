"""Grading a class with ``nanovllm-teach grade EXERCISE PATH...``: one row per student whatever they handed
in, the same rows every run, the gradebook as CSV, an HTML page (in headless Chromium) and Gradescope's
results, the scheduling policy's leaderboard, and Gradescope's autograder bundle run in a throwaway folder
laid out as Gradescope documents it."""

from __future__ import annotations

import csv
import fnmatch
import json
import os
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from test_browser import CHROMIUM, _open, _screenshot, browser  # noqa: F401 (the fixture)

from nanovllm_teach.cli import main
from nanovllm_teach.exercises import isolation

HOSTILE = Path(__file__).parent / "data" / "hostile"
REPO = Path(__file__).resolve().parents[1]
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="no system Chromium (Debian: apt-get install chromium)")
# A class is graded only in bubblewrap, each submission as a user id of its own: root, as CI runs (where a
# missing one fails these tests: conftest.uid_drop_ready).
needs_bwrap = pytest.mark.usefixtures("uid_drop_ready")


def _class_folder(root: Path) -> Path:
    room = root / "class"
    (room / "Zhang 伟").mkdir(parents=True)
    (room / "Zhang 伟" / "decode_slot.py").write_text((HOSTILE / "honest_right.py").read_text())
    (room / "bob").mkdir()
    (room / "bob" / "mine.py").write_text((HOSTILE / "honest_wrong.py").read_text())
    (room / "empty folder").mkdir()
    (room / "binary.py").write_bytes(bytes(range(256)) * 4)
    (room / "huge.py").write_text("# " + "x" * (300 << 10) + "\n")
    (room / "syntax.py").write_text("def decode_slot(seq, block_size)\n    return 0\n")
    (room / "no function.py").write_text("x = 1\n")
    (room / "=HYPERLINK(1).py").write_text("x = 1\n")
    (room / "outside.py").symlink_to("/etc/passwd")
    (room / "notes.txt").write_text("my answers are in bob's folder\n")
    return room


EXPECTED = {
    "=HYPERLINK(1)": ("FAIL", "defines no function named decode_slot"),
    "Zhang 伟": ("PASS", "decides as the reference does"),
    "binary": ("ERROR", "not a Python text file"),
    "bob": ("FAIL", "slot_mapping"),
    "empty folder": ("ERROR", "no solution"),
    "huge": ("ERROR", "more than a solution can have"),
    "no function": ("FAIL", "defines no function named decode_slot"),
    "notes.txt": ("ERROR", "not a .py file"),
    "outside": ("ERROR", "a link pointing outside"),
    "syntax": ("FAIL", "SyntaxError"),
}


@pytest.fixture(scope="module")
def gradebook(tmp_path_factory, uid_drop_ready):
    root = tmp_path_factory.mktemp("grading")
    room = _class_folder(root)
    outputs = []
    for jobs in ("2", "1"):
        out = root / f"jobs{jobs}"
        out.mkdir()
        assert main(["grade", "decode_slot", str(room), "--jobs", jobs, "--csv",
                     str(out / "class.csv"), "--html", str(out / "class.html")]) == 0
        outputs.append(out)
    return outputs


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8-sig", newline="") as file:
        return list(csv.DictReader(file))


def test_every_student_gets_one_row_with_a_clear_reason_in_the_same_order_every_run(gradebook):
    first, second = (_rows(out / "class.csv") for out in gradebook)
    # By name without case ("alice" before "Zhang Wei"), the exact name breaking ties.
    assert [r["student"].lstrip("'") for r in first] == sorted(EXPECTED, key=lambda s: (s.casefold(), s))
    for row in first:
        verdict, reason = EXPECTED[row["student"].lstrip("'")]
        assert (row["verdict"], row["exercise"]) == (verdict, "decode_slot") and reason in row["reason"], row
        assert row["score"] == ("1" if verdict == "PASS" else "0") and float(row["seconds"]) >= 0
    assert [(r["student"], r["verdict"], r["reason"]) for r in first] == [
        (r["student"], r["verdict"], r["reason"]) for r in second]


def test_the_csv_opens_in_a_spreadsheet(gradebook):
    data = (gradebook[0] / "class.csv").read_bytes()
    assert data.startswith("\ufeff".encode()) and "Zhang 伟".encode() in data  # UTF-8, marked as such
    header = data.decode("utf-8-sig").splitlines()[0]
    assert header == ("student,exercise,verdict,score,seconds,attempts,reason,tokens,like_reference,most_alike,"
                      "like_them,similarity_flags")
    assert not any(r["student"].startswith("=") for r in _rows(gradebook[0] / "class.csv"))  # no formula


def test_a_class_without_bubblewrap_is_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(isolation, "available", lambda: False)
    for name in ("a.py", "b.py"):
        (tmp_path / name).write_text("x = 1\n")
    assert main(["grade", "decode_slot", str(tmp_path)]) == 2
    assert "it needs bubblewrap" in capsys.readouterr().err
    assert main(["grade", "schedule_decode", str(tmp_path)]) == 2
    assert "--check-isolation" in capsys.readouterr().err
    # One learner's self-check still runs, and its verdict says it was not in a sandbox.
    assert main(["grade", "decode_slot", str(HOSTILE / "honest_right.py")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("PASS decode_slot") and "not in a sandbox" in out


@needs_bwrap
def test_gradescope_results_for_one_submission(tmp_path, capsys):
    results = tmp_path / "results.json"
    assert main(["grade", "decode_slot", str(HOSTILE / "misbehave_fake_pass.py"), "--gradescope", str(results)]) == 1
    capsys.readouterr()
    data = json.loads(results.read_text(encoding="utf-8"))
    assert set(data) == {"score", "execution_time", "output", "tests"} and data["score"] == 0
    assert isinstance(data["execution_time"], float) and "FAIL decode_slot" in data["output"]
    (test,) = data["tests"]
    assert test["name"] == "decode_slot" and test["status"] == "failed"
    assert (test["score"], test["max_score"]) == (0, 1) and "\x1b" not in test["output"]


def _fake(folder: Path, name: str, log: Path) -> None:
    path = folder / name
    path.write_text(f'#!/usr/bin/env bash\necho "{name} $*" >> "{log}"\n')
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


@needs_bwrap
def test_the_gradescope_bundle_runs_as_gradescope_runs_it(tmp_path):
    bundle = tmp_path / "autograder.zip"
    assert main(["grade", "decode_slot", "--gradescope-bundle", str(bundle)]) == 0
    root = tmp_path / "autograder"
    with zipfile.ZipFile(bundle) as zip_file:
        names = zip_file.namelist()
        assert {"setup.sh", "run_autograder", "nanovllm-teach/pyproject.toml",
                "nanovllm-teach/nanovllm_teach/exercises/worker.py"} <= set(names)
        zip_file.extractall(root / "source")
    for script in ("setup.sh", "run_autograder"):
        (root / "source" / script).chmod(0o755)
    # setup.sh, with apt-get and the Python it installs into replaced by recorders (no network here).
    fakes, log = tmp_path / "bin", tmp_path / "calls.log"
    fakes.mkdir()
    _fake(fakes, "apt-get", log)
    _fake(fakes, "python3", log)
    (root / "venv" / "bin").mkdir(parents=True)
    _fake(root / "venv" / "bin", "python", log)
    env = {**os.environ, "AUTOGRADER_ROOT": str(root), "PATH": f"{fakes}:{os.environ['PATH']}"}
    subprocess.run(["bash", str(root / "source" / "setup.sh")], env=env, check=True, timeout=60)
    calls = log.read_text()
    assert "apt-get install -y -q bubblewrap" in calls and f"python3 -m venv {root}/venv" in calls
    assert f"install -q {root}/source/nanovllm-teach" in calls
    # run_autograder on one student's submission, with this checkout's nanovllm-teach.
    (root / "submission").mkdir()
    (root / "submission" / "decode_slot.py").write_text((HOSTILE / "honest_right.py").read_text())
    command = tmp_path / "nanovllm-teach"
    command.write_text(f'#!/usr/bin/env bash\nexec "{sys.executable}" -m nanovllm_teach.cli "$@"\n')
    command.chmod(0o755)
    env = {**os.environ, "AUTOGRADER_ROOT": str(root), "NANOVLLM_TEACH": str(command),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    subprocess.run(["bash", str(root / "source" / "run_autograder")], env=env, timeout=300, capture_output=True)
    results = json.loads((root / "results" / "results.json").read_text())
    assert results["score"] == 1 and results["tests"][0]["status"] == "passed", results


def test_a_gradescope_bundle_from_an_installed_package_is_refused_in_one_line(tmp_path, monkeypatch, capsys):
    from nanovllm_teach.exercises import gradescope

    monkeypatch.setattr(gradescope, "REPOSITORY", tmp_path / "site-packages")  # pip install ., no checkout
    bundle = tmp_path / "autograder.zip"
    assert main(["grade", "decode_slot", "--gradescope-bundle", str(bundle)]) == 2
    error = capsys.readouterr().err.strip()
    assert "\n" not in error and "from a source checkout of nanovllm-teach" in error and not bundle.exists()


def test_the_gradescope_scripts_are_shell_files_installed_with_the_package():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    from nanovllm_teach.exercises.gradescope import SCRIPTS

    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    patterns = setuptools["package-data"]["nanovllm_teach"]
    for name in ("setup.sh", "run_autograder"):
        relative = (SCRIPTS / name).relative_to(REPO / "nanovllm_teach").as_posix()
        assert any(fnmatch.fnmatch(relative, pattern) for pattern in patterns), relative  # in `pip install .`
        checked = subprocess.run(["bash", "-n", str(SCRIPTS / name)], capture_output=True, text=True, timeout=60)
        assert checked.returncode == 0, checked.stderr


POLICIES = {
    "fcfs": "def choose_next(waiting):\n    return 0\n",
    "shortest_with_aging": (REPO / "nanovllm_teach" / "exercises" / "scheduling_policy" / "solution.py").read_text(),
    "shortest_first": "def choose_next(waiting):\n    return min(range(len(waiting)), key=lambda i: waiting[i].num_prompt_tokens)\n",
}


@needs_bwrap
@needs_chromium
def test_the_scheduling_policy_gets_a_class_leaderboard(tmp_path, browser):  # noqa: F811
    room = tmp_path / "policies"
    room.mkdir()
    for name, code in POLICIES.items():
        (room / f"{name}.py").write_text(code.replace("from nanovllm_teach.engine.sequence import Sequence\n", ""))
    book, page_path = tmp_path / "policy.csv", tmp_path / "policy.html"
    assert main(["grade", "scheduling_policy", str(room), "--jobs", "2", "--csv", str(book),
                 "--html", str(page_path)]) == 0
    rows = {r["student"]: r for r in _rows(book)}
    assert [rows[name]["verdict"] for name in ("fcfs", "shortest_first", "shortest_with_aging")] == [
        "FAIL", "FAIL", "PASS"]  # FCFS is no faster than itself; shortest first starves the long prompts
    board = sorted(rows.values(), key=lambda r: int(r["rank"]))
    assert [r["rank"] for r in board] == ["1", "2", "3"] and board[-1]["student"] == "fcfs"
    assert float(rows["fcfs"]["latency"]) == pytest.approx(1.0)
    assert [float(r["latency"]) for r in board] == sorted(float(r["latency"]) for r in board)
    page, errors = _open(browser, page_path.as_uri(), 1200)
    shown = page.locator("#leaderboard tbody tr")
    assert shown.count() == 3 and shown.nth(0).locator("td").nth(1).inner_text() == board[0]["student"]
    assert page.locator("#gradebook tbody tr").count() == 3 and errors == []
    assert _screenshot(page, tmp_path, "gradebook_policy").stat().st_size > 10_000


@needs_chromium
def test_the_gradebook_page_shows_every_student_escaped(gradebook, browser, tmp_path):  # noqa: F811
    page, errors = _open(browser, (gradebook[0] / "class.html").as_uri(), 1200)
    rows = page.locator("#gradebook tbody tr")
    assert rows.count() == len(EXPECTED) and errors == []
    assert page.locator("#summary").inner_text() == "10 graded: 1 PASS, 4 FAIL, 5 ERROR"
    students = [rows.nth(k).locator("td").first.inner_text() for k in range(rows.count())]
    assert "Zhang 伟" in students and "=HYPERLINK(1)" in students
    pass_cell = page.locator("#gradebook td.verdict.PASS")
    assert pass_cell.count() == 1 and pass_cell.evaluate("e => getComputedStyle(e).color") == "rgb(26, 127, 55)"
    assert _screenshot(page, tmp_path, "gradebook").stat().st_size > 10_000


@needs_bwrap
def test_a_class_of_the_trace_quiz_is_graded_in_bubblewrap_without_the_flag(tmp_path):
    from nanovllm_teach.exercises import EXERCISES

    room = tmp_path / "quiz"
    room.mkdir()
    (room / "right.py").write_text(EXERCISES["trace_quiz"].solution_path.read_text())
    (room / "wrong.py").write_text("answer_quiz = {'num_steps': 1000}\n")
    # Outside the sandbox this would run the reference's answers; inside, the repository is not there.
    (room / "peek.py").write_text(f"def answer_quiz(trace):\n    names = {{}}\n    exec(open("
                                  f"{str(EXERCISES['trace_quiz'].folder)!r} + '/solu' + 'tion.py').read(), names)\n"
                                  f"    return names['answer_quiz'](trace)\n")
    assert main(["grade", "trace_quiz", str(room), "--csv", str(tmp_path / "quiz.csv")]) == 0
    rows = {row["student"]: row for row in _rows(tmp_path / "quiz.csv")}
    assert rows["right"]["verdict"] == "PASS", rows["right"]
    # In a class the quiz says how many answers are right, no more: its hints would let a blind search pass.
    assert rows["wrong"]["verdict"] == "FAIL" and rows["wrong"]["reason"] == "0 of 8 answers are right"
    assert rows["peek"]["verdict"] == "FAIL" and "FileNotFoundError" in rows["peek"]["reason"], rows["peek"]
