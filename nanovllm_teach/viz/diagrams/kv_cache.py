"""The paged KV cache in two pictures: the prefix hash chain of a prompt (``hash_chain``), and how a
token's position finds its cache slot through the block table (``block_table_slots``).

``hash_chain`` cuts the prompt into blocks and names every full block with the engine's own
``compute_block_hash`` (the block manager's, ``engine/block_manager.py``), each from the hash before it;
the last, partial block gets none. ``block_table_slots`` draws a sequence's logical positions, its block
table, the physical blocks of the pool they point to, and one token worked through:
``slot = block_table[pos // block_size] * block_size + pos % block_size``, computed by the engine's own
``utils.kv_slots.token_slot`` (the value the model runner puts in ``slot_mapping``: a PREPARE_PREFILL_TENSORS
or PREPARE_DECODE_TENSORS event's values can be passed in).

No torch. Emits no events.
"""

from __future__ import annotations

from collections.abc import Sequence as SequenceOf

from matplotlib.figure import Figure

from nanovllm_teach.engine.block_manager import NO_HASH, compute_block_hash
from nanovllm_teach.i18n import say
from nanovllm_teach.utils.kv_slots import token_slot
from nanovllm_teach.viz import words
from nanovllm_teach.viz.diagrams.boxes import INK, MUTED, arrow, box, canvas, cell, label
from nanovllm_teach.viz.messages import (BAD_BLOCK_ID, BAD_POSITION, BAD_TOKEN_ID, NO_TOKEN_IDS, NOT_A_POSITIVE_INT,
                                         TOO_FEW_BLOCKS, TOO_FEW_KV_BLOCKS)
from nanovllm_teach.viz.style import FREE_COLOR

FULL_COLOR = "#cfe3f3"
PARTIAL_COLOR = "#f2f2f2"
HASH_COLOR = "#fff2cc"
WORKED_COLOR = "#fdae61"
SEQ_COLOR = "#a6cee3"

_BLOCKS_PER_ROW = 5
_SHOWN_CHARS = 26  # the most characters of token ids a block's box holds; longer blocks show their ends


def _check_block_size(block_size: int) -> None:
    if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1:
        raise ValueError(say(NOT_A_POSITIVE_INT, name="block_size", value=block_size))


def short_hash(h: int) -> str:
    """A block hash as the pictures write it: its first 8 hex digits (of 16)."""
    return f"{h:016x}"[:8] + "…"


def chain_hashes(token_ids: SequenceOf[int], block_size: int) -> list[int]:
    """The hash of every full block of ``token_ids``, each from the one before it, as the block manager
    computes them (``compute_block_hash``)."""
    hashes, h = [], NO_HASH
    for start in range(0, len(token_ids) - block_size + 1, block_size):
        h = compute_block_hash(list(token_ids[start:start + block_size]), h)
        hashes.append(h)
    return hashes


def _ids_text(ids: list[int]) -> str:
    text = ", ".join(map(str, ids))
    for head in (3, 2, 1):
        if len(text) <= _SHOWN_CHARS:
            break
        text = ", ".join(map(str, ids[:head])) + ", …, " + str(ids[-1])
    return text


def hash_chain(token_ids: list[int], block_size: int) -> Figure:
    """``token_ids`` cut into blocks of ``block_size``: each full block's hash from the previous block's
    hash and its own tokens (``compute_block_hash``), in short hex, chained by arrows; the partial last block
    has none."""
    _check_block_size(block_size)
    if not token_ids:
        raise ValueError(say(NO_TOKEN_IDS))
    bad = next((t for t in token_ids if isinstance(t, bool) or not isinstance(t, int) or t < 0), None)
    if bad is not None:
        raise ValueError(say(BAD_TOKEN_ID, value=bad))
    hashes = chain_hashes(token_ids, block_size)
    num_blocks = -(-len(token_ids) // block_size)
    rows = -(-num_blocks // _BLOCKS_PER_ROW)
    width, row_h = 14.0, 2.9
    height = 1.5 + rows * row_h
    fig, ax = canvas(width, height)
    label(ax, width / 2, height - 0.35, say(words.CHAIN_TITLE, n=len(token_ids), block_size=block_size), size=11.5,
          weight="bold", ground=False)
    bw, gap = 2.3, 0.45
    previous_hash_box: tuple[float, float] | None = None  # (right edge x, centre y) of the last hash drawn
    for i in range(num_blocks):
        row, col = divmod(i, _BLOCKS_PER_ROW)
        x = 0.35 + col * (bw + gap)
        top = height - 0.9 - row * row_h
        ids = list(token_ids[i * block_size:(i + 1) * block_size])
        full = len(ids) == block_size
        box(ax, x, top - 1.05, bw, 1.05, face=FULL_COLOR if full else PARTIAL_COLOR, dashed=not full,
            gid="block-full" if full else "block-partial")
        label(ax, x + 0.12, top - 0.2, say(words.BLOCK_N, i=i), size=8.5, weight="bold", ha="left", ground=False)
        positions = say(words.CHAIN_POSITIONS, first=i * block_size, last=i * block_size + len(ids) - 1)
        label(ax, x + bw - 0.12, top - 0.2, positions, size=7, ha="right", color=MUTED, ground=False)
        label(ax, x + bw / 2, top - 0.62, f"[{_ids_text(ids)}]", size=7, ground=False, code=True)
        hash_y = top - 1.95
        if full:
            box(ax, x, hash_y - 0.4, bw, 0.8, face=HASH_COLOR, gid="hash")
            formula = say(words.CHAIN_FIRST_HASH) if i == 0 else say(words.CHAIN_HASH_OF, i=i, prev=i - 1)
            label(ax, x + bw / 2, hash_y + 0.18, formula, size=7, ground=False)
            label(ax, x + bw / 2, hash_y - 0.16, f"h{i} = {short_hash(hashes[i])}", size=8.5, weight="bold",
                  ground=False, code=True, gid="hash-value")
            arrow(ax, [(x + bw / 2, top - 1.05), (x + bw / 2, hash_y + 0.4)], gid="tokens-to-hash")
            if previous_hash_box is not None:
                px, py = previous_hash_box
                if py == hash_y:
                    arrow(ax, [(px, py), (x, hash_y)], color="#b8860b", width=1.6, gid="chain")
                else:  # the chain goes on in the next row: under the last row, then down the left margin
                    under = py - 0.4 - (row_h - 2.35) / 2
                    arrow(ax, [(px, py), (px + gap / 2, py), (px + gap / 2, under), (0.15, under), (0.15, hash_y),
                               (x, hash_y)], color="#b8860b", width=1.6, gid="chain")
            previous_hash_box = (x + bw, hash_y)
        else:
            label(ax, x + bw / 2, hash_y, say(words.CHAIN_NO_HASH_YET, n=len(ids), block_size=block_size), size=7.5,
                  color=MUTED, ground=False)
    label(ax, width / 2, 0.35, say(words.CHAIN_NOTE), size=8, color=MUTED, ground=False)
    return fig


def block_table_slots(block_table: list[int], num_tokens: int, block_size: int, *, position: int | None = None,
                      num_blocks: int | None = None, seq_id: int | None = None) -> Figure:
    """A sequence of ``num_tokens`` tokens: its logical blocks → ``block_table`` → the physical blocks of the
    pool (``num_blocks`` of them; None: as many as the table needs) → the slots of the worked token's block,
    with ``position``'s slot (None: the last token, the one a decode step writes) written out as
    ``block_id × block_size + offset``. ``block_table`` may end in -1 padding (a decode step's
    ``block_tables`` rows)."""
    _check_block_size(block_size)
    table = list(block_table)
    while table and table[-1] == -1:
        table.pop()
    if isinstance(num_tokens, bool) or not isinstance(num_tokens, int) or num_tokens < 1:
        raise ValueError(say(NOT_A_POSITIVE_INT, name="num_tokens", value=num_tokens))
    needed = -(-num_tokens // block_size)
    if len(table) < needed:
        raise ValueError(say(TOO_FEW_BLOCKS, block_table=block_table, have=len(table), num_tokens=num_tokens,
                             block_size=block_size, needed=needed))
    table = table[:needed]
    bad = next((b for b in table if isinstance(b, bool) or not isinstance(b, int) or b < 0), None)
    if bad is not None:
        raise ValueError(say(BAD_BLOCK_ID, value=bad, block_table=block_table))
    position = num_tokens - 1 if position is None else position
    if isinstance(position, bool) or not isinstance(position, int) or not 0 <= position < num_tokens:
        raise ValueError(say(BAD_POSITION, num_tokens=num_tokens, value=position))
    pool = max(table) + 1 if num_blocks is None else num_blocks
    if isinstance(pool, bool) or not isinstance(pool, int) or pool <= max(table):
        raise ValueError(say(TOO_FEW_KV_BLOCKS, num_blocks=num_blocks, largest=max(table)))

    j, offset = divmod(position, block_size)
    block, slot = table[j], token_slot(table, position, block_size)
    width, height = 14.0, 8.6
    fig, ax = canvas(width, height)
    title = (say(words.SLOTS_TITLE, pos=position) if seq_id is None
             else say(words.SLOTS_TITLE_SEQ, seq_id=seq_id, pos=position))
    label(ax, width / 2, height - 0.35, title, size=12, weight="bold", ground=False)
    left, right = 2.2, width - 0.3

    # Row 1 and 2: the logical blocks and, under each, its entry of the block table.
    n = len(table)
    step_x = min(2.4, (right - left) / n)
    cw = step_x - 0.12
    y_logical, y_table = 6.9, 5.65
    label(ax, 0.2, y_logical + 0.35, say(words.SLOTS_POSITIONS), size=8.5, ha="left", weight="bold", ground=False)
    label(ax, 0.2, y_table + 0.25, say(words.SLOTS_TABLE), size=8.5, ha="left", weight="bold", ground=False)
    size = 7.5 if step_x > 1.3 else 6.5
    for k, b in enumerate(table):
        x = left + k * step_x
        last = min((k + 1) * block_size, num_tokens) - 1
        face = WORKED_COLOR if k == j else SEQ_COLOR
        cell(ax, x, y_logical, cw, 0.7, f"{k * block_size}–{last}", face=face, size=size, gid="logical-block")
        cell(ax, x, y_table, cw, 0.5, str(b), face=face, size=8.5, gid="table-entry")
        label(ax, x + cw / 2, y_table - 0.18, f"[{k}]", size=6.5, color=MUTED, ground=False)
        arrow(ax, [(x + cw / 2, y_logical), (x + cw / 2, y_table + 0.5)], width=1.0, head=7)

    # Row 3: the pool. A pool too large to draw shows the blocks of this table and elides the others.
    y_pool = 3.7
    label(ax, 0.2, y_pool + 0.3, say(words.SLOTS_POOL, n=pool), size=8.5, ha="left", weight="bold", ground=False)
    shown: list[int | None] = list(range(pool)) if pool <= 32 else []
    if not shown:
        for b in sorted(set(table)):
            if (shown and b != shown[-1] + 1) or (not shown and b > 0):
                shown.append(None)  # an ellipsis
            shown.append(b)
        if shown[-1] < pool - 1:
            shown.append(None)
    pw = min(0.6, (right - left) / len(shown))
    x_of: dict[int, float] = {}
    for k, b in enumerate(shown):
        x = left + k * pw
        if b is None:
            label(ax, x + pw / 2, y_pool + 0.25, "…", size=9, ground=False)
            continue
        x_of[b] = x
        face = WORKED_COLOR if b == block else (SEQ_COLOR if b in table else FREE_COLOR)
        cell(ax, x, y_pool, pw - 0.04, 0.5, str(b), face=face, size=7 if pw > 0.45 else 5.5, gid="pool-block")
    cell(ax, right - 3.4, y_pool - 0.52, 0.3, 0.22, face=FREE_COLOR)
    label(ax, right - 3.0, y_pool - 0.41, say(words.SLOTS_OTHER_BLOCKS), size=7.5, ha="left", color=MUTED, ground=False)
    for k, b in enumerate(table):
        x = left + k * step_x + cw / 2
        arrow(ax, [(x, y_table - 0.3), (x_of[b] + (pw - 0.04) / 2, y_pool + 0.5)],
              color=INK if k == j else MUTED, width=1.4 if k == j else 0.8, head=7)

    # Row 4: the worked token's block, slot by slot (the offsets), its slot in orange.
    y_slots = 1.75
    label(ax, 0.2, y_slots + 0.3, say(words.SLOTS_OF, block=block, last=block_size - 1), size=8.5, ha="left",
          weight="bold", ground=False)
    first_slot = block * block_size
    if block_size <= 16:
        offsets: list[int | None] = list(range(block_size))
    else:  # the first, the worked one's neighbours and the last
        keep = sorted({0, 1, max(offset - 1, 0), offset, min(offset + 1, block_size - 1), block_size - 1})
        offsets = []
        for o in keep:
            if offsets and offsets[-1] is not None and o != offsets[-1] + 1:
                offsets.append(None)
            offsets.append(o)
    sw = min(0.72, (right - left) / len(offsets))
    for k, o in enumerate(offsets):
        x = left + k * sw
        if o is None:
            label(ax, x + sw / 2, y_slots + 0.25, "…", size=9, ground=False)
            continue
        cell(ax, x, y_slots, sw - 0.04, 0.5, str(first_slot + o), face=WORKED_COLOR if o == offset else "white",
             size=6.5, gid="slot")
        label(ax, x + sw / 2, y_slots - 0.16, f"+{o}", size=6, color=MUTED, ground=False)
        if o == offset:
            arrow(ax, [(x_of[block] + (pw - 0.04) / 2, y_pool), (x + sw / 2, y_slots + 0.5)], width=1.4, head=7)
    label(ax, left, 0.85, say(words.SLOTS_WORKED, pos=position, bs=block_size, j=j, offset=offset, block=block),
          size=8.5, ha="left", ground=False)
    label(ax, left, 0.4, say(words.SLOTS_SUM, block=block, bs=block_size, offset=offset, slot=slot), size=10,
          weight="bold", ha="left", ground=False, gid="slot-sum")
    return fig
