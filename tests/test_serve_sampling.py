"""The server's sampling fields through the official ``openai`` client, each compared with offline
``generate`` given the same ``SamplingParams``: top-p/top-k seeded runs reproducible and equal to offline,
stop strings cut where offline cuts (and never streamed before the cut), ``n`` choices, log-probabilities in
OpenAI's two shapes with offline's values; streamed equal to non-streamed for each."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi")
openai = pytest.importorskip("openai")

from serve_helpers import MODEL, running_server  # noqa: E402

PROMPT = "Once upon a time"
CHAT = [{"role": "user", "content": "Tell me a story."}]


BLOCK = 16  # small KV blocks, so that a short prompt fills some: the samples of a request share them


@pytest.fixture(scope="module")
def served():
    with running_server(kvcache_block_size=BLOCK) as (url, app):
        yield url, app


@pytest.fixture(scope="module")
def client(served):
    return openai.OpenAI(base_url=served[0] + "/v1", api_key="none", max_retries=0, timeout=60)


@pytest.fixture(scope="module")
def offline():
    from nanovllm_teach import LLM
    llm = LLM(max_model_len=512, kvcache_block_size=BLOCK)
    yield llm
    llm.close()


def _offline(llm, prompt, **params):
    from nanovllm_teach import SamplingParams
    return llm.generate([prompt], SamplingParams(**params), use_tqdm=False)[0]


def _chat_ids(llm):
    text = llm.tokenizer.apply_chat_template(CHAT, tokenize=False, add_generation_prompt=True)
    return llm.tokenizer.encode(text, add_special_tokens=False)


def _streamed(chunks, n=1, chat=False):
    """Per choice index: the text, the finish reason, the chunks' log-probabilities joined."""
    texts, reasons, logprobs = [""] * n, [None] * n, [[] for _ in range(n)]
    for chunk in chunks:
        for choice in chunk.choices:
            texts[choice.index] += (choice.delta.content or "") if chat else choice.text
            if choice.finish_reason:
                reasons[choice.index] = choice.finish_reason
            if choice.logprobs is not None:
                logprobs[choice.index].append(choice.logprobs)
    return texts, reasons, logprobs


def test_top_p_top_k_min_p_seeded_are_reproducible_and_equal_offline(client, offline):
    fields = dict(temperature=0.9, top_p=0.8, seed=11, max_tokens=20)
    extra = {"top_k": 30, "min_p": 0.02, "ignore_eos": True}
    first = client.completions.create(model=MODEL, prompt=PROMPT, extra_body=extra, **fields)
    again = client.completions.create(model=MODEL, prompt=PROMPT, extra_body=extra, **fields)
    streamed, reasons, _ = _streamed(client.completions.create(model=MODEL, prompt=PROMPT, extra_body=extra,
                                                               stream=True, **fields))
    expected = _offline(offline, PROMPT, top_k=30, min_p=0.02, ignore_eos=True, **fields)
    assert first.choices[0].text == again.choices[0].text == streamed[0] == expected.outputs[0].text
    assert reasons == [first.choices[0].finish_reason] == ["length"]
    other = client.completions.create(model=MODEL, prompt=PROMPT, extra_body=extra, **{**fields, "seed": 12})
    assert other.choices[0].text != first.choices[0].text, "another seed samples another text"


def test_stop_strings_cut_where_offline_cuts_and_are_never_streamed(client, offline):
    ids = _chat_ids(offline)  # the tiny model answers this one with a sentence
    greedy = _offline(offline, ids, temperature=0.0, max_tokens=40).outputs[0].text
    stop = greedy[12:17]  # a piece of what greedy decoding writes: it stops there
    expected = _offline(offline, ids, temperature=0.0, max_tokens=40, stop=["never-appears", stop]).outputs[0]
    assert expected.finish_reason == "stop" and expected.stop_reason == stop and len(expected.text) <= 12
    fields = dict(model=MODEL, prompt=ids, max_tokens=40, temperature=0, stop=["never-appears", stop])
    whole = client.completions.create(**fields)
    chunks = list(client.completions.create(stream=True, **fields))
    streamed, reasons, _ = _streamed(chunks)
    assert whole.choices[0].text == streamed[0] == expected.text, "no piece of the stop string was streamed"
    assert whole.choices[0].finish_reason == reasons[0] == "stop"
    assert whole.model_extra is not None and whole.choices[0].model_extra["stop_reason"] == stop
    assert [c.choices[0].model_extra.get("stop_reason") for c in chunks if c.choices[0].finish_reason] == [stop]


def test_chat_stop_string_and_stop_token_ids(client, offline):
    ids = _chat_ids(offline)
    greedy = _offline(offline, ids, temperature=0.0, max_tokens=30).outputs[0]
    stop = greedy.text[6:8]
    expected = _offline(offline, ids, temperature=0.0, max_tokens=30, stop=stop).outputs[0]
    whole = client.chat.completions.create(model=MODEL, messages=CHAT, max_tokens=30, temperature=0, stop=stop)
    streamed, _, _ = _streamed(client.chat.completions.create(model=MODEL, messages=CHAT, max_tokens=30,
                                                              temperature=0, stop=stop, stream=True), chat=True)
    assert whole.choices[0].message.content == streamed[0] == expected.text
    token = greedy.token_ids[3]
    by_token = client.completions.create(model=MODEL, prompt=ids, max_tokens=30, temperature=0,
                                         extra_body={"stop_token_ids": [token]})
    assert by_token.choices[0].finish_reason == "stop" and by_token.choices[0].model_extra["stop_reason"] == token
    assert by_token.usage.completion_tokens == greedy.token_ids.index(token) + 1


def test_n_choices_equal_offline_samples_streamed_or_not(client, offline):
    fields = dict(temperature=1.0, seed=5, max_tokens=12)
    expected = [o.text for o in _offline(offline, PROMPT, n=2, ignore_eos=True, **fields).outputs]
    assert expected[0] != expected[1]
    whole = client.completions.create(model=MODEL, prompt=PROMPT, n=2, extra_body={"ignore_eos": True}, **fields)
    assert [c.index for c in whole.choices] == [0, 1]
    assert [c.text for c in whole.choices] == expected
    assert whole.usage.completion_tokens == 24
    chunks = list(client.completions.create(model=MODEL, prompt=PROMPT, n=2, stream=True,
                                            stream_options={"include_usage": True},
                                            extra_body={"ignore_eos": True}, **fields))
    texts, reasons, _ = _streamed(chunks, n=2)
    assert texts == expected and reasons == ["length", "length"] and chunks[-1].usage == whole.usage
    chat = client.chat.completions.create(model=MODEL, messages=CHAT, n=2, **fields)
    assert [c.index for c in chat.choices] == [0, 1]


def test_n_choices_share_the_prompts_blocks(served, client, monkeypatch):
    engine = served[1].state.server.engine
    shared, step = [], engine.step

    def watched_step():  # on the engine thread, holding the engine's lock
        result = step()
        running, bm = list(engine.scheduler.running), engine.scheduler.block_manager
        if len(running) == 3:
            shared.append([bm.blocks[b].ref_count for b in running[0].block_table[:2]])
        return result
    monkeypatch.setattr(engine, "step", watched_step)
    prompt = "The engine schedules the waiting requests and allocates their blocks. " * 4  # over 2 blocks
    out = client.completions.create(model=MODEL, prompt=prompt, n=3, max_tokens=6, temperature=1.0, seed=2,
                                    extra_body={"ignore_eos": True})
    assert len(out.choices) == 3 and out.usage.completion_tokens == 18
    assert shared and all(counts == [3, 3] for counts in shared), shared


def test_completion_logprobs_have_the_legacy_shape_and_offline_values(client, offline):
    expected = _offline(offline, PROMPT, temperature=0.0, max_tokens=10, logprobs=3, ignore_eos=True).outputs[0]
    fields = dict(model=MODEL, prompt=PROMPT, max_tokens=10, temperature=0, logprobs=3,
                  extra_body={"ignore_eos": True})
    whole = client.completions.create(**fields).choices[0]
    lp = whole.logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == len(lp.text_offset) == 10
    assert lp.token_logprobs == pytest.approx([d[t].logprob for d, t in zip(expected.logprobs, expected.token_ids)],
                                              abs=1e-4)
    for top, step in zip(lp.top_logprobs, expected.logprobs):
        assert sorted(top.values()) == pytest.approx(sorted({p.decoded_token: p.logprob for p in step.values()}.values()),
                                                     abs=1e-4)
    assert lp.tokens == [d[t].decoded_token for d, t in zip(expected.logprobs, expected.token_ids)]
    assert lp.text_offset == [sum(len(t) for t in lp.tokens[:i]) for i in range(10)]
    _, _, parts = _streamed(client.completions.create(stream=True, **fields))
    assert sum((p.tokens for p in parts[0]), []) == lp.tokens
    assert sum((p.text_offset for p in parts[0]), []) == lp.text_offset
    assert sum((p.token_logprobs for p in parts[0]), []) == lp.token_logprobs


def test_chat_logprobs_have_openais_shape_and_offline_values(client, offline):
    ids = _chat_ids(offline)
    expected = _offline(offline, ids, temperature=0.0, max_tokens=8, logprobs=2, ignore_eos=True).outputs[0]
    fields = dict(model=MODEL, messages=CHAT, max_tokens=8, temperature=0, logprobs=True, top_logprobs=2,
                  extra_body={"ignore_eos": True})
    content = client.chat.completions.create(**fields).choices[0].logprobs.content
    assert len(content) == 8 and all(len(c.top_logprobs) == 2 for c in content)
    for entry, step, token_id in zip(content, expected.logprobs, expected.token_ids):
        assert entry.logprob == pytest.approx(step[token_id].logprob, abs=1e-4)
        assert entry.token == step[token_id].decoded_token and bytes(entry.bytes) == entry.token.encode()
        assert [t.logprob for t in entry.top_logprobs] == pytest.approx(
            sorted((p.logprob for p in step.values() if p.rank <= 2), reverse=True), abs=1e-4)
    _, _, parts = _streamed(client.chat.completions.create(stream=True, **fields), chat=True)
    assert [e.model_dump() for p in parts[0] for e in p.content] == [e.model_dump() for e in content]


def test_a_stream_never_sends_what_a_stop_string_later_cuts():
    """Token by token, as the engine finishes a request on the step its stop string is complete: every
    prefix a stream has sent is a prefix of the final (cut) text, and the pieces add up to it."""
    hypothesis = pytest.importorskip("hypothesis")
    from hypothesis import strategies as st
    from transformers import AutoTokenizer

    from nanovllm_teach import SamplingParams
    from nanovllm_teach.assets import default_model_path
    from nanovllm_teach.engine.stopping import first_stop
    from nanovllm_teach.serve.app import _Choice
    from nanovllm_teach.serve.engine_thread import Update

    tokenizer = AutoTokenizer.from_pretrained(default_model_path())
    words = tokenizer.encode("I am a tiny Qwen3 model. 在线服务 🙂 stop here", add_special_tokens=False)

    @hypothesis.settings(max_examples=80, deadline=None)
    @hypothesis.given(st.lists(st.sampled_from(words), min_size=1, max_size=24), st.data())
    def check(ids, data):
        whole = tokenizer.decode(ids, skip_special_tokens=True)
        start = data.draw(st.integers(0, max(len(whole) - 1, 0)))
        stop = whole[start:start + data.draw(st.integers(1, 6))] or "x"
        params = SamplingParams(stop=[stop, "never"])
        choice, sent = _Choice(tokenizer, params, chat=False), ""
        for k in range(1, len(ids) + 1):
            text = tokenizer.decode(ids[:k], skip_special_tokens=True)
            match = first_stop(text, params.stop)
            if match is None and k < len(ids):
                piece, _ = choice.add(Update(0, (ids[k - 1],)))
                sent += piece
                continue
            final = text if match is None else text[:match[0]]
            piece, _ = choice.add(Update(0, (ids[k - 1],), finish_reason="stop", text=final))
            assert sent + piece == final
            return
    check()
