"""Traces as files, without Jupyter: a PNG overview (timelines + Gantt chart) and a one-page HTML report.

The HTML report is self-contained (pictures inlined as base64 PNG, no script, no external file) and
treats every string that comes from the trace as untrusted: header values, scenario and lesson texts,
prompt texts and finish reasons are all HTML-escaped, so a trace cannot inject markup into the page.

The report is written in one language (``lang``, else the chosen one; ``<html lang=...>`` says which):
its headings and the pictures' words (``viz/words.py``), and a shipped scenario's lesson
(``scenarios.trace_lesson``). The tables' columns are the trace's field names, the same in both.
No torch. Emits no events.
"""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from nanovllm_teach.i18n import Text, resolve_lang, say, speaking
from nanovllm_teach.trace.reader import Trace
from nanovllm_teach.trace.replay import EngineReplay
from nanovllm_teach.trace.tables import RequestRow, format_step_table
from nanovllm_teach.viz import words
from nanovllm_teach.viz.blockgrid import plot_block_grid
from nanovllm_teach.viz.compare import summarize, summary_rows, trace_label
from nanovllm_teach.viz.gantt import draw_gantt
from nanovllm_teach.viz.messages import IN_MEMORY, NO_STEP_OR_REQUEST_TO_DRAW, NO_STEP_TO_REPORT
from nanovllm_teach.viz.render import NotebookFigure, figure_png
from nanovllm_teach.viz.render import as_written
from nanovllm_teach.viz.timeline import PANELS, draw_timelines, timeline_title


# The tables' columns are the trace's field names (``trace/tables.py``); these say them in words, here and
# under ``nanovllm-teach replay --text``.
STEP_COLUMNS = Text(
    en="bs: batch size; tokens: tokens computed; stat: num_tokens_stat (> 0 prefill, < 0 decode); "
       "held: KV blocks held while the step ran; used / free: KV blocks after it; wait / run: the queues after it",
    zh="bs：batch 大小；tokens：本步计算的 token 数；stat：num_tokens_stat（> 0 为预填充，< 0 为解码）；"
       "held：本步运行时占用的 KV 块；used / free：本步之后已用 / 空闲的 KV 块；wait / run：本步之后两个队列的长度")
REQUEST_COLUMNS = Text(
    en="@: the engine step of enqueue, first schedule, first token and finish; ttft: time to first token; "
       "tpot: time per output token",
    zh="@：入队、首次调度、产出首个 token、结束各在第几个引擎步；ttft：首 token 延迟；tpot：每个输出 token 的时间")


@as_written
def plot_overview(trace: Trace, cursor_step: int | None = None, panel_height: float = 1.8,
                  max_gantt_height: float = 10.0) -> Figure:
    """One figure: the five timelines on top, the request Gantt chart below, all on one step axis (one
    column of axes: the legends beside them take the same width from each, so every x lines up), with an
    optional cursor at one step in every panel. ``panel_height`` (inches per timeline) and
    ``max_gantt_height`` size it: the player asks for a compact one."""
    if not trace.steps or not trace.requests:
        raise ValueError(say(NO_STEP_OR_REQUEST_TO_DRAW, path=trace.path or say(IN_MEMORY)))
    gantt_height = min(max_gantt_height, 1.4 + 0.28 * len(trace.requests))
    fig = NotebookFigure(figsize=(12, panel_height * len(PANELS) + gantt_height), layout="constrained")
    axes = fig.subplots(len(PANELS) + 1, 1, sharex=True,
                        height_ratios=[panel_height] * len(PANELS) + [gantt_height])
    draw_timelines(list(axes[:-1]), trace, cursor_step)
    draw_gantt(axes[-1], trace, cursor_step)
    axes[-2].set_xlabel("")
    fig.suptitle(timeline_title(trace))
    return fig


def save_overview(trace: Trace, path: str | Path, dpi: float = 100) -> Path:
    """Write ``plot_overview(trace)`` as a PNG."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(figure_png(plot_overview(trace), dpi))
    return path


def _img(figure: Figure, alt: str, dpi: float = 90) -> str:
    data = base64.b64encode(figure_png(figure, dpi)).decode("ascii")
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'


def _text(value: Any) -> str:
    """Any value from the trace as escaped HTML text (dicts and lists as JSON)."""
    if isinstance(value, (dict, list)):
        value = json.dumps(value, ensure_ascii=False)
    return html.escape("-" if value is None else str(value))


def _prompts(trace: Trace) -> dict[int, str]:
    """The prompt texts of the traces that keep them (``REQUEST_ENQUEUE.prompt``), by seq id."""
    return {e.stats.seq_id: e.stats.prompt for e in trace.events_named("REQUEST_ENQUEUE")
            if isinstance(e.stats.prompt, str)}


def _request_table(requests: list[RequestRow], prompts: dict[int, str]) -> str:
    columns = ["seq", "prompt_len", "max_tokens", "enqueue@", "sched@", "1st_tok@", "finish@", "reason",
               "tokens", "preempt", "cached_tok", "ttft_ms", "tpot_ms", "e2e_ms"]
    if prompts:
        columns.append("prompt")
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = []
    for r in requests:
        cells = [r.seq_id, r.prompt_len, r.max_tokens, r.enqueue_step, r.first_scheduled_step, r.first_token_step,
                 r.finish_step, r.finish_reason, r.num_completion_tokens, r.num_preemptions, r.num_cached_tokens,
                 *(None if v is None else f"{v:.2f}" for v in (r.ttft_ms, r.tpot_ms, r.e2e_ms))]
        if prompts:
            cells.append(prompts.get(r.seq_id))
        body.append("<tr>" + "".join(f"<td>{_text(c)}</td>" for c in cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


_STYLE = """
body { font-family: sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 2px 6px; text-align: right; }
th { background: #f0f0f0; }
td:last-child { text-align: left; }
table.summary td { border: none; padding: 1px 12px 1px 0; }
table.summary td:first-child { text-align: left; }
table.summary td:last-child { text-align: right; }
pre { background: #f7f7f7; padding: 0.6em; font-size: 12px; overflow-x: auto; }
img { max-width: 100%; }
"""


def html_report(trace: Trace, max_step_rows: int = 2000, lang: str | None = None) -> str:
    """The report page of ``trace`` as one HTML string, in ``lang`` (see the module docstring)."""
    from nanovllm_teach.scenarios import trace_lesson

    rows = trace.steps
    if not rows:
        raise ValueError(say(NO_STEP_TO_REPORT, path=trace.path or say(IN_MEMORY)))
    lang = resolve_lang(lang)
    with speaking(lang):  # the pictures' words follow it too
        return _html_report(trace, max_step_rows, lang, trace_lesson(trace.header, lang))


def _html_report(trace: Trace, max_step_rows: int, lang: str, lesson: str | None) -> str:
    rows = trace.steps
    title = trace_label(trace)
    header_rows = "".join(f"<tr><th>{_text(k)}</th><td>{_text(v)}</td></tr>" for k, v in trace.header.items())
    # A table, not the console's fixed-width text: a browser draws a Chinese character in no fixed
    # number of Latin columns, so only cells keep the numbers lined up.
    summary = "".join("<tr>" + "".join(f"<td>{_text(cell)}</td>" for cell in row) + "</tr>"
                      for row in summary_rows([summarize(trace)], lang))
    peak = max(rows, key=lambda r: r.used_blocks).step
    grid = plot_block_grid(EngineReplay(trace), peak)
    parts = [
        "<!DOCTYPE html>", f'<html lang="{lang}"><head><meta charset="utf-8">',
        f"<title>{html.escape(say(words.REPORT_TITLE, name=title))}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{html.escape(say(words.REPORT_HEADING, name=title))}</h1>",
        f"<p>{_text(lesson)}</p>" if lesson else "",
        f"<h2>{say(words.REPORT_SUMMARY)}</h2>", f'<table class="summary">{summary}</table>',
        f"<h2>{say(words.OVERVIEW)}</h2>", _img(plot_overview(trace), say(words.OVERVIEW_ALT)),
        f"<h2>{say(words.BLOCKS_AT_PEAK, step=peak)}</h2>", _img(grid, say(words.BLOCKS_AT_PEAK_ALT, step=peak)),
        f"<h2>{say(words.REQUESTS)}</h2>", _request_table(trace.requests, _prompts(trace)),
        f"<p>{html.escape(say(REQUEST_COLUMNS))}</p>",
        f"<h2>{say(words.REPORT_STEPS)}</h2>", f"<p>{html.escape(say(STEP_COLUMNS))}</p>",
        f"<pre>{html.escape(format_step_table(rows, limit=max_step_rows))}</pre>",
        f"<h2>{say(words.TRACE_HEADER)}</h2>", f"<table>{header_rows}</table>",
        "</body></html>",
    ]
    return "\n".join(part for part in parts if part)


def write_html_report(trace: Trace, path: str | Path, lang: str | None = None) -> Path:
    """Write ``html_report(trace, lang=lang)`` to ``path`` (UTF-8)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(html_report(trace, lang=lang), encoding="utf-8")
    return path
