"""A sandbox's cgroup is made whole or not at all (``confinement.Cgroup.make``).

Under cgroup v1 each controller (memory, pids, cpu) has a folder of its own: where one refuses after another has
said yes, the folders already made are removed, not left behind for every submission graded.
"""

from __future__ import annotations

import pytest

from nanovllm_teach.exercises import confinement


def test_a_v1_cgroup_that_one_controller_refuses_leaves_no_folder(tmp_path, monkeypatch):
    for controller in confinement.CONTROLLERS:
        (tmp_path / controller).mkdir()
        (tmp_path / controller / "cgroup.procs").touch()
        if controller != "cpu":  # the cpu controller's parent folder is missing: its mkdir fails
            (tmp_path / controller / "grader").mkdir()
    monkeypatch.setattr(confinement, "CGROUP_ROOT", tmp_path)
    monkeypatch.setattr(confinement.Cgroup, "_own", staticmethod(lambda: dict.fromkeys(confinement.CONTROLLERS,
                                                                                     "grader")))
    assert confinement.Cgroup.make(confinement.LIMITS, "nanovllm-teach-worker-test") is None
    assert list(tmp_path.glob("*/grader/nanovllm-teach-worker-test")) == []


@pytest.mark.parametrize("version", [1, 2])
def test_a_cgroup_is_made_with_its_limits_written_in(tmp_path, monkeypatch, version):
    if version == 2:
        (tmp_path / "cgroup.controllers").touch()
        (tmp_path / "grader").mkdir()
        (tmp_path / "grader" / "cgroup.subtree_control").write_text(" ".join(confinement.CONTROLLERS))
        own = {"": "grader"}
    else:
        for controller in confinement.CONTROLLERS:
            (tmp_path / controller / "grader").mkdir(parents=True)
            (tmp_path / controller / "cgroup.procs").touch()
        own = dict.fromkeys(confinement.CONTROLLERS, "grader")
    monkeypatch.setattr(confinement, "CGROUP_ROOT", tmp_path)
    monkeypatch.setattr(confinement.Cgroup, "_own", staticmethod(lambda: own))
    cgroup = confinement.Cgroup.make(confinement.LIMITS, "nanovllm-teach-worker-test")
    assert cgroup is not None and cgroup.version == version
    memory = "memory.max" if version == 2 else "memory.limit_in_bytes"
    assert (cgroup.folders[0] / memory).read_text() == str(confinement.LIMITS.memory)
    for folder in cgroup.folders:  # a real cgroup's files go with it; a plain folder needs them gone first
        for file in folder.iterdir():
            file.unlink()
    cgroup.remove()
    assert list(tmp_path.glob("**/nanovllm-teach-worker-test")) == []
