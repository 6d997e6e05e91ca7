"""The explanatory diagrams (``nanovllm_teach.viz.diagrams``): each draws in the chosen language, shows the
real numbers of the objects it is drawn from (the engine's hashes, slots, KV budget, the config's shapes, a
trace's events), and refuses bad inputs with a ValueError naming the value."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest
from matplotlib.figure import Figure

from nanovllm_teach.assets import default_model_path
from nanovllm_teach.engine.block_manager import BlockManager, compute_block_hash
from nanovllm_teach.engine.sequence import Sequence
from nanovllm_teach.i18n import say, speaking
from nanovllm_teach.reference import load_reference_run
from nanovllm_teach.sampling_params import SamplingParams
from nanovllm_teach.trace import load_trace
from nanovllm_teach.trace.payload import LAYERS
from nanovllm_teach.viz import diagrams, words
from nanovllm_teach.viz.diagrams.kv_cache import short_hash
from nanovllm_teach.viz.diagrams.memory import budget_of

CJK = re.compile(r"[\u4e00-\u9fff]")
TRACE = load_trace(Path(__file__).resolve().parents[1] / "traces" / "preemption.jsonl")
CONFIG = SimpleNamespace(**json.loads((default_model_path() / "config.json").read_text()))


def texts(figure: Figure) -> str:
    """Every text drawn in ``figure``: its own, and each axes' title, labels and texts."""
    found = [t.get_text() for t in figure.texts]
    for ax in figure.get_axes():
        found += [t.get_text() for t in (ax.title, ax.xaxis.label, ax.yaxis.label, *ax.texts)]
    return "\n".join(found)


def gids(figure: Figure) -> Counter[str]:
    return Counter(a.get_gid() for a in figure.findobj() if a.get_gid())


DIAGRAMS = {
    "engine_layers": (lambda: diagrams.engine_layers(), [words.LAYERS_NAME["resources"], words.LAYERS_TITLE]),
    "engine_layers_step": (lambda: diagrams.engine_layers(TRACE, 1), [words.LAYERS_NAME["execution"]]),
    "sequence_states": (lambda: diagrams.sequence_states(TRACE), [words.STATES_PREEMPTED, words.STATES_FINISHED_BY]),
    "hash_chain": (lambda: diagrams.hash_chain(list(range(10)), 4), [words.CHAIN_NOTE]),
    "block_table_slots": (lambda: diagrams.block_table_slots([3, 7, 1], 10, 4), [words.SLOTS_TABLE]),
    "memory_budget": (lambda: diagrams.memory_budget(TRACE.events_named("KV_BUDGET_ESTIMATE")[0].stats),
                      [words.BUDGET_DECIDED]),
    "decoder_layer": (lambda: diagrams.decoder_layer(CONFIG), [words.DECODER_STAGE["rope"], words.DECODER_OUTPUT]),
    "tensor_parallel_splits": (lambda: diagrams.tensor_parallel_splits(CONFIG, 2), [words.TP_ALL_REDUCE]),
}


@pytest.mark.parametrize("name", DIAGRAMS)
def test_every_diagram_speaks_the_chosen_language(name):
    make, some_words = DIAGRAMS[name]
    for lang, other in (("en", "zh"), ("zh", "en")):
        with speaking(lang):
            drawn = texts(make())
        for text in some_words:
            assert say(text, lang) in drawn and say(text, other) not in drawn, (name, lang, text)
        assert bool(CJK.search(drawn)) == (lang == "zh"), (name, lang)


def test_engine_layers_lists_the_steps_events_under_the_class_whose_work_they_report():
    step = next(row.step for row in TRACE.steps if row.preempted) if any(r.preempted for r in TRACE.steps) else 1
    fig = diagrams.engine_layers(TRACE, step)
    boxes = {a.get_gid(): a for a in fig.findobj() if (a.get_gid() or "").startswith("class-")}
    assert {f"class-{actor}" for actor in LAYERS} <= set(boxes)
    events = Counter(e.event for e in TRACE.events_in_step(step))
    drawn = {t.get_text(): t.get_position() for t in fig.get_axes()[0].texts}
    for event, n in events.items():
        actor = next(type(e.stats).actor for e in TRACE.events_in_step(step) if e.event == event)
        (x, y) = drawn[f"{event} ×{n}"]
        patch = boxes[f"class-{actor}"]
        assert patch.get_x() <= x <= patch.get_x() + patch.get_width(), (event, actor)
        assert patch.get_y() <= y <= patch.get_y() + patch.get_height(), (event, actor)
    with pytest.raises(ValueError, match="step 999 is not in the trace"):
        diagrams.engine_layers(TRACE, 999)
    with pytest.raises(ValueError, match="without a step"):
        diagrams.engine_layers(TRACE)
    with pytest.raises(ValueError, match="without a trace"):
        diagrams.engine_layers(step=3)


def test_sequence_states_counts_each_edge_from_its_state_transitions():
    moves = Counter((e.stats.from_, e.stats.to) for e in TRACE.events_named("STATE_TRANSITION"))
    assert moves[("RUNNING", "WAITING")] > 0  # the preemption trace preempts
    with speaking("en"):
        drawn = texts(diagrams.sequence_states(TRACE))
        plain = texts(diagrams.sequence_states())
    assert f"{say(words.STATES_ADMITTED)}  ×{moves['WAITING', 'RUNNING']}" in drawn
    assert f"{say(words.STATES_PREEMPTED)}  ×{moves['RUNNING', 'WAITING']}" in drawn
    eos = sum(e.stats.get("finish_reason") == "eos" for e in TRACE.events_named("STATE_TRANSITION"))
    assert f"EOS  ×{eos}" in drawn
    assert "×" not in plain


def test_hash_chain_shows_the_block_managers_hashes():
    token_ids, block_size = [151644, 872, 198, 1, 2, 3, 4, 5, 6, 7, 8], 4
    with speaking("en"):
        drawn = texts(diagrams.hash_chain(token_ids, block_size))
    h0 = compute_block_hash(token_ids[0:4])
    h1 = compute_block_hash(token_ids[4:8], h0)
    assert f"h0 = {short_hash(h0)}" in drawn and f"h1 = {short_hash(h1)}" in drawn
    assert "h2 =" not in drawn and say(words.CHAIN_NO_HASH_YET, "en", n=3, block_size=4) in drawn
    # The block manager names the same blocks by the same hashes.
    bm = BlockManager(4, block_size)
    seq = Sequence(0, token_ids, SamplingParams(), block_size)
    bm.allocate(seq, bm.can_allocate(seq))
    seq.num_scheduled_tokens = len(token_ids)  # the whole prompt is computed, then its full blocks named
    bm.hash_blocks(seq)
    assert [bm.blocks[b].hash for b in seq.block_table[:2]] == [h0, h1]
    for bad in (0, -1, 2.0, True):
        with pytest.raises(ValueError, match="block_size"):
            diagrams.hash_chain(token_ids, bad)
    with pytest.raises(ValueError, match="empty"):
        diagrams.hash_chain([], 4)


@pytest.mark.parametrize("table, num_tokens, block_size, position", [
    ([3, 7, 1], 10, 4, None), ([5, 2, -1, -1], 7, 4, 2), ([30, 70, 100], 40, 16, 37), ([0], 1, 256, 0),
])
def test_block_table_slots_works_one_token_through(table, num_tokens, block_size, position):
    pos = num_tokens - 1 if position is None else position
    slot = table[pos // block_size] * block_size + pos % block_size
    with speaking("en"):
        fig = diagrams.block_table_slots(table, num_tokens, block_size, position=position, num_blocks=128)
    drawn = texts(fig)
    expected = say(words.SLOTS_SUM, "en", block=table[pos // block_size], bs=block_size, offset=pos % block_size,
                   slot=slot)
    assert expected in drawn and expected.endswith(f"= {slot}")
    assert gids(fig)["table-entry"] == -(-num_tokens // block_size)


def test_block_table_slots_refuses_what_cannot_be():
    with pytest.raises(ValueError, match="block_size"):
        diagrams.block_table_slots([1], 3, 0)
    with pytest.raises(ValueError, match="need 3"):
        diagrams.block_table_slots([1, 2], 10, 4)
    with pytest.raises(ValueError, match="position"):
        diagrams.block_table_slots([1, 2, 3], 10, 4, position=10)
    with pytest.raises(ValueError, match="num_blocks=3"):
        diagrams.block_table_slots([1, 2, 3], 10, 4, num_blocks=3)
    with pytest.raises(ValueError, match="-2"):
        diagrams.block_table_slots([1, -2, 3], 10, 4)


def test_memory_budget_buys_the_events_blocks():
    stats = TRACE.events_named("KV_BUDGET_ESTIMATE")[0].stats
    budget = budget_of(stats)
    assert max(budget.available, 0) // budget.block_bytes == stats["uncapped_num_blocks"]
    with speaking("en"):
        fig = diagrams.memory_budget(stats)
    drawn = texts(fig)
    assert f"num_blocks = {stats['num_blocks']:,}" in drawn
    decided = [a for a in fig.findobj() if a.get_gid() == "limit-decided"]
    assert len(decided) == 1
    assert stats["limited_by"] == "num_kvcache_blocks"  # this trace gives the number
    with pytest.raises(ValueError, match="missing"):
        diagrams.memory_budget({"total": 1})


def test_memory_budget_explains_the_reference_runs_blocks():
    ref = load_reference_run()
    budget = budget_of(ref)
    assert budget.available // budget.block_bytes == ref.num_kvcache_blocks  # the formula gives its 3052
    with speaking("zh"):
        drawn = texts(diagrams.memory_budget(ref))
    assert f"num_blocks = {ref.num_kvcache_blocks:,}" in drawn and say(words.BUDGET_NO_CAP, "zh") in drawn


def test_decoder_layer_labels_each_arrow_with_the_configs_shapes():
    T = 5
    H, KV, D = CONFIG.num_attention_heads, CONFIG.num_key_value_heads, CONFIG.head_dim
    drawn = texts(diagrams.decoder_layer(CONFIG, T, num_blocks=32, block_size=8))
    for shape in (f"({T}, {CONFIG.hidden_size})", f"({T}, {(H + 2 * KV) * D})", f"q ({T}, {H}, {D})",
                  f"({T}, {KV}, {D})", f"({T}, {H * D})", f"({T}, {2 * CONFIG.intermediate_size})",
                  f"({T}, {CONFIG.intermediate_size})", f"(32, 8, {KV}, {D})"):
        assert shape in drawn, shape
    ref = load_reference_run().model
    assert f"(16, {(16 + 2 * 8) * 128})" in texts(diagrams.decoder_layer(ref, 16))
    with pytest.raises(ValueError, match="num_tokens"):
        diagrams.decoder_layer(CONFIG, 0)
    with pytest.raises(ValueError, match="hidden_size"):
        diagrams.decoder_layer(SimpleNamespace(**{**vars(CONFIG), "hidden_size": None}))


def test_tensor_parallel_splits_shows_each_ranks_shapes_and_the_all_reduces():
    tp = 2
    fig = diagrams.tensor_parallel_splits(CONFIG, tp)
    drawn = texts(fig)
    H, KV, D, hidden = CONFIG.num_attention_heads, CONFIG.num_key_value_heads, CONFIG.head_dim, CONFIG.hidden_size
    assert f"({(H + 2 * KV) * D}, {hidden}) → ({(H + 2 * KV) * D // tp}, {hidden})" in drawn
    assert f"({hidden}, {H * D}) → ({hidden}, {H * D // tp})" in drawn
    assert f"({hidden}, {CONFIG.intermediate_size}) → ({hidden}, {CONFIG.intermediate_size // tp})" in drawn
    assert f"({CONFIG.vocab_size}, {hidden}) → ({CONFIG.vocab_size // tp}, {hidden})" in drawn
    # After the embedding, o_proj and down_proj: the three places layers/ calls all_reduce; the LM head gathers.
    assert gids(fig)["all-reduce"] == 3 and gids(fig)["gather"] == 1
    with pytest.raises(ValueError, match="tp_size=3 must divide the model's num_attention_heads=4"):
        diagrams.tensor_parallel_splits(CONFIG, 3)
    with pytest.raises(ValueError, match="tp_size"):
        diagrams.tensor_parallel_splits(CONFIG, 1)
