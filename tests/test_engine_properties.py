"""Property tests of the real engine: tight budgets change how a workload is scheduled, never what it
generates.

One random tiny Qwen3 checkpoint (hidden 64, 2 layers) is built per module. Its weights are untied and
initialised at a larger scale than the default (``initializer_range=0.3``): with the default tied 0.02
initialisation a random model predicts "the input token again" almost everywhere, whatever the context,
so a broken KV cache would go unnoticed. This one's next token depends on the context, and its top-2
logit gaps are far above float32 noise, so greedy decoding is a sharp test.

Hypothesis draws token-id workloads (shared prefixes, requests arriving while the engine runs) and tight
settings: a KV cache just big enough for the largest request (forces preemption), a small
``max_num_batched_tokens`` (forces chunked prefill), few sequences per batch, block size 4/8/16, prefix
caching on or off, continuous or static scheduling. The outputs must equal a reference engine's with the
same block size and a generous budget (no preemption, no chunking, no prefix caching), and every KV
block must be free at the end.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from checkpoints import make_random_checkpoint
from nanovllm_teach import LLM, SamplingParams
from nanovllm_teach.trace import TraceRecorder

VOCAB = 384
MAX_MODEL_LEN = 256  # the warm-up prefills this many tokens: keep engine construction cheap
BLOCK_SIZES = (4, 8, 16)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    return make_random_checkpoint(tmp_path_factory.mktemp("engine_props"), vocab_size=VOCAB, hidden_size=64,
                                  num_hidden_layers=2, tie_word_embeddings=False, initializer_range=0.3, seed=11)


@pytest.fixture(scope="module")
def reference_engines(checkpoint):
    """One unconstrained engine per block size, built on first use and shared by every example."""
    engines: dict[int, LLM] = {}

    def get(block_size: int) -> LLM:
        if block_size not in engines:
            engines[block_size] = LLM(checkpoint, max_model_len=MAX_MODEL_LEN, kvcache_block_size=block_size,
                                      num_kvcache_blocks=4 * 1024 // block_size, max_num_batched_tokens=1024,
                                      max_num_seqs=64, enable_prefix_caching=False)
        return engines[block_size]
    return get


def worst_case_blocks(prompt: list[int], max_tokens: int, block_size: int) -> int:
    """The engine's admission charge for one request."""
    return -(-min(len(prompt) + max_tokens, MAX_MODEL_LEN) // block_size)


@st.composite
def workloads(draw):
    block_size = draw(st.sampled_from(BLOCK_SIZES), label="block_size")
    token = st.integers(0, VOCAB - 1)  # EOS included: in a prompt it is just a token
    shared = draw(st.lists(token, min_size=block_size, max_size=2 * block_size + 3), label="shared prefix")
    requests = []
    for _ in range(draw(st.integers(2, 5), label="num_requests")):
        prompt = (shared if draw(st.booleans()) else []) + draw(st.lists(token, min_size=1, max_size=24))
        params = SamplingParams(temperature=0.0, max_tokens=draw(st.integers(1, 24)), ignore_eos=draw(st.booleans()))
        arrival = draw(st.just(0) | st.integers(1, 12))  # engine steps run before it is added
        requests.append((prompt, params, arrival))
    longest = max(len(p) for p, _, _ in requests)
    biggest = max(worst_case_blocks(p, sp.max_tokens, block_size) for p, sp, _ in requests)
    engine_settings = dict(
        kvcache_block_size=block_size,
        num_kvcache_blocks=biggest + draw(st.sampled_from([0, 0, 1]), label="spare blocks"),
        max_num_batched_tokens=draw(st.integers(min(4, longest), longest), label="max_num_batched_tokens"),
        max_num_seqs=draw(st.integers(1, 4), label="max_num_seqs"),
        enable_prefix_caching=draw(st.booleans(), label="prefix caching"),
        scheduling_policy=draw(st.sampled_from(["continuous", "static"]), label="policy"),
    )
    return requests, engine_settings


def serve(llm: LLM, requests) -> dict[int, list[int]]:
    """Run the workload through ``step()``, adding each request once ``arrival`` steps have run (or at
    once when the engine idles); returns each request's completion tokens by request index."""
    pending = sorted(range(len(requests)), key=lambda i: requests[i][2])
    seq_to_request: dict[int, int] = {}
    outputs: dict[int, list[int]] = {}
    steps = 0
    while pending or not llm.is_finished():
        while pending and (requests[pending[0]][2] <= steps or llm.is_finished()):
            i = pending.pop(0)
            seq_to_request[llm.add_request(requests[i][0], requests[i][1])] = i
        finished, _ = llm.step()
        steps += 1
        for seq_id, token_ids in finished:
            outputs[seq_to_request[seq_id]] = token_ids
    return outputs


def check_all_free(llm: LLM) -> None:
    bm = llm.scheduler.block_manager
    assert bm.num_free_blocks == bm.num_blocks and not bm.used_block_ids, "blocks leaked"
    assert all(block.ref_count == 0 for block in bm.blocks)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=workloads())
def test_tight_budgets_give_the_same_greedy_tokens(checkpoint, reference_engines, case):
    """Preemption (a KV cache of one request's worst case), chunked prefill (a token budget smaller than
    the prompts), few sequences per batch, prefix caching and late arrivals change the schedule only:
    every request's greedy tokens equal those of the same block size with a generous budget, and the
    tight engine ends with every KV block free."""
    requests, engine_settings = case
    reference = reference_engines(engine_settings["kvcache_block_size"])
    expected = serve(reference, [(p, sp, 0) for p, sp, _ in requests])
    check_all_free(reference)

    rec = TraceRecorder(detail_decode_steps=0, detail_max_elements=0)
    llm = LLM(checkpoint, trace=rec, max_model_len=MAX_MODEL_LEN, **engine_settings)
    got = serve(llm, requests)
    seen = Counter(e.event for e in rec.events)
    seen["chunked"] = sum(any(e.stats["chunked"]) for e in rec.events if e.event == "SCHEDULE_PREFILL")
    for what in ("PREEMPT", "chunked", "PREFIX_CACHE_HIT"):
        event(f"{what}: {'some' if seen[what] else 'none'}")
    for i, (prompt, params, arrival) in enumerate(requests):
        assert got[i] == expected[i], (
            f"request {i} (prompt {prompt}, {params}, arriving after {arrival} steps) diverged under "
            f"{engine_settings}")
    check_all_free(llm)


def test_the_tight_settings_do_preempt_chunk_and_hit(checkpoint, reference_engines):
    """The paths the property is about are really taken: on a cache of one request's worst case with a
    budget of 5 tokens per step, two long requests sharing a prefix get chunked, preempted and served
    from the prefix cache, and still produce the reference tokens."""
    shared = list(range(100, 120))
    requests = [(shared + [5, 6, 7], SamplingParams(temperature=0.0, max_tokens=10, ignore_eos=True), 0),
                (shared + [8, 9], SamplingParams(temperature=0.0, max_tokens=10, ignore_eos=True), 0),
                (shared + [1], SamplingParams(temperature=0.0, max_tokens=3, ignore_eos=True), 8)]
    expected = serve(reference_engines(4), [(p, sp, 0) for p, sp, _ in requests])
    rec = TraceRecorder(detail_decode_steps=0, detail_max_elements=0)
    llm = LLM(checkpoint, trace=rec, max_model_len=MAX_MODEL_LEN, kvcache_block_size=4,
              num_kvcache_blocks=worst_case_blocks(requests[0][0], 10, 4), max_num_batched_tokens=5)
    assert serve(llm, requests) == expected
    names = {e.event for e in rec.events}
    assert {"PREEMPT", "PREFIX_CACHE_HIT"} <= names
    assert any(any(e.stats["chunked"]) for e in rec.events if e.event == "SCHEDULE_PREFILL")
    check_all_free(llm)
