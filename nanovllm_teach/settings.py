"""Orchestration: every engine setting a learner can turn, its default and its check, in one place.

``Settings`` is what was asked for, validated without torch, a model or a device: a name that is not a
setting raises ``TypeError`` listing the known ones, a value of the wrong type ``TypeError``, a value out
of range or not among the choices ``ValueError`` — each naming the setting and the value. The choices
(``POLICIES``, ``ATTENTION_BACKENDS``, ``LINEAR_BACKENDS``, ``DTYPES``, ``RUNNERS``, ``QUANTIZATIONS``,
``SERVING_ENGINES``) are defined here and nowhere else.

What the settings become on this machine and this model (``"auto"`` made concrete, the token budget
chosen, ``max_model_len`` clamped to the model) is ``config.Config``, resolved once from these.

Emits no events.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, fields
from typing import Any, Mapping

from nanovllm_teach.i18n import Text, say

POLICIES = ("continuous", "static")
ATTENTION_BACKENDS = ("auto", "torch", "cpp", "triton", "flash_attn")
LINEAR_BACKENDS = ("auto", "torch", "onednn")
DTYPES = ("auto", "float32", "float16", "bfloat16")
RUNNERS = ("real", "simulated")
# Weights stored and multiplied in a lower precision, by vLLM's name for it; simulated only (this engine has no
# FP8 kernels): "fp8", FP8 weights and activations in the linear layers.
QUANTIZATIONS = ("fp8",)
BAD_QUANTIZATION = Text(en="quantization must be None or one of {choices}, got {value}",
                        zh="quantization 只能是 None 或 {choices} 之一，收到的是 {value}")
# A served engine whose own software costs a simulated GPU takes (its collectives' fixed cost), named by the
# published runs they were fitted on (sim/efficiency.py's ENGINE_EFFICIENCY); simulated only. None: one fit over
# the runs of every engine.
SERVING_ENGINES = ("vllm-0.5", "vllm-0.6")
# The settings only a simulated run has (a real run refuses them, and its trace header leaves them out).
SIMULATION_SETTINGS = ("hardware", "sim_factors", "quantization", "serving_engine")

NOT_POSITIVE = Text(en="{name} must be a positive int, got {value!r}", zh="{name} 必须是正整数，收到的是 {value!r}")
NOT_POSITIVE_OR_NONE = Text(en="{name} must be a positive int or None, got {value!r}",
                            zh="{name} 必须是正整数或 None，收到的是 {value!r}")
MEMORY_FRACTION_RANGE = Text(en="gpu_memory_utilization must be in (0, 1], got {value!r}",
                             zh="gpu_memory_utilization 必须在 (0, 1] 区间内，收到的是 {value!r}")
CPU_KV_NOT_POSITIVE = Text(en="cpu_kvcache_gib must be > 0, got {value!r}", zh="cpu_kvcache_gib 必须 > 0，收到的是 {value!r}")
NOT_A_CHOICE = Text(en="{name} must be one of {choices}, got {value!r}", zh="{name} 必须是 {choices} 之一，收到的是 {value!r}")
NOT_A_BOOL = Text(en="{name} must be True or False, got {value!r}", zh="{name} 必须是 True 或 False，收到的是 {value!r}")
NOT_A_NUMBER = Text(en="{name} must be a number, got {value!r}", zh="{name} 必须是数字，收到的是 {value!r}")
NOT_A_STR = Text(en="{name} must be a str, got {value!r}", zh="{name} 必须是 str，收到的是 {value!r}")
NEEDS_SIMULATED = Text(en="{name}={value!r} needs runner='simulated'", zh="{name}={value!r} 需要 runner='simulated'")
HARDWARE_TYPE = Text(en="hardware must be a device name (a str), got {value!r}",
                     zh="hardware 必须是设备名（str），收到的是 {value!r}")
SIM_FACTORS_TYPE = Text(en="sim_factors must be the path of a JSON file, got {value!r}",
                        zh="sim_factors 必须是一个 JSON 文件的路径，收到的是 {value!r}")
UNKNOWN_SETTINGS = Text(en="unknown engine setting(s): {names}; known: {known}",
                        zh="未知的引擎设置：{names}；可用的设置：{known}")
SHARDS_UNEVEN = Text(en="{option}={tp} must divide the model's {name}={value}",
                     zh="{option}={tp} 必须能整除模型的 {name}={value}")
# What tensor parallelism splits across its ranks, by their names in a Hugging Face config.json.
SHARDED_SIZES = ("num_attention_heads", "num_key_value_heads", "vocab_size", "intermediate_size")


@dataclass(frozen=True)
class Settings:
    # None: 16384 tokens per step on a GPU (nano-vllm's default), 2048 on a CPU, where a step that size
    # already takes about a second and the warm-up runs one of that size.
    max_num_batched_tokens: int | None = None
    max_num_seqs: int = 512
    max_model_len: int = 4096  # at most the model's max_position_embeddings
    gpu_memory_utilization: float = 0.9
    # On CPU the KV cache is also capped at this many GiB: system RAM is shared with everything else.
    # None: sized from the machine and the model (utils/memory.py's auto_cpu_kv_cap).
    cpu_kvcache_gib: float | None = None
    # Intra-op threads of torch on a CPU; None: the rule of utils/threads.py (the cores free now, no more
    # than the model is worth), applied when the engine starts.
    cpu_threads: int | None = None
    tensor_parallel_size: int = 1
    # True: no CUDA graphs on a GPU, no native decode step on a CPU (engine/compiled_decode.py): every
    # step runs the model's Python forward.
    enforce_eager: bool = False
    kvcache_block_size: int = 256
    num_kvcache_blocks: int | None = None  # None: as many as the memory budget allows
    enable_prefix_caching: bool = True
    scheduling_policy: str = "continuous"
    attention_backend: str = "auto"
    # How the linear layers multiply: "torch" (F.linear), "onednn" (packed weights, CPU only); "auto":
    # oneDNN on an x86-64 CPU, torch elsewhere.
    linear_backend: str = "auto"
    device: str = "auto"
    dtype: str = "auto"
    # "simulated": the real scheduler and block manager on a predicted device (``hardware``, required then),
    # with the efficiency factors of the JSON file ``sim_factors`` (None: the device's own, with those of the
    # ``serving_engine`` where one is named) and the weights' ``quantization`` (None: the device's dtype).
    runner: str = "real"
    hardware: str | None = None
    sim_factors: str | None = None
    quantization: str | None = None
    serving_engine: str | None = None

    def __post_init__(self) -> None:
        self._check_types()
        for name in ("max_num_seqs", "max_model_len", "kvcache_block_size", "tensor_parallel_size"):
            _check_positive(name, getattr(self, name))
        for name in ("max_num_batched_tokens", "num_kvcache_blocks", "cpu_threads"):
            if getattr(self, name) is not None:
                _check_positive(name, getattr(self, name), NOT_POSITIVE_OR_NONE)
        if not 0 < self.gpu_memory_utilization <= 1:
            raise ValueError(say(MEMORY_FRACTION_RANGE, value=self.gpu_memory_utilization))
        if self.cpu_kvcache_gib is not None and not self.cpu_kvcache_gib > 0:
            raise ValueError(say(CPU_KV_NOT_POSITIVE, value=self.cpu_kvcache_gib))
        for name, choices in (("scheduling_policy", POLICIES), ("attention_backend", ATTENTION_BACKENDS),
                              ("linear_backend", LINEAR_BACKENDS), ("dtype", DTYPES), ("runner", RUNNERS)):
            if getattr(self, name) not in choices:
                raise ValueError(say(NOT_A_CHOICE, name=name, choices=choices, value=getattr(self, name)))
        self._check_simulation()

    def _check_types(self) -> None:
        """Settings of the wrong type: ``"false"`` would be a true bool, ``"0.9"`` would fail far away."""
        for name in ("enforce_eager", "enable_prefix_caching"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(say(NOT_A_BOOL, name=name, value=getattr(self, name)))
        for name in ("gpu_memory_utilization", "cpu_kvcache_gib"):
            value = getattr(self, name)
            if name == "cpu_kvcache_gib" and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(say(NOT_A_NUMBER, name=name, value=value))
        for name in ("scheduling_policy", "attention_backend", "linear_backend", "device", "dtype", "runner"):
            if not isinstance(getattr(self, name), str):
                raise TypeError(say(NOT_A_STR, name=name, value=getattr(self, name)))

    def _check_simulation(self) -> None:
        """The simulation's own settings need the simulated runner; which devices and factor files exist is
        the simulator's to check (``sim/engine.py``), when it builds the engine."""
        if self.quantization is not None and self.quantization not in QUANTIZATIONS:
            raise ValueError(say(BAD_QUANTIZATION, choices=", ".join(QUANTIZATIONS), value=repr(self.quantization)))
        if self.serving_engine is not None and self.serving_engine not in SERVING_ENGINES:
            raise ValueError(say(NOT_A_CHOICE, name="serving_engine", choices=SERVING_ENGINES, value=self.serving_engine))
        if not self.simulated:
            for name in SIMULATION_SETTINGS:
                if getattr(self, name) is not None:
                    raise ValueError(say(NEEDS_SIMULATED, name=name, value=getattr(self, name)))
            return
        if self.hardware is not None and not isinstance(self.hardware, str):
            raise TypeError(say(HARDWARE_TYPE, value=self.hardware))
        if self.sim_factors is not None and not isinstance(self.sim_factors, (str, os.PathLike)):
            raise TypeError(say(SIM_FACTORS_TYPE, value=self.sim_factors))

    @property
    def simulated(self) -> bool:
        return self.runner == "simulated"

    @classmethod
    def from_kwargs(cls, kwargs: dict[str, Any]) -> Settings:
        """From user keyword arguments, rejecting any name that is not a setting."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(kwargs) - known)
        if unknown:
            raise TypeError(say(UNKNOWN_SETTINGS, names=", ".join(unknown), known=", ".join(sorted(known))))
        return cls(**kwargs)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _check_positive(name: str, value: Any, refusal: Text = NOT_POSITIVE) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(say(refusal, name=name, value=value))


def check_shards(tp: int, sizes: Mapping[str, int], option: str = "tensor_parallel_size") -> None:
    """Each rank owns whole attention heads, whole KV heads, an equal slice of the vocabulary and of the MLP:
    ``tp`` must divide every one of ``sizes`` (``SHARDED_SIZES`` of a model, by name). A check of the model's
    shape alone, so the simulator and the pictures make it without torch."""
    for name, value in sizes.items():
        if value % tp:
            raise ValueError(say(SHARDS_UNEVEN, option=option, tp=tp, name=name, value=value))
