"""The model in two pictures: one Qwen3 decoder layer as the package runs it, every arrow labelled with the
shape of its tensor (``decoder_layer``), and how tensor parallelism splits the layer's weights over the ranks
and where the ranks talk (``tensor_parallel_splits``).

Both are drawn from a Qwen3 config (a ``transformers`` config, ``llm.config.hf_config``, or the reference run's
``ModelShape``): anything with ``hidden_size``, ``num_attention_heads``, ``num_key_value_heads``,
``intermediate_size``, ``vocab_size``, ``num_hidden_layers`` (and ``head_dim``, else hidden size / heads, as
``models/qwen3.head_dim_of``). The stages and splits are those of ``models/qwen3.py`` and ``layers/``
(``linear.py``: column- and row-parallel linears, an all-reduce after each row-parallel one;
``embed_head.py``: the vocabulary-parallel embedding, all-reduced, and LM head, gathered to rank 0).

No torch. Emits no events.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from nanovllm_teach.i18n import say
from nanovllm_teach.viz import words
from nanovllm_teach.viz.diagrams.boxes import INK, MUTED, arrow, box, canvas, label
from nanovllm_teach.settings import SHARDED_SIZES, check_shards
from nanovllm_teach.viz.messages import HEADS_NOT_A_MULTIPLE, NOT_A_POSITIVE_INT, TP_TOO_SMALL
from nanovllm_teach.viz.style import SEQ_PALETTE

ATTENTION_COLOR = "#dbe9f6"
MLP_COLOR = "#fde7d4"
NORM_COLOR = "#eeeeee"
CACHE_COLOR = "#e5f5e0"
COMM_COLOR = "#b2182b"


@dataclass(frozen=True)
class Shape:
    """The numbers of a Qwen3 config that the pictures need."""

    name: str
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    inter: int
    vocab: int
    layers: int


def shape_of(config: Any) -> Shape:
    """The numbers of ``config`` (ValueError naming a missing or non-positive one)."""
    values = {}
    for field, attr in (("hidden", "hidden_size"), ("heads", "num_attention_heads"),
                        ("kv_heads", "num_key_value_heads"), ("inter", "intermediate_size"),
                        ("vocab", "vocab_size"), ("layers", "num_hidden_layers")):
        value = getattr(config, attr, None)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(say(NOT_A_POSITIVE_INT, name=f"config.{attr}", value=value))
        values[field] = value
    head_dim = getattr(config, "head_dim", None) or values["hidden"] // values["heads"]
    if values["heads"] % values["kv_heads"]:
        raise ValueError(say(HEADS_NOT_A_MULTIPLE, heads=values["heads"], kv_heads=values["kv_heads"]))
    name = getattr(config, "name", None) or str(getattr(config, "_name_or_path", "") or "").rstrip("/").split("/")[-1]
    return Shape(name=name, head_dim=head_dim, **values)


def _dims(*dims: object) -> str:
    return "(" + ", ".join(map(str, dims)) + ")"


def _name_part(name: str) -> str:
    return f" ({name})" if name else ""


def decoder_layer(config: Any, num_tokens: int = 8, *, num_blocks: int | None = None,
                  block_size: int | None = None) -> Figure:
    """One Qwen3 decoder layer for a step of ``num_tokens`` tokens: RMSNorm → qkv_proj → q/k norm → RoPE →
    store K/V → attention → o_proj; RMSNorm → gate_up_proj → SiLU-and-mul → down_proj; each arrow labelled
    with its tensor's shape. ``num_blocks`` and ``block_size`` (optional) give the cache's shape in numbers."""
    s = shape_of(config)
    if isinstance(num_tokens, bool) or not isinstance(num_tokens, int) or num_tokens < 1:
        raise ValueError(say(NOT_A_POSITIVE_INT, name="num_tokens", value=num_tokens))
    T, H, KV, D = num_tokens, s.heads, s.kv_heads, s.head_dim
    width, height = 14.4, 12.6
    fig, ax = canvas(width, height)
    label(ax, width / 2, height - 0.35, say(words.DECODER_TITLE, name=_name_part(s.name), tokens=T, hidden=s.hidden,
                                            heads=H, kv_heads=KV, head_dim=D, inter=s.inter),
          size=10.5, weight="bold", ground=False)

    bw, bh, gap = 3.9, 0.6, 0.74
    cols = {"attention": 0.5, "mlp": 8.2}
    qkv_width = (H + 2 * KV) * D
    attention_stages = [
        ("input_layernorm", "RMSNorm  input_layernorm", NORM_COLOR, _dims("T", "hidden") + " = " + _dims(T, s.hidden)),
        ("qkv_proj", "qkv_proj  (QKVParallelLinear)", ATTENTION_COLOR, _dims("T", "hidden") + " = " + _dims(T, s.hidden)),
        ("split", "view · split", ATTENTION_COLOR, f"(T, (H+2·KV)·D) = {_dims(T, qkv_width)}"),
        ("qk_norm", "q_norm, k_norm", NORM_COLOR, f"q {_dims(T, H, D)}   k, v {_dims(T, KV, D)}"),
        ("rope", "RoPE  (apply_rotary)", ATTENTION_COLOR, f"q {_dims(T, H, D)}   k {_dims(T, KV, D)}"),
        ("store", "store K/V  (store_kvcache)", CACHE_COLOR, f"q {_dims(T, H, D)}   k, v {_dims(T, KV, D)}"),
        ("attention", "Attention", ATTENTION_COLOR, f"q {_dims(T, H, D)}"),
        ("o_proj", "o_proj  (RowParallelLinear)", ATTENTION_COLOR, f"(T, H·D) = {_dims(T, H * D)}"),
    ]
    mlp_stages = [
        ("post_attention_layernorm", "RMSNorm  post_attention_layernorm", NORM_COLOR,
         _dims("T", "hidden") + " = " + _dims(T, s.hidden)),
        ("gate_up_proj", "gate_up_proj  (MergedColumnParallelLinear)", MLP_COLOR,
         _dims("T", "hidden") + " = " + _dims(T, s.hidden)),
        ("act", "SiluAndMul", MLP_COLOR, f"(T, 2·I) = {_dims(T, 2 * s.inter)}"),
        ("down_proj", "down_proj  (RowParallelLinear)", MLP_COLOR, f"(T, I) = {_dims(T, s.inter)}"),
    ]
    top = height - 1.75
    label(ax, cols["attention"] + bw / 2, top + 0.95, say(words.DECODER_INPUT), size=8.5, ground=False)
    label(ax, cols["attention"], top + 0.45, say(words.DECODER_ATTENTION), size=10, weight="bold", ha="left",
          color="#4a7fb5", ground=False)
    label(ax, cols["mlp"] + bw, top + 0.95, say(words.DECODER_MLP), size=10, weight="bold", ha="right", color="#c8772e",
          ground=False)

    def column(x: float, stages: list[tuple[str, str, str, str]], entry_y: float) -> list[tuple[float, float]]:
        """Draw ``stages`` down from ``entry_y``; each arrow into a stage carries its input's shape. Returns
        each box's (left, bottom)."""
        corners = []
        y = entry_y
        for k, (key, title, face, shape_in) in enumerate(stages):
            y_box = y - gap - bh if k else y - bh
            if k:
                arrow(ax, [(x + bw / 2, y), (x + bw / 2, y_box + bh)], width=1.1, head=7)
                label(ax, x + bw / 2 + 0.12, (y + y_box + bh) / 2, shape_in, size=7.5, ha="left", code=True,
                      ground=False, gid="shape")
            box(ax, x, y_box, bw, bh, face=face, gid=f"stage-{key}")
            label(ax, x + 0.12, y_box + bh - 0.19, title, size=8.3, weight="bold", ha="left", ground=False)
            label(ax, x + 0.12, y_box + 0.17, say(words.DECODER_STAGE[key], group=H // KV), size=7.3, ha="left",
                  color=MUTED, ground=False)
            corners.append((x, y_box))
            y = y_box
        return corners

    ax_ = cols["attention"]
    arrow(ax, [(ax_ + bw / 2, top + 0.75), (ax_ + bw / 2, top)], width=1.1, head=7)
    label(ax, ax_ + bw / 2 + 0.12, top + 0.33, attention_stages[0][3], size=7.5, ha="left", code=True,
          ground=False, gid="shape")
    attn = column(ax_, attention_stages, top)
    # The cache beside the store: K/V go in, attention reads every cached key back.
    store_y = attn[5][1]
    cache_shape = _dims(num_blocks if num_blocks is not None else "num_blocks",
                        block_size if block_size is not None else "block_size", KV, D)
    cx, cw = ax_ + bw + 0.45, 2.55
    box(ax, cx, store_y - 0.5, cw, 1.2, face=CACHE_COLOR, edge="#4f9a4f", gid="kv-cache")
    label(ax, cx + cw / 2, store_y + 0.1, say(words.DECODER_CACHE, shape=cache_shape), size=7.3, ground=False)
    arrow(ax, [(ax_ + bw, store_y + bh / 2), (cx, store_y + bh / 2)], width=1.0, head=7, color="#4f9a4f")
    attention_y = attn[6][1]
    arrow(ax, [(cx + cw / 2, store_y - 0.5), (cx + cw / 2, attention_y + bh / 2), (ax_ + bw, attention_y + bh / 2)],
          width=1.0, head=7, color="#4f9a4f")

    # o_proj's output crosses to the MLP column's first RMSNorm, with the residual beside it.
    mx = cols["mlp"]
    o_x, o_y = attn[-1]
    lane = 7.75
    mlp_top = top
    arrow(ax, [(o_x + bw / 2, o_y), (o_x + bw / 2, o_y - 0.45), (lane, o_y - 0.45), (lane, mlp_top + 0.3),
               (mx + bw / 2 - 0.6, mlp_top + 0.3), (mx + bw / 2 - 0.6, mlp_top)], width=1.1, head=7)
    label(ax, lane + 0.1, o_y - 0.2, _dims("T", "hidden") + " = " + _dims(T, s.hidden), size=7.5, ha="left", code=True,
          ground=False, gid="shape")
    # The residual stream: from the layer's input to the MLP's RMSNorm, and from there out of the layer.
    residual_x = 7.0
    arrow(ax, [(ax_ + bw / 2 + 1.4, top + 0.75), (residual_x, top + 0.75), (residual_x, mlp_top + 0.55),
               (mx + bw / 2 + 0.6, mlp_top + 0.55), (mx + bw / 2 + 0.6, mlp_top)], width=1.0, head=7,
          dashed=True, color=MUTED)
    label(ax, residual_x + 0.1, top + 0.95, say(words.DECODER_RESIDUAL), size=7.3, ha="left", color=MUTED, ground=False)
    mlp = column(mx, mlp_stages, mlp_top)
    d_x, d_y = mlp[-1]
    out_y = d_y - 1.4
    arrow(ax, [(d_x + bw / 2, d_y), (d_x + bw / 2, out_y)], width=1.1, head=7)
    label(ax, d_x + bw / 2 + 0.12, (d_y + out_y) / 2, _dims("T", "hidden") + " = " + _dims(T, s.hidden), size=7.5,
          ha="left", code=True, ground=False, gid="shape")
    n_x, n_y = mlp[0]
    arrow(ax, [(n_x + bw, n_y + bh / 2), (n_x + bw + 0.45, n_y + bh / 2), (n_x + bw + 0.45, out_y),
               (d_x + bw / 2 + 0.15, out_y)], width=1.0, head=7, dashed=True, color=MUTED)
    label(ax, d_x + bw / 2, out_y - 0.3, say(words.DECODER_OUTPUT), size=8.5, ground=False)
    return fig


def _check_tp(s: Shape, tp_size: int) -> None:
    if isinstance(tp_size, bool) or not isinstance(tp_size, int) or tp_size < 2:
        raise ValueError(say(TP_TOO_SMALL, value=tp_size))
    check_shards(tp_size, dict(zip(SHARDED_SIZES, (s.heads, s.kv_heads, s.vocab, s.inter))), option="tp_size")


def _matrix(ax: Any, x: float, y: float, w: float, h: float, tp: int, along: str,
            parts: tuple[float, ...] = (1.0,)) -> None:
    """A weight matrix (out × in drawn as height × width) in ``tp`` rank colours: ``along="rows"`` splits the
    output features (each of ``parts``, packed one above the other, in ``tp`` slices), ``"cols"`` the input
    features, ``"none"`` is replicated (one grey block)."""
    if along == "none":
        ax.add_patch(Rectangle((x, y), w, h, facecolor="#d9d9d9", edgecolor=INK, linewidth=0.8))
        return
    if along == "cols":
        for r in range(tp):
            ax.add_patch(Rectangle((x + r * w / tp, y), w / tp, h, facecolor=SEQ_PALETTE[r], edgecolor=INK,
                                   linewidth=0.6, gid="rank-slice"))
        return
    total = sum(parts)
    top = y + h
    for part in parts:
        ph = h * part / total
        for r in range(tp):
            ax.add_patch(Rectangle((x, top - (r + 1) * ph / tp), w, ph / tp, facecolor=SEQ_PALETTE[r],
                                   edgecolor=INK, linewidth=0.6, gid="rank-slice"))
        ax.plot([x, x + w], [top - ph, top - ph], color=INK, linewidth=1.6)
        top -= ph


def _ranges(count: int, tp: int, rank: int) -> str:
    per = count // tp
    first, last = rank * per, (rank + 1) * per - 1
    return str(first) if first == last else f"{first}–{last}"


def tensor_parallel_splits(config: Any, tp_size: int) -> Figure:
    """How one Qwen3's weights split over ``tp_size`` ranks — the embedding and LM head by vocabulary, QKV
    and gate_up column-parallel, o_proj and down_proj row-parallel — with each rank's shapes and where the
    all-reduces (and the LM head's gather) are."""
    s = shape_of(config)
    _check_tp(s, tp_size)
    tp, D = tp_size, s.head_dim
    q, kv = s.heads * D, s.kv_heads * D
    rows = [
        ("embed_tokens", "VocabParallelEmbedding", "vocab", (s.vocab, s.hidden), (s.vocab // tp, s.hidden), "rows",
         (1.0,), "all_reduce"),
        ("input_layernorm", "RMSNorm", "replicated", (s.hidden,), (s.hidden,), "none", (1.0,), None),
        ("qkv_proj", "QKVParallelLinear", "qkv", (q + 2 * kv, s.hidden), ((q + 2 * kv) // tp, s.hidden), "rows",
         (q, kv, kv), None),
        ("attention", "Attention", "attention", None, None, None, (1.0,), None),
        ("o_proj", "RowParallelLinear", "row", (s.hidden, q), (s.hidden, q // tp), "cols", (1.0,), "all_reduce"),
        ("gate_up_proj", "MergedColumnParallelLinear", "gate_up", (2 * s.inter, s.hidden),
         (2 * s.inter // tp, s.hidden), "rows", (1.0, 1.0), None),
        ("SiLU · mul", "SiluAndMul", "act", None, None, None, (1.0,), None),
        ("down_proj", "RowParallelLinear", "row", (s.hidden, s.inter), (s.hidden, s.inter // tp), "cols", (1.0,),
         "all_reduce"),
        ("lm_head", "ParallelLMHead", "vocab", (s.vocab, s.hidden), (s.vocab // tp, s.hidden), "rows", (1.0,),
         "gather"),
    ]
    row_h = 1.05
    width, height = 14.4, 2.3 + row_h * len(rows)
    fig, ax = canvas(width, height)
    label(ax, width / 2, height - 0.35, say(words.TP_TITLE, tp=tp, name=_name_part(s.name)), size=11.5,
          weight="bold", ground=False)
    columns = {"weight": 0.45, "split": 5.2, "shapes": 8.0, "talk": 11.6}
    head_y = height - 0.95
    for key, x in columns.items():
        label(ax, x, head_y, say(words.TP_HEAD[key]), size=9, weight="bold", ha="left", color=MUTED, ground=False)
    # The decoder layer's rows, bracketed: they repeat in every layer.
    y_first_layer = head_y - 0.35 - row_h
    for k, (name, cls, split, full, shard, along, parts, talk) in enumerate(rows):
        y = head_y - 0.35 - (k + 1) * row_h
        face = "#f7f7f7" if k % 2 else "white"
        ax.add_patch(Rectangle((0.15, y), width - 0.3, row_h, facecolor=face, edgecolor="none", zorder=0))
        label(ax, columns["weight"] + 0.35, y + row_h - 0.3, name, size=9, weight="bold", ha="left", ground=False,
              code=True)
        label(ax, columns["weight"] + 0.35, y + 0.3, cls, size=7.5, ha="left", color=MUTED, ground=False, code=True)
        if along is not None:
            _matrix(ax, 3.7, y + 0.15, 1.2, row_h - 0.3, tp, along, parts)
        label(ax, columns["split"], y + row_h / 2, say(words.TP_SPLIT[split]), size=7.8, ha="left", ground=False)
        if full is not None:
            shapes = f"{_dims(*full)} → {_dims(*shard)}" if full != shard else _dims(*full)
            label(ax, columns["shapes"], y + row_h - 0.3, shapes, size=8, ha="left", code=True, ground=False,
                  gid="shard-shape")
        if split == "attention":  # which heads each rank computes (the first four ranks)
            lines = [say(words.TP_HEADS_OF_RANK, rank=r, q=_ranges(s.heads, tp, r), kv=_ranges(s.kv_heads, tp, r))
                     for r in range(min(tp, 4))]
            label(ax, columns["shapes"], y + row_h / 2, "\n".join(lines) + (" …" if tp > 4 else ""), size=7.3,
                  ha="left", ground=False, gid="heads")
        if talk == "all_reduce":
            box(ax, columns["talk"], y + 0.25, 2.4, row_h - 0.5, face="#fbe3e6", edge=COMM_COLOR, gid="all-reduce")
            label(ax, columns["talk"] + 1.2, y + row_h / 2, say(words.TP_ALL_REDUCE), size=8.5, weight="bold",
                  color=COMM_COLOR, ground=False)
        elif talk == "gather":
            box(ax, columns["talk"], y + 0.12, 2.45, row_h - 0.24, face="#fff2cc", edge="#b8860b", gid="gather")
            label(ax, columns["talk"] + 1.22, y + row_h / 2, say(words.TP_GATHER), size=7.8, color="#8a6508",
                  ground=False)
        else:
            label(ax, columns["talk"], y + row_h / 2, say(words.TP_NO_TALK), size=8, ha="left", color=MUTED,
                  ground=False)
        if name == "down_proj":
            y_last_layer = y
    # The bracket of the repeated rows, along the left edge.
    ax.plot([0.5, 0.5], [y_last_layer + 0.05, y_first_layer - 0.05], color=INK, linewidth=1.4)
    label(ax, 0.3, (y_last_layer + y_first_layer) / 2, say(words.TP_PER_LAYER, layers=s.layers), size=7.5,
          rotation=90)
    # Rank colours, and the count of one forward pass's collectives.
    legend_y = 0.75
    for r in range(tp):
        ax.add_patch(Rectangle((0.4 + r * 1.3, legend_y - 0.12), 0.3, 0.24, facecolor=SEQ_PALETTE[r], edgecolor=INK,
                               linewidth=0.6))
        label(ax, 0.8 + r * 1.3, legend_y, f"rank {r}", size=8, ha="left", ground=False)
    label(ax, 0.4, 0.3, say(words.TP_COUNT, n=1 + 2 * s.layers, layers=s.layers), size=8.5, ha="left",
          weight="bold", ground=False, gid="count")
    return fig
