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
    6: {"store_contiguous": "for i, p in enumerate(positions.tolist()):\n"
                            "    k_cache[i, p] = k[i]\n    v_cache[i, p] = v[i]",
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
        "k_cache.view(-1, *k_cache.shape[2:])[slot_mapping] = k\n"
        "v_cache.view(-1, *v_cache.shape[2:])[slot_mapping] = v",
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
    store = "TorchAttentionBackend.store_kvcache"
    replace_stub(folder, chapter, store, ANOTHER_WAY[7][store])
    replace_stub(folder, chapter, "TorchAttentionBackend.decode", "CALLS.append(q.size(0))\n" + PAGED_DECODE)
    import_attend(folder, 7, "\n\nCALLS = []\n")
    params = SamplingParams(temperature=0.0, max_tokens=4, ignore_eos=True)
    outputs, trace = generate(folder, ["Hello", "The capital of France is"], params)
    decodes = len(trace.events_named("PREPARE_DECODE_TENSORS"))
    calls = sys.modules[f"{PACKAGE}.layers.paged_attention"].CALLS
    assert decodes == 3 and calls == [2] * 3 * decodes  # three layers a step, both sequences in each
    reference, _ = generate(skeleton(tmp_path / "fresh"), ["Hello", "The capital of France is"], params)
    assert [o.outputs[0].token_ids for o in outputs] == [o.outputs[0].token_ids for o in reference]


DEALLOCATE_IN_ORDER = (  # chapter 8's mistake: the blocks let go of first block first (the engine: last first)
    "released, seq.block_table = seq.block_table, []\nseq.num_cached_tokens = 0\nfreed = []\n"
    "for block_id in released:\n    block = self.blocks[block_id]\n    block.ref_count -= 1\n"
    "    if block.ref_count == 0:\n        self.used_block_ids.discard(block_id)\n"
    "        self.free_block_ids.append(block_id)\n        freed.append(block_id)\n"
    "return Freed(seq.seq_id, released, freed, self.num_free_blocks)")
CHUNK_ANYONE = (  # chapter 9's mistake: a sequence behind the head is chunked too, instead of waiting
    "scheduled, allocations = [], []\nnum_batched_tokens = 0\nbm = self.block_manager\n"
    "while self.waiting and len(scheduled) < self.admission_cap():\n    seq = self.next_waiting()\n"
    "    remaining = self.max_num_batched_tokens - num_batched_tokens\n    if remaining == 0:\n        break\n"
    "    if seq.block_table:\n        num_cached_blocks = None\n"
    "        num_tokens = seq.num_tokens - seq.num_cached_tokens\n"
    "    else:\n        num_cached_blocks = bm.can_allocate(seq)\n"
    "        if num_cached_blocks == -1:\n            break\n"
    "        num_tokens = seq.num_tokens - num_cached_blocks * bm.block_size\n"
    "    if num_cached_blocks is not None:\n        allocations.append(bm.allocate(seq, num_cached_blocks))\n"
    "    seq.num_scheduled_tokens = min(num_tokens, remaining)\n    num_batched_tokens += seq.num_scheduled_tokens\n"
    "    if seq.num_cached_tokens + seq.num_scheduled_tokens == seq.num_tokens:\n"
    "        seq.status = SequenceStatus.RUNNING\n        self.waiting.popleft()\n        self.running.append(seq)\n"
    "    scheduled.append(seq)\nreturn scheduled, allocations")
BY_DECISIONS = {  # chapter: (function, the mistake, what the learner must read in English, and in Chinese)
    8: ("BlockManager.deallocate", DEALLOCATE_IN_ORDER,
        ["with your BlockManager.deallocate in the engine, workload 'shared_prefixes'",
         "your run's decisions first differ from the reference's in step 8 (BLOCK_FREE):",
         "BLOCK_FREE.freed_block_ids: you had [2, 9], the reference [9, 2]",
         "there, at the start of step 8, seq 0 had the K/V of 15 tokens cached in 4 blocks of 4 ([0, 1, 2, 9])"],
        ["换上你的 BlockManager.deallocate 后，工作负载 'shared_prefixes'", "你的运行所做的决策最早在第 8 步与参考实现不同",
         "序列 0 已有 15 个 token 的 K/V 缓存在 4 个块中"]),
    9: ("Scheduler.schedule_prefill", CHUNK_ANYONE,
        ["with your Scheduler.schedule_prefill in the engine, workload 'small_budget'",
         "your run's decisions first differ from the reference's in step 2 (SCHEDULE_PREFILL):",
         "you allocated blocks [8, 9, 10] to seq 1, the reference did not"],
        ["换上你的 Scheduler.schedule_prefill 后，工作负载 'small_budget'", "你为序列 1 分配了块 [8, 9, 10]，参考实现没有这样做"]),
}


@pytest.mark.parametrize("number", sorted(BY_DECISIONS))
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_wrong_engine_piece_fails_by_the_first_decision_that_differs(tmp_path, number, lang):
    folder = skeleton(tmp_path / "mine")
    name, body, english, chinese = BY_DECISIONS[number]
    replace_stub(folder, chapter_named(str(number)), name, body)
    path = folder / chapter_named(str(number)).file
    path.write_text(path.read_text(encoding="utf-8").replace(
        "from myvllm.glue.engine.sequence import Sequence\n",
        "from myvllm.glue.engine.sequence import Sequence, SequenceStatus\n"), encoding="utf-8")
    status, text = verdict_text(folder, number, lang)
    assert status == "fail", text
    assert all(sentence in text for sentence in (english if lang == "en" else chinese)), text


def test_the_chapter_workloads_make_the_behaviour_happen():
    """Prefix hits (also on blocks whose holders finished), chunked prefills and preemptions all occur in the
    engine's own runs of the workloads chapters 8 and 9 are checked on, or their checks would prove nothing."""
    from nanovllm_teach.track.checks_decisions import WORKLOADS, reference_run

    def trace(name):
        return reference_run(name)

    blocks, scheduler = (WORKLOADS[f"nanovllm_teach.engine.{m}"] for m in ("block_manager", "scheduler"))
    assert all(trace(w.name).events_named("PREFIX_CACHE_HIT") for w in blocks[:2])
    assert trace(blocks[2].name).events_named("PREEMPT")  # the tight cache: blocks given back and taken again
    chunked = [e for w in scheduler for e in trace(w.name).events_named("SCHEDULE_PREFILL") if any(e.stats.chunked)]
    assert chunked and any(trace(w.name).events_named("PREEMPT") for w in scheduler)


def test_a_wrong_block_hash_is_named_by_its_value(tmp_path):
    folder = skeleton(tmp_path / "mine")
    replace_stub(folder, chapter_named("8"), "compute_block_hash",
                 "import xxhash\nreturn xxhash.xxh64(bytes(token_ids)).intdigest()")
    status, text = verdict_text(folder, 8)
    assert status == "fail" and "your compute_block_hash on tokens [11, 12, 13, 14] after the hash -1 returned " in text


DECODE_LENS_SHORT = (  # chapter 10's mistake: context_lens that forget the new token (its K/V is stored first)
    "from nanovllm_teach.engine.decode_inputs import padded_block_tables\n"
    "from nanovllm_teach.engine.model_runner import decode_slot\n"
    "from nanovllm_teach.utils.context import Context, set_context\n"
    "tables, width = padded_block_tables(seqs)\n"
    "ctx = Context(is_prefill=False, slot_mapping=self._tensor([decode_slot(s, self.block_size) for s in seqs]),\n"
    "              context_lens=self._tensor([s.num_tokens - 1 for s in seqs], torch.int32),\n"
    "              block_tables=self._tensor(tables, torch.int32).view(len(seqs), width))\n"
    "set_context(ctx)\n"
    "return self._tensor([s.token_ids[0] for s in seqs]), self._tensor([s.num_cached_tokens for s in seqs])")
OUT_OF_ORDER = (  # and a loop that decides right but returns the sequences in another order than the prompts'
    "if not isinstance(sampling_params, list):\n    sampling_params = [sampling_params] * len(prompts)\n"
    "seq_ids = [self.add_request(prompt, params) for prompt, params in zip(prompts, sampling_params)]\n"
    "seqs = [self.scheduler.accepted[seq_id] for seq_id in seq_ids]\n"
    "with self.generating(len(seqs)):\n    while not self.is_finished():\n        self.step()\n"
    "return sorted(seqs, key=lambda seq: seq.num_prompt_tokens)")


@pytest.mark.parametrize("name, body, sentence", [
    ("ModelRunner.prepare_decode", DECODE_LENS_SHORT,
     "first differ from the reference's in step 5 (PREPARE_DECODE_TENSORS):\n  step 5, "
     "PREPARE_DECODE_TENSORS.context_lens: you wrote [15, 14, 16, 10], the reference [16, 15, 17, 11]"),
    ("LLMEngine.generate", OUT_OF_ORDER,
     "with your LLMEngine.generate in the engine, workload 'tight_cache': every decision agrees, but request 0 "
     "generated [14, 2, "),
], ids=["prepare_decode", "generate"])
def test_a_wrong_runner_input_or_loop_fails_chapter_10(tmp_path, name, body, sentence):
    folder = skeleton(tmp_path / "mine")
    replace_stub(folder, chapter_named("10"), name, body)
    status, text = verdict_text(folder, 10)
    assert status == "fail" and sentence in text, text


def test_the_loop_runs_through_the_learners_generate_step_and_runner_inputs(tmp_path):
    """Chapter 10's check drives nano-vllm's own engine, so the learner's generate, step and prepare_decode
    are what run (the serving shell's loop would not call them); its workloads cache, chunk and preempt."""
    from nanovllm_teach.track.chapters import CHAPTERS as ALL
    from nanovllm_teach.track.checks_decisions import WORKLOADS, reference_loop, run_loop
    from nanovllm_teach.track.learner import written_pieces

    folder = tmp_path / "solutions"
    write_package(folder, ALL, with_solutions=True, lang="en")
    chapter = chapter_named("10")
    path = folder / chapter.file
    text = path.read_text(encoding="utf-8")
    for method in ("def step(self)", "def generate(self", "def prepare_decode(self"):
        head, _, rest = text.partition(method)
        documented, _, body = rest.partition('"""\n')  # the docstring's end: the body starts after it
        text = head + method + documented + '"""\n        CALLS.append(' + repr(method) + ")\n" + body
    path.write_text(text + "\n\nCALLS = []\n", encoding="utf-8")
    workload = WORKLOADS["nanovllm_teach.engine.llm_engine"][0]
    trace, tokens = run_loop(workload, written_pieces(folder, [chapter]))
    calls = sys.modules[f"{PACKAGE}.engine.loop"].CALLS
    steps = len(trace.events_named("STEP_DONE"))
    assert calls.count("def generate(self") == 1 and calls.count("def step(self)") == steps
    assert calls.count("def prepare_decode(self") == len(trace.events_named("PREPARE_DECODE_TENSORS")) > 0
    assert tokens == reference_loop(workload.name)[1]
    ran = [reference_loop(w.name)[0] for w in WORKLOADS["nanovllm_teach.engine.llm_engine"]]
    assert any(t.events_named("PREFIX_CACHE_HIT") for t in ran) and any(t.events_named("PREEMPT") for t in ran)
    assert any(any(e.stats.chunked) for t in ran for e in t.events_named("SCHEDULE_PREFILL"))


def test_what_a_learners_engine_piece_raises_is_named_with_its_workload(tmp_path):
    folder = skeleton(tmp_path / "mine")
    replace_stub(folder, chapter_named("9"), "Scheduler.preempt", "raise ValueError('no room for ' + str(seq.seq_id))")
    status, text = verdict_text(folder, 9)
    sentence = "with your Scheduler.preempt in the engine, on workload 'tight_cache', the run raised ValueError: no"
    assert status == "fail" and sentence in text, text
