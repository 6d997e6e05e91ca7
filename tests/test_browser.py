"""What a person sees, tested as they see it: pages and widgets in headless Chromium (Debian's ``chromium``),
driven by Playwright for Python against that system browser (Playwright's own browser download is not used).

Without a Chromium these tests skip, unless ``NANOVLLM_TEACH_REQUIRE_BROWSER=1`` (set by ``.ci/run``, which
installs it), where a missing browser is a failure. ``NANOVLLM_TEACH_SCREENSHOTS=DIR`` keeps the screenshots.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# The machine's network is closed: background services would only fill the log with refused connections.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-sync",
                 "--disable-background-networking", "--disable-component-update"]

if CHROMIUM is None and os.environ.get("NANOVLLM_TEACH_REQUIRE_BROWSER") == "1":
    raise RuntimeError("NANOVLLM_TEACH_REQUIRE_BROWSER=1 but no chromium: apt-get install chromium")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no system Chromium (Debian: apt-get install chromium)")


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


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
    page_path = tmp_path / "report.html"
    subprocess.run([sys.executable, "-m", "nanovllm_teach.cli", "replay", str(REPO / "traces" / "preemption.jsonl"),
                    "--html", str(page_path)], check=True, capture_output=True)
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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def jupyterlab(tmp_path_factory):
    """A JupyterLab server over a scratch copy of the notebooks (autosave must never write outputs into the
    repository's notebooks), with the app exposed to the page so the test can run commands."""
    pytest.importorskip("jupyterlab")
    root = tmp_path_factory.mktemp("lab")
    shutil.copytree(REPO / "notebooks", root / "notebooks")
    (root / "traces").symlink_to(REPO / "traces")
    port, token = _free_port(), "nanovllm-teach-test"
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", f"--ServerApp.port={port}",
         f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}", "--LabApp.expose_app_in_browser=True",
         "--ServerApp.disable_check_xsrf=True", "--allow-root"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
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
    yield base, token
    server.terminate()
    try:
        server.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.kill()


def test_quickstart_player_renders_and_moves_in_jupyterlab(browser, jupyterlab, tmp_path):
    base, token = jupyterlab
    page, errors = _open(browser, f"{base}/lab/tree/notebooks/01_quickstart.ipynb?token={token}", 1400)
    # JupyterLab rewrites its URL while it starts: a locator survives that, a page function may not.
    page.locator(".jp-Notebook").first.wait_for(state="attached", timeout=120_000)
    page.wait_for_function("() => window.jupyterapp !== undefined", timeout=60_000)
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
    # The notebook view is windowed: cells far from the viewport are attached but not laid out.
    page.locator(".widget-slider").first.wait_for(state="attached", timeout=300_000)
    player = page.locator(".jp-OutputArea-output", has=page.locator(".widget-slider")).first
    player.scroll_into_view_if_needed()
    assert player.locator("img").count() >= 3, "the Player shows its pictures, not a text repr"
    readout = player.locator(".widget-readout").first
    header = player.locator(".widget-html").first
    before, header_before = int(readout.inner_text()), header.inner_text()
    player.locator(".noUi-handle").first.focus()
    for _ in range(3):
        page.keyboard.press("ArrowRight")
    deadline = time.monotonic() + 30
    while header.inner_text() == header_before and time.monotonic() < deadline:
        time.sleep(0.2)
    assert int(readout.inner_text()) == before + 3, "three arrow presses move the slider three steps"
    assert f"step {before + 3} " in header.inner_text(), "the step header follows the slider"
    player.scroll_into_view_if_needed()
    _screenshot(page, tmp_path, "quickstart_player_1400")
    widget_errors = [e for e in errors if "widget" in e.lower() or "Uncaught" in e]
    assert not widget_errors, f"console errors from the widgets: {widget_errors}"
    page.close()
