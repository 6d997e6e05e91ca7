"""A worker that cannot start leaves nothing behind: no open descriptor, no copy of the submission.

``remote.Worker`` opens its two pipes and its output file before it starts the sandbox, and
``confinement.Confined`` copies the submission before it takes a job slot: where the next step raises (no free
slot, a fork refused), what was already made is undone at once, not at garbage collection, in a grader that
goes on to the next student.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from nanovllm_teach.exercises import confinement, remote


def _open_descriptors() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def _copies() -> set[Path]:
    return set(Path(tempfile.gettempdir()).glob("nanovllm_teach_submission_*"))


class NoSlot(RuntimeError):
    pass


def _no_slot() -> None:
    raise NoSlot("all slots in use")


def test_a_worker_whose_sandbox_cannot_start_closes_its_pipes_and_its_output(tmp_path, monkeypatch):
    solution = tmp_path / "decode_slot.py"
    solution.write_text("def decode_slot(*args):\n    return 0\n")
    monkeypatch.setattr(confinement, "Slot", _no_slot)
    monkeypatch.setattr(remote.isolation, "uid_drop", lambda: True)
    before, copies = _open_descriptors(), _copies()
    for _ in range(3):
        with pytest.raises(NoSlot):
            remote.Worker(solution, ("decode_slot",), (), 5.0)
    assert _open_descriptors() == before
    assert _copies() == copies  # the copy made before the slot was asked for is gone too


def test_a_notebook_worker_whose_fork_fails_closes_its_pipes_and_its_output(monkeypatch):
    def no_fork(*args):
        raise OSError("fork refused")

    monkeypatch.setattr(remote, "fork", no_fork)
    before = _open_descriptors()
    with pytest.raises(OSError, match="fork refused"):
        remote.Worker({"decode_slot": lambda *args: 0}, ("decode_slot",), (), 5.0)
    assert _open_descriptors() == before
