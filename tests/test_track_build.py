"""The build-it-yourself track, part 1: ``build start`` writes the learner's package, ``build check`` checks it.

The generated solutions pass every chapter, a fresh skeleton is "not written yet" in each, and one deliberately
wrong function per chapter fails with the sentence a learner should read. Chapters are judged in this process
(``judge_chapter``, what the check's child runs) except where the command itself is the point.
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

import pytest

from nanovllm_teach.cli import main
from nanovllm_teach.i18n import speaking
from nanovllm_teach.track.chapters import CHAPTERS, chapter_named
from nanovllm_teach.track.seams import PACKAGE
from nanovllm_teach.track.extract import is_written, reference, replace_stub, write_package
from nanovllm_teach.track.learner import chapter_file, generate
from nanovllm_teach.track.verdict import judge_chapter


@pytest.fixture(scope="module")
def solutions(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("track") / "solutions"
    write_package(folder, CHAPTERS, with_solutions=True, lang="en")
    return folder


def skeleton(folder: Path, lang: str = "en") -> Path:
    write_package(folder, CHAPTERS, with_solutions=False, lang=lang)
    return folder


def fill(folder: Path, chapter: int, name: str, body: str) -> None:
    """Write ``body`` in place of the stub of ``name`` in chapter ``chapter``'s file, as a learner would."""
    replace_stub(folder, chapter_named(str(chapter)), name, body)


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda c: c.slug)
def test_the_generated_solutions_pass_every_chapter(solutions, chapter):
    with speaking("en"):
        verdict = judge_chapter(solutions, chapter)
    assert verdict.status == "pass", verdict.lines
    assert verdict.lines[0].startswith(f"chapter {chapter.number} ")


def test_a_solution_is_the_engines_own_body_and_a_stub_is_not_written(solutions):
    for chapter in CHAPTERS:
        for piece in chapter_file(solutions, chapter).pieces:
            assert piece.written
            engine_source = inspect.getsource(reference(piece.seam))
            body = inspect.getsource(piece.function).split('"""')[-1].strip()
            assert body and all(line.strip() in engine_source for line in body.splitlines())


# Every chapter in English; in Chinese, the first and the last: the sentence is the same Text in every chapter,
# and each chapter's check starts a sandbox of its own (about 3 s on two cores).
@pytest.mark.parametrize("lang, sentence, chapters", [("en", "not written yet", CHAPTERS),
                                                      ("zh", "还没有写", [CHAPTERS[0], CHAPTERS[-1]])],
                         ids=["en", "zh"])
def test_a_fresh_skeleton_is_not_written_in_every_chapter(tmp_path, lang, sentence, chapters):
    folder = skeleton(tmp_path / "mine", lang)
    with speaking(lang):
        verdicts = [judge_chapter(folder, chapter) for chapter in chapters]
    for chapter, verdict in zip(chapters, verdicts):
        assert verdict.status == "not_written"
        assert sentence in verdict.lines[0]
        assert all(seam.qualname in verdict.lines[0] for seam in chapter.seams)


WRONG = {  # chapter: (function, a plausible mistake, what the learner must read)
    1: ("rms_norm", "return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps).to(x.dtype)",
        "your rms_norm on random tensors: element [0, 0] is "),
    2: ("apply_rotary", "xf = x.float()\nreturn (xf * cos - xf.roll(x.size(-1) // 2, dims=-1) * sin).to(x.dtype)",
        "your apply_rotary on random tensors: element [0, 0, "),
    3: ("causal_prefill", "return attend(q, k, v, scale, None, True)",
        "your causal_prefill on random tensors: element [3, "),
    4: ("Qwen3DecoderLayer.forward",
        "hidden_states = self.input_layernorm(hidden_states)\n"
        "hidden_states = self.post_attention_layernorm(self.self_attn(rope, hidden_states))\n"
        "return self.mlp(hidden_states), hidden_states",
        "your Qwen3DecoderLayer.forward (output 0) on random tensors: element [0, 0] is "),
    5: ("Sampler.forward",
        "probs = torch.softmax(logits.float(), dim=-1)\n"
        "out = [torch.multinomial(p, 1, generator=torch.Generator().manual_seed(s or 0)) for p, s in zip(probs, seeds)]\n"
        "return torch.where(temperatures == 0, logits.argmax(dim=-1), torch.cat(out))",
        "do not follow softmax(logits / temperature): chi-square "),
}


@pytest.mark.parametrize("number", sorted(WRONG))
def test_a_wrong_function_fails_its_chapter_with_the_sentence_a_learner_needs(tmp_path, number):
    folder = skeleton(tmp_path / "mine")
    name, body, sentence = WRONG[number]
    fill(folder, number, name, body)
    with speaking("en"):
        verdict = judge_chapter(folder, chapter_named(str(number)))
    text = "\n".join(verdict.lines)
    assert verdict.status == "fail" and sentence in text, text
    assert "the reference gives" in text or "p = " in text
    assert f"  yours: {name}" in text  # the rest of the chapter is still the engine's, and said so
    assert "not written yet" in text or number == 1 and "silu_and_mul" in text


def test_a_wrong_keep_mask_names_the_first_candidate_it_gets_wrong(tmp_path):
    folder = skeleton(tmp_path / "mine")
    fill(folder, 5, "keep_mask", "return scaled >= scaled.topk(5, dim=-1).values[:, -1:]")
    with speaking("en"):
        verdict = judge_chapter(folder, chapter_named("5"))
    assert "your keep_mask on random tensors: element [0, " in "\n".join(verdict.lines)


def test_what_the_learners_function_raises_is_named(tmp_path):
    folder = skeleton(tmp_path / "mine")
    fill(folder, 1, "silu_and_mul", "gate, up = x.chunk(3, dim=-1)\nreturn gate * up")
    with speaking("en"):
        verdict = judge_chapter(folder, chapter_named("norms"))
    assert "your silu_and_mul raised ValueError on random tensors: too many values to unpack" in "\n".join(verdict.lines)


def test_a_file_that_does_not_load_is_named_with_its_error(tmp_path):
    folder = skeleton(tmp_path / "mine")
    (folder / PACKAGE / "layers" / "rotary.py").write_text("def cos_sin_table(:\n", encoding="utf-8")
    with speaking("en"):
        verdict = judge_chapter(folder, chapter_named("2"))
    assert verdict.status == "fail" and "myvllm/layers/rotary.py could not be loaded: SyntaxError" in verdict.lines[1]


def test_a_check_that_runs_forever_is_stopped(tmp_path):
    folder = skeleton(tmp_path / "mine")
    (folder / PACKAGE / "layers" / "norms.py").write_text("while True:\n    pass\n", encoding="utf-8")
    with speaking("en"):
        verdict = judge_chapter(folder, chapter_named("1"), time_limit=3)
    assert verdict.status == "fail" and "stopped after 3 s" in "\n".join(verdict.lines)


def test_the_engine_runs_on_the_learners_pieces(tmp_path):
    """The learner's silu_and_mul is what the engine's MLP calls, in every step; the rest is the engine's."""
    from nanovllm_teach import SamplingParams

    folder = skeleton(tmp_path / "mine")
    fill(folder, 1, "silu_and_mul", "CALLS.append(x.shape)\ngate, up = x.chunk(2, dim=-1)\n"
                                    "return torch.nn.functional.silu(gate) * up")
    path = folder / chapter_named("1").file
    path.write_text(path.read_text(encoding="utf-8") + "\n\nCALLS = []\n", encoding="utf-8")
    outputs, trace = generate(folder, ["Hello"], SamplingParams(temperature=0.0, max_tokens=3, ignore_eos=True))
    calls = sys.modules[f"{PACKAGE}.layers.norms"].CALLS
    steps = len(trace.events_named("RUN_MODEL"))
    assert steps == 3 and len(calls) == 3 * (steps + 1)  # three layers a step, and the engine's warm-up
    reference, _ = generate(skeleton(tmp_path / "fresh"), ["Hello"],
                            SamplingParams(temperature=0.0, max_tokens=3, ignore_eos=True))
    assert outputs[0].outputs[0].token_ids == reference[0].outputs[0].token_ids


def test_build_start_and_check_on_the_command_line(tmp_path, capsys, solutions):
    folder = tmp_path / "mine"
    assert main(["build", "start", str(folder), "--lang", "en"]) == 0
    assert "chapter 5 · The sampler: myvllm/sampler.py (keep_mask, Sampler.forward)" in capsys.readouterr().out
    assert main(["build", "start", str(folder)]) == 2
    assert "already exists" in capsys.readouterr().err
    assert main(["build", "check", str(folder), "1", "--lang", "en"]) == 1
    assert "chapter 1 · RMSNorm and SiLU-and-mul: not written yet" in capsys.readouterr().out
    assert main(["build", "check", str(solutions), "norms", "--lang", "zh"]) == 0
    assert "第 1 章 · RMSNorm 与 SiLU-and-mul：通过" in capsys.readouterr().out
    assert main(["build", "check", str(tmp_path / "absent")]) == 2
    assert main(["build", "check", str(folder), "99"]) == 2
    assert "unknown chapter '99'" in capsys.readouterr().err


def test_written_is_told_by_the_body_not_the_name():
    def stub(x):
        """contract"""
        raise NotImplementedError("not written yet")

    def partial(x):
        """contract"""
        if x:
            return x
        raise NotImplementedError("the other case")

    assert not is_written(stub) and is_written(partial)


ANOTHER_WAY = {  # chapter: {function: a correct body that is not the engine's}
    1: {"rms_norm": "xf = x.float()\nnormed = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)\n"
                    "return weight * normed.to(x.dtype)",
        "silu_and_mul": "half = x.size(-1) // 2\nreturn x[..., :half] * torch.sigmoid(x[..., :half]) * x[..., half:]"},
    2: {"cos_sin_table": "half = head_dim // 2\n"
                         "angles = torch.arange(max_position).double()[:, None] * "
                         "base ** (-2 * torch.arange(half).double() / head_dim)\n"
                         "cos, sin = angles.cos().float(), angles.sin().float()\n"
                         "return torch.stack([torch.cat([cos, cos], -1), torch.cat([-sin, sin], -1)], dim=1)",
        "apply_rotary": "xf = x.float()\nx1, x2 = xf.chunk(2, dim=-1)\nc, s = cos[..., :x1.size(-1)], sin[..., x1.size(-1):]\n"
                        "return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1).to(x.dtype)"},
    3: {"attend": "group = q.size(1) // k.size(1)\nk, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)\n"
                  "scores = torch.einsum('qhd,khd->hqk', q, k) * scale\n"
                  "if is_causal:\n    mask = torch.ones(q.size(0), k.size(0), dtype=torch.bool).tril()\n"
                  "if mask is not None:\n    scores = scores.masked_fill(~mask, float('-inf'))\n"
                  "return torch.einsum('hqk,khd->qhd', scores.softmax(-1), v)",
        "causal_prefill": "bounds = cu_seqlens.tolist()\n"
                          "return torch.cat([attend(q[a:b], k[a:b], v[a:b], scale, None, True)\n"
                          "                  for a, b in zip(bounds, bounds[1:])])"},
    5: {"Sampler.forward": "rows = []\nfor row, t, seed in zip(logits.float(), temperatures.tolist(), seeds):\n"
                           "    if t == 0:\n        rows.append(row.argmax())\n        continue\n"
                           "    g = torch.Generator().manual_seed(seed) if seed is not None else None\n"
                           "    rows.append(torch.multinomial((row / t).softmax(-1), 1, generator=g)[0])\n"
                           "return torch.stack(rows)"},
}


@pytest.mark.parametrize("number", sorted(ANOTHER_WAY))
def test_a_correct_function_written_another_way_passes(tmp_path, number):
    """The tolerances and the sampler's frequency test accept what is right, not only the engine's own code."""
    folder = skeleton(tmp_path / "mine")
    for name, body in ANOTHER_WAY[number].items():
        fill(folder, number, name, body)
    with speaking("en"):
        verdict = judge_chapter(folder, chapter_named(str(number)))
    complete = len(ANOTHER_WAY[number]) == len(chapter_named(str(number)).seams)
    assert not any(line.startswith("  your ") for line in verdict.lines), verdict.lines
    assert verdict.status == ("pass" if complete else "fail")  # the sampler's keep_mask is left to the engine


def test_the_learners_rms_norm_normalises_the_query_and_key_heads_too():
    """Chapter 1's rms_norm runs everywhere an RMSNorm does: Qwen3's per-head query and key norms included."""
    import torch

    from nanovllm_teach.track.checks import shipped_model
    from nanovllm_teach.track.learner import Piece, installed

    seam = chapter_named("norms").seams[0]
    engine_rms_norm, shapes = reference(seam), []

    def mine(x, weight, eps):
        shapes.append(tuple(x.shape))
        return engine_rms_norm(x, weight, eps)

    model = shipped_model()[0]
    attention, rope_of = model.model.layers[0].self_attn, model.model.rotary_emb
    with torch.inference_mode(), installed([Piece(seam, mine, True)]):
        attention.project(rope_of(torch.arange(3)), torch.randn(3, model.model.embed_tokens.weight.size(1)))
    assert shapes == [(3, attention.num_heads + attention.num_kv_heads, attention.head_dim)]


@pytest.mark.parametrize("lang, words", [("en", "## Checking your work"), ("zh", "## 检查你的代码")])
def test_build_start_writes_the_folders_readme_in_the_learners_language(tmp_path, capsys, lang, words):
    folder = tmp_path / "mine"
    assert main(["build", "start", str(folder), "--lang", lang]) == 0
    readme = (folder / "README.md").read_text(encoding="utf-8")
    assert words in readme and f"nanovllm-teach build check {folder} 1" in readme
    assert f"nanovllm-teach build check {folder} final" in readme  # the finish line
    for chapter in CHAPTERS:
        row = next(line for line in readme.splitlines() if f"`{chapter.file}`" in line)
        assert all(f"`{seam.qualname}`" in row for seam in chapter.seams)
    assert f"`notebooks/{lang}/16_build_norms.ipynb`" in readme
    repository = Path(__file__).resolve().parents[1]
    assert all((repository / "notebooks" / lang / f"{chapter.notebook}.ipynb").is_file() for chapter in CHAPTERS)
    written = sum(1 for path in folder.rglob("*") if path.is_file())  # the package's files, and the README
    assert f" {written} " in capsys.readouterr().out.splitlines()[0]
