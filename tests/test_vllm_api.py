"""The offline API a vLLM user expects: outputs in vLLM's shape, the sampling parameters vLLM has, each
checked against a reference, and the dicts nano-vllm's users read still answering."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers import Qwen3ForCausalLM as HFQwen3

from checkpoints import make_random_checkpoint
from nanovllm_teach import LLM, SamplingParams
from nanovllm_teach.outputs import CompletionOutput, RequestOutput
from nanovllm_teach.trace import TraceRecorder

PROMPT = [5, 6, 7, 8, 9, 10, 11, 12] * 5  # 40 tokens: two full blocks of 16
GREEDY = SamplingParams(temperature=0, max_tokens=12)


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    return make_random_checkpoint(tmp_path_factory.mktemp("ckpt"))


@pytest.fixture(scope="module")
def llm(path):
    return LLM(path, trace=TraceRecorder(), kvcache_block_size=16, max_model_len=256, max_num_batched_tokens=512,
               num_kvcache_blocks=40)


def _assert_clean(llm):
    bm = llm.scheduler.block_manager
    assert llm.is_finished() and bm.num_free_blocks == bm.num_blocks
    assert all(b.ref_count == 0 for b in bm.blocks)


def test_one_string_prompt_gives_one_vllm_shaped_output_that_still_reads_as_a_dict(llm):
    [out] = llm.generate("hello world", SamplingParams(temperature=0, max_tokens=5), use_tqdm=False)
    assert isinstance(out, RequestOutput) and isinstance(out.outputs[0], CompletionOutput)
    first = out.outputs[0]
    assert out.prompt == "hello world" and out.prompt_token_ids == llm.tokenizer.encode("hello world")
    assert out.finished and out.request_id == str(first.seq_id)
    assert (first.index, first.finish_reason, first.stop_reason) == (0, "length", None)
    assert first.text == llm.tokenizer.decode(first.token_ids) and len(first.token_ids) == 5
    assert first.logprobs is None and first.cumulative_logprob is None
    assert dict(out) == {"seq_id": first.seq_id, "text": first.text, "token_ids": first.token_ids,
                         "finish_reason": "length"}  # the engine's own reason, as the dicts had it
    with pytest.raises(KeyError, match="outputs"):
        out["outputs"]
    m = out.metrics
    assert m.arrival_time <= m.first_scheduled_time <= m.first_token_time <= m.last_token_time <= m.finished_time
    assert m.time_in_queue >= 0
    [ids_out] = llm.generate(PROMPT, GREEDY, use_tqdm=False)  # a list of ints is one prompt
    assert ids_out.prompt is None and ids_out.prompt_token_ids == PROMPT
    _assert_clean(llm)


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(top_p=0), ValueError, "top_p must be a number in \\(0, 1\\], got 0"),
    (dict(top_p=1.5), ValueError, "top_p"),
    (dict(top_p=float("nan")), ValueError, "top_p"),
    (dict(top_k=-2), ValueError, "top_k .* got -2"),
    (dict(top_k=2.5), ValueError, "top_k"),
    (dict(min_p=-0.1), ValueError, "min_p"),
    (dict(n=0), ValueError, "n must be an int between 1 and 256, got 0"),
    (dict(n=True), ValueError, "n must be"),
    (dict(stop=[""]), ValueError, "non-empty str, got ''"),
    (dict(stop=5), TypeError, "stop must be"),
    (dict(stop=["a"] * 40), ValueError, "stop has 40 strings"),
    (dict(stop_token_ids=[-1]), ValueError, "stop token id must be an int >= 0, got -1"),
    (dict(logprobs=21), ValueError, "logprobs must be None or an int between 0 and 20, got 21"),
    (dict(logprobs=-1), ValueError, "logprobs"),
    (dict(temperature=float("inf")), ValueError, "temperature must be a finite number"),
    (dict(temperature=float("nan")), ValueError, "temperature must be a finite number"),
])
def test_bad_new_sampling_params_are_named(kwargs, error, match):
    with pytest.raises(error, match=match):
        SamplingParams(**kwargs)


@settings(max_examples=300, deadline=None)
@given(temperature=st.floats(allow_nan=True, allow_infinity=True), max_tokens=st.integers(-5, 2**70),
       seed=st.none() | st.integers(-5, 2**70))
def test_every_sampling_params_accepted_can_be_recorded_in_a_trace(temperature, max_tokens, seed):
    """What SamplingParams accepts, REQUEST_ENQUEUE's contract can hold: no request reaches the engine that
    would write a trace line (or feed /live) the contract refuses."""
    from nanovllm_teach.trace.events import check_payload
    try:
        params = SamplingParams(temperature=temperature, max_tokens=max_tokens, seed=seed)
    except (TypeError, ValueError):
        return
    check_payload("REQUEST_ENQUEUE", {"seq_id": 0, "prompt_len": 1, "max_tokens": params.max_tokens,
                                      "temperature": float(params.temperature), "ignore_eos": params.ignore_eos,
                                      "seed": params.seed, "waiting_len": 1})


def test_requests_the_engine_cannot_take_are_refused_before_anything_is_queued(llm):
    with pytest.raises(ValueError, match="stop token id 100000 is outside the vocabulary"):
        llm.generate([PROMPT, PROMPT], SamplingParams(stop_token_ids=[1, 100000]), use_tqdm=False)
    with pytest.raises(ValueError, match="add_request takes n=1"):
        llm.add_request(PROMPT, SamplingParams(n=2))
    _assert_clean(llm)


def test_stop_token_ids_end_the_request_and_the_reasons_map_in_one_place(llm):
    [greedy] = llm.generate(PROMPT, GREEDY, use_tqdm=False)
    tokens = greedy.outputs[0].token_ids
    stop_id = tokens[3]
    cut = tokens.index(stop_id) + 1
    [out] = llm.generate(PROMPT, SamplingParams(temperature=0, max_tokens=12, stop_token_ids=[stop_id]),
                         use_tqdm=False)
    first = out.outputs[0]
    assert first.token_ids == tokens[:cut]  # the stop token is kept in the ids
    assert (first.finish_reason, first.stop_reason, out["finish_reason"]) == ("stop", stop_id, "stop")
    # On the very token max_tokens allows, it is still the stop token that ended it (as EOS would be).
    [last] = llm.generate(PROMPT, SamplingParams(temperature=0, max_tokens=cut, stop_token_ids=[stop_id]),
                          use_tqdm=False)
    assert (last.outputs[0].finish_reason, last.outputs[0].stop_reason) == ("stop", stop_id)
    _assert_clean(llm)


def _spanning_stop(pieces: list[str]) -> tuple[str, int]:
    """A stop string that begins inside one token's text and ends inside a later one's (no single token
    holds it), and how many tokens the text needs before it first holds it whole."""
    full = pieces[-1]
    for start in range(2, len(pieces) - 3):
        if len(pieces[start + 1]) - len(pieces[start]) < 2:
            continue  # the first token must have a character before the stop string begins
        for end in range(start + 2, len(pieces)):
            stop = full[len(pieces[start]) + 1:len(pieces[end]) - 1]
            needed = next(i for i in range(len(pieces)) if stop in pieces[i])
            if len(pieces[end]) - len(pieces[end - 1]) >= 2 and needed == end:
                return stop, needed
    raise AssertionError("no stop string spans several tokens of this text")


def test_a_stop_string_across_tokens_ends_the_text_where_it_begins(llm):
    params = SamplingParams(temperature=1.0, max_tokens=24, seed=3)  # seeded: the same tokens every run
    [sampled] = llm.generate(PROMPT, params, use_tqdm=False)
    tokens = sampled.outputs[0].token_ids
    pieces = [llm.tokenizer.decode(tokens[:i]) for i in range(len(tokens) + 1)]
    stop, needed = _spanning_stop(pieces)
    [out] = llm.generate(PROMPT, dataclasses.replace(params, stop=["never there", stop]), use_tqdm=False)
    first = out.outputs[0]
    assert first.text == pieces[-1][:pieces[-1].find(stop)]
    assert (first.finish_reason, first.stop_reason) == ("stop", stop)
    assert first.token_ids == tokens[:needed]  # it stopped on the step the stop string was complete
    assert out["text"] == first.text and out["finish_reason"] == "stop"
    stops = [e for e in llm.rec.events if e.event == "STATE_TRANSITION" and e.reason == "finished_stop"]
    assert stops[-1].stats["seq_id"] == first.seq_id
    _assert_clean(llm)


def test_top_k_1_is_greedy_and_seeded_filtered_sampling_ignores_the_batch(llm):
    [greedy] = llm.generate(PROMPT, GREEDY, use_tqdm=False)
    [top1] = llm.generate(PROMPT, SamplingParams(temperature=1.3, top_k=1, max_tokens=12), use_tqdm=False)
    assert top1.outputs[0].token_ids == greedy.outputs[0].token_ids
    seeded = SamplingParams(temperature=1.0, top_p=0.8, top_k=40, min_p=0.02, max_tokens=10, seed=99)
    [alone] = llm.generate([[7, 8, 9]], seeded, use_tqdm=False)
    batched = llm.generate([[1, 2], [7, 8, 9], [4] * 30],
                           [SamplingParams(temperature=1.0, max_tokens=3), seeded,
                            SamplingParams(temperature=0.7, top_p=0.5, max_tokens=14)], use_tqdm=False)
    assert alone.outputs[0].token_ids == batched[1].outputs[0].token_ids


def test_sample_events_show_what_the_filters_kept(llm):
    llm.generate([[1, 2], [3, 4], [5, 6]], [SamplingParams(temperature=1.0, top_k=5, max_tokens=2),
                                            SamplingParams(temperature=0, max_tokens=2),
                                            SamplingParams(temperature=1.0, max_tokens=2)], use_tqdm=False)
    sample = [e for e in llm.rec.events if e.event == "SAMPLE"][-1]
    vocab = llm.config.hf_config.vocab_size
    assert sample.stats["top_k"] == [5, 0, 0] and sample.stats["num_kept"] == [5, 1, vocab]
    llm.generate([[1, 2]], GREEDY, use_tqdm=False)
    assert "num_kept" not in [e for e in llm.rec.events if e.event == "SAMPLE"][-1].stats  # no filter, no fields


def test_logprobs_match_transformers_for_every_generated_token(llm, path):
    [out] = llm.generate(PROMPT, SamplingParams(temperature=0, max_tokens=6, logprobs=3), use_tqdm=False)
    first = out.outputs[0]
    model = HFQwen3.from_pretrained(path, dtype=torch.float32).eval()
    with torch.no_grad():
        logits = model(torch.tensor([PROMPT + first.token_ids])).logits[0]
    expected = torch.log_softmax(logits[len(PROMPT) - 1:-1], dim=-1)
    assert len(first.logprobs) == len(first.token_ids) == 6
    for position, (token_id, entry) in enumerate(zip(first.token_ids, first.logprobs)):
        top = expected[position].topk(3)
        assert list(entry) == top.indices.tolist()  # greedy: the sampled token is the most likely, rank 1
        assert [entry[t].logprob for t in entry] == pytest.approx(top.values.tolist(), abs=1e-4)
        assert entry[token_id].rank == 1 and entry[token_id].decoded_token == llm.tokenizer.decode([token_id])
    assert first.cumulative_logprob == pytest.approx(sum(e[t].logprob for t, e in zip(first.token_ids,
                                                                                    first.logprobs)))
    [sampled] = llm.generate(PROMPT, SamplingParams(temperature=1.0, max_tokens=8, logprobs=0, seed=5),
                             use_tqdm=False)
    for token_id, entry in zip(sampled.outputs[0].token_ids, sampled.outputs[0].logprobs):
        assert list(entry) == [token_id]  # logprobs=0: the sampled token's alone, with its rank


def test_n_samples_share_the_prompts_blocks(llm, monkeypatch):
    params = SamplingParams(temperature=1.0, max_tokens=8, n=3, seed=21)
    bm = llm.scheduler.block_manager
    shared = []
    real_step = llm.step

    def step():
        result = real_step()
        running = list(llm.scheduler.running)
        if len(running) == 3:
            heads = {tuple(seq.block_table[:2]) for seq in running}
            shared.append((heads, [bm.blocks[b].ref_count for b in running[0].block_table[:2]]))
        return result

    monkeypatch.setattr(llm, "step", step)
    [out] = llm.generate(PROMPT, params, use_tqdm=False)
    assert [o.index for o in out.outputs] == [0, 1, 2] and len({o.seq_id for o in out.outputs}) == 3
    assert shared and all(len(heads) == 1 and counts == [3, 3] for heads, counts in shared)
    assert len({tuple(o.token_ids) for o in out.outputs}) > 1, "each sample draws its own tokens"
    monkeypatch.undo()
    [again] = llm.generate(PROMPT, params, use_tqdm=False)
    assert [o.token_ids for o in again.outputs] == [o.token_ids for o in out.outputs]  # seeded: reproducible
    [single] = llm.generate(PROMPT, SamplingParams(temperature=1.0, max_tokens=8, seed=21), use_tqdm=False)
    assert single.outputs[0].token_ids == out.outputs[0].token_ids  # sample 0 is the n=1 request
    _assert_clean(llm)
