"""The player, driven as a notebook user would from Python, without a browser: its step (a synced trait),
the TEACHING lines, queues and blocks it answers for that step, the viewer's data and module it sends to the
browser (the replay page's own), the lines of a long trace sent a window at a time, the static picture for
frontends without widgets, and no log-axis label left as matplotlib math text. What the browser does with
it (playing, pausing, stepping, both languages) is tests/test_browser.py's.

Traces: ``test_viz_replay.viz_traces`` (recorded once per session) and ``data/small_trace.jsonl``.
"""

from __future__ import annotations

import gzip
import io
import json
import re
from pathlib import Path

import pytest
import traitlets
from matplotlib.text import Text
from PIL import Image

from nanovllm_teach.trace import ConsoleRenderer, load_trace
from nanovllm_teach.viz import EngineReplay, Player, plot_overview, plot_timelines
from nanovllm_teach.viz import player as player_module
from nanovllm_teach.viz.page import page_data, step_lines_window
from nanovllm_teach.viz.render import figure_png
from test_viz_replay import viz_traces

SMALL_TRACE = Path(__file__).resolve().parent / "data" / "small_trace.jsonl"
TRACES = Path(__file__).resolve().parents[1] / "traces"


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    return load_trace(viz_traces(tmp_path_factory.getbasetemp())["rich"].path)


@pytest.fixture(scope="module")
def player(trace):
    return Player(trace)


def expected_lines(trace, step: int, lang: str = "en", verbosity: str = "normal") -> list[str]:
    """The console's lines for the events since the previous step ended, from one renderer that saw the
    whole trace (as a live run prints it)."""
    renderer = ConsoleRenderer(lang, io.StringIO(), verbosity)
    done = [i for i, e in enumerate(trace.events) if e.event == "STEP_DONE"]
    end = next(i for i in done if trace.events[i].step == step)
    start = max((i for i in done if i < end), default=-1) + 1
    lines = [renderer.lines(e) for e in trace.events]
    return [line for per_event in lines[start:end + 1] for line in per_event]


def decoded_lines(window: dict, lang: str) -> list[list[str]]:
    """What the viewer's script makes of a window of encoded lines (common.js: addLines, linesOf)."""
    last = {}
    out = []
    for j, flat in enumerate(window["steps"]):
        lines, k = [], 0
        alone = window["zhAlone"].get(str(j)) if lang == "zh" else None
        while k < len(flat):
            pair = flat[k]
            parts = window["texts"][window["pairs"][pair][0]].split(window["slot"])
            numbers = [a + b for a, b in zip(flat[k + 1:k + len(parts)], last.get(pair, [0] * (len(parts) - 1)))]
            last[pair] = numbers
            side = window["texts"][window["pairs"][pair][1 if lang == "zh" else 0]].split(window["slot"])
            lines.append(side[0] + "".join(str(n) + part for n, part in zip(numbers, side[1:])))
            k += len(parts)
        if alone is not None:  # the Chinese lines that do not pair with the English ones, numbers as they are
            lines, k = [], 0
            while k < len(alone):
                parts = window["texts"][window["pairs"][alone[k]][0]].split(window["slot"])
                lines.append(parts[0] + "".join(str(n) + part for n, part in zip(alone[k + 1:], parts[1:])))
                k += len(parts)
        out.append(lines)
    return out


def test_the_widget_sends_the_replay_pages_data_and_viewer(trace, player):
    data = json.loads(gzip.decompress(player.data))
    page = page_data(trace, lines_until=player_module.LINE_WINDOW)
    assert {k: data[k] for k in page} == json.loads(json.dumps(page)), "the page's encoding, sent once"
    assert set(data["ui"]) == {"en", "zh"}, "with the page's words in both languages"
    assert "async function startViewer(root, D, host)" in player._esm and "export default" in player._esm
    assert "render(" in player._esm and "model.send" in player._esm
    assert ".replay main" in player._css and not re.search(r"^\s*(body|header|main|h1|h2)\b", player._css, re.M), \
        "the style is scoped to the viewer: it cannot restyle the notebook"


def test_moving_to_a_step_answers_for_that_step(trace, player):
    replay = EngineReplay(trace)
    for step in (5, 12, 23, player.steps[-1], 2):
        if step % 2:
            player.step = step
        else:
            player.set_step(step)
        assert player.step == step
        assert player.lines == expected_lines(trace, step)
        row = next(r for r in trace.steps if r.step == step)
        assert player.queues == replay.queues_at(step)
        assert (len(player.queues.waiting), len(player.queues.running)) == (row.waiting_len, row.running_len)
        assert player.kv == replay.kv_at(step) and player.kv.num_used == row.used_blocks


def test_language_and_verbosity(trace, player):
    step = next(e.step for e in trace.events_named("PREEMPT"))
    player.step = step
    english = player.lines
    player.set_lang("zh")
    assert player.lang == "zh" and player.lines == expected_lines(trace, step, "zh")
    assert player.lines != english and any("\u4e00" <= ch <= "\u9fff" for ch in "".join(player.lines))
    player.lang = "en"
    # "detail" numbers the first decode steps' tensor lines as the console does (decode detail #k/3).
    detailed = Player(trace, verbosity="detail")
    decode_steps = [row.step for row in trace.steps if row.phase == "decode"]
    for step in decode_steps[:4]:
        detailed.step = step
        assert detailed.lines == expected_lines(trace, step, verbosity="detail")
    assert any("decode detail #1/3" in line for line in expected_lines(trace, decode_steps[0], verbosity="detail"))


def test_bad_steps_and_options(player, trace):
    with pytest.raises(ValueError, match="10000 is not a completed step"):
        player.set_step(10_000)
    with pytest.raises(traitlets.TraitError, match="10000 is not a completed step"):
        player.step = 10_000
    with pytest.raises(traitlets.TraitError, match="'fr'"):
        player.lang = "fr"
    with pytest.raises(ValueError, match="lang"):
        Player(trace, lang="fr")
    with pytest.raises(ValueError, match="verbosity"):
        Player(trace, verbosity="chatty")


def test_step_by_holds_at_the_ends(player):
    player.step = player.steps[1]
    player.step_by(1)
    assert player.step == player.steps[2]
    player.step_by(-5)
    assert player.step == player.steps[0]
    player.step = player.last
    player.step_by(1)
    assert player.step == player.steps[-1]


def test_small_trace_plays_through():
    trace = load_trace(SMALL_TRACE)
    player = Player(trace)
    for step in player.steps:
        player.step = step
        row = next(r for r in trace.steps if r.step == step)
        assert (len(player.queues.waiting), len(player.queues.running), player.kv.num_used) == (
            row.waiting_len, row.running_len, row.used_blocks)
    hit_step = next(r.step for r in trace.steps if r.prefix_hit_seq_ids)
    player.step = hit_step
    assert any(line.startswith("TEACHING/PREFIX_CACHE_HIT") for line in player.lines)


def test_a_long_traces_lines_go_a_window_at_a_time(trace, monkeypatch):
    """With windows of 7 steps the data holds the first 7 steps' lines; asked for a later step's, the kernel
    sends that step's window, and the viewer's decoding of it gives the console's lines in both languages."""
    monkeypatch.setattr(player_module, "LINE_WINDOW", 7)
    player = Player(trace)
    assert len(json.loads(gzip.decompress(player.data))["lines"]["steps"]) == 7
    sent = []
    monkeypatch.setattr(player, "send", lambda content, buffers=None: sent.append(content))
    player._on_msg(player, {"lines": 17}, [])
    player._on_msg(player, {"lines": "17; drop table"}, [])  # not an index: ignored
    player._on_msg(player, {"lines": 10_000}, [])  # past the end: nothing to send
    assert len(sent) == 1 and sent[0]["lines"]["from"] == 14
    window = json.loads(json.dumps(sent[0]["lines"]))
    for lang in ("en", "zh"):
        decoded = decoded_lines(window, lang)
        assert decoded == [expected_lines(trace, player.steps[i], lang) for i in range(14, 14 + len(decoded))]
    assert window == json.loads(json.dumps(step_lines_window(trace, "normal", 14, 21)))


def test_the_static_picture_is_in_the_display_bundle(player):
    """Where widgets do not render (GitHub's notebook view, a PDF export), the cell shows a picture."""
    player.step = 12
    data, _ = player._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in data
    image = Image.open(io.BytesIO(data["image/png"]))
    assert image.size[0] > 400


def test_player_displays_in_a_real_kernel():
    """In a Jupyter kernel (what JupyterLab and VS Code both run), the player displays as a widget view and
    setting its step from a later cell works."""
    import nbformat
    from nbclient import NotebookClient

    cells = [
        "from nanovllm_teach.trace import load_trace\n"
        "from nanovllm_teach.viz import Player\n"
        f"player = Player(load_trace({str(SMALL_TRACE)!r}))\n"
        "player",
        "player.step = 13\nprint(player.step, player.queues.running)",
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in cells])
    NotebookClient(nb, timeout=300, kernel_name="python3").execute()
    shown = nb.cells[0].outputs
    assert any("application/vnd.jupyter.widget-view+json" in out.get("data", {}) for out in shown), shown
    assert any("image/png" in out.get("data", {}) for out in shown), "with the static picture beside it"
    assert nb.cells[1].outputs[0]["text"] == "13 (1,)\n"


@pytest.mark.parametrize("draw", [plot_overview, plot_timelines])
def test_no_log_axis_label_is_drawn_as_math_text_source(draw):
    """A log axis labels its ticks ``$\\mathdefault{10^{1}}$``: drawn with mathtext off (as the pictures'
    own words are), the label showed those letters. Every such label is drawn as math, and there is one."""
    trace = load_trace(TRACES / "preemption.jsonl")
    figure = draw(trace, cursor_step=5)
    figure_png(figure, dpi=30)  # the draw makes the ticks
    math = [t for t in figure.findobj(Text) if "\\mathdefault" in t.get_text()]
    assert math, "the step latency axis is logarithmic on this trace"
    assert all(t.get_parse_math() for t in math), [t.get_text() for t in math if not t.get_parse_math()]
    assert not [t for t in figure.findobj(Text) if "$" in t.get_text() and not t.get_parse_math()
                and "\\mathdefault" in t.get_text()]


def test_the_grids_summary_counts_what_its_legend_draws():
    """After the last step every block was just freed: the grid draws them faded in their holder's colour
    ("freed at the step's end"), so the title counts them as that, not as cached or free."""
    from nanovllm_teach.viz.blockgrid import freed_at_step_end, summary_line

    trace = load_trace(Path(__file__).resolve().parents[1] / "traces" / "prefix_cache.jsonl")
    last = trace.steps[-1].step
    kv = EngineReplay(trace).kv_at(last)
    freed = freed_at_step_end(trace)[last]
    numbers = [int(n) for n in re.findall(r"(\d+) (?:used|freed|cached|free)", summary_line(kv, None, freed))]
    used, gone, cached, free = numbers
    assert gone == len(freed) > 0 and used + gone + cached + free == kv.num_blocks
    assert cached == len(set(kv.cached_free) - set(freed))
