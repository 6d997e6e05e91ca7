"""Orchestration: the engine's configuration, resolved once at start-up.

``Config.from_kwargs(model, settings)`` checks the settings (``settings.py``, no torch needed), reads the
model's Hugging Face ``config.json``, and makes every choice the settings left open, for this machine and
this model: the device (``"auto"``: a GPU if there is one), the dtype (float32 on a CPU, the checkpoint's
on a GPU), the attention and linear backends, the per-step token budget, ``max_model_len`` (clamped to the model's).
The result is frozen: the trace header, ``ENGINE_INIT`` and every layer read the same values, and
``requested`` keeps what was asked. The KV cache's size is known only once the model runner has measured
the memory left; the engine then takes ``with_kv_cache(num_blocks)``, the same config with that number.

A bad value raises ``ValueError`` (or ``TypeError`` for a value of the wrong type) naming it before
anything heavy is built. The checkpoint folder must hold a ``config.json`` and a tokenizer; its weights'
shapes are checked against ``config.json`` by ``models/loader.py``'s ``check_checkpoint``.

``runner="simulated"`` runs the same engine on a device that is not there: the simulator resolves its
own config (``sim/engine.py``) through ``Config.build``, the model only a shape, ``device`` the name of the
simulated device.

Traces name the model by its folder name and the SHA-256 of its ``config.json`` (``model_name``,
``config_sha256``), never by a path on this machine.
"""

from __future__ import annotations

import hashlib
import os
import platform
from dataclasses import dataclass, field, fields, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from nanovllm_teach.utils.threads import prefer_passive_wait

# libgomp reads its wait policy only when torch first loads it. Every path that builds an engine imports this
# module before torch (llm.py and serve/build.py import it ahead of transformers, which loads torch): the place
# to ask for passive waiting, so that importing the package alone changes nothing in the environment.
prefer_passive_wait()
# The oneDNN linear layers build one primitive per weight shape and row count, and two caches keep them, each
# of 1024 by default: oneDNN's own and PyTorch's (ideep's, LRU_CACHE_CAPACITY), whose entries hold theirs.
# A server's batches keep bringing new row counts: its RSS grew by ~400 MB per 800 short requests, until the
# caches were full (1.5 GB and more). Both at 16 (measured: +130 MB over the same 800, as with F.linear, which
# caches nothing). Read when the first primitive is built; a value already in the environment wins.
for _cache in ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "LRU_CACHE_CAPACITY"):
    os.environ.setdefault(_cache, "16")

import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import AutoConfig, PretrainedConfig  # noqa: E402

from nanovllm_teach.i18n import Text, say
from nanovllm_teach.layers.attention_cpp import cpp_unusable_reason
from nanovllm_teach.layers.attention_flash import flash_attn_unusable_reason
from nanovllm_teach.layers.attention_triton import triton_unusable_reason
from nanovllm_teach.layers.onednn_linear import auto_linear_backend, onednn_unusable_reason
from nanovllm_teach.models.qwen3 import head_dim_of
from nanovllm_teach.settings import SHARDED_SIZES, SIMULATION_SETTINGS, Settings, check_shards
from nanovllm_teach.trace.schema import SCHEMA_NAME, SCHEMA_VERSION
from nanovllm_teach.utils.memory import auto_cpu_kv_cap, kv_block_bytes, read_memory

_SIMULATION_ONLY = ("runner", *SIMULATION_SETTINGS)  # what a real run's trace header leaves out
# A tokenizer Hugging Face can load without the Hub: a fast tokenizer, a BPE vocabulary, or SentencePiece.
TOKENIZER_FILES = (("tokenizer.json",), ("vocab.json", "merges.txt"), ("tokenizer.model",))

NO_TOKENIZER_FILES = Text(en="model folder {path} has no tokenizer files: expected {expected}",
                          zh="模型文件夹 {path} 里没有 tokenizer 文件：应当有 {expected}")
BAD_DEVICE = Text(en="device must be auto, cpu or cuda[:N], got {name!r}",
                  zh="device 必须是 auto、cpu 或 cuda[:N]，收到的是 {name!r}")
NO_CUDA = Text(en="device {name!r} requested but CUDA is not available",
               zh="要求的 device 是 {name!r}，但这台机器上没有可用的 CUDA")
ATTENTION_BACKEND_UNUSABLE = Text(en="attention_backend={name!r} cannot run here: {problem}",
                                  zh="attention_backend={name!r} 在这里无法运行：{problem}")
ONEDNN_UNUSABLE = Text(en="linear_backend='onednn' cannot run here: {problem}",
                       zh="linear_backend='onednn' 在这里无法运行：{problem}")
NO_CHECKPOINT_FOLDER = Text(en="model must be a local checkpoint directory with a config.json, got {asked!r}",
                            zh="model 必须是一个含 config.json 的本地 checkpoint 目录，收到的是 {asked!r}")
NOT_QWEN3 = Text(en="the engine runs only Qwen3 checkpoints, {path} is {model_type!r} (the simulator, "
                    "runner='simulated' or nanovllm-teach simulate, takes any dense decoder's config.json)",
                 zh="引擎只能运行 Qwen3 的 checkpoint，{path} 是 {model_type!r}（模拟器，即 runner='simulated' 或 "
                    "nanovllm-teach simulate，可以读取任何稠密解码器模型的 config.json）")
TOO_FEW_GPUS = Text(en="tensor_parallel_size={tp} needs one GPU per rank, this machine has {available}",
                    zh="tensor_parallel_size={tp} 要求每个 rank 各占一块 GPU，这台机器只有 {available} 块")
TOO_FEW_CORES = Text(en="tensor_parallel_size={tp} needs one CPU core per rank, this machine has {available}",
                     zh="tensor_parallel_size={tp} 要求每个 rank 各占一个 CPU 核，这台机器只有 {available} 个")


@dataclass(frozen=True)
class Config(Settings):
    """The settings as this engine runs them. Build it with ``from_kwargs`` (or ``resolve``)."""

    model: str = ""  # the checkpoint folder (simulated: the model shape's folder)
    hf_config: PretrainedConfig | None = field(default=None, repr=False)
    config_sha256: str = field(default="", repr=False)
    requested: Settings | None = field(default=None, repr=False)  # what was asked, before resolution
    cpu_kv_cap_reason: str = field(default="", repr=False)  # where cpu_kvcache_gib came from (KV_BUDGET_ESTIMATE)

    @classmethod
    def from_kwargs(cls, model: str, kwargs: dict[str, Any]) -> Config:
        """From user keyword arguments, rejecting any name that is not a setting."""
        return cls.resolve(model, Settings.from_kwargs(kwargs))

    @classmethod
    def resolve(cls, model: str, asked: Settings) -> Config:
        """The real engine's config for the checkpoint folder ``model`` on this machine."""
        path = Path(model)
        hf_config = read_model_config(path, model)
        if not any(all((path / name).is_file() for name in names) for names in TOKENIZER_FILES):
            expected = ", or ".join(" and ".join(names) for names in TOKENIZER_FILES)
            raise ValueError(say(NO_TOKENIZER_FILES, path=path, expected=expected))
        check_config_shards(asked.tensor_parallel_size, hf_config)
        device = _resolve_device(asked.device)
        _check_ranks_fit(asked.tensor_parallel_size, device)
        dtype = resolve_dtype(asked.dtype, torch.device(device), hf_config)
        on_gpu = device.startswith("cuda")
        return cls.build(asked, path, hf_config, device=device, dtype=dtype, on_gpu=on_gpu,
                         available_memory=None if on_gpu else read_memory(torch.device("cpu")).free,
                         attention_backend=resolve_attention_backend(asked.attention_backend, torch.device(device),
                                                                     asked.kvcache_block_size,
                                                                     getattr(torch, dtype), hf_config),
                         linear_backend=resolve_linear_backend(asked.linear_backend, torch.device(device),
                                                               getattr(torch, dtype)))

    @classmethod
    def build(cls, asked: Settings, path: Path, hf_config: PretrainedConfig, *, device: str, dtype: str,
              on_gpu: bool, attention_backend: str, linear_backend: str,
              available_memory: int | None = None) -> Config:
        """The config once the machine-dependent choices are made (by ``resolve``, or by the simulator).
        ``available_memory``: the bytes this machine has available now (None: unknown, or a simulated device),
        which the CPU KV cap is sized from when ``cpu_kvcache_gib`` is not set."""
        max_model_len = min(asked.max_model_len, hf_config.max_position_embeddings)
        cap_gib, cap_reason = asked.cpu_kvcache_gib, "cpu_kvcache_gib" if asked.cpu_kvcache_gib else ""
        if cap_gib is None and not on_gpu:
            tp = asked.tensor_parallel_size
            block_bytes = kv_block_bytes(hf_config.num_hidden_layers, asked.kvcache_block_size,
                                         hf_config.num_key_value_heads // tp, head_dim_of(hf_config),
                                         torch.tensor([], dtype=getattr(torch, dtype)).element_size())
            max_blocks = asked.max_num_seqs * -(-max_model_len // asked.kvcache_block_size)
            cap_bytes, cap_reason = auto_cpu_kv_cap(
                block_bytes, max_blocks, None if available_memory is None else available_memory // tp)
            cap_gib = cap_bytes / 2**30
        return cls(**{**asked.as_dict(), "device": device, "dtype": dtype, "attention_backend": attention_backend,
                      "linear_backend": linear_backend,
                      "max_num_batched_tokens": asked.max_num_batched_tokens or (16384 if on_gpu else 2048),
                      "max_model_len": max_model_len, "cpu_kvcache_gib": cap_gib},
                   model=str(path), hf_config=hf_config,
                   config_sha256=hashlib.sha256((path / "config.json").read_bytes()).hexdigest(),
                   requested=asked, cpu_kv_cap_reason=cap_reason)

    def with_kv_cache(self, num_blocks: int) -> Config:
        """This config once the KV cache is sized: ``num_kvcache_blocks`` is the number it has."""
        return replace(self, num_kvcache_blocks=num_blocks)

    @property
    def model_name(self) -> str:
        """The checkpoint folder's name: how traces and events name the model."""
        return Path(self.model).name

    def settings(self) -> dict[str, Any]:
        """The resolved settings as keyword arguments that rebuild this config (a tensor-parallel worker
        does: it resolves nothing differently from rank 0)."""
        return {f.name: getattr(self, f.name) for f in fields(Settings)}

    def describe(self) -> dict[str, Any]:
        """The settings as the engine runs them, for the trace header (the model by name, not by path; the
        factors file by name). A real run's header has no simulation settings."""
        out = self.settings() | {"model": self.model_name}
        if not self.simulated:
            return {k: v for k, v in out.items() if k not in _SIMULATION_ONLY}
        return out | {"sim_factors": self.sim_factors and Path(self.sim_factors).name}

    def trace_header(self, metadata: dict[str, Any], simulated: dict[str, Any] | None = None) -> dict[str, Any]:
        """The first line of a trace: what the run was (``simulated``: the simulated device, if any)."""
        hf = self.hf_config
        return {
            "schema": SCHEMA_NAME, "version": SCHEMA_VERSION,
            "recorded_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "config": self.describe(), "requested": self.resolved_from(),
            "model": {"name": self.model_name, "config_sha256": self.config_sha256, "model_type": hf.model_type,
                      "vocab_size": hf.vocab_size, "hidden_size": hf.hidden_size,
                      "num_hidden_layers": hf.num_hidden_layers, "num_attention_heads": hf.num_attention_heads,
                      "num_key_value_heads": hf.num_key_value_heads, "head_dim": getattr(hf, "head_dim", None)},
            "device": self.device, **({"simulated": simulated} if simulated is not None else {}),
            "versions": {"python": platform.python_version(), "torch": torch.__version__,
                         "transformers": transformers.__version__}, **metadata}

    def resolved_from(self) -> dict[str, Any]:
        """The settings whose value was chosen here (``"auto"``, None, a length over the model's), as asked."""
        asked = self.requested.as_dict() if self.requested is not None else {}
        return {name: value for name, value in asked.items()
                if name not in _SIMULATION_ONLY and value != getattr(self, name)}


def _resolve_device(name: str) -> str:
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(say(BAD_DEVICE, name=name)) from exc
    if device.type not in ("cpu", "cuda"):
        raise ValueError(say(BAD_DEVICE, name=name))
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(say(NO_CUDA, name=name))
    return str(device)


def resolve_dtype(name: str, device: torch.device, hf_config: PretrainedConfig) -> str:
    """``auto``: float32 on CPU (exact parity, and half precision is slow there), the checkpoint's dtype on GPU."""
    if name != "auto":
        return name
    if device.type == "cpu":
        return "float32"
    stored = getattr(hf_config, "dtype", None) or getattr(hf_config, "torch_dtype", None) or "bfloat16"
    stored = str(stored).removeprefix("torch.")
    return stored if stored in ("float32", "float16", "bfloat16") else "bfloat16"


def resolve_attention_backend(name: str, device: torch.device, block_size: int = 256,
                              dtype: torch.dtype = torch.bfloat16,
                              hf_config: PretrainedConfig | None = None) -> str:
    """``auto``: on a GPU, flash_attn when it is installed and fits (block size, dtype), else triton when it
    is installed, else torch; on a CPU, cpp when its kernel builds and the dtype is float32, else torch. An
    explicit choice that cannot run here raises ValueError (triton on a CPU runs only under the Triton
    interpreter, ``TRITON_INTERPRET=1``). ``hf_config``, when given, is the model, whose head shapes the cpp
    kernel must fit."""
    heads = {} if hf_config is None else dict(
        # All the heads: a tensor-parallel rank holds fewer, so this is the strictest test.
        head_dim=head_dim_of(hf_config), heads=hf_config.num_attention_heads)
    if name == "auto":
        if device.type != "cuda":
            return "cpp" if cpp_unusable_reason(device, dtype, **heads) is None else "torch"
        if flash_attn_unusable_reason(device, block_size, dtype) is None:
            return "flash_attn"
        return "triton" if triton_unusable_reason(device) is None else "torch"
    if name == "flash_attn":
        problem = flash_attn_unusable_reason(device, block_size, dtype)
    elif name == "triton":
        problem = triton_unusable_reason(device)
    elif name == "cpp":
        problem = cpp_unusable_reason(device, dtype, **heads)
    else:
        return name  # torch (Settings has rejected every other name)
    if problem is not None:
        raise ValueError(say(ATTENTION_BACKEND_UNUSABLE, name=name, problem=problem))
    return name


def resolve_linear_backend(name: str, device: torch.device, dtype: torch.dtype) -> str:
    """``auto``: oneDNN on an x86-64 CPU in float32, where it is the faster library, else torch. An explicit
    ``onednn`` that cannot run here raises ValueError."""
    if name == "auto":
        return auto_linear_backend(device, dtype)
    if name == "onednn" and (problem := onednn_unusable_reason(device, dtype)) is not None:
        raise ValueError(say(ONEDNN_UNUSABLE, problem=problem))
    return name


def read_model_config(path: Path, asked: str) -> PretrainedConfig:
    """The Hugging Face ``config.json`` of the folder ``path`` (``asked``: as the user named it)."""
    if not path.is_dir() or not (path / "config.json").is_file():
        raise ValueError(say(NO_CHECKPOINT_FOLDER, asked=asked))
    hf_config = AutoConfig.from_pretrained(str(path))
    if hf_config.model_type != "qwen3":
        raise ValueError(say(NOT_QWEN3, path=path, model_type=hf_config.model_type))
    return hf_config


def check_config_shards(tp: int, hf_config: PretrainedConfig) -> None:
    check_shards(tp, {name: getattr(hf_config, name) for name in SHARDED_SIZES})


def _check_ranks_fit(tp: int, device: str) -> None:
    """Before any worker is spawned: every rank needs a device of its own."""
    if device.startswith("cuda"):
        available, refusal = torch.cuda.device_count(), TOO_FEW_GPUS
    else:
        available, refusal = os.cpu_count() or 1, TOO_FEW_CORES
    if tp > available:
        raise ValueError(say(refusal, tp=tp, available=available))
