"""The player, driven as a notebook user would, without a notebook: set the slider (or press Play, or call
``set_step``), then check that the cursors, the TEACHING lines, the queues and the block grid show that
step, and that stepping does not rebuild the timelines.

Traces: ``test_viz_replay.viz_traces`` (recorded once per session) and ``data/small_trace.jsonl``.
"""

from __future__ import annotations

import copy
import html
import io
import re
from pathlib import Path

import ipywidgets as widgets
import numpy as np
import pytest
from matplotlib.colors import to_rgba
from PIL import Image

from nanovllm_teach.trace import ConsoleRenderer, Trace, load_trace
from nanovllm_teach.viz import EngineReplay, Player
from nanovllm_teach.viz.style import seq_color
from nanovllm_teach.viz.timeline import cursor_lines
from test_viz_replay import viz_traces

SMALL_TRACE = Path(__file__).resolve().parent / "data" / "small_trace.jsonl"


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    return load_trace(viz_traces(tmp_path_factory.getbasetemp())["rich"].path)


@pytest.fixture(scope="module")
def player(trace):
    return Player(trace, dpi=40)


def expected_lines(trace, step: int, lang: str = "en", verbosity: str = "normal") -> list[str]:
    """The console's lines for the events since the previous step ended, from one renderer that saw the
    whole trace (as a live run prints it)."""
    renderer = ConsoleRenderer(lang, io.StringIO(), verbosity)
    done = [i for i, e in enumerate(trace.events) if e.event == "STEP_DONE"]
    end = next(i for i in done if trace.events[i].step == step)
    start = max((i for i in done if i < end), default=-1) + 1
    lines = [renderer.lines(e) for e in trace.events]
    return [line for per_event in lines[start:end + 1] for line in per_event]


def shown_lines(view: str) -> list[str]:
    """The TEACHING lines a lines view shows, as text (one ``<div>`` per line, its fields in spans)."""
    return [html.unescape(re.sub(r"<[^>]+>", "", body)).strip()
            for body in re.findall(r'<div style="padding-left[^"]*">(.*?)</div>', view)]


def png(data: bytes) -> Image.Image:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return Image.open(io.BytesIO(data))


def row_of(trace, step: int):
    return next(r for r in trace.steps if r.step == step)


def test_widget_parts(player):
    assert isinstance(player.widget, widgets.VBox)
    found = player.widget.children[0].children
    assert player.play in found and player.slider in found and player.lang_picker in found
    assert player.step == player.steps[0] == player.slider.value == player.slider.min
    assert player.slider.max == player.steps[-1]
    for image in (player.timeline_image, player.grid_image):
        assert png(image.value).size[0] > 50
    assert "application/vnd.jupyter.widget-view+json" in player._repr_mimebundle_()


@pytest.mark.parametrize("how", ["set_step", "slider", "play"])
def test_moving_to_a_step_shows_that_step(trace, player, how):
    replay = EngineReplay(trace)
    for step in (5, 12, 23, player.steps[-1], 2):
        if how == "set_step":
            player.set_step(step)
        elif how == "slider":
            player.slider.value = step
        else:  # Play drives the slider through the link
            player.play.value = step
        assert player.step == step == player.slider.value == player.play.value
        assert {tuple(line.get_xdata()) for line in cursor_lines(player.timeline_figure)} == {(step, step)}
        assert player.lines == expected_lines(trace, step)
        row = row_of(trace, step)
        assert player.queues == replay.queues_at(step)
        assert (len(player.queues.waiting), len(player.queues.running)) == (row.waiting_len, row.running_len)
        assert player.kv == replay.kv_at(step) and player.kv.num_used == row.used_blocks
        assert f"<b>step {step} of " in player.header.value
        assert shown_lines(player.lines_view.value) == player.lines


def test_lines_queues_and_grid_follow_the_events(trace, player):
    preempt = next(e for e in trace.events_named("PREEMPT"))
    player.set_step(preempt.step)
    assert any(line.startswith("TEACHING/PREEMPT") for line in player.lines)
    assert preempt.stats["seq_id"] in player.queues.preempted
    assert player.queues.waiting[0] == preempt.stats["seq_id"]  # preempted requests go to the front
    assert f"<u>{preempt.stats['seq_id']}</u>" in player.queue_view.value

    finish = next(e for e in trace.events_named("STATE_TRANSITION") if e.stats.get("to") == "FINISHED")
    player.set_step(finish.step)
    assert finish.stats["seq_id"] in player.queues.finished
    assert any(line.startswith("TEACHING/BLOCK_FREE") for line in player.lines)

    # The grid's cells are coloured by the holders at the current step.
    cells = next(a for a in player.grid_figure.findobj() if a.get_gid() == "blocks")
    for block_id, seqs in player.kv.holders.items():
        assert tuple(np.round(cells.get_facecolors()[block_id], 3)) == tuple(np.round(to_rgba(seq_color(seqs[0])), 3))


def test_teaching_lines_wrap_between_fields_only(trace, player):
    player.set_step(1)
    view = player.lines_view.value
    spans = re.findall(r'<span style="white-space:(\w+)">(.*?)</span>', view)
    assert spans and shown_lines(view) == player.lines
    for style, text in spans:
        text = html.unescape(text)
        # A field: the event name, "| name=value", a stat (or list item) after a comma; only the reason's
        # prose may wrap inside, between its words.
        assert text.startswith(("TEACHING/", "| ")) or not text[:1].isspace(), text
        assert style == ("normal" if text.startswith("| reason=") else "pre"), text
    # The break a narrow view made before (" | st" / "ats={...") cannot happen: "| stats={" is one field.
    assert any(html.unescape(text).startswith("| stats={engine_step=1,") for _, text in spans)
    assert "word-break:normal" in view


def test_language_and_verbosity(trace, player):
    step = next(e.step for e in trace.events_named("PREEMPT"))
    player.set_step(step)
    english = player.lines
    player.set_lang("zh")
    assert player.lang == "zh" and player.lines == expected_lines(trace, step, "zh")
    assert player.lines != english and any("\u4e00" <= ch <= "\u9fff" for ch in "".join(player.lines))
    player.set_lang("en")
    # "detail" numbers the first decode steps' tensor lines as the console does (decode detail #k/3).
    player.verbosity_picker.value = "detail"
    decode_steps = [row.step for row in trace.steps if row.phase == "decode"]
    for step in decode_steps[:4]:
        player.set_step(step)
        assert player.lines == expected_lines(trace, step, verbosity="detail")
    assert any("decode detail #1/3" in line for line in expected_lines(trace, decode_steps[0], verbosity="detail"))
    assert not any("decode detail" in line for line in expected_lines(trace, decode_steps[3], verbosity="detail"))
    player.verbosity_picker.value = "normal"


def test_stepping_moves_the_cursor_without_rebuilding_the_timelines(player):
    player.set_step(3)
    timeline_artists = list(player.timeline_figure.findobj())
    before = png(player.timeline_image.value)
    player.set_step(30)
    assert list(player.timeline_figure.findobj()) == timeline_artists  # same artists, only moved
    after = png(player.timeline_image.value)
    assert before.size == after.size
    # Only columns near the old and the new cursor changed.
    diff = np.any(np.asarray(before.convert("RGB")) != np.asarray(after.convert("RGB")), axis=(0, 2))
    changed = np.flatnonzero(diff)
    assert 0 < len(changed) < before.size[0] / 10


def test_bad_steps_and_options(player, trace):
    with pytest.raises(ValueError, match="not a completed step"):
        player.set_step(10_000)
    with pytest.raises(ValueError, match="lang"):
        Player(trace, lang="fr")
    with pytest.raises(ValueError, match="verbosity"):
        Player(trace, verbosity="chatty")


def test_small_trace_plays_through():
    trace = load_trace(SMALL_TRACE)
    player = Player(trace, dpi=30)
    for step in player.steps:
        player.set_step(step)
        row = row_of(trace, step)
        assert (len(player.queues.waiting), len(player.queues.running), player.kv.num_used) == (
            row.waiting_len, row.running_len, row.used_blocks)
    hit_step = next(r.step for r in trace.steps if r.prefix_hit_seq_ids)
    player.set_step(hit_step)
    assert any(line.startswith("TEACHING/PREFIX_CACHE_HIT") for line in player.lines)


def test_player_displays_in_a_real_kernel():
    """In a Jupyter kernel (what JupyterLab and VS Code both run), the player displays as a widget view and
    stepping it from a later cell works."""
    import nbformat
    from nbclient import NotebookClient

    cells = [
        "from nanovllm_teach.trace import load_trace\n"
        "from nanovllm_teach.viz import Player\n"
        f"player = Player(load_trace({str(SMALL_TRACE)!r}), dpi=30)\n"
        "player",
        "player.set_step(13)\nprint(player.step, player.queues.running, len(player.timeline_image.value) > 0)",
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in cells])
    NotebookClient(nb, timeout=300, kernel_name="python3").execute()
    shown = nb.cells[0].outputs
    assert any("application/vnd.jupyter.widget-view+json" in out.get("data", {}) for out in shown), shown
    assert nb.cells[1].outputs[0]["text"] == "13 (1,) True\n"


def test_panels_share_one_x_axis_and_one_cursor(player):
    """The Gantt chart's legend must not shift its x range against the timelines': one column of axes."""
    fig = player.timeline_figure
    fig.canvas.draw()
    axes = fig.get_axes()
    assert len(axes) == 6  # five timelines and the Gantt chart
    assert len({ax.get_xlim() for ax in axes}) == 1
    extents = {(round(ax.get_position().x0, 4), round(ax.get_position().x1, 4)) for ax in axes}
    assert len(extents) == 1, extents
    player.set_step(12)
    assert {tuple(line.get_xdata()) for line in cursor_lines(fig)} == {(12, 12)} and len(cursor_lines(fig)) == 6


def test_a_large_cache_is_grouped_and_a_group_can_be_read():
    trace = load_trace(SMALL_TRACE)
    big = copy.deepcopy(trace)
    ready = next(e for e in big.events if e.event == "ENGINE_READY")
    ready.stats["num_kvcache_blocks"] = 20_000
    player = Player(Trace(big.header, big.events), dpi=30)
    layout = player._block_grid.layout
    assert layout.group == 20 and layout.num_cells == 1000
    assert player.group_picker.layout.display == "" and player.group_picker.max == 999
    step = next(r.step for r in trace.steps if r.used_blocks >= 2)
    player.set_step(step)
    assert player.selected_group == 0 and player.group_view.value.startswith("blocks 0–19: ")
    used = player.kv.num_used
    assert f"{used} used" in html.unescape(player.group_view.value)
    cells = next(a for a in player.grid_figure.findobj() if a.get_gid() == "blocks")
    assert cells.get_linewidths()[0] > 0  # the selected group is outlined
    player.select_group(3)
    assert player.group_view.value.startswith("blocks 60–79: 0 used")
    assert cells.get_linewidths()[3] > 0 and cells.get_linewidths()[0] == 0
    # The CPU default (341 blocks) and small caches draw one cell per block, no group box.
    small = Player(trace, dpi=30)
    assert small._block_grid.layout.group == 1 and small.group_picker.layout.display == "none"


def test_the_controls_header_and_queues_speak_the_players_language(trace):
    player = Player(trace, lang="zh", dpi=40)
    step = next(e.step for e in trace.events_named("PREEMPT"))
    player.set_step(step)
    assert player.slider.description == "步" and player.back.tooltip == "上一步"
    assert f"<b>第 {step} 步（共 " in player.header.value and "本步结束时的 KV 块：" in player.header.value
    assert "等待队列" in player.queue_view.value and "被抢占过" in player.queue_view.value
    player.set_lang("en")
    assert player.slider.description == "step" and f"<b>step {step} of " in player.header.value
    assert "<b>waiting (" in player.queue_view.value and not re.search(r"[\u4e00-\u9fff]", player.header.value)


def test_the_arrows_step_back_and_forward_and_stop_at_the_ends(trace, player):
    player.set_step(player.steps[1])
    player.forward.click()
    assert player.step == player.steps[2]
    player.back.click()
    player.back.click()
    assert player.step == player.steps[0]
    player.back.click()  # held at the first step
    assert player.step == player.steps[0]
    player.set_step(player.steps[-1])
    player.forward.click()
    assert player.step == player.steps[-1]


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
