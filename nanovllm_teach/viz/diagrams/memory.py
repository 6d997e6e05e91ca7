"""How the model runner sizes the KV cache (``memory_budget``), drawn from a KV_BUDGET_ESTIMATE event's
stats or from the reference nano-vllm run's memory readings.

The formula is the model runner's (``engine/model_runner.py``, as nano-vllm's): of the device's ``total``
memory the engine may use ``total × utilization``; from that share go what is already used and the
warm-up's peak above what stays resident (``peak − current``); what is left buys ``budget // block_bytes``
blocks. On a CPU the ``cpu_kvcache_gib`` cap may decide instead, and a given ``num_kvcache_blocks`` skips
the estimate: the picture marks which limit decided (``limited_by``).

No torch. Emits no events.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from nanovllm_teach.i18n import say
from nanovllm_teach.reference import ReferenceRun
from nanovllm_teach.viz import words
from nanovllm_teach.viz.diagrams.boxes import INK, MUTED, arrow, box, canvas, label
from nanovllm_teach.viz.messages import BAD_BLOCK_BYTES, NOT_BUDGET_STATS

SEGMENT_COLORS = {"used": "#9e9e9e", "warmup": "#e6ab02", "available": "#66c2a5", "kept": "#ffffff"}
DECIDED_COLOR = "#d95f02"
GIB = 2 ** 30


@dataclass(frozen=True)
class Budget:
    """The readings and results of one KV sizing, whichever source they came from (bytes)."""

    device: str
    total: int
    used: int
    peak: int
    current: int
    utilization: float
    block_bytes: int
    num_blocks: int
    cap_bytes: int | None
    limited_by: str
    explicit: bool
    num_layers: int
    block_size: int
    num_kv_heads: int
    head_dim: int
    dtype_bytes: int

    @property
    def share(self) -> float:
        return self.total * self.utilization

    @property
    def available(self) -> int:
        """What the memory formula leaves for the KV cache (negative: nothing)."""
        return int(self.share - self.used - self.peak + self.current)


_FIELDS = ("device", "total", "used", "peak", "current", "utilization", "block_bytes", "num_blocks", "explicit",
           "num_layers", "block_size", "num_kv_heads", "head_dim", "dtype_bytes")


def budget_of(stats: Mapping[str, Any] | ReferenceRun) -> Budget:
    """A KV_BUDGET_ESTIMATE event's stats (its payload or a dict of it), or the reference run, as a ``Budget``."""
    if isinstance(stats, ReferenceRun):
        mem, m = stats.memory_gib, stats.model
        total = round(mem["total"] * GIB)
        return Budget(device="GPU", total=total, used=total - round(mem["free"] * GIB), peak=round(mem["peak"] * GIB),
                      current=round(mem["current"] * GIB), utilization=stats.settings["gpu_memory_utilization"],
                      block_bytes=stats.kv_block_bytes, num_blocks=stats.num_kvcache_blocks, cap_bytes=None,
                      limited_by="memory", explicit=False, num_layers=m.num_hidden_layers,
                      block_size=stats.settings["kvcache_block_size"], num_kv_heads=m.num_key_value_heads,
                      head_dim=m.head_dim, dtype_bytes=m.dtype_bytes)
    missing = [name for name in _FIELDS if name not in stats]
    if missing:
        raise ValueError(say(NOT_BUDGET_STATS, missing=", ".join(missing)))
    if stats["block_bytes"] < 1:
        raise ValueError(say(BAD_BLOCK_BYTES, value=stats["block_bytes"]))
    cap = stats.get("cap_bytes")
    limited_by = stats.get("limited_by") or ("num_kvcache_blocks" if stats["explicit"] else "memory")
    return Budget(cap_bytes=cap, limited_by=limited_by, **{name: stats[name] for name in _FIELDS})


def size_text(num_bytes: float) -> str:
    """Bytes in the unit that reads best: 786.4 KiB, 28 MiB, 21.93 GiB."""
    for unit, scale in (("GiB", GIB), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if abs(num_bytes) >= scale:
            value = num_bytes / scale
            return f"{value:.2f} {unit}" if abs(value) < 100 else f"{value:,.0f} {unit}"
    return f"{num_bytes:.0f} B"


def memory_budget(stats: Mapping[str, Any] | ReferenceRun) -> Figure:
    """The KV budget of one start-up: the device's memory as a bar (used, the warm-up peak, what is left for
    the KV cache, what utilization keeps back), what each limit allows, which decided, and the blocks that
    buys. ``stats``: a KV_BUDGET_ESTIMATE event's stats, or ``load_reference_run()``."""
    b = budget_of(stats)
    block = size_text(b.block_bytes)
    width, height = 14.0, 8.0
    fig, ax = canvas(width, height)
    label(ax, width / 2, height - 0.35, say(words.BUDGET_TITLE, device=b.device, num_blocks=f"{b.num_blocks:,}",
                                            block=block), size=12, weight="bold", ground=False)

    # The memory bar, to scale.
    left, right, y_bar, bar_h = 2.3, width - 0.4, 6.2, 0.65
    scale = (right - left) / b.total
    extra = max(b.peak - b.current, 0)
    segments = [("used", b.used), ("warmup", extra), ("available", max(b.available, 0)),
                ("kept", b.total - b.share)]
    label(ax, 0.25, y_bar + bar_h / 2, say(words.BUDGET_MEMORY_BAR, total=size_text(b.total)), size=8.5, ha="left",
          weight="bold", ground=False)
    x = left
    for name, size in segments:
        w = size * scale
        ax.add_patch(Rectangle((x, y_bar), w, bar_h, facecolor=SEGMENT_COLORS[name], edgecolor=INK, linewidth=0.8,
                               hatch="//" if name == "kept" else None, gid=f"segment-{name}"))
        x += w
    share_x = left + b.share * scale
    ax.plot([share_x, share_x], [y_bar - 0.15, y_bar + bar_h + 0.15], color=INK, linewidth=1.6)
    label(ax, share_x, y_bar + bar_h + 0.3, f"× {b.utilization}", size=8, ground=False)
    # The legend of the bar, two segments a line.
    utilization = f"{b.utilization}"
    for k, (name, size) in enumerate(segments):
        lx, ly = left + (k % 2) * 5.8, y_bar - 0.5 - (k // 2) * 0.38
        ax.add_patch(Rectangle((lx, ly - 0.1), 0.3, 0.22, facecolor=SEGMENT_COLORS[name], edgecolor=INK,
                               linewidth=0.6, hatch="//" if name == "kept" else None))
        label(ax, lx + 0.42, ly, say(words.BUDGET_SEGMENT[name], size=size_text(size), utilization=utilization), size=8,
              ha="left", ground=False)
    label(ax, left, 4.75, say(words.BUDGET_SHARE, total=size_text(b.total), utilization=utilization,
                              share=size_text(b.share)), size=8.5, ha="left", ground=False)
    label(ax, left, 4.4, say(words.BUDGET_AVAILABLE, share=size_text(b.share), used=size_text(b.used),
                             extra=size_text(extra), available=size_text(b.available)), size=8.5, ha="left",
          ground=False)

    # What each limit allows; the one that decided is drawn in orange.
    label(ax, 0.25, 3.55, say(words.BUDGET_CANDIDATES, block=block), size=9, ha="left", weight="bold", ground=False)
    candidates = {
        "memory": say(words.BUDGET_LIMIT["memory"], size=size_text(max(b.available, 0)), block=block,
                      blocks=f"{max(b.available, 0) // b.block_bytes:,}"),
        "cpu_kvcache_gib": (say(words.BUDGET_NO_CAP) if b.cap_bytes is None else
                            say(words.BUDGET_LIMIT["cpu_kvcache_gib"], size=size_text(b.cap_bytes), block=block,
                                blocks=f"{b.cap_bytes // b.block_bytes:,}")),
        "num_kvcache_blocks": (say(words.BUDGET_LIMIT["num_kvcache_blocks"], blocks=f"{b.num_blocks:,}") if b.explicit
                               else say(words.BUDGET_NOT_GIVEN)),
    }
    cw, ch, y_c = 3.1, 1.35, 1.75
    for k, (name, text) in enumerate(candidates.items()):
        cx = 0.4 + k * (cw + 0.35)
        decided = name == b.limited_by
        box(ax, cx, y_c, cw, ch, face="#fff1e6" if decided else "white", edge=DECIDED_COLOR if decided else MUTED,
            linewidth=2.2 if decided else 0.9, dashed=not decided, gid="limit-decided" if decided else "limit")
        label(ax, cx + cw / 2, y_c + ch / 2, text, size=8.5, color=INK if decided else MUTED, ground=False)
        if decided:
            label(ax, cx + cw / 2, y_c + ch + 0.2, say(words.BUDGET_DECIDED), size=8.5, weight="bold",
                  color=DECIDED_COLOR, ground=False)
            arrow(ax, [(cx + cw / 2, y_c), (cx + cw / 2, y_c - 0.3), (10.9, y_c - 0.3), (10.9, y_c)],
                  color=DECIDED_COLOR)
    box(ax, 10.95 - 0.05, y_c, 2.75, ch, face="#fff1e6", edge=DECIDED_COLOR, linewidth=2.2, gid="num-blocks")
    label(ax, 10.9 + 1.37, y_c + ch / 2, say(words.BUDGET_RESULT, blocks=f"{b.num_blocks:,}", block=block,
                                            size=size_text(b.num_blocks * b.block_bytes)), size=8.5,
          weight="bold", ground=False, gid="result")
    label(ax, 0.25, 0.5, say(words.BUDGET_BLOCK_BYTES, layers=b.num_layers, block_size=b.block_size,
                             kv_heads=b.num_kv_heads, head_dim=b.head_dim, dtype_bytes=b.dtype_bytes,
                             block=f"{b.block_bytes:,} B"),
          size=8.5, ha="left", ground=False)
    return fig
