"""The build-it-yourself track, part 2: chapters 6 and on (the KV cache, paging, the engine around the model).

Each chapter: a wrong function fails with the sentence a learner should read, a correct one written another
way than the solution passes, and the engine runs on the learner's pieces. That the generated solutions pass
and a fresh skeleton is "not written yet" is tested for every chapter in ``test_track_build.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from nanovllm_teach.i18n import speaking
from nanovllm_teach.track.chapters import CHAPTERS, chapter_named
from nanovllm_teach.track.extract import replace_stub, write_package
from nanovllm_teach.track.learner import generate
from nanovllm_teach.track.seams import PACKAGE
from nanovllm_teach.track.verdict import judge_chapter


def skeleton(folder: Path) -> Path:
    write_package(folder, CHAPTERS, with_solutions=False, lang="en")
    return folder


def verdict_text(folder: Path, number: int, lang: str = "en") -> tuple[str, str]:
    with speaking(lang):
        verdict = judge_chapter(folder, chapter_named(str(number)))
    return verdict.status, "\n".join(verdict.lines)


PAGED_DECODE = ("lens, tables = ctx.context_lens.tolist(), ctx.block_tables\nout = torch.empty_like(q)\n"
                "block = k_cache.size(1)\nfor i, n in enumerate(lens):\n"
                "    blocks = tables[i, :(n + block - 1) // block].long()\n"
                "    k, v = k_cache[blocks].flatten(0, 1)[:n], v_cache[blocks].flatten(0, 1)[:n]\n"
                "    out[i] = attend(q[i:i + 1], k, v, scale, None, False)[0]\nreturn out")
ANOTHER_WAY = {  # chapter: {function: a correct body that is not the solution's}
    6: {"store_contiguous": "for i, p in enumerate(positions.tolist()):\n    k_cache[i, p] = k[i]\n    v_cache[i, p] = v[i]",
        "decode_contiguous": "out = []\nfor i, n in enumerate(context_lens.tolist()):\n"
                             "    out.append(attend(q[i:i + 1], k_cache[i, :n], v_cache[i, :n], scale, None, False))\n"
                             "return torch.cat(out)"},
    7: {"TorchAttentionBackend.store_kvcache":
        "keep = slot_mapping >= 0\nslots = slot_mapping[keep]\nblock = k_cache.size(1)\n"
        "k_cache[slots // block, slots % block] = k[keep]\nv_cache[slots // block, slots % block] = v[keep]",
        "TorchAttentionBackend.decode": PAGED_DECODE},
}


def import_attend(folder: Path, number: int, extra: str = "") -> None:
    """The learner's own import of chapter 3's ``attend`` (the engine's, or theirs once written), and ``extra``
    at the end of the file."""
    path = folder / chapter_named(str(number)).file
    text = path.read_text(encoding="utf-8").replace(
        "from __future__ import annotations\n",
        "from __future__ import annotations\n\nfrom nanovllm_teach.layers.attention_torch import attend\n", 1)
    path.write_text(text + extra, encoding="utf-8")


def write_another_way(folder: Path, number: int) -> None:
    chapter = chapter_named(str(number))
    for name, body in ANOTHER_WAY[number].items():
        replace_stub(folder, chapter, name, body)
    import_attend(folder, number)


@pytest.mark.parametrize("number", sorted(ANOTHER_WAY))
def test_a_correct_cache_written_another_way_passes(tmp_path, number):
    folder = skeleton(tmp_path / "mine")
    write_another_way(folder, number)
    status, text = verdict_text(folder, number)
    assert status == "pass", text


WRONG = {  # chapter: (function, a plausible mistake, what the learner must read)
    6: ("decode_contiguous",
        "out = torch.empty_like(q)\nfor i, n in enumerate(context_lens.tolist()):\n"
        "    out[i] = attend(q[i:i + 1], k_cache[i, :n - 1], v_cache[i, :n - 1], scale, None, False)[0]\nreturn out",
        "your decode_contiguous on decode step 1 of 3 sequences of [6, 2, 13] tokens: element [0, 0, 0] is "),
    7: ("TorchAttentionBackend.store_kvcache",
        "k_cache.view(-1, *k_cache.shape[2:])[slot_mapping] = k\nv_cache.view(-1, *v_cache.shape[2:])[slot_mapping] = v",
        "your TorchAttentionBackend.store_kvcache (k_cache) on a prefill of 11 tokens whose first 6 are cached "
        "already (slot -1): element [7, 3, 0, 0] is "),
}


@pytest.mark.parametrize("number", sorted(WRONG))
def test_a_wrong_cache_fails_its_chapter_with_the_sentence_a_learner_needs(tmp_path, number):
    folder = skeleton(tmp_path / "mine")
    name, body, sentence = WRONG[number]
    replace_stub(folder, chapter_named(str(number)), name, body)
    import_attend(folder, number)
    status, text = verdict_text(folder, number)
    assert status == "fail" and sentence in text, text
    assert "the reference gives" in text and f"  yours: {name}" in text and "not written yet" in text


def test_a_paged_decode_that_ignores_the_block_table_is_named_in_chinese(tmp_path):
    folder = skeleton(tmp_path / "mine")
    ignoring = PAGED_DECODE.replace("tables[i, :(n + block - 1) // block].long()",
                                    "torch.arange((n + block - 1) // block) + i")
    replace_stub(folder, chapter_named("7"), "TorchAttentionBackend.decode", ignoring)
    import_attend(folder, 7)
    status, text = verdict_text(folder, 7, "zh")
    assert status == "fail" and "你的 TorchAttentionBackend.decode 在3 条长度为 [6, 2, 13] 的序列的第 1 个解码 step上" in text, text


def test_the_engines_decode_runs_through_the_learners_paged_attention(tmp_path):
    """Chapter 7's pieces are the engine's attention: every layer's store and decode of every step calls them,
    and the tokens are the engine's own."""
    from nanovllm_teach import SamplingParams

    folder = skeleton(tmp_path / "mine")
    chapter = chapter_named("7")
    replace_stub(folder, chapter, "TorchAttentionBackend.store_kvcache", ANOTHER_WAY[7]["TorchAttentionBackend.store_kvcache"])
    replace_stub(folder, chapter, "TorchAttentionBackend.decode", "CALLS.append(q.size(0))\n" + PAGED_DECODE)
    import_attend(folder, 7, "\n\nCALLS = []\n")
    params = SamplingParams(temperature=0.0, max_tokens=4, ignore_eos=True)
    outputs, trace = generate(folder, ["Hello", "The capital of France is"], params)
    decodes = len(trace.events_named("PREPARE_DECODE_TENSORS"))
    calls = sys.modules[f"{PACKAGE}.layers.paged_attention"].CALLS
    assert decodes == 3 and calls == [2] * 3 * decodes  # three layers a step, both sequences in each
    reference, _ = generate(skeleton(tmp_path / "fresh"), ["Hello", "The capital of France is"], params)
    assert [o.outputs[0].token_ids for o in outputs] == [o.outputs[0].token_ids for o in reference]
