"""``build check`` runs a learner's chapter in the class grader's sandbox, and judges it outside.

The learner's code runs in bubblewrap as a job slot's own user id (where the machine gives them), answers the
checks' calls over bounded frames, and cannot change the references: they are computed in the checking
process, which never runs it. Without bubblewrap or the uid drop, a learner's own check runs in a plain process
and says so.
"""

from __future__ import annotations

import os

import pytest
import torch
from test_sandbox_child import gives_up_at_its_deadline

from nanovllm_teach.exercises import confinement, isolation
from nanovllm_teach.i18n import speaking
from nanovllm_teach.track.chapters import CHAPTERS, chapter_named
from nanovllm_teach.track.seams import PACKAGE
from nanovllm_teach.track.extract import replace_stub, write_package
from nanovllm_teach.track.verdict import judge_chapter
from nanovllm_teach.track.wire import MAX_FRAME, Frame, FrameError, read_frame, unpack_answer, write_frame

NORMS = f"{PACKAGE}/layers/norms.py"


def skeleton(folder, with_solutions=False):
    write_package(folder, CHAPTERS, with_solutions=with_solutions, lang="en")
    return folder


def judged(folder, chapter="1", **kwargs):
    with speaking("en"):
        verdict = judge_chapter(folder, chapter_named(chapter), **kwargs)
    return verdict, "\n".join(verdict.lines)


def test_a_chapter_runs_in_bubblewrap_as_a_slots_own_user(tmp_path, uid_drop_ready):
    folder = skeleton(tmp_path / "mine", with_solutions=True)
    path = folder / NORMS
    repository = os.path.dirname(os.path.dirname(os.path.abspath(isolation.__file__)))
    path.write_text(path.read_text(encoding="utf-8") + "\n\nimport os\nprint('uid', os.getuid(), 'sees the host:', "
                    f"os.path.exists({str(tmp_path)!r}) or os.path.exists({repository!r}), "
                    "'environment:', sorted(os.environ))\n", encoding="utf-8")
    verdict, text = judged(folder)
    assert verdict.status == "pass", text
    printed = verdict.printed
    uid = int(printed.split("uid ")[1].split()[0])
    assert confinement.FIRST_UID <= uid < confinement.FIRST_UID + confinement.SLOTS
    assert "sees the host: False" in printed
    assert "environment: ['HOME', 'LANG', 'PWD', 'PYTHONDONTWRITEBYTECODE']" in printed  # PWD: bubblewrap's --chdir
    assert verdict.isolated and "no sandbox here" not in "\n".join(verdict.shown())


HOSTILE = '''

import torch
import nanovllm_teach.layers.activation as engine_activation
import nanovllm_teach.track.checks as checks
import nanovllm_teach.track.compare as compare

# If the references were computed in here, each of these would make the wrong silu_and_mul below pass.
engine_activation.silu_and_mul = lambda x: torch.zeros(*x.shape[:-1], x.shape[-1] // 2)
torch.nn.functional.silu = lambda x: torch.zeros_like(x)
checks.check_seam = lambda seam, fn: None
compare.outputs_difference = lambda *args: None
compare.first_difference = lambda *args: None
'''


def test_a_learner_who_patches_the_reference_in_the_sandbox_still_fails(tmp_path, bwrap_ready):
    folder = skeleton(tmp_path / "mine")
    replace_stub(folder, chapter_named("1"), "rms_norm", "xf = x.float()\n"
                 "return weight * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)")
    replace_stub(folder, chapter_named("1"), "silu_and_mul", "return torch.zeros(*x.shape[:-1], x.shape[-1] // 2)")
    path = folder / NORMS
    path.write_text(path.read_text(encoding="utf-8") + HOSTILE, encoding="utf-8")
    verdict, text = judged(folder)
    assert verdict.status == "fail", text
    assert "your silu_and_mul on random tensors: element [0, 0] is 0, the reference gives 0.26" in text, text
    assert "your rms_norm" not in text  # the one written right passes


def test_without_bubblewrap_a_learners_own_check_runs_plain_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(isolation, "available", lambda: False)
    monkeypatch.setattr(isolation, "uid_drop", lambda: False)
    verdict, text = judged(skeleton(tmp_path / "mine", with_solutions=True))
    assert verdict.status == "pass", text
    assert not verdict.isolated
    assert verdict.shown()[-1] == ("  note: no sandbox here (bubblewrap or a user id of its own is missing): your "
                                   "code ran in a plain process on this machine (a class is never graded so)")


@pytest.mark.parametrize("body, sentence", [
    ("return 'normalised'", "your rms_norm on random tensors returned str, not a tensor"),
    ("import os\nos._exit(3)", "the check ended without a verdict (exit code 3)"),
    ("return torch.zeros(MAX // 4 + 1)", "your rms_norm raised ValueError on random tensors: its result is too large"),
])
def test_what_comes_back_from_the_sandbox_is_checked(tmp_path, body, sentence):
    folder = skeleton(tmp_path / "mine")
    replace_stub(folder, chapter_named("1"), "rms_norm", body)
    path = folder / NORMS
    path.write_text(path.read_text(encoding="utf-8") + f"\n\nMAX = {MAX_FRAME}\n", encoding="utf-8")
    verdict, text = judged(folder)
    assert verdict.status == "fail" and sentence in text, text


def test_a_frame_larger_than_the_bound_or_not_a_value_is_refused():
    read, write = os.pipe()
    os.write(write, (MAX_FRAME + 1).to_bytes(4, "big"))
    with pytest.raises(FrameError, match="larger than"):
        read_frame(read, None)
    os.close(read)
    os.close(write)
    for tree in ({"t": "absent"}, {"module": "model"}, {"tuple": "not a list"}):
        with pytest.raises(FrameError):
            unpack_answer(tree, {"0": torch.zeros(1)})
    named = unpack_answer({"other": "Gen\nerator\x1b[2J"}, {})
    assert type(named).__name__ == "Generator2J"  # an identifier's letters only


def test_a_call_into_a_sandbox_that_stopped_reading_gives_up_at_its_deadline():
    """A call's frame larger than the pipe holds (600 KB of tensors), to a sandbox that reads nothing (a learner's
    code that stopped its own process): written whole, it would block ``build check`` for ever."""
    gives_up_at_its_deadline(lambda fd, deadline: write_frame(fd, Frame(tensors=bytes(600_000)), deadline))


def test_a_folder_too_large_to_check_is_refused_with_a_sentence(tmp_path):
    folder = skeleton(tmp_path / "mine")
    (folder / PACKAGE / "huge.py").write_text("#" * (300 << 10), encoding="utf-8")
    verdict, text = judged(folder)
    assert verdict.status == "fail" and "myvllm/huge.py is larger than 256 KiB: not checked" in text
