"""The sandbox's limits bind as root, and a grade that counts never runs a submission outside one.

As root (a teacher's container, Gradescope, CI), each submission runs as a job slot's own host user id in a
cgroup of its own (``confinement``): a fork bomb stops at the process limit, three 700 MB children do not
fit the whole sandbox's memory, 2 GiB cannot go to ``/dev/shm``, a double-forked daemon neither survives the
grade nor changes Gradescope's results.json. A class, ``--csv`` and ``--gradescope`` refuse to run where
nothing isolates (no bubblewrap: a PATH without it; no uid drop: not root), and ``--check-isolation`` says
what this machine gives.

These tests need root (the uid drop) and a bubblewrap that starts; without them they skip (``grade
--check-isolation`` says which is missing), except under ``NANOVLLM_TEACH_REQUIRE_BWRAP=1`` (CI, as root), where
they fail (``conftest.uid_drop_ready``).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import sys
import time
from pathlib import Path

import pytest

from nanovllm_teach.cli import main
from nanovllm_teach.exercises import confinement, isolation, remote, selftest

HONEST = (Path(__file__).parent / "data" / "hostile" / "honest_right.py").read_text()
pytestmark = pytest.mark.usefixtures("uid_drop_ready")

FORK_BOMB = """
import os, time
forked = 0
try:
    for _ in range(200):
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        forked += 1
except OSError:
    pass
print("FORKED", forked)
"""
THREE_CHILDREN = """
import os, select, time
r, w = os.pipe()
for _ in range(3):
    if os.fork() == 0:
        held = bytearray(700 << 20)
        for page in range(0, len(held), 4096):  # touched, so that the memory is really held
            held[page] = 1
        os.write(w, b"x")
        time.sleep(30)
        os._exit(0)
os.close(w)
got = b""
deadline = time.monotonic() + 20  # seconds on a loaded machine
while len(got) < 3 and time.monotonic() < deadline and os.waitpid(-1, os.WNOHANG) == (0, 0):
    if select.select([r], [], [], 0.1)[0]:
        got += os.read(r, 3)  # a child killed on the way ends the wait above
print("HELD", len(got))
"""
SHARED_MEMORY = """
written = 0
try:
    for k in range(2048):
        with open(f"/dev/shm/part{k}", "wb") as file:
            file.write(b"\\x01" * (1 << 20))
        written += 1 << 20
except OSError:
    pass
print("SHM", written)
"""
DAEMON = """
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(3)
        with open({results!r}, "w") as file:
            file.write('{{"score": 1.0, "output": "forged", "tests": []}}')
        os._exit(0)
    os._exit(0)
"""


def _slot_processes() -> list[int]:
    """The processes of every slot's user id that no grader holds: what a finished grade left behind. (Another
    grader running on the machine meanwhile holds its slot's lock, and what runs as that slot is its own.)"""
    left = []
    for number in range(confinement.SLOTS):
        lock = os.open(confinement._LOCKS / f"slot-{number}", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            continue
        finally:
            os.close(lock)  # closing drops the lock, taken or not
        left += confinement.processes_of(confinement.FIRST_UID + number)
    return left


def _worker_cgroups() -> list[Path]:
    return list(confinement.CGROUP_ROOT.glob("*/**/nanovllm-teach-worker-*"))


def _self_check(tmp_path: Path, top: str, capsys) -> str:
    solution = tmp_path / "decode_slot.py"
    solution.write_text(top + HONEST)
    main(["grade", "decode_slot", str(solution), "--time-limit", "40"])
    return capsys.readouterr().out


def _printed(out: str, word: str) -> int:
    return int(next(line for line in out.splitlines() if f"| {word} " in line).split()[-1])


def test_the_worker_runs_as_the_slots_user_with_its_own_interpreter_wherever_that_lives(tmp_path):
    # As root, bubblewrap makes the binds and setpriv drops inside it: an interpreter under a folder only root
    # may enter (pyenv's under /root) is reached, with its own standard library, by a user id with no capability.
    probe = tmp_path / "probe.py"
    probe.write_text("import json, os, sys\n\ndef probe():\n"
                     "    status = dict(l.split(':', 1) for l in open('/proc/self/status').read().splitlines())\n"
                     "    return {'uid': os.getuid(), 'gid': os.getgid(), 'groups': os.getgroups(),\n"
                     "            'capabilities': status['CapEff'].strip(),\n"
                     "            'no_new_privs': status['NoNewPrivs'].strip(),\n"
                     "            'stdlib': json.__file__, 'base_prefix': sys.base_prefix}\n")
    with remote.Worker(probe, ("probe",), (), 60.0) as worker:
        assert worker.isolated and worker.confined.slot is not None and worker.load() is None
        seen = worker.call("probe", (), ())
        uid = worker.confined.slot.uid
    assert (seen["uid"], seen["gid"], seen["groups"]) == (uid, uid, []), seen
    assert seen["capabilities"] == "0000000000000000" and seen["no_new_privs"] == "1", seen
    assert seen["base_prefix"] == sys.base_prefix and seen["stdlib"].startswith(sys.base_prefix + "/"), seen
    assert _slot_processes() == []


def test_a_fork_bomb_stops_at_the_process_limit_and_leaves_nothing(tmp_path, capsys):
    out = _self_check(tmp_path, FORK_BOMB, capsys)
    assert 0 < _printed(out, "FORKED") < confinement.LIMITS.processes, out
    assert _slot_processes() == [] and _worker_cgroups() == []


def test_three_700_mb_children_do_not_fit_the_whole_sandbox(tmp_path, capsys):
    # The bound on the whole sandbox is its cgroup's: where the machine gives none, only per-process rlimits hold.
    cgroup = confinement.Cgroup.make(confinement.LIMITS, f"nanovllm-teach-test-{os.getpid()}")
    if cgroup is None:
        pytest.skip("this machine gives no cgroup to bound a whole sandbox's memory (see grade --check-isolation)")
    cgroup.remove()
    out = _self_check(tmp_path, THREE_CHILDREN, capsys)
    assert _printed(out, "HELD") < 3, out  # each alone is under the 1 GiB address space; together they are not
    assert _slot_processes() == []


def test_two_gib_to_dev_shm_are_refused(tmp_path, capsys):
    out = _self_check(tmp_path, SHARED_MEMORY, capsys)
    assert _printed(out, "SHM") <= isolation.TMPFS_BYTES, out


def test_a_daemon_neither_survives_the_grade_nor_changes_the_results(tmp_path, monkeypatch, capsys):
    # Gradescope's container may forbid bubblewrap's namespaces: the submission then runs as its own user id. Where
    # that user id cannot reach the grader's Python without bubblewrap's folders (an interpreter under /root), the
    # uid drop alone is refused (the probe's test below), and the same daemon is tried in bubblewrap.
    alone = isolation._drop_fails(False) is None
    if alone:
        monkeypatch.setattr(isolation, "available", lambda: False)
    results = tmp_path / "results" / "results.json"
    results.parent.mkdir()
    solution = tmp_path / "submission" / "decode_slot.py"
    solution.parent.mkdir()
    solution.write_text(DAEMON.format(results=str(results)) + HONEST)
    assert main(["grade", "decode_slot", str(solution), "--gradescope", str(results)]) == 0
    written = results.read_text(encoding="utf-8")
    assert json.loads(written)["score"] == 1 and "forged" not in written
    assert _slot_processes() == []
    time.sleep(3.5)  # when the daemon would have written
    assert results.read_text(encoding="utf-8") == written
    out = capsys.readouterr().out
    assert alone == ("\n  note: bubblewrap cannot start here, so this submission ran as a user id of its own" in out)


def test_a_grade_that_counts_refuses_to_run_where_nothing_isolates(tmp_path, monkeypatch, capsys):
    solution = tmp_path / "decode_slot.py"
    solution.write_text(HONEST)
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))  # no bubblewrap on it
    isolation.available.cache_clear()
    try:
        book = tmp_path / "class.csv"
        assert main(["grade", "decode_slot", str(solution), "--csv", str(book)]) == 2
        err = capsys.readouterr().err
        assert "needs bubblewrap" in err and "--check-isolation" in err and len(err.strip().splitlines()) == 1
        assert not book.exists()
    finally:
        monkeypatch.undo()
        isolation.available.cache_clear()
    monkeypatch.setattr(isolation, "uid_drop_missing", lambda: "the grader is not root")
    results = tmp_path / "results.json"
    assert main(["grade", "decode_slot", str(solution), "--gradescope", str(results)]) == 2
    refusal = json.loads(results.read_text(encoding="utf-8"))
    assert refusal["score"] == 0 and "not graded" in refusal["output"] and refusal["tests"] == []
    # A learner's own self-check still runs, and its verdict says it was not in a sandbox.
    monkeypatch.setattr(isolation, "available", lambda: False)
    assert main(["grade", "decode_slot", str(solution)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("PASS decode_slot") and "\n  note: a self-check: your code ran in a plain process" in out


def test_check_isolation_says_what_this_machine_gives(monkeypatch, capsys):
    assert main(["grade", "--check-isolation"]) == 0
    out = capsys.readouterr().out
    assert "bubblewrap:  " in out and "starts; network unshared (inside: lo)" in out
    # The first free slot's user id (another grader on the machine may hold slot 0).
    assert re.search(rf"the probe ran as {confinement.FIRST_UID // 100}\d\d\b", out)
    assert "A class can be graded here" in out
    assert "environment of pid 1: not readable by the submission's user id" in out and "/dev/shm: 16 MiB" in out
    monkeypatch.setattr(isolation, "uid_drop_missing", lambda: "the grader is not root")
    monkeypatch.setattr(isolation, "available", lambda: False)
    assert main(["grade", "--check-isolation"]) == 2
    out = capsys.readouterr().out
    assert "A class cannot be graded here" in out and "Gradescope (one submission): refused" in out


def test_the_probe_refuses_a_sandbox_that_runs_another_python(monkeypatch, capsys):
    # As root without bubblewrap, a worker once started on Debian's standard library instead of the grader's
    # virtual environment, and the probe (it checked the user id only) passed: now the sandboxed interpreter's
    # prefix and standard library must be the grader's own. Here the dropped interpreter reports Debian's.
    monkeypatch.setattr(isolation, "_DROP_PROBE",
                        'import json, os; print(json.dumps([os.getuid(), "/usr", "/usr/lib/python3.0"]))')
    isolation._drop_fails.cache_clear()
    try:
        reason = isolation.uid_drop_missing()
        assert reason is not None and "it ran on the Python of /usr (standard library /usr/lib/python3.0)" in reason
        assert f"not on the grader's own {sys.prefix}" in reason, reason
        assert main(["grade", "--check-isolation"]) == 2
    finally:
        isolation._drop_fails.cache_clear()
    out = capsys.readouterr().out
    # The screen shows it once, as the reason there is no uid drop.
    assert f"no uid drop: {reason}" in out and out.count("it ran on the Python of /usr") == 1
    assert "A class cannot be graded here" in out and "Gradescope (one submission): refused" in out


def test_check_isolation_as_a_user_that_is_not_root_says_what_it_can_and_cannot_do():
    found = selftest.Check("/usr/bin/bwrap", True, "the grader is not root", False, 1000, None,
                           {"network": ["lo"], "processes": 16, "environment": None, "dev_shm": 16 << 20})
    out = selftest.screen(found)
    assert "the grader's own (1000): not root, so no user id per submission" in out
    assert f"as {isolation.SANDBOX_UID} inside bubblewrap" in out and "counting this user's other processes" in out
    assert "do not bind for root" not in out  # said of root only
    assert "A class cannot be graded here" in out and "Gradescope (one submission): refused" in out
