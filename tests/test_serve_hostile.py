"""The server against a hostile client: numbers JSON allows but no engine can use (``Infinity``, ``1e400``,
``true`` for an integer), answers longer than the context, connections that never finish their headers
or body, bodies abandoned half-way, a missing API key, and a fuzz over the whole request schema: every
answer a 200 or a 4xx, never a 500, and the trace and the live page still readable afterwards."""

from __future__ import annotations

import json
import logging
import socket
import time

import pytest

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from serve_helpers import MODEL, running_server, wait_until  # noqa: E402

COMPLETIONS = "/v1/completions"


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    """A server recording to a trace file, with the live page on, and short timeouts."""
    from nanovllm_teach.serve.limits import ServeLimits

    path = tmp_path_factory.mktemp("trace") / "run.jsonl"
    limits = ServeLimits(header_timeout_s=0.5, body_timeout_s=0.5, keep_alive_s=1)
    with running_server(trace=path, limits=limits) as (url, app):
        yield url, app, path
    from nanovllm_teach.trace import load_trace
    assert load_trace(path).requests, "the trace file is complete and every line passes the contract"


def _post_raw(url: str, body: bytes) -> httpx.Response:
    return httpx.post(url + COMPLETIONS, content=body, headers={"content-type": "application/json"}, timeout=60)


def _still_readable(url: str) -> None:
    assert httpx.get(url + "/live/page", timeout=30).status_code in (200, 204)  # 204: no step yet
    assert httpx.get(url + "/health", timeout=10).status_code == 200


@pytest.mark.parametrize("raw", ["Infinity", "-Infinity", "NaN", "1e400"])
@pytest.mark.parametrize("field", ["temperature", "top_p", "min_p"])
def test_numbers_that_are_not_finite_get_400_and_poison_nothing(traced, field, raw):
    url, _, _ = traced
    response = _post_raw(url, f'{{"model": "{MODEL}", "prompt": "x", "max_tokens": 2, "{field}": {raw}}}'.encode())
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == field and "must be a finite number" in error["message"]
    _still_readable(url)


@pytest.mark.parametrize("field", ["max_tokens", "n", "seed", "top_k", "logprobs"])
def test_a_boolean_is_not_an_integer(traced, field):
    url, _, _ = traced
    response = httpx.post(url + COMPLETIONS, json={"model": MODEL, "prompt": "x", field: True}, timeout=60)
    assert response.status_code == 400 and response.json()["error"]["param"] == field, response.text


def test_max_tokens_past_the_context_is_a_400_naming_max_model_len(traced):
    url, _, _ = traced
    response = httpx.post(url + COMPLETIONS, json={"model": MODEL, "prompt": "Hello there", "max_tokens": 510},
                          timeout=60)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["param"] == "max_tokens" and "max_model_len=512" in error["message"], error
    chat = httpx.post(url + "/v1/chat/completions", timeout=60, json={
        "model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "max_completion_tokens": 10**6})
    assert chat.status_code == 400 and "max_model_len" in chat.json()["error"]["message"]


def test_a_list_of_string_prompts_gives_each_its_choices_in_order(traced):
    url, _, _ = traced
    one = {"model": MODEL, "max_tokens": 5, "temperature": 0, "ignore_eos": True}
    singles = [httpx.post(url + COMPLETIONS, json={**one, "prompt": p}, timeout=60).json()["choices"][0]["text"]
               for p in ("Once upon a time", "The capital of France is")]
    both = httpx.post(url + COMPLETIONS, json={**one, "prompt": ["Once upon a time", "The capital of France is"],
                                               "n": 2}, timeout=60)
    assert both.status_code == 200, both.text
    body = both.json()
    assert [c["index"] for c in body["choices"]] == [0, 1, 2, 3]
    assert [c["text"] for c in body["choices"]] == [singles[0], singles[0], singles[1], singles[1]]
    assert body["usage"]["completion_tokens"] == 20
    streamed = httpx.post(url + COMPLETIONS, timeout=60, json={**one, "prompt": [[1, 2, 3], [4, 5]], "stream": True})
    indexes = {json.loads(line[6:])["choices"][0]["index"] for line in streamed.text.splitlines()
               if line.startswith("data: {")}
    assert indexes == {0, 1}
    refused = httpx.post(url + COMPLETIONS, json={**one, "prompt": ["fine", ""]}, timeout=60)
    assert refused.status_code == 400 and "empty" in refused.json()["error"]["message"]


def _closed_within(sock: socket.socket, seconds: float) -> bool:
    """Whether the server closes ``sock`` (reads end) within ``seconds``; what it sent first is read too."""
    sock.settimeout(seconds)
    try:
        while sock.recv(4096):
            pass
        return True
    except socket.timeout:
        return False


def test_connections_whose_headers_or_body_never_finish_are_closed(traced):
    url, _, _ = traced
    host, port = url.removeprefix("http://").split(":")
    slow = []
    for _ in range(20):  # slowloris: headers begun, a byte now and then, never finished
        sock = socket.create_connection((host, int(port)))
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")
        slow.append(sock)
    time.sleep(0.3)
    for sock in slow:
        try:
            sock.sendall(b"X")
        except OSError:
            pass
    assert all(_closed_within(sock, 5) for sock in slow), "every slowloris connection closed"
    silent = socket.create_connection((host, int(port)))  # opens and says nothing
    assert _closed_within(silent, 5)
    body = socket.create_connection((host, int(port)))  # a body that never finishes: 408
    body.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: 1000\r\n\r\n{\"model\": ")
    body.settimeout(5)
    assert body.recv(4096).startswith(b"HTTP/1.1 408")
    for sock in [*slow, silent, body]:
        sock.close()
    _still_readable(url)


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_an_abandoned_body_is_one_line_in_the_log_not_a_traceback(traced):
    url, _, _ = traced
    host, port = url.removeprefix("http://").split(":")
    records = _Records()
    loggers = [logging.getLogger(name) for name in ("uvicorn.error", "nanovllm_teach.serve.http", "")]
    saved = [logger.level for logger in loggers]
    for logger in loggers:
        logger.addHandler(records)
    logging.getLogger("nanovllm_teach.serve.http").setLevel(logging.INFO)
    try:
        sock = socket.create_connection((host, int(port)))
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"model\": ")
        time.sleep(0.1)
        sock.close()
        assert wait_until(lambda: any("abandoned" in r.getMessage() for r in records.records), timeout_s=5)
    finally:
        for logger, level in zip(loggers, saved):
            logger.removeHandler(records)
            logger.setLevel(level)
    mine = {id(r): r for r in records.records}.values()  # a record seen by two handlers' loggers counts once
    assert not [r for r in mine if r.levelno >= logging.ERROR or r.exc_info], [r.getMessage() for r in mine]
    assert len([r for r in mine if "abandoned" in r.getMessage()]) == 1


def test_an_api_key_guards_the_v1_and_live_routes_as_vllm_serve_does():
    with running_server(api_key="s3cret") as (url, _):
        assert httpx.get(url + "/v1/models", timeout=10).status_code == 401
        wrong = httpx.get(url + "/v1/models", headers={"Authorization": "Bearer nope"}, timeout=10)
        assert wrong.status_code == 401 and wrong.json() == {"error": "Unauthorized"}
        ok = httpx.get(url + "/v1/models", headers={"Authorization": "Bearer s3cret"}, timeout=10)
        assert ok.status_code == 200
        assert httpx.get(url + "/health", timeout=10).status_code == 200
        assert httpx.get(url + "/metrics", timeout=10).status_code == 200
        # The live page shows every request's timing: it wants the key too, as the header or (a browser's
        # page and EventSource send no header) as ?key=, which the page passes on to its own requests.
        for path in ("/live", "/live/page", "/live/events"):
            assert httpx.get(url + path, timeout=10).status_code == 401, path
            assert httpx.get(url + path, params={"key": "nope"}, timeout=10).status_code == 401, path
        assert httpx.get(url + "/v1/models", params={"key": "s3cret"}, timeout=10).status_code == 401, \
            "a /v1 route takes the key as the header only, as vLLM's"
        page = httpx.get(url + "/live", params={"key": "s3cret"}, timeout=10)
        assert page.status_code == 200 and "keyed('/live/events')" in page.text
        keyed = httpx.get(url + "/live/page", headers={"Authorization": "Bearer s3cret"}, timeout=10)
        assert keyed.status_code in (200, 204)
        with httpx.stream("GET", url + "/live/events", params={"key": "s3cret"}, timeout=10) as events:
            assert events.status_code == 200


# ---- the fuzz -------------------------------------------------------------------------------------

_NUMBER = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-3, 3), st.booleans(), st.none(),
                    st.text(max_size=3))
_INT = st.one_of(st.integers(-3, 6), st.integers(-2**70, 2**70), st.booleans(), st.none(), st.floats(width=16),
                 st.text(max_size=2))
_PROMPT = st.one_of(st.text(max_size=20), st.lists(st.integers(-5, 200_000), max_size=6),
                    st.lists(st.text(max_size=8), max_size=3), st.lists(st.lists(st.integers(0, 1000), max_size=3),
                                                                        max_size=3),
                    st.integers(), st.none(), st.booleans())
_STOP = st.one_of(st.none(), st.text(max_size=3), st.lists(st.text(max_size=3), max_size=3), st.integers())
_FIELDS = st.fixed_dictionaries({}, optional={
    "model": st.one_of(st.just(MODEL), st.text(max_size=5), st.integers()),
    "max_tokens": _INT, "n": _INT, "seed": _INT, "top_k": _INT, "logprobs": _INT,
    "temperature": _NUMBER, "top_p": _NUMBER, "min_p": _NUMBER,
    "stop": _STOP, "stop_token_ids": st.one_of(st.none(), st.lists(_INT, max_size=3)),
    "stream": st.one_of(st.booleans(), st.integers(0, 1)), "ignore_eos": st.one_of(st.booleans(), st.none()),
    "presence_penalty": _NUMBER, "stream_options": st.one_of(st.none(), st.just({"include_usage": True})),
})


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(fields=_FIELDS, prompt=_PROMPT, chat=st.booleans())
def test_fuzz_every_answer_is_a_200_or_a_4xx(traced, fields, prompt, chat):
    url, _, _ = traced
    body = dict(fields)
    body.setdefault("model", MODEL)
    if isinstance(body.get("max_tokens"), int) and not isinstance(body["max_tokens"], bool):
        body["max_tokens"] = min(body["max_tokens"], 8)  # every answer short: the fuzz is about the request
    body.setdefault("max_tokens", 4)
    if chat:
        path = "/v1/chat/completions"
        body["messages"] = [{"role": "user", "content": prompt if isinstance(prompt, str) else str(prompt)}]
    else:
        path, body["prompt"] = COMPLETIONS, prompt
    # json.dumps writes inf and nan as JSON's Infinity and NaN, as a hostile client would send them.
    response = httpx.post(url + path, content=json.dumps(body).encode(), timeout=60,
                          headers={"content-type": "application/json"})
    assert response.status_code == 200 or 400 <= response.status_code < 500, (body, response.text)


def test_after_the_fuzz_the_live_page_still_reads(traced):
    """Runs after the fuzz (file order): what it sent left nothing the trace contract refuses in the live
    feed (the trace file is loaded, and checked whole, when the module's server stops)."""
    url, app, _ = traced
    _still_readable(url)
    assert app.state.live.trace().requests, "the feed's events all pass the contract"


def test_shutting_down_drains_within_its_bound_and_the_trace_is_complete(tmp_path):
    """As on SIGTERM (uvicorn's should_exit): no new connection; a stream still running after the drain is
    cancelled and its request aborted; the engine core exits, its trace complete: the requests answered
    before, with their real arrival times (TTFT counts from arrival), and the one cut, replayable."""
    import threading

    from nanovllm_teach.serve.build import BackgroundServer, build_server
    from nanovllm_teach.serve.limits import ServeLimits
    from nanovllm_teach.trace import load_trace
    from nanovllm_teach.trace.consistency import check_consistency
    from nanovllm_teach.viz.page import replay_page

    path = tmp_path / "run.jsonl"
    server = BackgroundServer(build_server(trace=path, live=False, max_model_len=512, cpu_kvcache_gib=0.125,
                                           limits=ServeLimits(drain_s=0.01)))
    body = {"model": MODEL, "prompt": "Tell me a long story", "max_tokens": 500, "ignore_eos": True,
            "temperature": 0, "stream": True}
    with httpx.Client(timeout=60) as http:
        assert http.post(server.url + COMPLETIONS, json={"model": MODEL, "prompt": "One", "max_tokens": 6,
                                                         "temperature": 0}).status_code == 200
        chat = {"model": MODEL, "messages": [{"role": "user", "content": "Hi there, who are you?"}], "max_tokens": 6,
                "temperature": 0}
        assert http.post(server.url + "/v1/chat/completions", json=chat).status_code == 200
        with http.stream("POST", server.url + COMPLETIONS, json=body) as response:
            lines = response.iter_lines()
            assert next(lines).startswith("data: ")
            stopper = threading.Thread(target=server.stop, kwargs={"timeout_s": 60})
            stopper.start()
            rest = []
            try:
                rest.extend(lines)
            except httpx.HTTPError:  # the stream cut mid-answer
                pass
            stopper.join(60)
    assert not stopper.is_alive() and not server._thread.is_alive(), "the server stopped"
    assert server.app.state.server.core.process.poll() is not None, "the engine core stopped with the server"
    assert "data: [DONE]" not in rest, "500 tokens take far longer than the 10 ms drain: the stream was cut"
    with pytest.raises(httpx.ConnectError):
        httpx.get(server.url + "/health", timeout=5)
    trace = load_trace(path)
    assert check_consistency(trace) == [] and len(trace.requests) == 3
    assert trace.events_named("REQUEST_ABORT"), "the request cut by the drain was aborted"
    assert all(r.finish_reason for r in trace.requests[:2])
    enqueues = trace.events_named("REQUEST_ENQUEUE")
    assert enqueues[0].t_ns < enqueues[1].t_ns < enqueues[2].t_ns, "real arrival times"
    # Each request's arrival is stamped (taken by the HTTP side before the engine took it): TTFT from arrival.
    assert all(e.stats["since_arrival_ms"] > 0 for e in enqueues), [e.stats for e in enqueues]
    assert all(r.arrival_t_ns < r.enqueue_t_ns for r in trace.requests)
    assert "<html" in replay_page(trace)


def test_when_the_engine_core_dies_health_is_503_and_requests_fail_fast():
    """The engine-core process dies (killed, as the kernel's OOM killer would): the stream it was serving ends
    with the reason, later requests get 503 at once, ``/health`` answers 503."""
    import os
    import signal

    body = {"model": MODEL, "prompt": "Tell me a long story", "max_tokens": 400, "ignore_eos": True,
            "temperature": 0, "stream": True}
    with running_server(live=False) as (url, app):
        core = app.state.server.core.process
        with httpx.stream("POST", url + COMPLETIONS, json=body, timeout=30) as response:
            lines = response.iter_lines()
            assert next(lines).startswith("data: ")
            os.kill(core.pid, signal.SIGKILL)
            rest = "\n".join(lines)  # bounded by the timeout: it must not hang
        assert "the engine stopped" in rest and "data: [DONE]" in rest, rest[-300:]
        later = httpx.post(url + COMPLETIONS, json={**body, "stream": False}, timeout=30)
        assert later.status_code == 503 and "the engine stopped" in later.json()["error"]["message"]
        assert httpx.get(url + "/health", timeout=10).status_code == 503


def _children(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return [int(child) for child in f.read().split()]


def _gone(pid: int) -> bool:
    """Whether ``pid`` has exited (a zombie, not yet reaped by its parent, has exited)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_no_engine_core_outlives_its_server(tmp_path):
    """``nanovllm-teach serve`` stopped by SIGTERM drains and exits with its core, trace complete; killed
    outright (nothing can drain), its core sees its parent gone and exits on its own: no orphan engine is
    left holding memory. (Stopped in-process, the drain test checks the same.) The two servers start
    together, with a small KV cache: what is checked is the end, not the engine."""
    import signal
    import subprocess
    import sys

    path = tmp_path / "run.jsonl"
    servers = {}
    try:
        for how, sig in (("SIGTERM", signal.SIGTERM), ("SIGKILL", signal.SIGKILL)):
            with socket.socket() as probe:
                probe.bind(("127.0.0.1", 0))
                port = probe.getsockname()[1]
            trace = ["--trace", str(path)] if sig == signal.SIGTERM else []
            servers[how] = sig, port, subprocess.Popen(
                [sys.executable, "-m", "nanovllm_teach.cli", "serve", "--port", str(port), "--max-model-len", "512",
                 "--max-num-seqs", "4", "--num-kvcache-blocks", "8", "--no-live", *trace],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for how, (sig, port, api) in servers.items():
            assert wait_until(lambda: _up(port) or api.poll() is not None, timeout_s=180) and _up(port), how
            (core_pid,) = _children(api.pid)
            body = {"model": MODEL, "prompt": "Hi", "max_tokens": 3}
            assert httpx.post(f"http://127.0.0.1:{port}{COMPLETIONS}", json=body, timeout=60).status_code == 200
            api.send_signal(sig)
            api.wait(60)
            assert wait_until(lambda: _gone(core_pid), timeout_s=30), f"{how}: the core {core_pid} is left"
    finally:
        for _, _, api in servers.values():
            if api.poll() is None:
                api.kill()
                api.wait()
    from nanovllm_teach.trace import load_trace
    # uvicorn drains, then raises the signal again: the CLI takes it as the end of a clean stop (status 0, not
    # -15; Ctrl-C's SIGINT the same, not a KeyboardInterrupt traceback) and says where the trace is.
    api = servers["SIGTERM"][2]
    said = api.stdout.read()
    assert api.returncode == 0 and len(load_trace(path).requests) == 1, said
    assert said.rstrip().endswith(f"trace: {path} (nanovllm-teach replay {path})") and "Traceback" not in said, said


def _up(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False
