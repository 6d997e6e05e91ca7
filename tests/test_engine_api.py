"""The engine's public API: what users pass in, what they get back, and what bad input does."""

from __future__ import annotations

import pytest

from checkpoints import make_random_checkpoint
from nanovllm_teach import LLM, SamplingParams


@pytest.fixture(scope="module")
def llm(tmp_path_factory):
    path = make_random_checkpoint(tmp_path_factory.mktemp("ckpt"))
    return LLM(path, kvcache_block_size=16, max_model_len=256, max_num_batched_tokens=512,
               num_kvcache_blocks=40)


def _assert_clean(llm):
    bm = llm.scheduler.block_manager
    assert llm.is_finished()
    assert bm.num_free_blocks == bm.num_blocks
    assert all(b.ref_count == 0 for b in bm.blocks)


@pytest.mark.parametrize("prompt, params, error, match", [
    ("", SamplingParams(), ValueError, "empty"),
    ([], SamplingParams(), ValueError, "empty"),
    ([1] * 300, SamplingParams(), ValueError, "max_model_len"),
    ([1, 2, 10**6], SamplingParams(), ValueError, "outside the vocabulary"),
    ([1, -3], SamplingParams(), ValueError, "outside the vocabulary"),
    ([1, 2.5], SamplingParams(), TypeError, "list of int"),
    (42, SamplingParams(), TypeError, "str or a list"),
    ([1, 2], "greedy", TypeError, "SamplingParams"),
])
def test_bad_request_is_rejected_and_nothing_is_enqueued(llm, prompt, params, error, match):
    with pytest.raises(error, match=match):
        llm.add_request(prompt, params)
    _assert_clean(llm)


@pytest.mark.parametrize("kwargs, match", [
    (dict(max_tokens=0), "max_tokens"),
    (dict(max_tokens=-5), "max_tokens"),
    (dict(temperature=-0.1), "temperature"),
    (dict(temperature=float("nan")), "temperature"),
])
def test_bad_sampling_params(kwargs, match):
    with pytest.raises(ValueError, match=match):
        SamplingParams(**kwargs)


def test_params_list_of_wrong_length_enqueues_nothing(llm):
    with pytest.raises(ValueError, match="2 SamplingParams for 3 prompts"):
        llm.generate([[1], [2], [3]], [SamplingParams(), SamplingParams()], use_tqdm=False)
    _assert_clean(llm)


def test_one_bad_prompt_in_a_batch_enqueues_none_of_it(llm):
    with pytest.raises(ValueError, match="empty"):
        llm.generate([[1, 2], [3, 4], []], SamplingParams(max_tokens=4), use_tqdm=False)
    _assert_clean(llm)


def test_request_that_never_fits(tmp_path):
    path = make_random_checkpoint(tmp_path)
    small = LLM(path, kvcache_block_size=16, max_model_len=256, max_num_batched_tokens=256, num_kvcache_blocks=4)
    with pytest.raises(ValueError, match="could never fit"):
        small.add_request([1] * 60, SamplingParams(max_tokens=10))  # 70 tokens > 4 blocks of 16
    _assert_clean(small)
    # The engine is still usable: a request that fits runs to completion.
    out = small.generate([[1] * 30], SamplingParams(temperature=0, max_tokens=10), use_tqdm=False)
    assert len(out[0]["token_ids"]) >= 1
    _assert_clean(small)


def test_unknown_engine_setting_is_named(tmp_path):
    path = make_random_checkpoint(tmp_path)
    with pytest.raises(TypeError, match="max_num_seq\\b"):
        LLM(path, max_num_seq=4)
    with pytest.raises(ValueError, match="kvcache_block_size"):
        LLM(path, kvcache_block_size=0)


def test_outputs_in_prompt_order_with_strings_and_ids(llm):
    prompts = ["hello world", [5, 6, 7, 8, 9, 10, 11, 12] * 4, "the quick brown fox"]
    params = [SamplingParams(temperature=0, max_tokens=n) for n in (9, 2, 5)]
    outs = llm.generate(prompts, params, use_tqdm=False)
    assert [len(o["token_ids"]) for o in outs] == [9, 2, 5]  # random model: EOS is (almost) never greedy
    assert [o["finish_reason"] for o in outs] == ["length"] * 3
    assert outs[0]["text"] == llm.tokenizer.decode(outs[0]["token_ids"])
    _assert_clean(llm)


def test_step_by_step_equals_generate(llm):
    params = SamplingParams(temperature=0, max_tokens=6)
    expected = [o["token_ids"] for o in llm.generate([[3, 4, 5], [9] * 20], params, use_tqdm=False)]
    ids = [llm.add_request([3, 4, 5], params), llm.add_request([9] * 20, params)]
    finished = {}
    while not llm.is_finished():
        outputs, _ = llm.step()
        finished.update(outputs)
    assert [finished[i] for i in ids] == expected


def test_seeded_sampling_is_independent_of_the_batch(llm):
    seeded = SamplingParams(temperature=0.9, max_tokens=12, seed=1234)
    alone = llm.generate([[7, 8, 9]], seeded, use_tqdm=False)[0]["token_ids"]
    others = [SamplingParams(temperature=1.0, max_tokens=n) for n in (3, 20, 7)]
    batched = llm.generate([[1, 2], [7, 8, 9], [4] * 30, [5]], [others[0], seeded, others[1], others[2]],
                           use_tqdm=False)[1]["token_ids"]
    assert alone == batched


def test_ignore_eos_runs_to_max_tokens(llm):
    eos = llm.eos_token_id
    out = llm.generate([[eos, eos]], SamplingParams(temperature=0, max_tokens=7, ignore_eos=True),
                       use_tqdm=False)[0]
    assert len(out["token_ids"]) == 7 and out["finish_reason"] == "length"


def test_step_without_requests_is_an_error(llm):
    with pytest.raises(RuntimeError, match="no request"):
        llm.step()


def test_interrupted_generate_leaves_nothing_behind(llm, monkeypatch):
    calls = {"n": 0}
    real_run = llm.model_runner.run

    def failing_run(seqs, is_prefill):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return real_run(seqs, is_prefill)

    monkeypatch.setattr(llm.model_runner, "run", failing_run)
    with pytest.raises(KeyboardInterrupt):
        llm.generate([[1, 2, 3], [4] * 40], SamplingParams(max_tokens=10), use_tqdm=False)
    _assert_clean(llm)


def _first_step_of(rec, seq_id):
    return min(e.step for e in rec.events if e.event == "SCHEDULE_PREFILL" and seq_id in e.stats["seq_ids"])


@pytest.mark.parametrize("policy", ["continuous", "static"])
def test_arrivals_join_according_to_the_policy(tmp_path, policy):
    from nanovllm_teach.trace import TraceRecorder
    rec = TraceRecorder()
    llm = LLM(make_random_checkpoint(tmp_path), trace=rec, scheduling_policy=policy, kvcache_block_size=16,
              max_model_len=256, max_num_batched_tokens=256, num_kvcache_blocks=40)
    params = [SamplingParams(temperature=0, max_tokens=n, ignore_eos=True) for n in (30, 4, 10)]
    outs = llm.generate([[1, 2, 3], [4, 5], [6, 7, 8]], params, use_tqdm=False, arrival_steps=[0, 0, 5])
    assert [len(o["token_ids"]) for o in outs] == [30, 4, 10]
    late = outs[2]["seq_id"]
    if policy == "continuous":
        assert _first_step_of(rec, late) == 6  # joins right after the 5th step
    else:
        assert _first_step_of(rec, late) == 31  # waits for the whole first batch (30 tokens) to drain
    _assert_clean(llm)


def test_bad_arrival_steps(llm):
    with pytest.raises(ValueError, match="arrival_steps"):
        llm.generate([[1], [2]], SamplingParams(), use_tqdm=False, arrival_steps=[0])
    with pytest.raises(ValueError, match="arrival_steps"):
        llm.generate([[1]], SamplingParams(), use_tqdm=False, arrival_steps=[-1])
    _assert_clean(llm)
