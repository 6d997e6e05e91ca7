"""Two languages from one source: how the language is chosen, text in both, the glossary, the exercises'
texts, and the notebooks built from their sources."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
import types

import jupytext
import msgspec
import pytest

from nanovllm_teach import i18n
from nanovllm_teach.cli import main
from nanovllm_teach.exercises import EXERCISES, hint
from nanovllm_teach.i18n import Text, resolve_lang, say, set_lang, speaking
from nanovllm_teach.i18n.glossary import TERMS, term
from nanovllm_teach.i18n.notebooks import ROOT, build, english_runs, problems_in, sources, stale

CJK = re.compile(r"[\u4e00-\u9fff]")


pytestmark = pytest.mark.usefixtures("no_language_chosen")


def test_the_language_is_asked_for_then_chosen_then_the_environment_then_the_locale(monkeypatch):
    assert resolve_lang() == "en"
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    assert resolve_lang() == "zh"
    monkeypatch.setenv(i18n.ENV_VAR, "en")
    assert resolve_lang() == "en"
    set_lang("zh")
    assert resolve_lang() == "zh" and resolve_lang("en") == "en"
    with speaking("en"):
        assert resolve_lang() == "en"
    assert resolve_lang() == "zh"


def test_a_bad_language_is_refused_with_its_name(monkeypatch):
    with pytest.raises(ValueError, match="'fr'"):
        resolve_lang("fr")
    monkeypatch.setenv(i18n.ENV_VAR, "jp")
    with pytest.raises(ValueError, match=f"{i18n.ENV_VAR} must be one of en, zh, got 'jp'"):
        resolve_lang()


def test_a_text_has_the_same_fields_in_both_languages():
    text = Text(en="{n} blocks free", zh="空闲块 {n} 个")
    assert say(text, "zh", n=3) == "空闲块 3 个" and say(text, "en", n=3) == "3 blocks free"
    with pytest.raises(ValueError, match="same fields"):
        Text(en="{n} blocks", zh="空闲块")


def test_the_glossary_is_consistent():
    assert len({t.name for t in TERMS}) == len(TERMS)
    for entry in TERMS:
        assert CJK.search(entry.zh) or entry.zh.isascii(), entry
        assert entry.en == tuple(form.lower() for form in entry.en), entry
        assert not any(avoided in entry.zh for avoided in entry.avoid), f"{entry.name}: it contains an avoided form"
    assert term("prefill").zh == "预填充" and term("prefill").in_english("a Prefill step")
    assert not term("decode").in_english("prepare_decode")  # a name, not the term


def test_every_exercise_title_and_hint_is_in_both_languages():
    for ex in EXERCISES.values():
        assert isinstance(ex.title, Text) and CJK.search(ex.title.zh) and not CJK.search(ex.title.en), ex.name
        for level in range(1, len(ex.hints) + 1):
            en, zh = ex.hint(level, "en"), ex.hint(level, "zh")
            assert CJK.search(zh) and not CJK.search(en) and en != zh, (ex.name, level)


def test_hint_and_the_cli_follow_the_language(monkeypatch, capsys):
    assert hint("decode_slot", 1, "zh") == EXERCISES["decode_slot"].hints[0].zh
    assert main(["hint", "decode_slot", "1", "--lang", "zh"]) == 0
    assert capsys.readouterr().out.strip() == EXERCISES["decode_slot"].hints[0].zh
    monkeypatch.setenv(i18n.ENV_VAR, "zh")
    assert main(["exercises"]) == 0
    assert EXERCISES["can_allocate"].title.zh in capsys.readouterr().out
    assert resolve_lang() == "zh"  # the environment's, untouched by the command
    assert main(["hint", "decode_slot", "1", "--lang", "en"]) == 0
    assert capsys.readouterr().out.strip() == EXERCISES["decode_slot"].hints[0].en
    assert i18n._chosen is None  # --lang lasts for the command only


def test_a_closed_pipe_ends_the_command_quietly():
    done = subprocess.run(f"{sys.executable} -m nanovllm_teach.cli exercises | head -1", shell=True,
                          capture_output=True, text=True, timeout=120)
    assert done.stdout.startswith("1. ") and "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr


# ---- the notebooks ------------------------------------------------------------------------------------

def test_every_notebook_is_built_from_its_source_and_up_to_date():
    assert sources(), "no notebook sources"
    assert stale() == []


def test_the_two_languages_of_a_notebook_have_the_same_code():
    for source in sources():
        built = build(source)
        code = {lang: [c.source for c in nb.cells if c.cell_type == "code"] for lang, nb in built.items()}
        assert code["en"][0] != code["zh"][0] and "set_lang" in code["zh"][0]  # the language cell
        assert code["en"][1:] == code["zh"][1:], source.name
        markdown = {lang: [c.source for c in nb.cells if c.cell_type == "markdown"] for lang, nb in built.items()}
        assert len(markdown["en"]) == len(markdown["zh"]) > 0, source.name


def test_the_check_catches_a_missing_translation_a_copy_and_a_glossary_slip(tmp_path):
    def problems(text: str) -> list[str]:
        path = tmp_path / "01_quickstart.md"  # a source's name, in a folder of its own
        path.write_text(text, encoding="utf-8")
        return problems_in(jupytext.read(path), path.name)

    en = '<!-- #region lang="en" -->\nThe prefill step.\n<!-- #endregion -->\n\n'
    assert any("not followed by its Chinese cell" in p for p in problems(en))
    copy = en + '<!-- #region lang="zh" -->\nThe prefill step.\n<!-- #endregion -->\n'
    assert any("is not in Chinese" in p for p in problems(copy))
    slip = en + '<!-- #region lang="zh" -->\n预先填充这一步。\n<!-- #endregion -->\n'
    found = problems(slip)
    assert any("lacks the glossary's '预填充'" in p for p in found) and any("'预先填充'" in p for p in found)
    unbracketed = en + '<!-- #region lang="zh" -->\n预填充这一步。\n<!-- #endregion -->\n'
    assert any("needs the English term in brackets" in p for p in problems(unbracketed))
    right = en + '<!-- #region lang="zh" -->\n预填充（prefill）这一步。\n<!-- #endregion -->\n'
    assert problems(right) == []
    untagged = "Some prose.\n"
    assert any("has no language" in p for p in problems(untagged))


def test_the_built_notebooks_are_where_the_readme_says():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for source in sources():
        for lang in ("en", "zh"):
            assert f"({lang}/{source.stem}.ipynb)" in readme, (lang, source.stem)


def test_chinese_is_drawn_with_a_cjk_font(tmp_path):
    """Debian's fonts-noto-cjk (installed by .ci/run) is found, so a Chinese label is no row of empty boxes."""
    import warnings

    from matplotlib import rcParams

    from nanovllm_teach.viz.fonts import add_cjk_fallback
    from nanovllm_teach.viz.render import NotebookFigure, figure_png

    name = add_cjk_fallback()
    assert name is not None and rcParams["font.family"][-1] == name
    figure = NotebookFigure(figsize=(4, 2))
    figure.add_subplot().set_title("预填充（prefill）与解码（decode）")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # matplotlib warns for every glyph its fonts lack
        assert figure_png(figure)[:4] == b"\x89PNG"


def test_the_teaching_sentences_keep_to_the_glossary():
    """The console, the player and the page say these in Chinese: the same terms as the notebooks (a
    one-line sentence needs no English in brackets)."""
    from nanovllm_teach.i18n.notebooks import pair_problems
    from nanovllm_teach.trace.reasons import SENTENCES

    problems = [p for payload, table in SENTENCES.items() for key, sentence in table.items()
                for p in pair_problems(sentence["en"], sentence["zh"], f"{payload.event}.{key}", set())
                if "in brackets" not in p]
    assert problems == []


def test_the_pictures_speak_the_chosen_language():
    """Axis labels, titles and legends of the timelines and the Gantt chart follow ``set_lang``."""
    from pathlib import Path

    from nanovllm_teach.trace import load_trace
    from nanovllm_teach.viz import plot_gantt, plot_timelines, words

    trace = load_trace(Path(__file__).resolve().parents[1] / "traces" / "preemption.jsonl")

    def drawn(figure) -> str:
        texts = [t.get_text() for ax in figure.get_axes() for t in (ax.title, ax.xaxis.label, ax.yaxis.label)]
        for ax in figure.get_axes():
            legend = ax.get_legend()
            if legend is not None:
                texts += [t.get_text() for t in legend.get_texts()] + [legend.get_title().get_text()]
        return "\n".join(texts + [t.get_text() for t in figure.texts] + [figure.get_suptitle()])

    for lang in ("en", "zh"):
        with speaking(lang):
            timelines, gantt = drawn(plot_timelines(trace)), drawn(plot_gantt(trace))
        other = "zh" if lang == "en" else "en"
        for label in (words.BATCH_SIZE, words.ENGINE_STEP, words.PHASE["decode"]):
            assert say(label, lang) in timelines and say(label, other) not in timelines, (lang, label)
        assert say(words.GANTT_TITLE, lang) in gantt and say(words.STATE["decode"], lang) in gantt
        assert bool(CJK.search(timelines + gantt)) == (lang == "zh")


def _texts_of(value, seen: set[int]):
    """Every ``Text`` in a module-level value: the value itself, or inside tables and classes."""
    if id(value) in seen:
        return
    seen.add(id(value))
    if isinstance(value, Text):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _texts_of(item, seen)
    elif isinstance(value, (list, tuple, set, frozenset)):
        for item in value:
            yield from _texts_of(item, seen)
    elif isinstance(value, type) and value.__module__.startswith("nanovllm_teach"):
        for item in vars(value).values():
            yield from _texts_of(item, seen)
    elif dataclasses.is_dataclass(value) or isinstance(value, msgspec.Struct):
        names = ([f.name for f in dataclasses.fields(value)] if dataclasses.is_dataclass(value)
                 else value.__struct_fields__)
        for name in names:
            yield from _texts_of(getattr(value, name), seen)


def _package_texts() -> dict[str, list[Text]]:
    import importlib
    import pkgutil

    import nanovllm_teach

    found: dict[str, list[Text]] = {}
    for info in pkgutil.walk_packages(nanovllm_teach.__path__, "nanovllm_teach."):
        if info.name.endswith("__main__"):
            continue
        try:
            module = importlib.import_module(info.name)
        except ImportError as error:  # an optional GPU dependency (flash-attn): nothing a learner reads
            assert "flash" in str(error).lower() or "cuda" in str(error).lower(), (info.name, error)
            continue
        seen: set[int] = set()
        # What the module defines (not what it imported: that is found in its own module).
        texts = [t for name, value in vars(module).items() if not name.startswith("__")
                 and not isinstance(value, types.ModuleType)
                 and (not isinstance(value, type) or value.__module__ == module.__name__)
                 for t in _texts_of(value, seen)]
        if texts:
            found[info.name] = texts
    return found


def test_every_text_in_the_package_is_in_both_languages_and_keeps_to_the_glossary():
    """Whatever a learner reads is a ``Text`` somewhere in the package: each one's English is English, its
    Chinese is Chinese (not a copy), and both use the glossary's terms."""
    from nanovllm_teach.i18n.notebooks import pair_problems

    found = _package_texts()
    # The walk finds the tables where the learner's words live (a walk that finds nothing passes nothing).
    assert {"nanovllm_teach.viz.words", "nanovllm_teach.exercises.trace_quiz.grading",
            "nanovllm_teach.exercises.trace_quiz"} <= set(found)
    problems = []
    for module, texts in found.items():
        for text in texts:
            if not re.search(r"[A-Za-z]{3}", re.sub(r"\{[^}]*\}|`[^`]*`", "", text.en)):
                continue  # a name or a number in both languages, not a sentence
            if text.en == text.zh:
                problems.append(f"{module}: {text.en!r} is the same in both languages")
            problems += [p for p in pair_problems(text.en, text.zh, f"{module}: {text.en[:60]!r}", set())
                         if "in brackets" not in p]
    assert problems == []


@pytest.mark.parametrize(("text", "runs"), [
    ("a memory floor of 0.31 to 0.31 ms", ["a memory floor of to"]),
    ("prefill took 3.1 ms for the batch", ["took for the"]),
    ("modes of the decode steps: {'compiled': 64}", ["modes of the"]),
    ("预填充（prefill）用了 3.1 ms，batch 为 16", []),
    ("Qwen3-8B 在 H100 GPU 上：TTFT p50 12 ms, throughput 300 tok/s", []),
    ("见 `scheduler.schedule()` 和 engine.step 的 continuous batching", []),
    ("<Figure size 640x480 with 1 Axes>", []),
])
def test_english_prose_is_three_words_in_a_row_that_are_not_code_terms_or_names(text, runs):
    assert english_runs(text) == runs


def test_serve_s_own_messages_follow_the_language(capsys):
    """``serve --lang zh`` refuses a bad port in Chinese (one line, exit 2), as every other command speaks."""
    assert main(["serve", "--port", "70000", "--lang", "zh"]) == 2
    err = capsys.readouterr().err
    assert "--port 必须在 1 到 65535 之间，收到的是 70000" in err and err.count("\n") == 1
