"""The replay page without a browser: one self-contained file, data that decodes to exactly the engine state
of every step, the lines the console printed and the trace's step table, escaping of trace strings, and the
size of a long trace's page. The decoding here is written from page.py's description of the encoding, apart
from the page's script, so that both readers check the format. (``test_browser.py`` opens the page in
Chromium.)"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

import pytest

from nanovllm_teach.trace import EngineReplay, load_trace, render_trace
from nanovllm_teach.trace.reader import Trace
from nanovllm_teach.trace.recorder import TraceRecorder
from nanovllm_teach.trace.segments import request_segments
from nanovllm_teach.trace.steps import cut_steps
from nanovllm_teach.viz.blockgrid import freed_at_step_end
from nanovllm_teach.viz.page import page_data, read_page_data, replay_page, write_replay_page

REPO = Path(__file__).resolve().parents[1]
TRACES = ["preemption", "prefix_cache", "chunked_prefill", "static_arrivals"]


def _simulated_trace(workload, **settings) -> Trace:
    """A run of the real engine (scheduler, block manager) on a simulated H100: no model, any scale."""
    from nanovllm_teach import LLM

    rec = TraceRecorder()
    llm = LLM("qwen3-0.6b", runner="simulated", hardware="h100-sxm", trace=rec, **settings)
    llm.run_workload(workload)
    return Trace.from_recorder(rec)


@lru_cache(maxsize=1)
def long_trace() -> Trace:
    """A simulated run of 1,500+ steps, with prefix hits."""
    from nanovllm_teach.workload.requests import Poisson, Uniform, make_workload

    workload = make_workload(60, Poisson(3.0), Uniform(20, 600), Uniform(1, 60), vocab_size=151936, seed=3)
    return _simulated_trace(workload)


@lru_cache(maxsize=1)
def big_cache_trace() -> Trace:
    """300 requests at once into a 20,000-block cache of 16-token blocks, four shared prompt prefixes."""
    from nanovllm_teach.workload.requests import AtOnce, SharedPrefix, Uniform, make_workload

    workload = make_workload(300, AtOnce(), Uniform(100, 1500), Uniform(1, 40), vocab_size=151936, seed=1,
                             shared_prefix=SharedPrefix(4, 64))
    return _simulated_trace(workload, num_kvcache_blocks=20_000, kvcache_block_size=16, max_num_seqs=256)


@lru_cache(maxsize=1)
def qwen3_8b_trace() -> Trace:
    """The user's workload, smaller: ``simulate`` of Qwen3-8B on a simulated H100, its default chat-like
    lengths and arrivals, 150 requests (the page's size is measured per request and per step)."""
    import tempfile

    from nanovllm_teach.cli import main

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "sim.jsonl"
        assert main(["simulate", "--model", "qwen3-8b", "--hardware", "h100-sxm", "--requests", "150",
                     "--out", str(path)]) == 0
        return load_trace(path)


def _sums(deltas: list[int]) -> list[int]:
    out, value = [], 0
    for d in deltas:
        value += d
        out.append(value)
    return out


def decoded_lines(data: dict) -> list[dict[str, list[str]]]:
    """Every step's lines, ``{"en": [...], "zh": [...]}``, decoded from the templates and the numbers."""
    coded = data["lines"]
    texts, pairs, slot = coded["texts"], coded["pairs"], coded["slot"]

    def entries(flat: list[int]) -> list[tuple[int, list[int]]]:
        out, k = [], 0
        while k < len(flat):
            slots = texts[pairs[flat[k]][0]].count(slot)
            out.append((flat[k], flat[k + 1:k + 1 + slots]))
            k += 1 + slots
        return out

    def text(template: str, numbers: list[int]) -> str:
        parts = template.split(slot)
        return parts[0] + "".join(str(n) + part for n, part in zip(numbers, parts[1:]))

    last: dict[int, list[int]] = {}
    decoded = []
    for i, flat in enumerate(coded["steps"]):
        lines = []
        for pair, differences in entries(flat):
            numbers = [d + m for d, m in zip(differences, last.get(pair, [0] * len(differences)))]
            last[pair] = numbers
            lines.append((pair, numbers))
        en = [text(texts[pairs[pair][0]], numbers) for pair, numbers in lines]
        if str(i) in coded["zhAlone"]:
            zh = [text(texts[pairs[pair][0]], numbers) for pair, numbers in entries(coded["zhAlone"][str(i)])]
        else:
            zh = [text(texts[pairs[pair][1]], numbers) for pair, numbers in lines]
        decoded.append({"en": en, "zh": zh})
    return decoded


def _queues(data: dict) -> list[list[list[int]]]:
    out: list[list[list[int]]] = []
    for q in data["queues"]:
        out.append([out[-1][j] if lists == 0 else lists for j, lists in enumerate(q)])
    return out


def _replayed_codes(data: dict) -> list[dict[int, object]]:
    """Decode the per-step deltas back to {block: holders tuple | "cached"} for every step."""
    codes: dict[int, int] = {}
    out = []
    for delta in data["blockDeltas"]:
        for block, code in zip(delta[::2], delta[1::2]):
            if code == 0:
                codes.pop(block, None)
            else:
                codes[block] = code
        out.append({b: "cached" if c == 1 else tuple(data["holders"][c - 2]) for b, c in codes.items()})
    return out


@pytest.mark.parametrize("name", TRACES)
def test_block_deltas_replay_to_the_engine_state_of_every_step(name):
    trace = load_trace(REPO / "traces" / f"{name}.jsonl")
    data = page_data(trace)
    replay = EngineReplay(trace)
    steps = _sums(data["steps"]["step"])
    assert steps == [r.step for r in trace.steps]
    for step, blocks in zip(steps, _replayed_codes(data)):
        kv = replay.kv_at(step)
        assert {b: s for b, s in blocks.items() if s != "cached"} == kv.holders, f"step {step}"
        assert {b for b, s in blocks.items() if s == "cached"} == kv.cached_free, f"step {step}"
    for step, (waiting, running, preempted, finished) in zip(steps, _queues(data)):
        q = replay.queues_at(step)
        assert [waiting, running, preempted, finished] == [list(q.waiting), list(q.running), list(q.preempted),
                                                            list(q.finished)], f"step {step}"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_lines_are_what_the_console_printed_step_by_step(capsys, lang):
    trace = load_trace(REPO / "traces" / "preemption.jsonl")
    data = page_data(trace)
    shown = [line for step in decoded_lines(data) for line in step[lang]]
    last_done = max(i for i, e in enumerate(trace.events) if e.event == "STEP_DONE")
    render_trace(trace.events[:last_done + 1], lang=lang)
    assert shown == capsys.readouterr().out.splitlines()
    assert len(data["lines"]["texts"]) < sum(len(step["en"]) for step in decoded_lines(data)) / 2, "templates are shared"


def test_the_step_table_and_the_freed_blocks_decode_to_the_trace():
    trace = long_trace()
    data = page_data(trace)
    columns = {name: _sums(deltas) for name, deltas in data["steps"].items()}
    rows = trace.steps
    assert columns["used"] == [r.used_blocks for r in rows] and columns["batch"] == [r.batch_size for r in rows]
    assert columns["latencyUs"] == [round(r.latency_ms * 1000) for r in rows]
    assert columns["prefill"] == [int(r.phase == "prefill") for r in rows]
    freed = freed_at_step_end(trace)
    steps = [r.step for r in rows]
    decoded = {steps[int(i)]: dict(zip(flat[::2], flat[1::2])) for i, flat in data["freed"].items()}
    assert decoded == {s: blocks for s, blocks in freed.items() if s in set(steps)} and decoded
    flat, previous, segments = data["segments"], [0, 0, 0, 0], set()
    for k in range(0, len(flat), 4):
        previous = [p + d for p, d in zip(previous, flat[k:k + 4])]
        segments.add(tuple(previous))
    row_of = {r.seq_id: i for i, r in enumerate(trace.requests)}
    assert segments == {(row_of[g.seq_id], data["states"].index(g.state), g.step_start, g.step_end)
                        for g in request_segments(trace)}, "the Gantt chart's segments"


def test_the_page_is_one_self_contained_file(tmp_path):
    trace = load_trace(REPO / "traces" / "prefix_cache.jsonl")
    path = write_replay_page(trace, tmp_path / "sub" / "page.html", lang="zh")
    html = path.read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>") and '<html lang="zh">' in html
    fetched = html.replace("'http://www.w3.org/2000/svg'", "")  # the SVG namespace is a name, not a fetch
    assert not re.search(r"""(src|href)\s*=|<link|@import|url\(|https?://""", fetched), "nothing is fetched"
    assert html.count("<script") == 2 and "window.replay" in html, "the script and the data are inline"
    data = read_page_data(html)
    assert data["lang"] == "zh" and data["numBlocks"] == trace.settings.num_blocks
    assert len(data["lines"]["steps"]) == len(data["queues"]) == len(data["blockDeltas"]) == len(trace.steps)


def test_trace_strings_cannot_inject_markup():
    trace = load_trace(REPO / "traces" / "preemption.jsonl")
    evil = "</script><script>alert(1)</script><!--"
    trace.header["scenario"] = evil
    trace.header["lesson"] = evil
    html = replay_page(trace)
    assert evil not in html and html.count("<script") == 2 and "<!--" not in html
    assert read_page_data(html)["title"] == evil, "the text itself survives, as data"


ODD_LINES = {"en": ["\ue000 slot-like \ue001", "0 05 1234567890123456789 -3 7.50 step#{step}"],
             "zh": ["\ue000 像槽位 \ue001", "0 05 1234567890123456789 -3 7.50 第 {step} 步"]}


def test_any_line_survives_the_templates(monkeypatch):
    """Lines that hold the private-use characters the templates use, numbers with leading zeros, signs,
    decimals, more digits than a double keeps, and Chinese lines whose numbers differ from the English ones
    (they are stored apart) all come back as they were printed."""
    from nanovllm_teach.viz import page

    class OddRenderer:
        def __init__(self, lang: str, verbosity: str) -> None:
            self.lang = lang

        def lines(self, event) -> list[str]:
            step = event.step or 0
            return [line.format(step=step * (1 if self.lang == "en" else 2)) for line in ODD_LINES[self.lang]]

    monkeypatch.setattr(page, "ConsoleRenderer", OddRenderer)
    trace = load_trace(REPO / "traces" / "preemption.jsonl")
    data = page_data(trace)
    assert data["lines"]["slot"] not in "".join(ODD_LINES["en"] + ODD_LINES["zh"])
    assert data["lines"]["zhAlone"], "the Chinese lines with other numbers are stored apart"
    cut = cut_steps(trace.events)
    for step, shown in zip(cut.spans, decoded_lines(data)):
        events = cut.events(trace.events, step)
        for lang in ("en", "zh"):
            assert shown[lang] == [line for e in events for line in OddRenderer(lang, "normal").lines(e)]


@pytest.mark.parametrize("make", [long_trace, big_cache_trace], ids=["1500_steps", "20000_blocks"])
def test_a_long_or_wide_traces_page_stays_small(make):
    trace = make()
    assert len(trace.steps) >= 1000 or trace.settings.num_blocks >= 20_000
    size = len(replay_page(trace).encode("utf-8"))
    assert size < 1_000_000, f"{size} bytes for {len(trace.steps)} steps"


# A 2,000-request run of the same workload has about 41,000 steps (measured: 41,159); at these rates its page
# is at most 2,000 * 300 + 41,159 * 40 bytes = 2.2 MB, within the 5 MB a page may weigh (measured: 0.91 MB;
# the 150-request page: 111 kB for 5,174 steps).
BYTES_PER_REQUEST, BYTES_PER_STEP = 300, 40


def test_a_qwen3_8b_workloads_page_grows_slowly_enough_for_2000_requests():
    trace = qwen3_8b_trace()
    size = len(replay_page(trace).encode("utf-8"))
    requests, steps = len(trace.requests), len(trace.steps)
    assert requests == 150 and steps > 2000
    assert size <= BYTES_PER_REQUEST * requests + BYTES_PER_STEP * steps, \
        f"{size} bytes for {requests} requests, {steps} steps: {size / steps:.1f} bytes per step"
    assert 2000 * BYTES_PER_REQUEST + 41_159 * BYTES_PER_STEP < 5_000_000


def test_a_big_caches_deltas_still_replay_exactly():
    trace = big_cache_trace()
    data = page_data(trace)
    replay = EngineReplay(trace)
    blocks = _replayed_codes(data)
    steps = _sums(data["steps"]["step"])
    for k in (0, len(blocks) // 2, len(blocks) - 1):
        kv = replay.kv_at(steps[k])
        assert {b: s for b, s in blocks[k].items() if s != "cached"} == kv.holders
    assert any(len(h) > 1 for h in data["holders"]), "the shared prefixes show as shared blocks"


def test_the_lesson_is_the_scenarios_in_each_language_or_labelled_as_the_traces_own(tmp_path):
    from nanovllm_teach import scenarios
    trace = load_trace(REPO / "traces" / "preemption.jsonl")
    lesson = page_data(trace)["lesson"]
    assert lesson == {"en": scenarios.LESSONS["preemption"].en, "zh": scenarios.LESSONS["preemption"].zh,
                      "own": False}, "a shipped scenario's lesson, translated"
    own = Trace({**trace.header, "lesson": "my own words"}, trace.events)
    assert page_data(own)["lesson"] == {"en": "my own words", "zh": "my own words", "own": True}, \
        "a trace's own text, shown as it is and marked so"


def test_a_big_page_shows_its_progress(tmp_path, capsys):
    """``replay --html`` of a big trace takes seconds: tqdm bars on stderr say how far the encoding is."""
    trace = load_trace(REPO / "traces" / "preemption.jsonl")
    write_replay_page(trace, tmp_path / "page.html", progress=True)
    err = capsys.readouterr().err
    assert "page: block grid and queues" in err and "page: TEACHING lines" in err
    write_replay_page(trace, tmp_path / "quiet.html")
    assert capsys.readouterr().err == "", "only when asked for"
