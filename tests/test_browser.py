"""What a person sees, tested as they see it: pages and widgets in headless Chromium (Debian's ``chromium``),
driven by Playwright for Python against that system browser (Playwright's own browser download is not used).

Without a Chromium these tests skip, unless ``NANOVLLM_TEACH_REQUIRE_BROWSER=1`` (set by ``.ci/run``, which
installs it), where a missing browser, Playwright or JupyterLab is a failure.
``NANOVLLM_TEACH_SCREENSHOTS=DIR`` keeps the screenshots.

No test can hang: each has a wall-clock guard (``GUARD_S``, by test name; default 120 s). The fixture
starts Chromium itself and Playwright attaches to it over CDP, so when the guard expires it kills that
process and whatever Playwright call is waiting fails at once (``evaluate`` in particular has no timeout
of its own).
"""

from __future__ import annotations

import importlib
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# The machine's network is closed: background services would only fill the log with refused connections.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-sync",
                 "--disable-background-networking", "--disable-component-update"]

REQUIRED = os.environ.get("NANOVLLM_TEACH_REQUIRE_BROWSER") == "1"
if CHROMIUM is None and REQUIRED:
    raise RuntimeError("NANOVLLM_TEACH_REQUIRE_BROWSER=1 but no chromium: apt-get install chromium")
# Wall-clock limits (s) of the tests that need more than the default: notebook 01 runs the model.
GUARD_S = {"test_quickstart_player_renders_and_moves_in_jupyterlab": 600,
           "test_player_plays_pauses_steps_and_speaks_both_languages_in_jupyterlab": 300}
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no system Chromium (Debian: apt-get install chromium)")


def _need(module: str):
    """``module``, imported; missing, the test skips (or fails, where the browser tests are required)."""
    return importlib.import_module(module) if REQUIRED else pytest.importorskip(module)


@pytest.fixture
def browser(request, tmp_path_factory):
    """A fresh headless Chromium per test, killed by the test's guard if the test runs past it."""
    sync_api = _need("playwright.sync_api")
    limit = GUARD_S.get(request.node.originalname, 120)
    profile = tmp_path_factory.mktemp("chromium")
    process = subprocess.Popen([CHROMIUM, "--headless", "--remote-debugging-port=0", f"--user-data-dir={profile}",
                                *CHROMIUM_ARGS, "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    expired = threading.Event()

    def expire() -> None:
        expired.set()
        process.kill()
    guard = threading.Timer(limit, expire)
    guard.start()
    try:
        port_file = profile / "DevToolsActivePort"  # Chromium writes its port here once it listens
        deadline = time.monotonic() + 30
        while not port_file.exists() or not port_file.read_text().strip():
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail("Chromium did not start within 30 s")
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        with sync_api.sync_playwright() as pw:
            yield pw.chromium.connect_over_cdp(f"http://127.0.0.1:{port}", timeout=30_000)
    finally:
        guard.cancel()
        process.kill()
        process.wait(timeout=10)
    if expired.is_set():
        pytest.fail(f"the test ran past its {limit} s guard")


def _screenshot(page, tmp_path: Path, name: str) -> Path:
    folder = Path(os.environ.get("NANOVLLM_TEACH_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def _open(browser, url: str, width: int):
    page = browser.new_page(viewport={"width": width, "height": 900})
    errors: list[str] = []
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(url)
    return page, errors


@pytest.mark.parametrize("width", [900, 1400])
def test_html_report_renders_without_errors(browser, tmp_path, width):
    from nanovllm_teach.trace import load_trace
    from nanovllm_teach.viz.report import write_html_report
    page_path = write_html_report(load_trace(REPO / "traces" / "preemption.jsonl"), tmp_path / "report.html")
    page, errors = _open(browser, page_path.as_uri(), width)
    page.wait_for_load_state("load")
    images = page.locator("img")
    assert images.count() >= 1, "the report shows its pictures"
    assert all(images.nth(i).evaluate("img => img.naturalWidth > 0") for i in range(images.count())), \
        "every picture of the report decodes"
    assert page.title(), "the page has a title"
    _screenshot(page, tmp_path, f"report_{width}")
    assert not errors, f"console errors: {errors}"
    page.close()


def _replay_page(tmp_path: Path, trace) -> Path:
    from nanovllm_teach.viz.page import write_replay_page
    return write_replay_page(trace, tmp_path / "page.html")


def _open_replay(browser, path: Path, width: int):
    """A replay page, opened and drawn: it inflates its data first (``window.replay.ready``)."""
    page, errors = _open(browser, path.as_uri(), width)
    page.wait_for_function("() => window.replay !== undefined && window.replay.ready", timeout=30_000)
    return page, errors


def _cursor_xs(page) -> tuple[float, float]:
    """The x of the timelines' cursor and of the Gantt chart's, read in one go: the page redraws both charts
    when its width changes (a scrollbar that appears once the fonts load), and two separate reads could
    straddle that redraw."""
    xs = page.evaluate("() => ['timelines', 'gantt'].map("
                       "(box) => document.querySelector(`#${box} line.cursor`).getAttribute('x1'))")
    return float(xs[0]), float(xs[1])


@pytest.mark.parametrize("width", [900, 1400])
def test_replay_page_slider_play_and_language(browser, tmp_path, width):
    from nanovllm_teach.trace import load_trace
    trace = load_trace(REPO / "traces" / "preemption.jsonl")
    first = trace.steps[0].step
    page, errors = _open_replay(browser, _replay_page(tmp_path, trace), width)
    header = page.locator("#step-header")
    assert header.inner_text().startswith(f"step {first} of {trace.steps[-1].step}"), header.inner_text()
    x_timeline, x_gantt = _cursor_xs(page)
    assert x_timeline == x_gantt, "the timelines and the Gantt chart share one step axis"
    page.locator("#slider").focus()
    for _ in range(3):
        page.keyboard.press("ArrowRight")
    row = trace.steps[3]
    assert header.inner_text().startswith(f"step {row.step} of"), "the step header follows the slider"
    assert f"batch {row.batch_size} " in header.inner_text()
    x_timeline_now, x_gantt_now = _cursor_xs(page)
    assert x_timeline_now > x_timeline and x_gantt_now == x_timeline_now, "both cursors move with the slider, to the same x"
    lines_en = page.locator("#lines").inner_text()
    assert "TEACHING/" in lines_en and f"step#{row.step} " in lines_en, "the lines are the step's"
    page.locator(".langs button[data-lang=zh]").click()
    lines_zh = page.locator("#lines").inner_text()
    assert lines_zh != lines_en and any("\u4e00" <= ch <= "\u9fff" for ch in lines_zh), "中文 shows the zh lines"
    assert "已用 KV 块" in page.locator("#timelines").inner_text(), "the charts' labels follow the language"
    assert "解码" in page.locator("#gantt-legend").inner_text(), "and so do the legends"
    page.locator(".langs button[data-lang=en]").click()
    assert "KV blocks used" in page.locator("#timelines").inner_text() and \
        "decode" in page.locator("#gantt-legend").inner_text()
    page.locator("#play").click()
    page.wait_for_function(f"() => window.replay.step > {row.step + 1}", timeout=10_000)
    page.locator("#play").click()
    assert not page.evaluate("() => window.replay.playing"), "play toggles back to pause"
    page.evaluate("(s) => window.replay.setStep(s)", max(trace.steps, key=lambda r: r.used_blocks).step)
    assert not page.locator("#owners").is_visible(), "a small cache is read cell by cell, no owner bar"
    for lang in ("zh", "en"):
        page.locator(f".langs button[data-lang={lang}]").click()
        assert not page.evaluate(_CLIPPED, page.locator(".replay").element_handle()), \
            f"every pane fits the page's width ({lang})"
    _screenshot(page, tmp_path, f"replay_page_{width}")
    assert not errors, f"console errors: {errors}"
    page.close()


def test_replay_page_of_a_long_trace_moves_a_step_quickly(browser, tmp_path):
    """A 1,500-step simulated trace: every step is drawn once from the slider, and the slowest is reported
    (``performance.now()`` in the page; the target is < 50 ms)."""
    from test_viz_page import long_trace  # tests/ is on sys.path (rootdir imports)
    trace = long_trace()
    page, errors = _open_replay(browser, _replay_page(tmp_path, trace), 1400)
    timings = page.evaluate("""() => {
        const slider = document.getElementById('slider'), out = [];
        for (let step = Number(slider.min); step <= Number(slider.max); step++) {
            const t0 = performance.now();
            slider.value = step;
            slider.dispatchEvent(new Event('input'));
            out.push(performance.now() - t0);
        }
        const t0 = performance.now();
        window.replay.setStep(Number(slider.min));  // the longest jump: back to the start
        out.push(performance.now() - t0);
        return out;
    }""")
    assert len(timings) >= len(trace.steps)
    assert page.locator("#step-header").inner_text().startswith(f"step {trace.steps[0].step} of")
    timings.sort()
    print(f"\nreplay page, {len(trace.steps)} steps: step move median {timings[len(timings) // 2]:.2f} ms, "
          f"max {timings[-1]:.2f} ms")
    _screenshot(page, tmp_path, "replay_page_long_1400")
    assert not errors, f"console errors: {errors}"
    page.close()


def test_replay_page_groups_the_cells_of_a_large_cache(browser, tmp_path):
    from test_viz_page import big_cache_trace
    trace = big_cache_trace()
    page, errors = _open_replay(browser, _replay_page(tmp_path, trace), 1400)
    peak = max(trace.steps, key=lambda r: r.used_blocks)
    page.evaluate("(s) => window.replay.setStep(s)", peak.step)
    summary = page.locator("#grid-summary").inner_text()
    assert f"{peak.used_blocks} used" in summary and "one cell = " in summary, summary
    assert page.locator("#owners").is_visible(), "a large cache is summed up by owner above its grid"
    owners = page.locator("#owners")
    owners.hover(position={"x": owners.bounding_box()["width"] - 4, "y": 10})  # its right end: free blocks
    assert page.locator("#grid-info").inner_text() == "free"
    canvas = page.locator("#grid")
    canvas.hover(position={"x": 5, "y": 5})
    info = page.locator("#grid-info").inner_text()
    assert info.startswith("blocks 0–") and " used " in info, f"the hovered group reads: {info}"
    canvas.click(position={"x": 5, "y": 5})
    page.mouse.move(0, 0)
    assert page.locator("#grid-info").inner_text() == info, "a clicked group stays selected"
    _screenshot(page, tmp_path, "replay_page_20000_blocks_1400")
    assert not errors, f"console errors: {errors}"
    page.close()


def _rgb(css: str) -> str:
    """``rgb(r, g, b)`` (a computed style) as ``#rrggbb``."""
    r, g, b = (int(v) for v in css[css.index("(") + 1:css.index(")")].split(",")[:3])
    return f"#{r:02x}{g:02x}{b:02x}"


def _faded(hex_color: str) -> str:
    """blockgrid's faded colour of a block freed at the step's end, over a white cell, as ``#rrggbb``."""
    from nanovllm_teach.viz.style import FREED_ALPHA
    channels = (int(hex_color[k:k + 2], 16) for k in (1, 3, 5))
    return "#" + "".join(f"{int(255 - FREED_ALPHA * (255 - v) + 0.5):02x}" for v in channels)  # JS Math.round


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("width", [900, 1400])
def test_replay_page_of_a_2000_step_trace_fits_steps_and_keeps_its_legend(browser, tmp_path, width, lang):
    """A Qwen3-8B workload (150 requests, 2,000+ steps): the timelines are in the first screen (the grid too,
    beside them, at 1,400 px), the Gantt chart scrolls in a box of bounded height, no axis label sticks out
    of its SVG, the step buttons, the arrow keys (after a click on a button too) and pause move and keep the
    step, the fastest speed crosses the run in under a minute, a window of steps follows the step shown,
    and every grid cell has its legend entry's colour."""
    from test_viz_page import qwen3_8b_trace
    from nanovllm_teach.viz.blockgrid import freed_at_step_end
    from nanovllm_teach.viz.style import CACHED_COLOR, FREE_COLOR, SEQ_PALETTE
    trace = qwen3_8b_trace()
    page, errors = _open_replay(browser, _replay_page(tmp_path, trace), width)
    page.locator(f".langs button[data-lang={lang}]").click()
    height = page.viewport_size["height"]
    tops = page.evaluate("""() => Object.fromEntries(['timelines', 'grid', 'lines', 'gantt'].map((id) =>
        [id, document.getElementById(id).getBoundingClientRect().top]))""")
    assert tops["timelines"] < height * 0.3, f"the timelines first, in the first screen ({height} px): {tops}"
    if width >= 1200:
        assert tops["grid"] < height * 0.6 and tops["lines"] < height, f"beside them, above the fold: {tops}"
    else:
        assert tops["timelines"] < tops["gantt"] < tops["grid"] < tops["lines"], f"one column, charts first: {tops}"
    page.evaluate("() => window.replay.setWindow(Number(document.querySelector('#zoom option').value))")  # all
    gantt = page.evaluate("() => { const b = document.getElementById('gantt'); "
                          "return [b.clientHeight, b.scrollHeight]; }")
    assert gantt[0] <= 250 and gantt[1] > gantt[0], f"the Gantt chart scrolls inside its box: {gantt}"
    outside = page.evaluate("""() => [...document.querySelectorAll('svg text')].filter((t) => {
        const a = t.getBoundingClientRect(), b = t.ownerSVGElement.getBoundingClientRect();
        return a.width > 0 && (a.left < b.left - 0.5 || a.right > b.right + 0.5 || a.top < b.top - 0.5 ||
                               a.bottom > b.bottom + 0.5);
    }).map((t) => t.textContent)""")
    assert not outside, f"labels outside their SVG: {outside}"
    assert page.locator("#gantt-axis text.tick").count() >= 3 and page.locator("#timelines text.tick").count() >= 3

    steps = [r.step for r in trace.steps]
    freed = freed_at_step_end(trace)
    step = sorted(s for s in freed if s in set(steps))[len(freed) // 2]
    page.evaluate("(s) => window.replay.setStep(s)", step)
    k = steps.index(step)
    page.locator("#forward").click()
    assert page.evaluate("() => window.replay.step") == steps[k + 1]
    page.locator("#back").click()
    page.locator("#back").click()
    assert page.evaluate("() => window.replay.step") == steps[k - 1]
    page.keyboard.press("ArrowRight")  # the focus is still on the button just clicked
    assert page.evaluate("() => window.replay.step") == step, "the right arrow steps forward after a click"
    page.keyboard.press("ArrowLeft")
    page.keyboard.press("ArrowRight")
    assert page.evaluate("() => window.replay.step") == step
    page.locator("#play").click()
    page.wait_for_function(f"() => window.replay.step > {step}", timeout=10_000)
    page.locator("#play").click()
    paused = page.evaluate("() => window.replay.step")
    page.wait_for_timeout(800)
    assert not page.evaluate("() => window.replay.playing") and page.evaluate("() => window.replay.step") == paused, \
        "pause keeps the step"
    assert page.locator("#step-header").inner_text().split(" ")[1] == str(paused)

    fastest = max(float(v) for v in page.locator("#speed option").evaluate_all("os => os.map((o) => o.value)"))
    assert len(steps) / fastest < 60, f"the fastest speed, {fastest} steps/s, crosses the run in under a minute"
    page.evaluate("() => window.replay.setWindow(100)")
    page.evaluate("(s) => window.replay.setStep(s)", steps[1500])
    lo, hi = page.evaluate("() => window.replay.window")
    assert hi - lo == 99 and lo <= steps[1500] <= hi, "the window of 100 steps holds the step shown"
    rows = page.locator("#gantt-rows").inner_text()
    assert int(re.search(r"\d+", rows).group()) < len(trace.requests), f"its requests only: {rows}"
    page.evaluate("() => window.replay.setWindow(Number(document.querySelector('#zoom option').value))")  # all
    # The page's new height may add or drop the window's scrollbar: the viewer redraws for the new width
    # (100 ms after the resize); read the legend once it has.
    page.wait_for_timeout(400)
    page.evaluate("(s) => window.replay.setStep(s)", step)
    legend = {kind: _rgb(page.locator(f"#grid-legend [data-kind={kind}] i").evaluate(
        "i => getComputedStyle(i).backgroundColor")) for kind in ("used", "freed", "cached", "free")}
    kinds = page.evaluate(f"""() => Array.from({{length: {trace.settings.num_blocks}}}, (_, b) =>
        Object.assign(window.replay.blockKind(b), {{color: window.replay.cellColor(b)}}))""")
    seen = {}
    for block, cell in enumerate(kinds):
        seen.setdefault(cell["kind"], 0)
        seen[cell["kind"]] += 1
        if cell["kind"] in ("cached", "free"):
            assert cell["color"] == legend[cell["kind"]], f"block {block}: {cell}, legend {legend}"
        elif cell["kind"] == "used":
            assert cell["color"] == SEQ_PALETTE[cell["seq"] % len(SEQ_PALETTE)], f"block {block}: {cell}"
        elif cell["kind"] == "freed":
            assert cell["color"] == _faded(SEQ_PALETTE[cell["seq"] % len(SEQ_PALETTE)]), f"block {block}: {cell}"
    assert legend["used"] == SEQ_PALETTE[0] and legend["freed"] == _faded(SEQ_PALETTE[0]), legend
    assert legend["cached"] == CACHED_COLOR and legend["free"] == FREE_COLOR, legend
    assert {"used", "freed", "cached", "free"} <= set(seen), seen
    assert all(freed_seq in freed[step].values() for freed_seq in
               {c["seq"] for c in kinds if c["kind"] == "freed"}), "the freed blocks are the step's"
    _screenshot(page, tmp_path, f"replay_page_qwen3_8b_{width}_{lang}")
    assert not errors, f"console errors: {errors}"
    page.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def jupyterlab(tmp_path_factory):
    """A JupyterLab server over a scratch copy of the notebooks (autosave must never write outputs into the
    repository's notebooks), with the app exposed to the page so the test can run commands.

    Its settings and workspaces live in the scratch folder too: the user's saved layout must not be restored
    into the test, and the "get notified about Jupyter news?" prompt is turned off. The kernel gets the
    learner's environment, not the test session's (no ``TRITON_INTERPRET``)."""
    _need("jupyterlab")
    root = tmp_path_factory.mktemp("lab")
    shutil.copytree(REPO / "notebooks", root / "notebooks")
    (root / "traces").symlink_to(REPO / "traces")
    settings = root / "settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text('{"fetchNews": "false"}')
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(JUPYTERLAB_SETTINGS_DIR=str(root / "settings"), JUPYTERLAB_WORKSPACES_DIR=str(root / "workspaces"))
    port, token = _free_port(), "nanovllm-teach-test"
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", f"--ServerApp.port={port}",
         f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}", "--LabApp.expose_app_in_browser=True",
         "--ServerApp.disable_check_xsrf=True", "--allow-root"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
            break
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                pytest.fail("JupyterLab did not start within 60 s")
            time.sleep(0.5)
    yield base, token, root
    server.terminate()
    try:
        server.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.kill()


_KERNEL_READY = """() => {
    const widget = window.jupyterapp && window.jupyterapp.shell.currentWidget;
    const kernel = widget && widget.sessionContext && widget.sessionContext.session
        && widget.sessionContext.session.kernel;
    return Boolean(kernel) && kernel.connectionStatus === 'connected' && kernel.status === 'idle';
}"""


def test_quickstart_player_renders_and_moves_in_jupyterlab(browser, jupyterlab, tmp_path):
    base, token, _ = jupyterlab
    page, errors = _open(browser, f"{base}/lab/tree/notebooks/en/01_quickstart.ipynb?token={token}", 1400)
    # Run the cells only once the notebook's kernel is connected and idle. Started earlier (while the kernel
    # is still "initializing", the first second after the page loads), "run all" executes nothing and
    # resolves at once, and the wait for the Player below could only time out: that was the hang.
    page.wait_for_function(_KERNEL_READY, timeout=180_000)
    # Not awaited in the page: the command's promise lasts as long as the whole notebook runs, and
    # ``evaluate`` has no timeout of its own.
    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
    # The notebook view is windowed: cells far from the viewport are attached but not laid out.
    try:
        page.wait_for_function(_PLAYER_READY, timeout=360_000)
    except Exception:
        cell_errors = page.locator(".jp-OutputArea-output[data-mime-type*=error]").all_inner_texts()
        pytest.fail(f"no Player appeared; cell errors: {cell_errors}")
    player = page.locator(".replay.in-notebook").first
    player.scroll_into_view_if_needed()
    header = player.locator("#step-header")
    before = player.evaluate("el => el.replay.step")
    player.locator("#forward").click()  # the keys go to the viewer, even after a click on a button
    for _ in range(2):
        page.keyboard.press("ArrowRight")
    assert player.evaluate("el => el.replay.step") == before + 3, "a click and two arrow presses move three steps"
    assert header.inner_text().startswith(f"step {before + 3} "), "the step header follows"
    _screenshot(page, tmp_path, "quickstart_player_1400")
    widget_errors = [e for e in errors if "widget" in e.lower() or "Uncaught" in e]
    assert not widget_errors, f"console errors from the widgets: {widget_errors}"
    page.close()


_PLAYER_READY = """() => { const el = document.querySelector('.replay.in-notebook');
                         return Boolean(el && el.replay && el.replay.ready); }"""
# Every element of the viewer inside its box (a pane cut off on the right fails), and no matplotlib math text.
_CLIPPED = """(root) => { const box = root.getBoundingClientRect();
    return [...root.querySelectorAll('*')].filter((e) => { const r = e.getBoundingClientRect();
        return r.width > 0 && r.right > box.right + 1; }).map((e) => e.id || e.tagName); }"""


def _run_cell(page, path: str, index: int) -> None:
    """Run cell ``index`` of the open notebook ``path`` and wait until the kernel has run it. The notebook is
    activated first and its file and kernel session awaited: a command run before then does nothing."""
    page.evaluate("""async ([path, k]) => {
        const app = window.jupyterapp;
        const panel = [...app.shell.widgets('main')].find((w) => w.context && w.context.path === path);
        await panel.context.ready;
        await panel.sessionContext.ready;
        app.shell.activateById(panel.id);
        panel.content.activeCellIndex = k;
        await app.commands.execute('notebook:run-cell');
    }""", [path, index])


def _python_sees(page, step: int) -> None:
    """Run the notebook's cell that prints ``player.step`` until it prints ``step``. The step reaches Python as a
    widget message, and ipywidgets holds back a model's latest change while an earlier one is unanswered: the
    second of two quick steps lands a moment later (once, it landed after a ``player.step = 40`` run next)."""
    for _ in range(20):
        _run_cell(page, "player.ipynb", 2)
        page.wait_for_timeout(500)
        if page.get_by_text(f"python sees step {step}", exact=True).count():
            return
    pytest.fail(f"Python did not see step {step}: {page.locator('.jp-OutputArea-output').all_inner_texts()}")


def test_player_plays_pauses_steps_and_speaks_both_languages_in_jupyterlab(browser, jupyterlab, tmp_path):
    """The Player in JupyterLab on the walkthrough trace: it plays in the browser (its steps per second are
    measured: the target is 20 or more, the floor asserted 5), pauses and keeps its step, steps by button and
    key, follows ``player.step = ...`` from Python and tells Python the step it shows, speaks both
    languages, and no pane of it is cut off nor a label written as matplotlib math text."""
    import nbformat
    base, token, root = jupyterlab
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in (
        "from nanovllm_teach.trace import load_trace\nfrom nanovllm_teach.viz import Player\n"
        "player = Player(load_trace('traces/walkthrough.jsonl'))\nplayer",
        "player.step = 40",
        "print('python sees step', player.step)",
        "player.lang = 'zh'",
    )], metadata={"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}})
    nbformat.write(notebook, root / "player.ipynb")
    # A workspace of its own: the default one would restore the notebooks an earlier test opened, and the
    # current widget might be one of them.
    page, errors = _open(browser, f"{base}/lab/workspaces/player/tree/player.ipynb?token={token}", 1400)
    page.wait_for_function(_KERNEL_READY, timeout=180_000)
    _run_cell(page, "player.ipynb", 0)
    try:
        page.wait_for_function(_PLAYER_READY, timeout=120_000)
    except Exception:
        _screenshot(page, tmp_path, "player_jupyterlab_missing")
        pytest.fail(f"no Player appeared: {page.locator('.jp-OutputArea-output').all_inner_texts()} {errors}")
    player = page.locator(".replay.in-notebook").first
    assert player.evaluate("el => el.replay.step") == 1
    assert "mathdefault" not in player.inner_text(), "no matplotlib math text in the viewer"
    assert not player.evaluate(_CLIPPED), "every pane of the Player fits its width"

    # Played at 64x (160 steps/s): the browser shows one step per frame, or as many as it manages. Counted
    # in the page, from the click to the last step.
    player.evaluate("el => el.replay.setSpeed(160)")
    rate = player.evaluate("""(el) => new Promise((done) => {
        const shown = el.replay.shown, t0 = performance.now();
        el.querySelector('#play').click();
        const poll = () => el.replay.playing ? setTimeout(poll, 5)
            : done((el.replay.shown - shown) / ((performance.now() - t0) / 1000));
        poll();
    })""")
    print(f"\nPlayer in JupyterLab, walkthrough ({player.evaluate('el => el.replay.step')} steps): "
          f"{rate:.1f} steps/s while playing (target >= 20)")
    assert rate >= 5, f"the Player plays at {rate:.1f} steps/s"
    assert player.evaluate("el => el.replay.step") == 64, "played to the last step"

    player.evaluate("el => el.replay.setSpeed(10)")
    player.locator("#play").click()  # from the start again, then paused
    page.wait_for_timeout(1200)
    _screenshot(page, tmp_path, "player_jupyterlab_playing_en")
    player.locator("#play").click()
    paused = player.evaluate("el => el.replay.step")
    page.wait_for_timeout(600)
    assert player.evaluate("el => el.replay.step") == paused and not player.evaluate("el => el.replay.playing")
    _screenshot(page, tmp_path, "player_jupyterlab_paused_en")
    player.locator("#back").click()
    page.keyboard.press("ArrowLeft")
    assert player.evaluate("el => el.replay.step") == max(1, paused - 2), "a button and a key step back"
    _python_sees(page, max(1, paused - 2))  # before Python sets a step of its own: else the two could cross

    _run_cell(page, "player.ipynb", 1)  # player.step = 40, from Python
    page.wait_for_function("() => document.querySelector('.replay.in-notebook').replay.step === 40", timeout=30_000)
    assert player.locator("#step-header").inner_text().startswith("step 40 of 64")
    player.locator("#forward").click()  # and back to Python
    _python_sees(page, 41)

    _run_cell(page, "player.ipynb", 3)  # player.lang = 'zh'
    page.wait_for_function("() => document.querySelector('.replay.in-notebook #step-header').textContent"
                           ".startsWith('第 41 步')", timeout=30_000)
    assert "已用 KV 块" in player.locator("#timelines").inner_text() and "解码" in player.locator("#gantt-legend").inner_text()
    assert any("\u4e00" <= ch <= "\u9fff" for ch in player.locator("#lines").inner_text())
    assert not player.evaluate(_CLIPPED), "every pane of the Player fits its width, in Chinese too"
    player.scroll_into_view_if_needed()
    _screenshot(page, tmp_path, "player_jupyterlab_paused_zh")
    player.locator("#play").click()
    page.wait_for_timeout(200)
    _screenshot(page, tmp_path, "player_jupyterlab_playing_zh")
    assert not [e for e in errors if "widget" in e.lower() or "Uncaught" in e], errors
    page.close()
