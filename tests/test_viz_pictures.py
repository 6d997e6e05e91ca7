"""What the pictures draw, read back from their artists (Agg backend, no pyplot): bars per step and their
phase colours, the Gantt chart's segments, chunks, preemption and finish markers, the block grid's cells,
colours, edges and reference counts, cursors, the side-by-side comparison and its waste measures.

Traces: ``test_viz_replay.viz_traces`` (recorded once per session).
"""

from __future__ import annotations

import bisect
import io
from math import ceil

import numpy as np
import pytest
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from PIL import Image

from pathlib import Path

from nanovllm_teach.trace import format_step_table, load_trace
from nanovllm_teach.viz import (
    EngineReplay, compare, figure_png, move_cursor, plot_block_grid, plot_gantt, plot_overview, plot_timelines,
    summarize,
)
from nanovllm_teach.viz.blockgrid import LABEL_CELLS, MAX_CELLS, draw_block_grid, freed_at_step_end, group_summary
from nanovllm_teach.viz.compare import early_finished_waste, late_joining_waste
from nanovllm_teach.trace import KVSnapshot, held_segments, request_segments
from nanovllm_teach.viz.style import CACHED_COLOR, FREE_COLOR, PHASE_COLORS, STATE_COLORS, seq_color
from nanovllm_teach.viz.timeline import cursor_lines
from test_viz_replay import viz_traces


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    return {name: load_trace(rec.path) for name, rec in viz_traces(tmp_path_factory.getbasetemp()).items()}


def by_gid(fig: Figure, gid: str) -> list:
    return [a for a in fig.findobj() if a.get_gid() == gid]


def one(fig: Figure, gid: str):
    found = by_gid(fig, gid)
    assert len(found) == 1, f"{len(found)} artists with gid {gid!r}"
    return found[0]


def rgba(color) -> tuple:
    return tuple(np.round(to_rgba(color), 3))


def faces(collection) -> list[tuple]:
    return [tuple(np.round(c, 3)) for c in collection.get_facecolors()]


def x_span(path) -> tuple[float, float]:
    xs = path.vertices[:, 0]
    return float(xs.min()), float(xs.max())


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return Image.open(io.BytesIO(data)).size


# ---- timelines -----------------------------------------------------------------------------------------

def test_timelines_bars_per_step_coloured_by_phase(traces):
    trace = traces["rich"]
    fig = plot_timelines(trace)
    rows = trace.steps
    for gid in ("batch-size", "latency", "tokens"):
        bars = one(fig, gid)
        assert len(bars.get_paths()) == len(rows)
        assert faces(bars) == [rgba(PHASE_COLORS[r.phase]) for r in rows]
        # Bar k spans step k's unit: [step - 0.5, step + 0.5].
        assert [x_span(p) for p in bars.get_paths()] == [(r.step - 0.5, r.step + 0.5) for r in rows]
    heights = [p.vertices[:, 1].max() for p in one(fig, "batch-size").get_paths()]
    assert heights == [r.batch_size for r in rows]
    preempted_steps = [r.step for r in rows if r.preempted]
    assert preempted_steps
    assert sorted(line.get_xdata()[0] for line in by_gid(fig, "preempt")) == sorted(preempted_steps * 5)  # 5 panels
    assert cursor_lines(fig) == []


def test_timelines_cursor_moves(traces):
    fig = plot_timelines(traces["rich"], cursor_step=3)
    lines = cursor_lines(fig)
    assert len(lines) == 5 and all(list(line.get_xdata()) == [3, 3] for line in lines)
    move_cursor(fig, 17)
    assert all(list(line.get_xdata()) == [17, 17] for line in lines)
    assert png_size(figure_png(fig, dpi=40))[0] > 100


def _height_at(fig: Figure, gid: str, x: float) -> float:
    """The height a panel draws over x: the tallest of its bars or fill there, or its step line's value."""
    artist = one(fig, gid)
    if hasattr(artist, "get_paths"):
        heights = [p.vertices[:, 1].max() for p in artist.get_paths()
                   if p.vertices[:, 0].min() <= x <= p.vertices[:, 0].max()]
        if len(artist.get_paths()) == 1:  # a fill_between: the highest whole number its outline holds over x
            path, h = artist.get_paths()[0], 0
            while path.contains_point((x, h + 0.5)):
                h += 1
            return float(h)
        return float(max(heights))
    xs, ys = list(artist.get_xdata()), list(artist.get_ydata())  # a step line drawn where="post"
    return float(ys[bisect.bisect_right(xs, x) - 1])


@pytest.mark.parametrize("path", ["traces/preemption.jsonl", "traces/walkthrough.jsonl"])
def test_one_step_convention_in_every_picture_and_the_table(path):
    """Step N's column shows step N as it ran: when a request finishes in step N, the batch bars, the KV
    blocks held and the running queue all drop at N + 0.5, where the Gantt chart's finish marker is."""
    trace = load_trace(Path(__file__).resolve().parent.parent / path)
    fig = plot_overview(trace)
    rows = {r.step: r for r in trace.steps}
    finishes = [r for r in trace.steps if r.finished and r.step + 1 in rows]
    assert finishes
    for row in finishes:
        after = rows[row.step + 1]
        n = row.step
        assert _height_at(fig, "batch-size", n) == row.batch_size
        assert _height_at(fig, "batch-size", n + 1) == after.batch_size < row.batch_size
        # The finished request's blocks are still drawn over its last step, gone over the next.
        assert _height_at(fig, "kv-used", n) == row.held_blocks > row.used_blocks
        assert _height_at(fig, "kv-used", n + 1) == after.held_blocks
        assert _height_at(fig, "running", n) == row.running_in_step == row.batch_size or row.phase == "prefill"
        assert _height_at(fig, "running", n + 1) == after.running_in_step < row.running_in_step
    ends = {round(float(x), 3) for coll in by_gid(fig, "finish-eos") + by_gid(fig, "finish-length")
            for x, _ in coll.get_offsets()}
    assert {row.step + 0.5 for row in finishes} <= ends
    # The table says the same: "held" while the step ran, "used" after its requests freed their blocks.
    table = format_step_table(trace.steps).splitlines()
    header = table[0].split()
    for row in finishes:
        cells = dict(zip(header, table[row.step].split()))
        assert int(cells["bs"]) == row.batch_size and int(cells["held"]) == row.held_blocks
        assert int(cells["used"]) == row.used_blocks and cells["finished"] == ",".join(map(str, row.finished))
    assert "step N as it ran" in one(fig, "batch-size").axes.get_legend().get_title().get_text()


# ---- Gantt chart ---------------------------------------------------------------------------------------

def test_gantt_segments_chunks_and_colours(traces):
    trace = traces["rich"]
    fig = plot_gantt(trace)
    rows = {r.seq_id: i for i, r in enumerate(trace.requests)}
    segments = request_segments(trace)
    for state, color in STATE_COLORS.items():
        mine = [s for s in segments if s.state == state]
        if state == "held":
            assert not by_gid(fig, "gantt-held")  # continuous batching holds nothing
            continue
        collection = one(fig, f"gantt-{state}")
        assert len(collection.get_paths()) == len(mine)
        assert set(faces(collection)) == {rgba(color)}
        spans = sorted((x_span(p), round(float(p.vertices[:, 1].mean()))) for p in collection.get_paths())
        assert spans == sorted(((s.step_start - 0.5, s.step_end - 0.5), rows[s.seq_id]) for s in mine)
    # The chunked prompt: two prefill blocks side by side, kept apart by a white edge.
    prefill = one(fig, "gantt-prefill")
    chunked_seq = next(sid for row in trace.steps for sid in row.chunked)
    chunks = [x_span(p) for p in prefill.get_paths() if round(float(p.vertices[:, 1].mean())) == rows[chunked_seq]]
    chunks.sort()
    assert len(chunks) >= 2 and chunks[0][1] == chunks[1][0]
    assert tuple(np.round(prefill.get_edgecolor()[0], 3)) == rgba("white")


def test_gantt_marks_preemptions_and_finishes(traces):
    trace = traces["rich"]
    fig = plot_gantt(trace, cursor_step=9)
    rows = {r.seq_id: i for i, r in enumerate(trace.requests)}
    preempts = sorted((e.step - 0.5, rows[e.stats["seq_id"]]) for e in trace.events_named("PREEMPT"))
    assert sorted(map(tuple, one(fig, "preempt").get_offsets().tolist())) == preempts
    eos, length = one(fig, "finish-eos"), one(fig, "finish-length")
    for reason, collection in (("eos", eos), ("length", length)):
        expected = sorted((r.finish_step + 0.5, rows[r.seq_id]) for r in trace.requests if r.finish_reason == reason)
        assert sorted(map(tuple, collection.get_offsets().tolist())) == expected
    # EOS and max_tokens are told apart by the marker's shape.
    assert not np.array_equal(eos.get_paths()[0].vertices, length.get_paths()[0].vertices)
    assert [list(line.get_xdata()) for line in cursor_lines(fig)] == [[9, 9]]
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels == [f"seq {r.seq_id}" for r in trace.requests]


def test_gantt_static_batching_shows_held_slots(traces):
    static = traces["static"]
    fig = plot_gantt(static)
    held = one(fig, "gantt-held")
    segments = held_segments(static)
    assert len(segments) > 0 and len(held.get_paths()) == len(segments)
    width = sum(x_span(p)[1] - x_span(p)[0] for p in held.get_paths())
    assert width == early_finished_waste(static)
    # Late arrivals wait (grey) until the first batch has drained.
    first_batch_end = max(r.finish_step for r in static.requests if r.seq_id < 4)
    waiting = [s for s in request_segments(static) if s.state == "waiting" and s.seq_id >= 4]
    assert waiting and all(s.step_end == first_batch_end + 1 for s in waiting)


# ---- block grid ----------------------------------------------------------------------------------------

def test_block_grid_cells_colours_and_refcounts(traces):
    trace = traces["rich"]
    replay = EngineReplay(trace)
    # A step with a shared prefix block, and one with cached (free, hashed) blocks.
    shared_step = next(s for s in replay.steps if replay.kv_at(s).shared)
    cached_step = next(s for s in replay.steps if replay.kv_at(s).cached_free)
    for step in (shared_step, cached_step):
        kv = replay.kv_at(step)
        fig = plot_block_grid(replay, step)
        cells = one(fig, "blocks")
        assert len(cells.get_paths()) == kv.num_blocks == 14  # every block is a cell
        expected = []
        for block_id in range(kv.num_blocks):
            if block_id in kv.holders:
                expected.append(rgba(seq_color(kv.holders[block_id][0])))
            else:
                expected.append(rgba(CACHED_COLOR if block_id in kv.cached_free else FREE_COLOR))
        assert faces(cells) == expected
        widths = cells.get_linewidths()
        assert [i for i, w in enumerate(widths) if w > 0] == sorted(kv.shared)  # only shared blocks have edges
        refcounts = sorted((t.get_text(), tuple(t.get_position())) for t in by_gid(fig, "refcount"))
        assert refcounts == sorted((f"×{n}", (b % 16, b // 16)) for b, n in kv.shared.items())
        assert fig.axes[0].get_title().startswith(f"step {step}: {kv.num_used} used ({len(kv.shared)} shared")
        assert f"{len(kv.cached_free)} cached" in fig.axes[0].get_title()
        owners = {t.get_text() for t in by_gid(fig, "owner")}
        assert owners == {str(seqs[0]) for seqs in kv.holders.values() if len(seqs) == 1}


@pytest.mark.parametrize("num_blocks", [16, 341, 1024, 1025, 20_000])
def test_block_grid_scales_from_16_to_20000_blocks(num_blocks):
    holders = {b: (b % 7,) for b in range(2, min(num_blocks, 400))}
    holders[2] = (1, 2, 3)  # one shared block
    cached = frozenset(range(num_blocks - 3, num_blocks))
    kv = KVSnapshot(step=7, num_blocks=num_blocks, holders=holders, cached_free=cached)
    fig = Figure()
    layout = draw_block_grid(fig.subplots(), kv)
    cells = one(fig, "blocks")
    assert len(cells.get_paths()) == layout.num_cells <= MAX_CELLS
    title = fig.axes[0].get_title()
    assert f"{len(holders)} used (1 shared, max ×3), 3 cached, {num_blocks - len(holders) - 3} free" in title
    if num_blocks <= MAX_CELLS:  # one cell per block, texts where they can be read
        assert layout.group == 1 and layout.num_cells == num_blocks
        labelled = num_blocks <= LABEL_CELLS  # 341, the CPU default, is labelled
        assert bool(by_gid(fig, "refcount")) == bool(by_gid(fig, "owner")) == labelled
        return
    # Grouped: every cell stands for `group` blocks, coloured by how many of them are in use.
    assert layout.group == -(-num_blocks // MAX_CELLS) and f"one cell = {layout.group} blocks" in title
    assert not by_gid(fig, "refcount") and not by_gid(fig, "owner")
    colours = faces(cells)
    full, empty, last = 10 // layout.group + 1, layout.cell(1000), layout.num_cells - 1
    assert colours[empty] == rgba(FREE_COLOR) and colours[last] == rgba(CACHED_COLOR)
    assert colours[full] != colours[empty] and colours[full] != colours[last]
    assert sum(colours[full][:3]) < sum(colours[empty][:3])  # the fuller, the darker
    summary = group_summary(kv, layout, full)
    first = full * layout.group
    assert summary.startswith(f"blocks {first}–{first + layout.group - 1}: {layout.group} used (seq ")


def test_block_grid_fades_what_the_step_freed_at_its_end(traces):
    trace = traces["rich"]
    replay = EngineReplay(trace)
    freed = freed_at_step_end(trace)
    step = next(s for s in replay.steps if freed.get(s))
    kv = replay.kv_at(step)
    fig = plot_block_grid(replay, step)
    colours = one(fig, "blocks").get_facecolors()
    for block_id, seq_id in freed[step].items():
        if block_id not in kv.holders:
            assert tuple(np.round(colours[block_id][:3], 3)) == rgba(seq_color(seq_id))[:3]
            assert colours[block_id][3] < 0.5  # faded
    # The step's row says the same: held while it ran = held at its end + what it freed.
    row = next(r for r in trace.steps if r.step == step)
    assert row.held_blocks == kv.num_used + len(set(freed[step]) - set(kv.holders))


# ---- comparison and waste ------------------------------------------------------------------------------

def test_waste_measures_from_the_traces_alone(traces):
    static, continuous = traces["static"], traces["continuous"]
    # Early-finished: static only, and equal to the slots a batch kept after members finished.
    # The workload's batches are its first four requests and its last four (four slots).
    rows = static.steps
    batch_waste = 0
    for members in (range(0, 4), range(4, 8)):
        start = min(r.first_scheduled_step for r in static.requests if r.seq_id in members)
        end = max(r.finish_step for r in static.requests if r.seq_id in members)
        batch_waste += sum(len(members) - row.batch_size for row in rows if start <= row.step <= end)
    assert early_finished_waste(static) == batch_waste > 0
    assert early_finished_waste(continuous) == 0
    # Late-joining: with a roomy cache and budget, every step a static late arrival waited while fewer
    # than four ran; continuous batching admits at once whenever a slot is free.
    slots = 4
    expected = 0
    for req in static.requests:
        for step in range(req.enqueue_step, req.first_scheduled_step):
            before = next((r for r in rows if r.step == step - 1), None)
            if before is None or before.running_len < slots:
                expected += 1
    assert late_joining_waste(static) == expected > 0
    assert late_joining_waste(continuous) == 0


def test_summary_numbers(traces):
    for name in ("static", "continuous"):
        trace = traces[name]
        s = summarize(trace)
        assert s.steps == len(trace.steps) and s.num_requests == 8 and s.policy == name
        assert s.output_tokens == sum((4, 30, 12, 24, 8, 16, 28, 6))
        assert s.tokens_per_step == pytest.approx(s.output_tokens / s.steps)
        assert s.mean_ttft_ms == pytest.approx(sum(r.ttft_ms for r in trace.requests) / 8)
        assert s.prefill_steps + s.decode_steps == s.steps
        assert s.tokens_per_s > 0 and s.wall_s > 0
    assert summarize(traces["static"]).steps > summarize(traces["continuous"]).steps
    assert summarize(traces["static"]).mean_ttft_steps > summarize(traces["continuous"]).mean_ttft_steps


def test_comparison_figure_shares_its_axes(traces):
    static, continuous = traces["static"], traces["continuous"]
    result = compare(static, continuous)
    fig = result.figure
    assert (result.a.label, result.b.label) == ("static", "continuous")
    ax = {title: a for a in fig.axes for title in [a.get_title()]}
    left = next(a for t, a in ax.items() if t.startswith("static (static)"))
    right = next(a for t, a in ax.items() if t.startswith("continuous (continuous)"))
    assert left.get_shared_y_axes().joined(left, right)
    assert left.get_shared_x_axes().joined(left, right)
    assert left.get_ylim() == right.get_ylim() and left.get_xlim() == right.get_xlim()
    assert left.get_xlim()[1] >= max(static.steps[-1].step, continuous.steps[-1].step)
    assert len(by_gid(fig, "batch-size")) == 2 and len(by_gid(fig, "gantt-decode")) == 2
    # The summary under the pictures: a table of cells with the printed table's rows.
    cells = one(fig, "summary").get_celld()
    drawn = [[cells[r, c].get_text().get_text() for c in range(3)] for r in range(len(cells) // 3)]
    assert [" ".join(" ".join(row).split()) for row in drawn] == \
        [" ".join(line.split()) for line in result.table().splitlines()]
    late = next(row for row in drawn if row[0] == "late-joining waste (slot-steps)")
    assert late[1:] == [str(result.a.late_joining_waste), "0"]
    assert any(row[0] == "early-finished waste (slot-steps)" for row in drawn)


def test_overview_lines_up_timelines_and_gantt(traces):
    trace = traces["rich"]
    fig = plot_overview(trace)
    assert len(fig.axes) == 6
    xlims = {a.get_xlim() for a in fig.axes}
    assert len(xlims) == 1  # one step axis for all six panels
    assert one(fig, "gantt-decode") and one(fig, "batch-size")
    width, height = png_size(figure_png(fig, dpi=30))
    assert height > width  # timelines over the Gantt chart
    assert ceil(max(xlims)[1]) >= trace.steps[-1].step


def test_an_interrupted_run_draws_its_aborted_requests(tmp_path):
    from test_trace_reader import record_scenarios

    trace = load_trace(record_scenarios(tmp_path, names=("crashed",))["crashed"].path)
    assert [r.finish_reason for r in trace.requests] == ["aborted", "aborted"]
    fig = plot_gantt(trace)
    aborted = one(fig, "finish-aborted")
    last_step = trace.steps[-1].step
    # Aborted between steps: marked where each was last seen, after the last completed step.
    assert sorted(map(tuple, aborted.get_offsets().tolist())) == [(last_step + 0.5, 0), (last_step + 0.5, 1)]
    assert figure_png(plot_overview(trace), dpi=30)


def test_returned_figures_show_themselves_in_a_notebook(traces):
    """Drawn without pyplot, the figures are unknown to IPython's inline backend: each one must offer the
    PNG that IPython asks for, at its own size."""
    trace = traces["rich"]
    figures = [plot_timelines(trace), plot_gantt(trace), plot_block_grid(trace, trace.steps[1].step),
               plot_overview(trace), compare(trace, trace).figure]
    for fig in figures:
        png = fig._repr_png_()
        width, height = fig.get_size_inches() * fig.dpi
        assert Image.open(io.BytesIO(png)).size == (round(width), round(height))


def test_a_simulated_runs_latency_bars_are_coloured_by_their_bound():
    """Prefill steps of a simulated GPU run are compute-bound, its decode steps memory-bound: the latency
    timeline shows which, with a legend; a real run's bars keep the phase colours."""
    from matplotlib.colors import to_hex

    from nanovllm_teach import LLM
    from nanovllm_teach.workload.requests import AtOnce, Uniform, make_workload
    from nanovllm_teach.trace import Trace, TraceRecorder
    from nanovllm_teach.viz.style import BOUND_COLORS

    rec = TraceRecorder()
    llm = LLM("qwen3-8b", runner="simulated", hardware="h100-sxm", trace=rec)
    llm.run_workload(make_workload(16, AtOnce(), Uniform(2000, 4000), Uniform(4, 8), vocab_size=151936, seed=0))
    trace = Trace.from_recorder(rec)
    figure = plot_timelines(trace)
    latency_ax = next(ax for ax in figure.axes if ax.get_ylabel().startswith("step latency"))
    (bars,) = [c for c in latency_ax.collections if c.get_gid() == "latency"]
    colours = [to_hex(c) for c in bars.get_facecolors()]
    expected = [BOUND_COLORS[row.bound] for row in trace.steps]
    assert colours == expected and {row.bound for row in trace.steps} >= {"compute", "memory"}
    assert [t.get_text() for t in latency_ax.get_legend().get_texts()] == ["compute-bound", "memory-bound"]
    real = plot_timelines(load_trace(Path(__file__).resolve().parents[1] / "traces" / "preemption.jsonl"))
    real_ax = next(ax for ax in real.axes if ax.get_ylabel().startswith("step latency"))
    (real_bars,) = [c for c in real_ax.collections if c.get_gid() == "latency"]
    assert {to_hex(c) for c in real_bars.get_facecolors()} <= set(PHASE_COLORS.values())
