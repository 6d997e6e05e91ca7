"""The deployment planner's picture: every configuration's cost per hour against the rate it sustains, the
Pareto front (no other configuration sustains more for less) drawn as a line, the target rate as a vertical
line and the cheapest configuration that reaches it marked.

Reads the plan's rows (``PlanRow``-like records: ``label``, ``cost_per_hour``, ``sustained_rate``); words in
the chosen language (``say``).
"""

from __future__ import annotations

from typing import Any, Sequence

from nanovllm_teach.i18n import Text, say
from nanovllm_teach.viz.fonts import add_cjk_fallback
from nanovllm_teach.viz.render import NotebookFigure, as_written
from nanovllm_teach.viz.style import BOUND_COLORS, CURSOR_COLOR, PHASE_COLORS

TITLE = Text(en="{model}: cost per hour against the rate each configuration sustains under the SLO",
             zh="{model}：每种配置在 SLO 下能承受的请求速率与每小时成本")
X_LABEL = Text(en="sustained rate (requests/s)", zh="可承受的速率（请求/秒）")
Y_LABEL = Text(en="cost (US$ per hour)", zh="成本（美元/小时）")
CONFIGURATIONS = Text(en="configurations", zh="各种配置")
FRONT = Text(en="Pareto front: nothing sustains more for less", zh="帕累托前沿：没有配置能以更低成本承受更高速率")
TARGET = Text(en="target: {rate:g} requests/s", zh="目标：{rate:g} 个请求/秒")
CHEAPEST = Text(en="cheapest that reaches it: {label}", zh="达到目标的最便宜配置：{label}")


def pareto_front(rows: Sequence[Any]) -> list[Any]:
    """The rows no other row beats on both counts (sustains at least as much for less, or more for as much),
    by rising cost."""
    front: list[Any] = []
    for row in sorted(rows, key=lambda r: (r.cost_per_hour, -r.sustained_rate)):
        if not front or row.sustained_rate > front[-1].sustained_rate:
            front.append(row)
    return front


@as_written
def plot_pareto(rows: Sequence[Any], target_rate: float, cheapest: Any | None, model: str,
                lang: str | None = None) -> NotebookFigure:
    add_cjk_fallback()
    fig = NotebookFigure(figsize=(9, 5.5), layout="constrained")
    ax = fig.add_subplot()
    ax.scatter([r.sustained_rate for r in rows], [r.cost_per_hour for r in rows], s=14, alpha=0.5,
               color=BOUND_COLORS["memory"], label=say(CONFIGURATIONS, lang))
    front = pareto_front(rows)
    ax.plot([r.sustained_rate for r in front], [r.cost_per_hour for r in front], "-o", markersize=4,
            color=PHASE_COLORS["prefill"], label=say(FRONT, lang))
    ax.axvline(target_rate, color=CURSOR_COLOR, linestyle="--", linewidth=1, label=say(TARGET, lang, rate=target_rate))
    if cheapest is not None:
        ax.scatter([cheapest.sustained_rate], [cheapest.cost_per_hour], s=120, facecolors="none",
                   edgecolors=PHASE_COLORS["decode"], linewidths=2, label=say(CHEAPEST, lang, label=cheapest.label))
    ax.set_xlabel(say(X_LABEL, lang))
    ax.set_ylabel(say(Y_LABEL, lang))
    ax.set_title(say(TITLE, lang, model=model), fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    return fig
