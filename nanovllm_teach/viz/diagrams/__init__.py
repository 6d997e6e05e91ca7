"""Explanatory diagrams of the engine, drawn from its real objects: the three layers and one step through
them, a sequence's states, the prefix hash chain, block table → pool → slot, the KV memory budget, one
decoder layer with its tensor shapes, and how tensor parallelism splits the weights.

Each function returns a ``NotebookFigure`` (a matplotlib ``Figure`` that shows itself in a notebook) drawn
in the chosen language (``nanovllm_teach.i18n``). Viz layer; emits no events.
"""

from nanovllm_teach.viz.diagrams.engine import engine_layers, sequence_states
from nanovllm_teach.viz.diagrams.kv_cache import block_table_slots, hash_chain
from nanovllm_teach.viz.diagrams.memory import memory_budget
from nanovllm_teach.viz.diagrams.model import decoder_layer, tensor_parallel_splits

__all__ = [
    "block_table_slots", "decoder_layer", "engine_layers", "hash_chain", "memory_budget", "sequence_states",
    "tensor_parallel_splits",
]
