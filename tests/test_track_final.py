"""The build-it-yourself track's finish line, ``build check DIR final``: the learner's engine alone, in the
sandbox, with the reference's engine, layers and models refused, against the reference and transformers.

One folder with the solutions is generated for the module; the others are copies of it with one file changed.
"""

from __future__ import annotations

import ast
import shutil
import sys
from pathlib import Path

import pytest

from nanovllm_teach.cli import main
from nanovllm_teach.i18n import speaking
from nanovllm_teach.track.chapters import CHAPTERS, chapter_named
from nanovllm_teach.track.extract import write_package
from nanovllm_teach.track.final import judge_final
from nanovllm_teach.track.final_inside import final_chapters
from nanovllm_teach.track.glue import GLUE, is_blocked
from nanovllm_teach.track.learner import chapter_file
from nanovllm_teach.track.seams import PACKAGE

SCHEDULER = f"{PACKAGE}/engine/scheduler.py"


@pytest.fixture(scope="module")
def solutions(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("final") / "solved"
    write_package(folder, CHAPTERS, with_solutions=True, lang="en")
    return folder


def changed(solutions: Path, target: Path, old: str, new: str) -> Path:
    """A copy of the solutions folder with ``old`` replaced by ``new`` (once) in the scheduler's file."""
    shutil.copytree(solutions, target)
    path = target / SCHEDULER
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new), encoding="utf-8")
    return target


def test_no_file_of_the_package_imports_the_reference(solutions: Path) -> None:
    """The chapter files and the glue import what they do not write from the glue, never the reference (that
    the solutions pass ``final`` shows it too; this names the file)."""
    for path in (solutions / PACKAGE).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            assert not any(is_blocked(name) for name in names), (path, names)


def test_the_glue_is_the_engine_for_the_chapters(solutions: Path) -> None:
    """Chapters 1-10 check the learner's pieces inside the reference engine: there ``myvllm.glue.X`` is the
    engine's own module (which keeps its own spec)."""
    from nanovllm_teach.engine import scheduler

    loaded = chapter_file(solutions, chapter_named("9"))
    module = sys.modules[loaded.pieces[0].function.__module__]
    assert module.engine_scheduler is scheduler and module.Scheduler.__mro__[1] is scheduler.Scheduler
    assert sys.modules[f"{GLUE}.engine.scheduler"] is scheduler
    assert scheduler.__spec__.name == "nanovllm_teach.engine.scheduler"


def test_solutions_pass_the_finish_line(solutions: Path) -> None:
    verdict = judge_final(solutions)
    text = "\n".join(verdict.lines)
    assert verdict.status == "pass", text
    assert "0 decisions differ" in text and "preemptions" in text
    assert (solutions / "traces/final_yours.jsonl").is_file() and (solutions / "traces/final_reference.jsonl").is_file()
    assert f"nanovllm-teach compare {solutions / 'traces/final_yours.jsonl'}" in text
    # The two headers name the same model (inside, the checkpoint sits in a folder of its own name), so a plain
    # diff of the traces starts at what differs, not at where the sandbox keeps the model.
    from nanovllm_teach.trace import load_trace
    yours, reference = (load_trace(solutions / f"traces/final_{who}.jsonl").header for who in ("yours", "reference"))
    assert yours["model"]["name"] == reference["model"]["name"] == "qwen3-tiny", (yours["model"], reference["model"])


def test_a_fresh_folder_names_what_is_not_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_package(tmp_path / "fresh", CHAPTERS, with_solutions=False, lang="zh")
    with speaking("zh"):
        code = main(["build", "check", str(tmp_path / "fresh"), "final", "--lang", "zh"])
    out = capsys.readouterr().out
    assert code == 1 and "还没有写完" in out
    for chapter in final_chapters():
        assert f"第 {chapter.number} 章：" + ", ".join(seam.qualname for seam in chapter.seams) in out
    assert "第 6 章：" not in out  # the contiguous cache is the track's own: the engine pages from the start


def test_a_reference_import_is_refused_naming_it(solutions: Path, tmp_path: Path) -> None:
    """The scheduler's file hands its decode to the reference's: refused before anything runs, named with the
    file and line (without the block, the run would pass)."""
    folder = changed(solutions, tmp_path / "smuggled", "from __future__ import annotations\n",
                     "from __future__ import annotations\n\ntry:\n"
                     "    from nanovllm_teach.engine.scheduler import Scheduler as Reference\n"
                     "except ImportError:  # a learner hiding the refusal does not hide it\n"
                     "    Reference = None\n")
    with (folder / SCHEDULER).open("a", encoding="utf-8") as file:
        file.write("\n\ndef decode(self):\n    return Reference.schedule_decode(self)\n\n\n"
                   "Scheduler.schedule_decode = decode\n")
    verdict = judge_final(folder)
    text = "\n".join(verdict.lines)
    assert verdict.status == "fail", text
    assert f"{SCHEDULER}:10 imports nanovllm_teach.engine (from nanovllm_teach.engine.scheduler import" in text


def test_a_wrong_scheduler_is_named_by_its_first_decision(solutions: Path, tmp_path: Path) -> None:
    """Preempting the oldest running sequence instead of the newest: every token is still right (greedy), the
    first decision that differs is named, with the step and the sequence."""
    folder = changed(solutions, tmp_path / "wrong", "self.preempt(self.running.pop(), needed_by=seq)",
                     "self.preempt(self.running.popleft(), needed_by=seq)")
    verdict = judge_final(folder)
    text = "\n".join(verdict.lines)
    assert verdict.status == "fail", text
    assert "your run's decisions first differ from the reference's in step" in text
    assert "the reference preempted seq" in text and "0 decisions differ" not in text


@pytest.mark.parametrize("answer", [
    {"not_written": [[1, ["rms_norm\x1b[2J" * 400]]] * 50},
    {"raised": ["Error\x07" * 100, "\r" * 5000]},
    {"load_error": ["myvllm/x.py", ["not", "text"]]},
    ["not", "a", "dict"],
])
def test_what_the_sandbox_answers_is_shown_bounded_and_visible(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               answer: object) -> None:
    """The answer is made where the learner's code runs: whatever its shape, the verdict is a few bounded lines
    without a control character."""
    from nanovllm_teach.track import sandbox

    class Answering:
        printed, isolated = "", True

        def __init__(self, *args: object) -> None:
            pass

        def __enter__(self) -> Answering:
            return self

        def __exit__(self, *exc: object) -> None:
            pass

        def result(self) -> object:
            return answer

    monkeypatch.setattr(sandbox, "ChapterSandbox", Answering)
    verdict = judge_final(tmp_path)
    assert verdict.status != "pass" and len(verdict.lines) <= 1 + len(final_chapters())
    assert all(len(line) < 700 and not any(ord(c) < 32 for c in line) for line in verdict.lines), verdict.lines


def test_final_on_a_folder_that_is_not_there_is_a_usage_mistake(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["build", "check", str(tmp_path / "nowhere"), "final", "--lang", "en"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no such folder" in err[0] and "Traceback" not in err[0]


def test_a_chapter_file_imports_the_learners_other_files_by_their_package(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The chapter files are loaded as modules of the learner's package, which is a package: one file may
    import another by its name (the glue's names hang from it too)."""
    for name in [name for name in sys.modules if name == PACKAGE or name.startswith(PACKAGE + ".")]:
        monkeypatch.delitem(sys.modules, name)
    folder = tmp_path / "mine"
    write_package(folder, CHAPTERS, with_solutions=True, lang="en")
    path = folder / chapter_named("3").file
    path.write_text(path.read_text(encoding="utf-8") + "\nfrom myvllm.layers.norms import rms_norm\n",
                    encoding="utf-8")
    loaded = chapter_file(folder, chapter_named("3"))
    assert loaded.load_error is None and all(piece.written for piece in loaded.pieces)
