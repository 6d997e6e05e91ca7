"""Watching a run live: the Player following a recorder while the engine runs in another thread, and the
server's ``/live`` page in headless Chromium moving as requests arrive."""

from __future__ import annotations

import threading

import pytest

from serve_helpers import MODEL, running_server, wait_until


def test_player_follows_a_run_then_steps_like_any_player():
    pytest.importorskip("ipywidgets")
    from nanovllm_teach import LLM, SamplingParams
    from nanovllm_teach.trace.recorder import TraceRecorder
    from nanovllm_teach.viz.player import Player

    recorder = TraceRecorder()
    llm = LLM(trace=recorder, max_model_len=512)
    gate, paused_at = threading.Event(), 6

    def run() -> None:  # the engine's own loop, held at one step until the test has seen it
        for prompt in ("Hello", "Once upon a time", "The sky"):
            llm.add_request(prompt, SamplingParams(temperature=0.0, max_tokens=12, ignore_eos=True))
        while not llm.is_finished():
            llm.step()
            if llm.num_steps == paused_at:
                gate.wait(60)

    worker = threading.Thread(target=run)
    worker.start()
    try:
        player = Player.follow(recorder, worker)
        assert wait_until(lambda: player.step == paused_at, timeout_s=60), player.step
        assert player.following and player.steps[-1] == paused_at, "it shows the newest step while the run goes on"
        assert player.last == paused_at
    finally:
        gate.set()
        worker.join(60)
    player.wait(60)
    assert not player.following
    last = llm.num_steps
    assert player.steps[-1] == player.step == last == player.last, "the whole run once it has ended"
    player.set_step(2)
    player.step_by(1)
    assert player.step == 3 and player.lines, "and it steps like any player"
    assert len(player.queues.running) == 3
    llm.close()


def test_live_page_moves_as_requests_arrive(tmp_path):
    from test_browser import CHROMIUM, _screenshot

    if CHROMIUM is None:
        pytest.skip("no system Chromium")
    sync_api = pytest.importorskip("playwright.sync_api")
    openai = pytest.importorskip("openai")
    import subprocess
    with running_server(max_num_seqs=4) as (url, app):
        profile = tmp_path / "chromium"
        process = subprocess.Popen([CHROMIUM, "--headless", "--remote-debugging-port=0", f"--user-data-dir={profile}",
                                    "--no-sandbox", "--disable-gpu", "--no-first-run", "about:blank"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        guard = threading.Timer(120, process.kill)
        guard.start()
        stop = threading.Event()  # set when the test has seen what it checks, or failed: the clients end
        try:
            port_file = profile / "DevToolsActivePort"
            assert wait_until(lambda: port_file.exists() and port_file.read_text().strip(), timeout_s=30)
            with sync_api.sync_playwright() as pw:
                browser = pw.chromium.connect_over_cdp(f"http://127.0.0.1:{port_file.read_text().split()[0]}")
                page = browser.new_page(viewport={"width": 1400, "height": 900})
                errors: list[str] = []
                page.on("pageerror", lambda exc: errors.append(str(exc)))
                page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
                page.goto(url + "/live?lang=en")
                assert "waiting for the first request" in page.locator("#ticker").inner_text()
                client = openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0, timeout=60)

                def load() -> None:  # requests keep arriving until the test has seen what it checks
                    for k in range(2000):  # bounded; a fast engine answers 40 of these in about a second
                        if stop.is_set():
                            return
                        client.completions.create(model=MODEL, prompt=f"Story {k}", max_tokens=60, temperature=0,
                                                  extra_body={"ignore_eos": True})
                clients = [threading.Thread(target=load) for _ in range(3)]
                for c in clients:
                    c.start()
                page.wait_for_function("() => window.live.pages >= 1", timeout=60_000)
                first = page.evaluate("() => window.live.lastStep")
                page.wait_for_function(f"() => window.live.pages >= 2 && window.live.lastStep > {first}", timeout=60_000)
                frame = page.frame_locator("iframe:not(.back)")
                header = frame.locator("#step-header").inner_text()
                assert header.startswith("step "), header
                shown, last = (int(x) for x in header.split(" of ")[0].split()[1:2] + header.split(" of ")[1].split()[:1])
                assert shown == last > 1, "the live page opens at the newest step"
                assert "running" in page.locator("#ticker").inner_text()
                assert page.locator("#follow-label").inner_text() == "follow the newest step"
                _screenshot(page, tmp_path, "live_page")

                front_step = "() => document.querySelector('iframe:not(.back)').contentWindow.replay.step"
                # Which frame is in front, and its step, read together: a newer page may swap in between.
                front_now = ("() => { const f = document.querySelector('iframe:not(.back)'); "
                             "return [f.id, f.contentWindow.replay.step]; }")
                for _ in range(5):
                    shown_before, before = page.evaluate(front_now)
                    frame.locator("#back").click()  # the learner steps back by hand
                    shown_after, stepped = page.evaluate(front_now)
                    if shown_after == shown_before:  # else the click went to a page that came in meanwhile
                        break
                assert shown_after == shown_before and stepped == before - 1
                seen = page.evaluate("() => window.live.lastStep")
                page.wait_for_function(f"() => window.live.lastStep > {seen} + 3 && !window.live.following",
                                       timeout=60_000)
                pages = page.evaluate("() => window.live.pages")
                page.wait_for_timeout(1500)  # a page would have come by now, were it following
                assert page.evaluate(front_step) == stepped, "not pulled to the newest step"
                assert page.evaluate("() => window.live.pages") == pages
                assert not page.locator("#follow").is_checked()
                _screenshot(page, tmp_path, "live_page_not_following")
                page.locator("#follow").check()  # and back to the newest
                page.wait_for_function(f"() => window.live.pages > {pages}", timeout=60_000)
                assert page.evaluate(front_step) > stepped

                zh = browser.new_page()
                zh.goto(url + "/live?lang=zh")
                assert zh.locator("#follow-label").inner_text() == "跟随最新的步"
                zh.close()
                stop.set()
                for c in clients:
                    c.join(120)
                page.wait_for_timeout(1500)
                _screenshot(page, tmp_path, "live_page_after")
                assert not errors, errors
        finally:
            stop.set()
            guard.cancel()
            process.kill()
            process.wait(timeout=10)


def test_live_events_are_bounded_and_the_page_is_built_once_for_everyone():
    import concurrent.futures

    import httpx

    with running_server() as (url, app):
        feed = app.state.live
        feed.max_subscribers = 2
        with httpx.Client(base_url=url, timeout=30) as http:
            assert http.post("/v1/completions", json={"model": MODEL, "prompt": "Hi", "max_tokens": 4}).status_code == 200
            with http.stream("GET", "/live/events") as one, http.stream("GET", "/live/events") as two:
                assert one.status_code == two.status_code == 200
                lines = one.iter_lines()  # kept: a dropped iterator closes its connection
                assert next(lines).startswith("event: step")
                refused = http.get("/live/events", timeout=10)
                assert refused.status_code == 503 and refused.headers["retry-after"] == "5"
                assert "2 clients" in refused.json()["error"]["message"]
            assert wait_until(lambda: feed.subscribers == 0), "a client that leaves frees its place"
            with http.stream("GET", "/live/events") as again:
                assert again.status_code == 200
            built = feed.pages_built
            with concurrent.futures.ThreadPoolExecutor(6) as pool:
                pages = list(pool.map(lambda _: http.get("/live/page?lang=en"), range(6)))
            assert all(p.status_code == 200 for p in pages) and len({p.text for p in pages}) == 1
            assert feed.pages_built == built + 1, "six clients, one page built"
