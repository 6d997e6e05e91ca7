"""Orchestration: the engine's configuration, validated once at start-up.

Every knob a learner turns lives here (batch limits, block size, KV budget, prefix caching, scheduling
policy, attention backend), with the model's own shape read from its Hugging Face ``config.json``.
A bad value raises ``ValueError`` (or ``TypeError`` for a value of the wrong type) naming it before
anything heavy is built. The checkpoint folder must hold a ``config.json`` and a tokenizer; its weights'
shapes are checked against ``config.json`` by ``utils/loader.py``'s ``check_checkpoint``.

``runner="simulated"`` runs the same engine on a device that is not there (``nanovllm_teach/sim``): the
model is only a shape (a shipped name such as ``qwen3-8b``, or any folder with a ``config.json``; no
tokenizer, no weights), ``hardware`` names the device, and ``device`` becomes that name.

Traces name the model by its folder name and the SHA-256 of its ``config.json`` (``model_name``,
``config_sha256``), never by a path on this machine.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import torch
from transformers import AutoConfig, PretrainedConfig

from nanovllm_teach.engine.scheduler import POLICIES
from nanovllm_teach.sim.cost_model import Efficiency, shape_dir
from nanovllm_teach.sim.hardware import DEVICES, device_names

ATTENTION_BACKENDS = ("auto", "torch", "triton", "flash_attn")
RUNNERS = ("real", "simulated")
_SIMULATION_SETTINGS = ("runner", "hardware", "sim_factors")
# A tokenizer Hugging Face can load without the Hub: a fast tokenizer, a BPE vocabulary, or SentencePiece.
TOKENIZER_FILES = (("tokenizer.json",), ("vocab.json", "merges.txt"), ("tokenizer.model",))


@dataclass
class Config:
    model: str
    # None: 16384 tokens per step on a GPU (nano-vllm's default), 2048 on a CPU, where a step that size
    # already takes about a second and the warm-up runs one of that size.
    max_num_batched_tokens: int | None = None
    max_num_seqs: int = 512
    max_model_len: int = 4096
    gpu_memory_utilization: float = 0.9
    # On CPU the KV cache is also capped at this many GiB: system RAM is shared with everything else.
    cpu_kvcache_gib: float = 0.25
    tensor_parallel_size: int = 1
    enforce_eager: bool = False
    # Decode steps through torch.compile, compiled once at start-up (seconds to tens of seconds).
    compile: bool = False
    kvcache_block_size: int = 256
    num_kvcache_blocks: int | None = None
    enable_prefix_caching: bool = True
    scheduling_policy: str = "continuous"
    attention_backend: str = "auto"
    device: str = "auto"
    dtype: str = "auto"
    # "simulated": the real scheduler and block manager on a predicted device (``hardware``, required then),
    # with the efficiency factors of the JSON file ``sim_factors`` (None: the defaults).
    runner: str = "real"
    hardware: str | None = None
    sim_factors: str | None = None
    hf_config: PretrainedConfig = field(init=False, repr=False)
    config_sha256: str = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._check_runner()
        path = shape_dir(self.model) if self.simulated else Path(self.model)
        if not path.is_dir() or not (path / "config.json").is_file():
            raise ValueError(f"model must be a local checkpoint directory with a config.json, got {self.model!r}")
        if not self.simulated and not any(all((path / name).is_file() for name in names)
                                          for names in TOKENIZER_FILES):
            expected = ", or ".join(" and ".join(names) for names in TOKENIZER_FILES)
            raise ValueError(f"model folder {path} has no tokenizer files: expected {expected}")
        self.model = str(path)
        self._check_types()
        self.device = self.hardware if self.simulated else self._resolve_device(self.device)
        if self.max_num_batched_tokens is None:
            on_gpu = DEVICES[self.device].kind == "gpu" if self.simulated and self.device in DEVICES \
                else self.device.startswith("cuda")
            self.max_num_batched_tokens = 16384 if on_gpu else 2048
        for name in ("max_num_batched_tokens", "max_num_seqs", "max_model_len", "kvcache_block_size",
                     "tensor_parallel_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if self.num_kvcache_blocks is not None and (
                isinstance(self.num_kvcache_blocks, bool) or not isinstance(self.num_kvcache_blocks, int)
                or self.num_kvcache_blocks < 1):
            raise ValueError(f"num_kvcache_blocks must be a positive int or None, got {self.num_kvcache_blocks!r}")
        if not 0 < self.gpu_memory_utilization <= 1:
            raise ValueError(f"gpu_memory_utilization must be in (0, 1], got {self.gpu_memory_utilization!r}")
        if not self.cpu_kvcache_gib > 0:
            raise ValueError(f"cpu_kvcache_gib must be > 0, got {self.cpu_kvcache_gib!r}")
        if self.scheduling_policy not in POLICIES:
            raise ValueError(f"scheduling_policy must be one of {POLICIES}, got {self.scheduling_policy!r}")
        if self.attention_backend not in ATTENTION_BACKENDS:
            raise ValueError(f"attention_backend must be one of {ATTENTION_BACKENDS}, got {self.attention_backend!r}")
        if self.dtype not in ("auto", "float32", "float16", "bfloat16"):
            raise ValueError(f"dtype must be auto, float32, float16 or bfloat16, got {self.dtype!r}")
        self.config_sha256 = hashlib.sha256((path / "config.json").read_bytes()).hexdigest()
        self.hf_config = AutoConfig.from_pretrained(self.model)
        if self.hf_config.model_type != "qwen3":
            raise ValueError(f"only Qwen3 checkpoints are supported, {self.model} is {self.hf_config.model_type!r}")
        self.max_model_len = min(self.max_model_len, self.hf_config.max_position_embeddings)
        self._check_tensor_parallel()

    @property
    def simulated(self) -> bool:
        return self.runner == "simulated"

    def _check_runner(self) -> None:
        if self.runner not in RUNNERS:
            raise ValueError(f"runner must be one of {RUNNERS}, got {self.runner!r}")
        if not self.simulated:
            for name in ("hardware", "sim_factors"):
                if getattr(self, name) is not None:
                    raise ValueError(f"{name}={getattr(self, name)!r} needs runner='simulated'")
            return
        if self.hardware not in device_names():
            problem = "needs hardware" if self.hardware is None else f"has no hardware {self.hardware!r}"
            raise ValueError(f"runner='simulated' {problem}: choose from {', '.join(device_names())}")
        if self.sim_factors is not None:
            self.efficiency()  # a missing or bad file fails now, before anything is built

    def efficiency(self) -> Efficiency:
        """The simulated device's efficiency factors: ``sim_factors``' file, or the defaults."""
        if self.sim_factors is None:
            return Efficiency()
        if not isinstance(self.sim_factors, (str, Path)):
            raise TypeError(f"sim_factors must be the path of a JSON file, got {self.sim_factors!r}")
        try:
            return Efficiency.from_json(self.sim_factors)
        except (OSError, ValueError, TypeError) as error:  # JSONDecodeError is a ValueError
            raise ValueError(f"sim_factors {str(self.sim_factors)!r} is not a JSON file of efficiency factors: "
                             f"{error}") from None

    def _check_types(self) -> None:
        """Settings of the wrong type: ``"false"`` would be a true bool, ``"0.9"`` would fail far away."""
        for name in ("enforce_eager", "compile", "enable_prefix_caching"):
            value = getattr(self, name)
            if not isinstance(value, bool):
                raise TypeError(f"{name} must be True or False, got {value!r}")
        for name in ("gpu_memory_utilization", "cpu_kvcache_gib"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"{name} must be a number, got {value!r}")
        for name in ("scheduling_policy", "attention_backend", "device", "dtype"):
            value = getattr(self, name)
            if not isinstance(value, str):
                raise TypeError(f"{name} must be a str, got {value!r}")

    @property
    def model_name(self) -> str:
        """The checkpoint folder's name: how traces and events name the model."""
        return Path(self.model).name

    def _check_tensor_parallel(self) -> None:
        """Before any worker is spawned: every rank needs a device of its own and whole shards."""
        tp = self.tensor_parallel_size
        if tp > 1 and self.compile:
            raise ValueError(f"compile=True runs on one rank only, not with tensor_parallel_size={tp}: the compiled "
                             "decode step is not built for the all-reduces of tensor parallelism")
        # Each rank owns whole attention heads, whole KV heads, an equal slice of the vocabulary and of the MLP.
        for name in ("num_attention_heads", "num_key_value_heads", "vocab_size", "intermediate_size"):
            value = getattr(self.hf_config, name)
            if value % tp != 0:
                raise ValueError(f"tensor_parallel_size={tp} must divide the model's {name}={value}")
        if self.simulated:
            return  # a simulated device has as many peers as it is asked for
        if self.device.startswith("cuda"):
            available, unit = torch.cuda.device_count(), "GPU"
        else:
            available, unit = os.cpu_count() or 1, "CPU core"
        if tp > available:
            raise ValueError(f"tensor_parallel_size={tp} needs one {unit} per rank, this machine has {available}")

    @staticmethod
    def _resolve_device(name: str) -> str:
        if name == "auto":
            return "cuda" if torch.cuda.is_available() else "cpu"
        try:
            device = torch.device(name)
        except (RuntimeError, TypeError) as exc:
            raise ValueError(f"device must be auto, cpu or cuda[:N], got {name!r}") from exc
        if device.type not in ("cpu", "cuda"):
            raise ValueError(f"device must be auto, cpu or cuda[:N], got {name!r}")
        if device.type == "cuda" and not torch.cuda.is_available():
            raise ValueError(f"device {name!r} requested but CUDA is not available")
        return str(device)

    @classmethod
    def from_kwargs(cls, model: str, kwargs: dict[str, Any]) -> "Config":
        """Build from user keyword arguments, rejecting any name that is not a setting."""
        known = {f.name for f in fields(cls) if f.init}
        unknown = sorted(set(kwargs) - known)
        if unknown:
            raise TypeError(f"unknown engine setting(s): {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        return cls(model, **kwargs)

    def settings(self) -> dict[str, Any]:
        """The settings as keyword arguments that rebuild this config (a tensor-parallel worker does)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.init and f.name != "model"}

    def describe(self) -> dict[str, Any]:
        """The settings as plain values, for the trace header (the model by name, not by path; the factors
        file by name). A real run's header has no simulation settings, as before they existed."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.init} | {"model": self.model_name}
        if not self.simulated:
            return {k: v for k, v in out.items() if k not in _SIMULATION_SETTINGS}
        return out | {"sim_factors": self.sim_factors and Path(self.sim_factors).name}
