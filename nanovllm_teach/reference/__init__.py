"""The reference nano-vllm run (Qwen3-0.6B on a GPU), as data the notebooks compare against.

``nano_vllm_qwen3_0_6b.json`` holds the figures of one public run of the nano-vllm engine (the nano-vllm
repository, ``example.py``) on Qwen3-0.6B: the prompts' lengths, the step latencies, how each request
finished, the KV-cache sizing and the CUDA-graph buckets. Our engine runs the same two prompts on the small
checkpoint it ships; the notebooks put the two side by side. Torch-free, like ``nanovllm_teach.trace``.

The file's words (its ``description`` and each kept step's ``note``) are written in both languages,
``{"en": ..., "zh": ...}``; ``load_reference_run()`` gives them in the chosen language (``note``,
``description``) and keeps both (``note_text``, ``description_text``). The file is checked as it is read:
a damaged one is refused with a ``ReferenceFormatError`` naming the bad field.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import msgspec

from nanovllm_teach.i18n import Text, resolve_lang, say

REFERENCE_FILE = Path(__file__).resolve().parent / "nano_vllm_qwen3_0_6b.json"

NO_SUCH_STEP = Text(en="step {number} is not among the reference steps {kept}",
                    zh="第 {number} 步不在参考运行保留的步里：{kept}")
NOT_BILINGUAL = Text(en="{file}: {where} must be {shape}, got {found}", zh="{file}：{where} 必须是 {shape}，收到的是 {found}")
BAD_BILINGUAL = Text(en="{file}: {where} must be {shape} ({why})", zh="{file}：{where} 必须是 {shape}（{why}）")
NOT_JSON = Text(en="{file}: not JSON ({why})", zh="{file}：不是 JSON（{why}）")
NO_STEPS = Text(en="{file}: expected an object with a list of steps", zh="{file}：应当是一个含 steps 列表的对象")
STEP_NOT_OBJECT = Text(en="{file}: steps[{index}] must be an object", zh="{file}：steps[{index}] 必须是一个对象")
BAD_FIELD = Text(en="{file}: {why}", zh="{file}：{why}")  # msgspec's words, which name the field


@dataclass(frozen=True)
class ModelShape:
    """The numbers of a Qwen3 ``config.json`` that size its weights, its KV cache and its arithmetic."""

    name: str
    num_hidden_layers: int
    hidden_size: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    tie_word_embeddings: bool
    dtype: str
    dtype_bytes: int
    eos_token_id: int
    shape_source: str

    @property
    def embedding_parameters(self) -> int:
        """The token embedding; with tied embeddings the LM head is the same matrix."""
        return self.vocab_size * self.hidden_size

    @property
    def layer_parameters(self) -> int:
        """One decoder layer: packed QKV, output projection, gate/up/down MLP, two RMSNorms, q/k norms."""
        q, kv = self.num_attention_heads * self.head_dim, self.num_key_value_heads * self.head_dim
        attention = self.hidden_size * (q + 2 * kv) + q * self.hidden_size + 2 * self.head_dim
        mlp = 3 * self.hidden_size * self.intermediate_size
        return attention + mlp + 2 * self.hidden_size

    @property
    def num_parameters(self) -> int:
        """Every weight, a tied LM head counted once (the final norm included)."""
        head = 0 if self.tie_word_embeddings else self.embedding_parameters
        return self.embedding_parameters + head + self.num_hidden_layers * self.layer_parameters + self.hidden_size


@dataclass(frozen=True)
class ReferenceRequest:
    seq_id: int
    question: str
    prompt_len: int
    num_completion_tokens: int
    finish_reason: str  # "eos" or "length", as in our engine's outputs
    finish_step: int
    last_token_id: int


@dataclass(frozen=True)
class ReferenceStep:
    """One engine step the reference log printed (only the steps worth a remark are kept)."""

    step: int
    phase: str
    batch_size: int
    num_tokens_stat: int
    latency_ms: float
    finished: list[int]
    note: str  # in the language the run was loaded in
    note_text: Text  # both languages


@dataclass(frozen=True)
class ReferenceRun:
    description: str  # in the language the run was loaded in
    description_text: Text  # both languages
    source: str
    model: ModelShape
    settings: dict[str, Any]
    sampling: dict[str, Any]
    warmup_seq_ids: list[int]
    memory_gib: dict[str, float]  # total, free, peak, current: the readings the KV budget was computed from
    kv_block_bytes: int
    num_kvcache_blocks: int
    cuda_graph_batch_sizes: list[int]
    requests: list[ReferenceRequest]
    first_sampled_token_ids: list[int]
    steps: list[ReferenceStep]
    decode_latency_ms_range: list[float]  # what the ordinary decode steps took, lowest and highest
    num_steps: dict[str, int]
    prefill_tensors: dict[str, Any]
    first_decode_tensors: dict[str, Any]

    def step(self, number: int) -> ReferenceStep:
        """The kept step ``number``; a ``KeyError`` names the steps that were kept."""
        for row in self.steps:
            if row.step == number:
                return row
        raise KeyError(say(NO_SUCH_STEP, number=number, kept=[row.step for row in self.steps]))


class ReferenceFormatError(ValueError):
    """The reference file is damaged: the message names the file and the bad field."""


def _bilingual(value: Any, where: str, path: Path, lang: str) -> Text:
    """``value`` as a ``Text``: an object with a string ``en`` and a string ``zh`` and nothing else."""
    shape = '{"en": "...", "zh": "..."}'
    if not isinstance(value, dict) or set(value) != {"en", "zh"}:
        found = sorted(value) if isinstance(value, dict) else type(value).__name__
        raise ReferenceFormatError(say(NOT_BILINGUAL, lang, file=path.name, where=where, shape=shape, found=found))
    try:
        return msgspec.convert(value, Text)
    except (msgspec.ValidationError, ValueError) as error:  # not a string, or the two use other fields
        raise ReferenceFormatError(say(BAD_BILINGUAL, lang, file=path.name, where=where, shape=shape,
                                       why=error)) from None


def read_reference_run(path: Path = REFERENCE_FILE, lang: str | None = None) -> ReferenceRun:
    """The reference run in ``path``, its words in ``lang`` (None: the chosen language), after checking
    every field; a damaged file raises ``ReferenceFormatError`` naming the field."""
    lang = resolve_lang(lang)
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise ReferenceFormatError(say(NOT_JSON, lang, file=Path(path).name, why=error)) from None
    if not isinstance(raw, dict) or not isinstance(raw.get("steps"), list):
        raise ReferenceFormatError(say(NO_STEPS, lang, file=Path(path).name))
    description = _bilingual(raw.get("description"), "description", Path(path), lang)
    steps = []
    for i, step in enumerate(raw["steps"]):
        if not isinstance(step, dict):
            raise ReferenceFormatError(say(STEP_NOT_OBJECT, lang, file=Path(path).name, index=i))
        note = _bilingual(step.get("note"), f"steps[{i}].note", Path(path), lang)
        steps.append({**step, "note": note.in_lang(lang), "note_text": step["note"]})
    chosen = {**raw, "description": description.in_lang(lang), "description_text": raw["description"],
              "steps": steps}
    try:
        return msgspec.convert(chosen, ReferenceRun)
    except msgspec.ValidationError as error:  # it names the field: "... - at `$.steps[0].latency_ms`"
        raise ReferenceFormatError(say(BAD_FIELD, lang, file=Path(path).name, why=error)) from None


def load_reference_run(lang: str | None = None) -> ReferenceRun:
    """The reference nano-vllm run (Qwen3-0.6B on a GPU), read from the package's data file, its words in
    ``lang`` (None: the chosen language, as a notebook's first cell sets it)."""
    return _load(resolve_lang(lang))


@cache
def _load(lang: str) -> ReferenceRun:
    return read_reference_run(REFERENCE_FILE, lang)
