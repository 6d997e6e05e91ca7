"""The replay page without a browser: one self-contained file, data that replays to exactly the engine state
of every step, the lines the console printed, escaping of trace strings, and the size of a long trace's page.
(``test_browser.py`` opens the page in Chromium.)"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

import pytest

from nanovllm_teach.trace import EngineReplay, load_trace, render_trace
from nanovllm_teach.trace.reader import Trace
from nanovllm_teach.trace.recorder import TraceRecorder
from nanovllm_teach.viz.page import page_data, replay_page, write_replay_page

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


def _data(html: str) -> dict:
    match = re.search(r'<script type="application/json" id="trace-data">(.*?)</script>', html, re.S)
    assert match, "the data is inlined"
    return json.loads(match.group(1))


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
    assert data["steps"]["step"] == [r.step for r in trace.steps]
    for step, blocks in zip(data["steps"]["step"], _replayed_codes(data)):
        kv = replay.kv_at(step)
        assert {b: s for b, s in blocks.items() if s != "cached"} == kv.holders, f"step {step}"
        assert {b for b, s in blocks.items() if s == "cached"} == kv.cached_free, f"step {step}"
    for step, (waiting, running, preempted, finished) in zip(data["steps"]["step"], data["queues"]):
        q = replay.queues_at(step)
        assert [waiting, running, preempted, finished] == [list(q.waiting), list(q.running), list(q.preempted),
                                                            list(q.finished)], f"step {step}"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_lines_are_what_the_console_printed_step_by_step(capsys, lang):
    trace = load_trace(REPO / "traces" / "preemption.jsonl")
    data = page_data(trace)
    shown = [line for en, zh in data["lines"] for line in (zh if lang == "zh" and zh is not None else en)]
    last_done = max(i for i, e in enumerate(trace.events) if e.event == "STEP_DONE")
    render_trace(trace.events[:last_done + 1], lang=lang)
    assert shown == capsys.readouterr().out.splitlines()
    assert any(zh is not None for _, zh in data["lines"]), "zh lines are stored where they differ"


def test_the_page_is_one_self_contained_file(tmp_path):
    trace = load_trace(REPO / "traces" / "prefix_cache.jsonl")
    path = write_replay_page(trace, tmp_path / "sub" / "page.html", lang="zh")
    html = path.read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>") and '<html lang="zh">' in html
    fetched = html.replace("'http://www.w3.org/2000/svg'", "")  # the SVG namespace is a name, not a fetch
    assert not re.search(r"""(src|href)\s*=|<link|@import|url\(|https?://""", fetched), "nothing is fetched"
    assert html.count("<script") == 2 and "window.replay" in html, "the script and the data are inline"
    data = _data(html)
    assert data["lang"] == "zh" and data["numBlocks"] == trace.settings.num_blocks
    assert len(data["lines"]) == len(data["queues"]) == len(data["blockDeltas"]) == len(trace.steps)


def test_trace_strings_cannot_inject_markup():
    trace = load_trace(REPO / "traces" / "preemption.jsonl")
    evil = "</script><script>alert(1)</script><!--"
    trace.header["scenario"] = evil
    trace.header["lesson"] = evil
    html = replay_page(trace)
    assert evil not in html and html.count("<script") == 2 and "<!--" not in html
    assert _data(html)["title"] == evil, "the text itself survives, as data"


def test_bad_arguments_are_refused_with_their_value(tmp_path):
    trace = load_trace(REPO / "traces" / "preemption.jsonl")
    with pytest.raises(ValueError, match="'fr'"):
        replay_page(trace, lang="fr")
    with pytest.raises(ValueError, match="'loud'"):
        write_replay_page(trace, tmp_path / "p.html", verbosity="loud")
    empty = Trace(trace.header, [e for e in trace.events if e.step is None])
    with pytest.raises(ValueError, match="no completed engine step"):
        replay_page(empty)


@pytest.mark.parametrize("make", [long_trace, big_cache_trace], ids=["1500_steps", "20000_blocks"])
def test_a_long_or_wide_traces_page_stays_small(make):
    trace = make()
    assert len(trace.steps) >= 1000 or trace.settings.num_blocks >= 20_000
    size = len(replay_page(trace).encode("utf-8"))
    assert size < 5_000_000, f"{size} bytes for {len(trace.steps)} steps"


def test_a_big_caches_deltas_still_replay_exactly():
    trace = big_cache_trace()
    data = page_data(trace)
    replay = EngineReplay(trace)
    blocks = _replayed_codes(data)
    for k in (0, len(blocks) // 2, len(blocks) - 1):
        kv = replay.kv_at(data["steps"]["step"][k])
        assert {b: s for b, s in blocks[k].items() if s != "cached"} == kv.holders
    assert any(len(h) > 1 for h in data["holders"]), "the shared prefixes show as shared blocks"
