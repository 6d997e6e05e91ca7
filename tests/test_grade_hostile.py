"""Hostile submissions graded as a class, in bubblewrap: cheats fail, and nothing outlives the grade.

The files are in ``tests/data/hostile`` (see its README). The class is graded once (``graded_class``),
honest work before and after the hostile files; then the package, site-packages, the kernel cache and a
decoy grading folder in the host's ``/tmp`` are as they were, and no process of the class is alive.

The tests bite: ``test_without_isolation_each_damaging_file_does_its_damage`` runs the same files with no
sandbox, against a throwaway copy of the package (a fake site-packages, HOME and TMPDIR), and sees each one
do its harm there.

Without bubblewrap (and, for a class or Gradescope, the uid drop: root) these tests skip, unless
``NANOVLLM_TEACH_REQUIRE_BWRAP=1`` (set by ``.ci/run``, which installs it and runs as root), where a missing one
is a failure (``conftest.bwrap_ready``, ``conftest.uid_drop_ready``).
"""

from __future__ import annotations

import csv
import hashlib
import os
import shutil
import signal
import site
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from nanovllm_teach.cli import main
from nanovllm_teach.exercises import isolation, remote

HOSTILE = Path(__file__).parent / "data" / "hostile"
PACKAGE = isolation.PACKAGE
pytestmark = pytest.mark.usefixtures("bwrap_ready")

KERNEL_CACHE = Path(os.environ.get("TORCH_EXTENSIONS_DIR") or Path.home() / ".cache" / "torch_extensions")
SECRET = "hostile-test-secret-7f3a"


def _hashes(folder: Path, pattern: str = "*") -> dict[str, str]:
    if not folder.is_dir():
        return {}
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob(pattern)) if p.is_file() and "__pycache__" not in p.parts}


def _site_packages() -> list[Path]:
    return [Path(p) for p in {*site.getsitepackages(), *(p for p in sys.path if p.endswith("site-packages"))}
            if Path(p).is_dir()]


def _state() -> dict[str, object]:
    return {"package": _hashes(PACKAGE), "kernels": _hashes(KERNEL_CACHE, "*.so"),
            "pth": {str(p): sorted(q.name for q in p.glob("*.pth")) for p in _site_packages()}}


def _alive(tags: list[str]) -> list[int]:
    """Processes whose command line carries one of the workers' ``tags``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                line = (entry / "cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if any(tag in line for tag in tags):
                found.append(int(entry.name))
    return found


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory, uid_drop_ready):  # a class runs each submission as a user id of its own
    room = tmp_path_factory.mktemp("class")
    names = sorted(p.name for p in HOSTILE.glob("*.py") if not p.name.startswith("honest"))
    shutil.copy(HOSTILE / "honest_right.py", room / "00 first honest.py")
    for name in names:
        shutil.copy(HOSTILE / name, room / name)
    shutil.copy(HOSTILE / "honest_right.py", room / "zz honest 最后.py")
    shutil.copy(HOSTILE / "honest_wrong.py", room / "zz wrong.py")
    decoy = Path(tempfile.mkdtemp(prefix="nanovllm_teach_grade_decoy_", dir="/tmp"))
    (decoy / "trace.jsonl").write_text("a trace of another student\n")
    tags: list[str] = []
    init = remote.Worker.__init__

    def remember(self, *args, **kwargs):
        init(self, *args, **kwargs)
        tags.append(self.tag)

    before = _state()
    os.environ[SECRET] = SECRET
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(remote.Worker, "__init__", remember)
        gradebook = room.parent / f"{room.name}.csv"
        # cheat_engine_call imports torch in its sandbox: seconds, beyond the default 10 s on a loaded machine, and
        # its verdict must be about the cheat, not the time it took.
        assert main(["grade", "decode_slot", str(room), "--jobs", "2", "--time-limit", "60", "--csv",
                     str(gradebook)]) == 0
    del os.environ[SECRET]
    time.sleep(0.5)  # a surviving grandchild would have done its work by now
    with gradebook.open(encoding="utf-8-sig") as file:
        rows = {row["student"]: row for row in csv.DictReader(file)}
    yield {"rows": rows, "before": before, "after": _state(), "tags": tags,
           "decoy": (decoy / "trace.jsonl").read_text()}
    shutil.rmtree(decoy)


def test_cheats_fail(graded_class):
    rows = graded_class["rows"]
    cheats = [name for name in rows if name.startswith("cheat_")]
    assert len(cheats) == 5
    for name in cheats:
        assert rows[name]["verdict"] == "FAIL", (name, rows[name]["reason"])
    assert "the engine's own decode_slot is not available while grading" in rows["cheat_engine_call"]["reason"]
    assert "FileNotFoundError" in rows["cheat_spec_closure"]["reason"]


def test_honest_work_before_and_after_the_hostile_files_is_graded_right(graded_class):
    rows = graded_class["rows"]
    assert list(rows)[0] == "00 first honest" and list(rows)[-2:] == ["zz honest 最后", "zz wrong"]
    assert rows["00 first honest"]["verdict"] == rows["zz honest 最后"]["verdict"] == "PASS"
    assert rows["zz wrong"]["verdict"] == "FAIL" and "slot_mapping" in rows["zz wrong"]["reason"]
    assert rows["damage_grandchild"]["verdict"] == "PASS"  # its grandchild did not empty its own traces
    assert rows["misbehave_thread"]["verdict"] == "PASS"  # the thread it left does not hold the grade


def test_nothing_outlives_the_class(graded_class):
    assert graded_class["after"] == graded_class["before"]
    assert graded_class["decoy"] == "a trace of another student\n"
    assert len(graded_class["tags"]) == 16 and _alive(graded_class["tags"]) == []


def test_misbehaviour_is_stopped_and_said(graded_class):
    rows = graded_class["rows"]
    assert rows["misbehave_memory"]["verdict"] == "FAIL" and "MemoryError" in rows["misbehave_memory"]["reason"]
    assert rows["misbehave_fake_pass"]["verdict"] == "FAIL"
    assert rows["snoop_machine"]["verdict"] == "FAIL"


def test_what_a_submission_prints_is_quoted_and_reads_nothing_of_the_machine(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(SECRET, SECRET)
    assert main(["grade", "decode_slot", str(HOSTILE / "snoop_machine.py")]) == 1
    out = capsys.readouterr().out
    assert SECRET not in out and "root:x:0" not in out and "nanovllm_teach" not in out.split("FAIL")[0]
    assert "DENIED /etc/passwd" in out
    assert main(["grade", "decode_slot", str(HOSTILE / "misbehave_fake_pass.py")]) == 1
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\r" not in out
    assert [line for line in out.splitlines() if line.startswith(("PASS", "FAIL"))] == [
        next(line for line in out.splitlines() if line.startswith("FAIL decode_slot: "))]


@pytest.mark.usefixtures("uid_drop_ready")  # --gradescope needs the uid drop
def test_the_teachers_environment_does_not_reach_the_sandbox_through_bubblewraps_own(tmp_path, monkeypatch, capsys):
    # bubblewrap is pid 1 inside: --clearenv cleans the student's process, not bubblewrap's own /proc/1/environ.
    # As root, bubblewrap is root's and the student's user id cannot read it; and it holds nothing of the grader's.
    monkeypatch.setenv("TEACHER_TOKEN", SECRET)
    solution = tmp_path / "decode_slot.py"
    solution.write_text("import os\nfor pid in (1, os.getppid()):\n    try:\n"
                        "        print(open(f'/proc/{pid}/environ', 'rb').read())\n"
                        "    except OSError as error:\n        print('DENIED', pid, type(error).__name__)\n"
                        + (HOSTILE / "honest_right.py").read_text())
    results = tmp_path / "results.json"
    assert main(["grade", "decode_slot", str(solution), "--gradescope", str(results)]) == 0
    out = capsys.readouterr().out
    assert "DENIED 1 PermissionError" in out, out
    assert SECRET not in out and SECRET not in results.read_text(encoding="utf-8")
    # Seen from the host (root may read it): bubblewrap's own environment is empty (not even the gate's PWD).
    with remote.Worker(solution, ("decode_slot",), (), 60.0) as worker:
        assert worker.load() is None
        bubblewraps = [pid for pid in _alive([worker.tag]) if Path(f"/proc/{pid}/status").read_text()
                       .split("Uid:")[1].split()[0] == "0"]  # the one outside and pid 1 inside
        environments = [Path(f"/proc/{pid}/environ").read_bytes() for pid in bubblewraps]
    assert bubblewraps and environments == [b""] * len(bubblewraps)


# ---- the same files, unsandboxed, against a throwaway copy: the damage they would do -------------------

_RUN_UNSANDBOXED = """
import importlib.util, sys
sys.path[:0] = [{package!r}, {site!r}]
sys.path += {real_site!r}  # after the fake one, which the .pth goes into
from nanovllm_teach.engine.batch import ScheduledSeq
seq = ScheduledSeq(0, [5], 5, 6, [7, 2], 0.0, None)
for path in {files!r}:
    spec = importlib.util.spec_from_file_location("hostile", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.decode_slot(seq, 4)
"""


def test_without_isolation_each_damaging_file_does_its_damage(tmp_path):
    package = tmp_path / "package"
    shutil.copytree(PACKAGE, package / "nanovllm_teach", ignore=shutil.ignore_patterns("__pycache__", "qwen3-tiny"))
    fake_site = tmp_path / "lib" / "site-packages"
    fake_site.mkdir(parents=True)
    home, host_tmp = tmp_path / "home", tmp_path / "tmp"
    kernel = home / ".cache" / "torch_extensions" / "nanovllm_teach_cpp" / "nanovllm_teach_cpp.so"
    kernel.parent.mkdir(parents=True)
    kernel.write_bytes(b"\x7fELF a kernel")
    grading = host_tmp / "nanovllm_teach_grade_next_student"
    grading.mkdir(parents=True)
    (grading / "tight_cache.jsonl").write_text("a trace\n")
    verdict = package / "nanovllm_teach" / "exercises" / "verdict.py"
    verdict_before = verdict.read_text()
    files = [str(HOSTILE / name) for name in ("damage_verdict.py", "damage_pth.py", "damage_kernel.py",
                                              "damage_grandchild.py", "snoop_machine.py")]
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "TMPDIR": str(host_tmp), SECRET: SECRET}
    code = textwrap.dedent(_RUN_UNSANDBOXED.format(package=str(package), site=str(fake_site), files=files,
                                                  real_site=[str(p) for p in _site_packages()]))
    # Its output into a file, not a pipe: the grandchild holds what it inherited for 90 s.
    with (tmp_path / "out.txt").open("w") as out:
        done = subprocess.run([sys.executable, "-S", "-c", code], env=env, stdout=out, stderr=subprocess.STDOUT,
                              timeout=120)
    printed = (tmp_path / "out.txt").read_text()
    pid_file = host_tmp / "hostile_grandchild.pid"
    grandchild = int(pid_file.read_text()) if pid_file.exists() else None
    try:
        assert done.returncode == 0, printed
        assert verdict.read_text() != verdict_before and "everyone passes" in verdict.read_text()
        assert (fake_site / "zz_hostile_grader.pth").exists()
        assert kernel.read_bytes() == b"not a kernel"
        assert grandchild is not None and Path(f"/proc/{grandchild}").exists()
        deadline = time.monotonic() + 10
        while (grading / "tight_cache.jsonl").read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (grading / "tight_cache.jsonl").read_text() == ""
        assert SECRET in printed and "READ /etc/passwd root:" in printed
    finally:
        if grandchild is not None:
            try:
                os.kill(grandchild, signal.SIGKILL)
            except ProcessLookupError:
                pass
