"""Execution layer (simulated): how long one engine step takes, predicted from the batch actually scheduled.

A roofline per step. The step does some floating-point work and moves some bytes; the device can do
``peak_flops`` of the one and ``memory_bandwidth`` of the other per second, each reached only in part (the
named ``Efficiency`` factors, ``sim/efficiency.py``). Whichever takes longer decides the step: it is *compute-bound* (a big
prefill: thousands of tokens through every weight) or *memory-bound* (a decode: every weight and every
cached K/V row read to produce one token per sequence).

What is counted, for a batch of sequences that each compute ``n`` new tokens after ``c`` cached ones:

- FLOPs: 2 per weight per new token in the linear layers (q, k, v, o, gate, up, down); attention of each new
  token over its context (``QK^T`` and ``PV``: 4 × heads × head_dim per context position, causal within the
  new tokens); the LM head on each sequence's last token only (the runner drops every other position first).
- bytes: every weight once per step (however many tokens share it: that is why batching pays), each
  sequence's K/V read once (``c + n`` rows) and its new rows written (``n``), the activations each layer reads
  and writes, the logits the sampler reads.

Then the parts a roofline leaves out:

- launching kernels: an eager step launches ``kernels_per_layer`` kernels per layer from Python; on a GPU
  they queue up ahead of the device, so the step takes at least as long as launching them (a small decode
  on a fast GPU is *launch-bound*: the lesson of CUDA graphs); a replayed CUDA graph is one launch. On a CPU
  the host runs every kernel itself, so launches add to the time, and the decode step is one call into
  native code (``engine/compiled_decode.py``, the CPU's counterpart of a graph): one launch, no padding.
  A CPU prefill still runs eagerly, so a lone small prefill costs several decode steps.
- tensor parallelism: each rank holds 1/tp of the weights, heads and KV; two all-reduces per layer (after
  attention's output projection and after the MLP) plus one for the embedding send the step's hidden states
  over the interconnect, and the LM head's vocabulary shards are gathered onto rank 0.
- the host: a fixed cost per step (schedule, build inputs, sample, postprocess) and a cost per sequence.
- FP8 weights (``quantization="fp8"``: vLLM's ``--quantization fp8``, W8A8): the linear layers' weights take one
  byte each and their matrix multiplies run at the device's FP8 peak (``Device.matmul_flops``), reaching their own
  share of it (``fp8_matmul``: vLLM's FP8 GEMMs are not its 16-bit ones), and each layer pays the kernels that
  quantize the linear layers' inputs (``fp8_layer_s``: small kernels, a fixed time, felt in a decode).
  Everything else stays 16-bit, as in vLLM's ``Fp8Config.get_quant_method``, which quantizes only
  ``LinearBase`` layers: the embedding and the LM head (vocabulary layers, not linear ones), the norms, the
  activations between layers, the all-reduces, and the KV cache (``kv_cache_dtype="auto"`` follows the
  activations), so attention runs at the 16-bit peak. The bytes those quantizing kernels move (each token's
  input read once more) are left out, next to the weights a decode reads and the FLOPs a prefill does.
- waking up: a step that starts after the engine sat idle waiting for an arrival finds its caches cold (and
  on a shared or power-saving machine, its core given away or slowed down): ``wake_s``, 0 unless fitted.
  On a CPU it can cost more than the prefill it delays; this is why a server at light load answers its
  first token more slowly than the same prefill run back to back.
- serving, outside the steps: a request sent to a server meets costs the engine never sees. The API server
  parses, tokenizes and hands over one request at a time: ``frontend_request_s`` per request and
  ``frontend_token_s`` per prompt token, so a burst of requests waits in line there; then a latency no request
  waits in line for (the client's send, the first token's way back as an SSE chunk): ``frontend_s``. All are 0
  unless fitted (published cases fit the server's work, the served calibration measures the latency). They
  are no step cost: the simulated engine's ``run_workload`` sends each request through that server
  (``workload/arrivals.py``'s ``ApiServer``) before it joins, and its TTFT and end-to-end latency count from
  its arrival, so they include it.

``StepCost.bound`` says what decided: ``"compute"``, ``"memory"`` or ``"launch"``.

Emits no events (the simulated runner reports the prediction).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, NamedTuple, Sequence

from nanovllm_teach.i18n import say
from nanovllm_teach.settings import BAD_QUANTIZATION, QUANTIZATIONS, SHARDED_SIZES, check_shards
from nanovllm_teach.sim.efficiency import Efficiency
from nanovllm_teach.sim.hardware import Device
from nanovllm_teach.sim.messages import (CONFIG_MISSES_INTS, CONFIG_NOT_AN_OBJECT, CONFIG_NOT_JSON, MIXTURE_OF_EXPERTS,
                                         NO_SUCH_MODEL, NOT_A_DENSE_DECODER)

DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}
# Bytes per linear-layer weight under each of the engine's quantizations (settings.QUANTIZATIONS; the per-tensor
# scales are a few floats per layer).
QUANTIZED_WEIGHT_BYTES = {"fp8": 1}
# The sampler works on float32 logits: one write, one read per vocabulary entry and sequence.
LOGIT_BYTES = 4 * 2
SHAPES_DIR = Path(__file__).resolve().parent / "shapes"


# The dense decoders whose config.json the shape is read from: the same block (RMSNorm, grouped-query
# attention with rotary positions, a gated SiLU MLP) in every one. Qwen3 adds RMSNorms on q and k; Qwen2 has
# biases on q, k and v. Sliding windows and rope scaling change no FLOP or byte counted here.
DENSE_DECODERS = ("qwen3", "qwen2", "llama", "mistral")
# Keys that only a mixture-of-experts config has.
_EXPERT_KEYS = ("num_experts", "num_local_experts", "n_routed_experts", "moe_intermediate_size", "num_experts_per_tok")
_REQUIRED = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "vocab_size",
             "max_position_embeddings")


@dataclass(frozen=True)
class ModelShape:
    """The numbers of a dense decoder's ``config.json`` that decide its cost and its memory."""

    name: str
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    tie_word_embeddings: bool
    max_position_embeddings: int
    eos_token_id: int
    qk_norm: bool = True  # Qwen3's RMSNorms on q and k
    qkv_bias: bool = False  # Qwen2's biases on q, k and v

    @classmethod
    def from_config(cls, config: Mapping[str, Any], name: str) -> "ModelShape":
        """From a Hugging Face ``config.json`` as a dict (or ``PretrainedConfig.to_dict()``) of one of
        ``DENSE_DECODERS``; anything else, a mixture of experts above all, raises ValueError saying why."""
        model_type = config.get("model_type")
        experts = [key for key in _EXPERT_KEYS if config.get(key)]
        if experts or "moe" in str(model_type):
            raise ValueError(say(MIXTURE_OF_EXPERTS, name=name, model_type=model_type,
                                 experts=", ".join(experts) or "moe", dense=", ".join(DENSE_DECODERS)))
        if model_type not in DENSE_DECODERS:
            raise ValueError(say(NOT_A_DENSE_DECODER, name=name, model_type=model_type,
                                 dense=", ".join(DENSE_DECODERS)))
        missing = [key for key in _REQUIRED if not isinstance(config.get(key), int) or config[key] < 1]
        if missing:
            raise ValueError(say(CONFIG_MISSES_INTS, name=name, missing=", ".join(missing)))
        hidden, heads = config["hidden_size"], config["num_attention_heads"]
        eos = config.get("eos_token_id")
        return cls(name=name, hidden_size=hidden, num_layers=config["num_hidden_layers"], num_heads=heads,
                   num_kv_heads=config.get("num_key_value_heads") or heads,
                   head_dim=config.get("head_dim") or hidden // heads,
                   intermediate_size=config["intermediate_size"], vocab_size=config["vocab_size"],
                   tie_word_embeddings=bool(config.get("tie_word_embeddings", False)),
                   max_position_embeddings=config["max_position_embeddings"],
                   eos_token_id=eos[0] if isinstance(eos, list) else (eos if eos is not None else 0),
                   qk_norm=model_type == "qwen3", qkv_bias=model_type == "qwen2")

    @property
    def linear_params_per_layer(self) -> int:
        h, d = self.hidden_size, self.head_dim
        attention = h * self.num_heads * d + 2 * h * self.num_kv_heads * d + self.num_heads * d * h  # q, k, v, o
        mlp = 3 * h * self.intermediate_size  # gate, up, down
        return attention + mlp

    @property
    def num_params(self) -> int:
        norms_per_layer = 2 * self.hidden_size + (2 * self.head_dim if self.qk_norm else 0)
        biases_per_layer = (self.num_heads + 2 * self.num_kv_heads) * self.head_dim if self.qkv_bias else 0
        embeddings = self.vocab_size * self.hidden_size * (1 if self.tie_word_embeddings else 2)
        return (self.num_layers * (self.linear_params_per_layer + norms_per_layer + biases_per_layer) + self.hidden_size
                + embeddings)

    @property
    def activation_elements_per_token_layer(self) -> int:
        """Elements one token's activations make each layer read and write (model-wide, before sharding)."""
        h, d, inter = self.hidden_size, self.head_dim, self.intermediate_size
        q, kv = self.num_heads * d, self.num_kv_heads * d
        matmuls = (h + q + 2 * kv) + (q + h) + (h + 2 * inter) + (inter + h)  # in + out of qkv, o, gate_up, down
        silu_and_mul = 2 * inter + inter
        norms = 2 * 4 * h  # fused add + RMSNorm: reads x and residual, writes both
        attention = 2 * q  # reads q, writes its output (K/V traffic is counted as KV)
        return matmuls + silu_and_mul + norms + attention

    def check_tensor_parallel(self, tp: int) -> None:
        check_shards(tp, dict(zip(SHARDED_SIZES, (self.num_heads, self.num_kv_heads, self.vocab_size,
                                                  self.intermediate_size))))

    def kv_bytes_per_token(self, dtype_bytes: int) -> int:
        return 2 * self.num_layers * self.num_kv_heads * self.head_dim * dtype_bytes


def shape_names() -> list[str]:
    return sorted(p.name for p in SHAPES_DIR.iterdir() if (p / "config.json").is_file())


def shape_dir(name_or_dir: str | Path) -> Path:
    """A shipped shape's folder (``qwen3-8b``) or any checkpoint folder with a ``config.json``."""
    path = Path(name_or_dir)
    if (path / "config.json").is_file():
        return path
    shipped = SHAPES_DIR / str(name_or_dir).lower()
    if (shipped / "config.json").is_file():
        return shipped
    raise ValueError(say(NO_SUCH_MODEL, name=str(name_or_dir), shapes=", ".join(shape_names())))


def load_shape(name_or_dir: str | Path) -> ModelShape:
    """A shipped shape or a folder's ``config.json``; a file that is not a JSON object raises ValueError."""
    folder = shape_dir(name_or_dir)
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise ValueError(say(CONFIG_NOT_JSON, path=folder / "config.json", why=error)) from None
    if not isinstance(config, dict):
        raise ValueError(say(CONFIG_NOT_AN_OBJECT, path=folder / "config.json"))
    return ModelShape.from_config(config, folder.name)


class StepCounts(NamedTuple):
    """What a step computes and moves on one rank: the roofline's inputs, independent of the factors."""

    linear_flops: float  # the linear layers and the LM head
    attention_flops: float
    bytes: float
    rows: int  # token rows through the linear layers (a graph's padding included)
    num_seqs: int
    fp8_flops: float = 0.0  # the part of ``linear_flops`` run in FP8 (the linear layers, with FP8 weights)


@dataclass(frozen=True)
class StepWork:
    """What one step did, as far as its cost goes (``StepCostModel.step``'s arguments, kept together)."""

    batch: list[tuple[int, int]]  # (num_new_tokens, num_cached_tokens) per sequence
    native: bool = False  # a CPU decode step run as one native call
    after_idle: bool = False  # the engine waited for an arrival before it


@dataclass(frozen=True)
class StepCost:
    """One step's prediction and what it is made of (seconds, FLOPs, bytes)."""

    total_s: float
    bound: str  # "compute", "memory" or "launch": what the device part of the step waited on
    compute_s: float
    memory_s: float
    launch_s: float
    comm_s: float
    host_s: float
    flops: float
    bytes: float

    def as_stats(self) -> dict[str, float | str]:
        return {"predicted_ms": round(self.total_s * 1e3, 4), "bound": self.bound,
                "compute_ms": round(self.compute_s * 1e3, 4), "memory_ms": round(self.memory_s * 1e3, 4),
                "launch_ms": round(self.launch_s * 1e3, 4), "comm_ms": round(self.comm_s * 1e3, 4),
                "host_ms": round(self.host_s * 1e3, 4), "flops": self.flops, "bytes": self.bytes}


class StepCostModel:
    """Predicts a step's time for one model on one device with ``tp`` ranks; ``quantization="fp8"``: with the
    linear layers' weights in FP8 (None: every weight in the device's dtype)."""

    def __init__(self, shape: ModelShape, device: Device, efficiency: Efficiency | None = None,
                 tensor_parallel_size: int = 1, quantization: str | None = None) -> None:
        if quantization is not None and quantization not in QUANTIZATIONS:
            raise ValueError(say(BAD_QUANTIZATION, choices=", ".join(QUANTIZATIONS), value=repr(quantization)))
        self.shape = shape
        self.device = device
        self.eff = efficiency or Efficiency.for_device(device.name)
        self.tp = tensor_parallel_size
        self.quantization = quantization
        self.matmul_flops = device.matmul_flops(quantization)  # refuses FP8 on a device without it
        self.dtype_bytes = DTYPE_BYTES[device.dtype]  # activations, KV cache, embedding, LM head
        self.linear_weight_bytes = QUANTIZED_WEIGHT_BYTES[quantization] if quantization else self.dtype_bytes
        s, tp, b = shape, tensor_parallel_size, self.dtype_bytes
        # Per rank: every weight is sharded tp ways (the vocabulary too, for the embedding and the LM head).
        self.linear_flops_per_token = 2 * s.num_layers * s.linear_params_per_layer / tp
        self.attention_flops_per_position = 4 * s.num_layers * s.num_heads * s.head_dim / tp
        self.lm_head_flops_per_seq = 2 * s.hidden_size * s.vocab_size / tp
        lm_head_params = s.vocab_size * s.hidden_size  # tied or not, the LM head reads a vocab x hidden matrix
        self.weight_bytes = (s.num_layers * s.linear_params_per_layer * self.linear_weight_bytes
                             + lm_head_params * b) / tp
        self.kv_bytes_per_token = s.kv_bytes_per_token(b) / tp
        self.activation_bytes_per_token = (s.num_layers * s.activation_elements_per_token_layer / tp
                                           + s.hidden_size) * b  # + the embedding row each token gathers
        self.num_kernels = s.num_layers * self.eff.kernels_per_layer

    def step(self, batch: Sequence[tuple[int, int]], graph_batch_size: int | None = None, *, native: bool = False,
             after_idle: bool = False) -> StepCost:
        """``batch``: ``(num_new_tokens, num_cached_tokens)`` per sequence. ``graph_batch_size``: the CUDA
        graph bucket a decode replays (the padding rows are computed too), or None for an eager step.
        ``native``: a CPU decode step run as one native call (priced as one launch, ``graph_launch_s``).
        ``after_idle``: the engine waited for an arrival before this step (it pays ``wake_s``)."""
        eff, dev = self.eff, self.device
        linear_flops, attention_flops, moved, rows, num_seqs, fp8_flops = self.counts(batch, graph_batch_size)
        compute_s = ((linear_flops - fp8_flops) / (dev.peak_flops * eff.matmul)
                     + fp8_flops / (self.matmul_flops * eff.fp8_matmul)
                     + attention_flops / (dev.peak_flops * eff.attention))
        memory_s = moved / (dev.memory_bandwidth * eff.memory)
        # FP8's quantizing kernels run between the GEMMs, on the device, whatever bounds the rest
        device_s = max(compute_s, memory_s) + (self.shape.num_layers * eff.fp8_layer_s if self.quantization else 0.0)
        bound = "compute" if compute_s >= memory_s else "memory"
        comm_s = self._comm_s(rows, num_seqs)
        if graph_batch_size is not None or native:
            launch_s = eff.graph_launch_s
            kernel_s = device_s + comm_s + launch_s
        else:
            launch_s = self.num_kernels * eff.kernel_launch_s
            if dev.kind == "gpu":
                kernel_s = max(device_s + comm_s, launch_s)  # launches run ahead of the device
                if launch_s > device_s + comm_s:
                    bound = "launch"
            else:
                kernel_s = device_s + comm_s + launch_s  # the host runs every kernel itself
        host_s = eff.step_overhead_s + eff.seq_overhead_s * num_seqs + (eff.wake_s if after_idle else 0.0)
        return StepCost(total_s=kernel_s + host_s, bound=bound, compute_s=compute_s, memory_s=memory_s,
                        launch_s=launch_s, comm_s=comm_s, host_s=host_s,
                        flops=linear_flops + attention_flops, bytes=moved)

    def counts(self, batch: Sequence[tuple[int, int]], graph_batch_size: int | None = None) -> StepCounts:
        """The step's work on one rank, whatever the efficiency factors (``step``'s arguments)."""
        s = self.shape
        num_seqs = len(batch)
        num_new = 0
        attended = 0  # (query, key) pairs: each new token attends to the cache and to the new tokens before it
        context = 0
        for n, c in batch:
            num_new += n
            attended += n * c + n * (n + 1) // 2
            context += c + n
        rows = graph_batch_size or num_new  # a graph computes its whole bucket, padding included
        layers_flops = self.linear_flops_per_token * rows
        linear_flops = layers_flops + self.lm_head_flops_per_seq * num_seqs
        attention_flops = self.attention_flops_per_position * attended
        moved = (self.weight_bytes + self.kv_bytes_per_token * (context + num_new)
                 + self.activation_bytes_per_token * rows + LOGIT_BYTES * s.vocab_size * num_seqs)
        return StepCounts(linear_flops, attention_flops, moved, rows, num_seqs,
                          layers_flops if self.quantization else 0.0)

    def _comm_s(self, rows: int, num_seqs: int) -> float:
        """Ring all-reduces of the hidden states (2 per layer + the embedding's), then the LM head's
        vocabulary shards gathered onto rank 0; nothing on one rank."""
        tp = self.tp
        if tp == 1:
            return 0.0
        s, eff, dev = self.shape, self.eff, self.device
        link = dev.interconnect_bandwidth * eff.interconnect
        message = rows * s.hidden_size * self.dtype_bytes
        allreduce_s = eff.allreduce_latency_s + 2 * (tp - 1) / tp * message / link
        gather_s = eff.allreduce_latency_s + (tp - 1) / tp * num_seqs * s.vocab_size * self.dtype_bytes / link
        return (2 * s.num_layers + 1) * allreduce_s + gather_s

    def activation_peak_bytes(self, num_tokens: int, num_seqs: int) -> int:
        """The transient memory of the largest prefill on one rank: what is alive at once inside a layer
        (hidden state and residual, q/k/v, the MLP's gate-up output and its activation) for every token,
        plus float32 logits and probabilities for every sequence."""
        s, tp = self.shape, self.tp
        per_token = (4 * s.hidden_size + (s.num_heads + 2 * s.num_kv_heads) * s.head_dim / tp
                     + 3 * s.intermediate_size / tp)
        return int(num_tokens * per_token * self.dtype_bytes + num_seqs * s.vocab_size * 4 * 2)
