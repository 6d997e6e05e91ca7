"""Execution layer: load Hugging Face safetensors weights into our packed, shardable parameters.

Only safetensors are read (never pickle, never remote code). Each checkpoint tensor is routed to the
parameter that owns it — through the model's ``packed_modules_mapping`` when several Hugging Face tensors
share one of our parameters — and that parameter's ``weight_loader`` copies the slice this rank owns.

``check_checkpoint`` runs first, from the engine, before anything heavy: it reads only the safetensors
headers, so a truncated or corrupt file and a ``config.json`` that disagrees with the weights are named
in seconds, not after the model has been built and half loaded.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from torch import nn
from transformers import PretrainedConfig

from nanovllm_teach.i18n import Text, say
from nanovllm_teach.models.qwen3 import checkpoint_shapes

# A checkpoint folder is the user's, and may be damaged: each refusal names the file and the tensor.
NO_SAFETENSORS = Text(en="no *.safetensors files in {path}", zh="{path} 里没有 *.safetensors 文件")
UNREADABLE_FILE = Text(en="{file} is not a readable safetensors file (truncated or corrupt?): {why}",
                       zh="{file} 不是可读的 safetensors 文件（被截断或已损坏？）：{why}")
SHAPE_DISAGREES = Text(en="{file}: tensor {key!r} has shape {shape}, but {config} implies {expected}",
                       zh="{file}：张量 {key!r} 的形状是 {shape}，但 {config} 给出的形状是 {expected}")
UNKNOWN_TENSOR = Text(en="checkpoint tensor {key!r} in {file} has no parameter in the model",
                      zh="{file} 中的 checkpoint 张量 {key!r} 在模型里没有对应的参数")
MISSING_WEIGHTS = Text(en="checkpoint in {path} lacks weights for: {names}", zh="{path} 中的 checkpoint 缺少这些权重：{names}")


@dataclass(frozen=True)
class LoadReport:
    num_files: int
    num_keys: int
    num_params: int
    dtype: str


def _default_weight_loader(param: nn.Parameter, loaded_weight: torch.Tensor) -> None:
    param.data.copy_(loaded_weight)


def _safetensors_files(path: str | Path) -> list[Path]:
    files = sorted(Path(path).glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(say(NO_SAFETENSORS, path=path))
    return files


def check_checkpoint(path: str | Path, hf_config: PretrainedConfig) -> None:
    """Raise ``ValueError`` naming the file for a safetensors file that cannot be read (truncated,
    corrupt), and naming the tensor and both shapes for a weight whose shape is not the one ``config.json``
    implies. Reads headers only; the expected shapes are the model's (``checkpoint_shapes``), so nothing
    is built and transformers' modelling code is not even imported."""
    expected = checkpoint_shapes(hf_config)
    for file in _safetensors_files(path):
        try:
            with safe_open(str(file), framework="pt") as f:
                shapes = {key: tuple(f.get_slice(key).get_shape()) for key in f.keys()}
        except SafetensorError as exc:
            raise ValueError(say(UNREADABLE_FILE, file=file, why=exc)) from exc
        for key, shape in shapes.items():
            if key in expected and shape != expected[key]:
                raise ValueError(say(SHAPE_DISAGREES, file=file.name, key=key, shape=list(shape),
                                     config=Path(path) / "config.json", expected=list(expected[key])))


def load_model(model: nn.Module, path: str | Path) -> LoadReport:
    """Fill every parameter of ``model`` from the ``*.safetensors`` files in ``path``.

    Raises ``FileNotFoundError`` when there are none and ``ValueError`` naming any parameter the checkpoint
    did not provide or any checkpoint tensor the model has no place for.
    """
    files = _safetensors_files(path)
    params = dict(model.named_parameters())
    packed = getattr(model, "packed_modules_mapping", {})
    filled: set[str] = set()
    num_keys = 0
    for file in files:
        with safe_open(str(file), framework="pt") as f:
            for key in f.keys():
                num_keys += 1
                target, shard_id = key, None
                for hf_name, (our_name, shard) in packed.items():
                    if f".{hf_name}." in key:
                        target, shard_id = key.replace(hf_name, our_name), shard
                        break
                if target not in params:
                    if key == "lm_head.weight" and "lm_head.weight" not in params:
                        continue  # tied embeddings: the LM head *is* the embedding matrix
                    raise ValueError(say(UNKNOWN_TENSOR, key=key, file=file.name))
                param = params[target]
                loader = getattr(param, "weight_loader", _default_weight_loader)
                tensor = f.get_tensor(key).to(param.dtype)
                if shard_id is None:
                    loader(param, tensor)
                else:
                    loader(param, tensor, shard_id)
                filled.add(target)
    missing = sorted(set(params) - filled)
    if missing:
        names = ", ".join(missing[:8]) + (" ..." if len(missing) > 8 else "")
        raise ValueError(say(MISSING_WEIGHTS, path=path, names=names))
    dtypes = {str(p.dtype).removeprefix("torch.") for p in params.values()}
    return LoadReport(num_files=len(files), num_keys=num_keys,
                      num_params=sum(p.numel() for p in params.values()), dtype=",".join(sorted(dtypes)))
