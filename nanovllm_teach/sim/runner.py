"""Execution layer (simulated): ``SimulatedRunner`` stands where ``ModelRunner`` stands and computes no tensors.

The engine asks its model runner for very little: ``num_kvcache_blocks`` (to build the block manager),
``attention_backend`` and ``device`` (to report them), and ``run(batch)``, one token id per sequence of
the scheduled batch. This runner answers all of it from a model's shape (``sim/cost_model.py``) and a device
(``sim/hardware.py``), so the real ``Scheduler`` and ``BlockManager`` make their real decisions about a
model and a GPU that are not there:

- start-up sizes the KV cache with the real formula (``utils/memory.py``) from a simulated memory reading:
  the device's memory, the runtime's own share, the weights, and the warm-up prefill's activation peak;
  it emits the same ``WARMUP`` and ``KV_BUDGET_ESTIMATE`` as the real runner;
- ``run`` predicts the step's time, advances the simulated ``clock`` by it and keeps the prediction in
  ``last_cost`` (and what it was made from in ``last_work``: each sequence's new and cached tokens, whether
  the step ran as one native call and whether the engine had been idle before it); the engine's RUN_MODEL
  and STEP_DONE carry it (the report's ``predicted`` cost, the output's ``step_stats``); decode steps replay a CUDA graph under the same rule as on a real GPU
  (``engine/cuda_graphs.py``), and on a CPU run as the native decode step where the real engine's would
  (``engine/compiled_decode.py``: one rank, no attention biases, ``enforce_eager`` off);
- tokens are placeholders: a sequence gets EOS once it reaches the length the workload gave it
  (``answers``, which the arrival loop tells), another id otherwise (so without a target it runs to
  ``max_tokens``). Prompt ids are real, so prefix caching hits exactly as it would.

Like the model runner, a step reports what it did (``RunReport``) while the engine records; it emits only its
start-up events: WARMUP, KV_BUDGET_ESTIMATE.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from msgspec import UNSET

from nanovllm_teach.engine.cuda_graphs import choose_graph_batch_size, graph_batch_sizes
from nanovllm_teach.engine.batch import ScheduledBatch, ScheduledSeq, warmup_batch
from nanovllm_teach.engine.runner import ForwardPass, RunOutput, RunReport
from nanovllm_teach.i18n import say
from nanovllm_teach.sim.budget import GPU_RUNTIME_BYTES, check_kv_blocks, weight_bytes
from nanovllm_teach.sim.cost_model import ModelShape, StepCost, StepCostModel, StepWork
from nanovllm_teach.sim.efficiency import Efficiency
from nanovllm_teach.sim.hardware import Device, attention_backend_on
from nanovllm_teach.sim.messages import NO_BUDGET_FOR_KV_CACHE, SEQUENCE_TOO_SHORT
from nanovllm_teach.trace.events import KvBudgetEstimate, Warmup
from nanovllm_teach.trace.recorder import NullRecorder, Recorder
from nanovllm_teach.utils.memory import MemoryReading, kv_block_bytes, size_kv_cache

class SimClock:
    """Simulated seconds since the engine started (the engine's ``Clock``); only ``SimulatedRunner.run`` and
    idle waits move it. ``idle``: the last thing that moved it was a wait for an arrival."""

    def __init__(self) -> None:
        self.t_s = 0.0
        self.idle = False

    def now_s(self) -> float:
        return self.t_s

    def now_ns(self) -> int:
        return round(self.t_s * 1e9)

    def advance(self, seconds: float) -> None:
        assert seconds >= 0, seconds
        self.t_s += seconds
        self.idle = False

    def wait_until(self, t_s: float) -> None:
        """An idle engine waits for the next arrival (time never runs backwards)."""
        if t_s > self.t_s:
            self.t_s, self.idle = t_s, True


class AnswerLengths:
    """How long each sequence's answer is to be: the workload says, and a simulated model cannot know."""

    def __init__(self) -> None:
        self._lengths: dict[int, int] = {}

    def expect(self, seq_id: int, num_tokens: int) -> None:
        """The token that makes ``seq_id`` ``num_tokens`` long is EOS."""
        if isinstance(num_tokens, bool) or not isinstance(num_tokens, int) or num_tokens < 2:
            raise ValueError(say(SEQUENCE_TOO_SHORT, value=num_tokens))
        self._lengths[seq_id] = num_tokens

    def forget(self, seq_ids: Iterable[int]) -> None:
        """Drop the lengths of sequences that are done (kept until then: a step that is rolled back and run
        again must answer the same)."""
        for seq_id in seq_ids:
            self._lengths.pop(seq_id, None)

    def get(self, seq_id: int) -> int | None:
        return self._lengths.get(seq_id)


class SimulatedRunner:
    def __init__(self, shape: ModelShape, device: Device, *, block_size: int = 256,
                 max_num_batched_tokens: int | None = None, max_num_seqs: int = 512, max_model_len: int = 4096,
                 gpu_memory_utilization: float = 0.9, cpu_kvcache_gib: float = 0.25,
                 num_kvcache_blocks: int | None = None, tensor_parallel_size: int = 1, enforce_eager: bool = False,
                 efficiency: Efficiency | None = None, recorder: Recorder | None = None,
                 clock: SimClock | None = None, answers: AnswerLengths | None = None,
                 quantization: str | None = None) -> None:
        """The engine settings that matter to execution, with ``Config``'s names and defaults. ``clock``: the
        simulated clock to advance (an engine that stamps its events with it passes its own); ``answers``:
        the lengths a workload gives its answers."""
        shape.check_tensor_parallel(tensor_parallel_size)
        self.shape = shape
        self.hardware = device
        self.rec = recorder or NullRecorder()
        self.block_size = block_size
        self.max_num_seqs = max_num_seqs
        self.max_model_len = min(max_model_len, shape.max_position_embeddings)
        self.max_num_batched_tokens = max_num_batched_tokens or (16384 if device.kind == "gpu" else 2048)
        self.cost_model = StepCostModel(shape, device, efficiency, tensor_parallel_size, quantization)
        self.clock = clock or SimClock()
        self.last_cost: StepCost | None = None
        self.last_work = StepWork([])
        # What the engine reports: the names a real engine on that device would pick with "auto".
        self.device = device.name
        self.dtype = device.dtype
        self.attention_backend = attention_backend_on(device.kind)
        self.enforce_eager = enforce_eager
        self.graph_sizes = graph_batch_sizes(max_num_seqs) if device.kind == "gpu" and not enforce_eager else []
        # The rule of engine/compiled_decode.py's unusable_reason (a CPU engine's attention backend is "cpp").
        self.native_decode = (device.kind == "cpu" and tensor_parallel_size == 1 and not enforce_eager
                              and not shape.qkv_bias)
        self.eos_token_id = shape.eos_token_id
        self.placeholder_token_id = 1 if shape.eos_token_id == 0 else 0
        self.answers = answers or AnswerLengths()
        peak = self._warmup()
        self.num_kvcache_blocks = self._size_kv_cache(peak, gpu_memory_utilization, cpu_kvcache_gib,
                                                      num_kvcache_blocks)

    # ---- start-up -------------------------------------------------------------------------------

    def _warmup(self) -> int:
        """The real runner's warm-up (the largest prefill step the scheduler can form), predicted: its time and
        the activation peak it would show. Returns that peak in bytes."""
        num_seqs, seq_len = warmup_batch(self.max_model_len, self.max_num_batched_tokens, self.max_num_seqs)
        cost = self.cost_model.step([(seq_len, 0)] * num_seqs)
        peak = self.cost_model.activation_peak_bytes(num_seqs * seq_len, num_seqs)
        if self.rec.enabled:
            self.rec.record("init", "expose_peak_memory", Warmup(
                num_seqs=num_seqs, seq_len=seq_len, sample_rows=UNSET, peak_bytes=self.weight_bytes + peak,
                peak_source="simulated: weights + activation estimate", seconds=round(cost.total_s, 4)))
        return peak

    @property
    def weight_bytes(self) -> int:
        """One rank's weights in memory (tied embeddings stored once)."""
        return weight_bytes(self.cost_model)

    def _size_kv_cache(self, activation_peak: int, utilization: float, cpu_kvcache_gib: float,
                       explicit_blocks: int | None) -> int:
        """The real runner's sizing on a simulated reading: ``used`` is the runtime and the weights,
        ``peak - current`` the warm-up's activations."""
        dev, shape, tp = self.hardware, self.shape, self.cost_model.tp
        runtime = GPU_RUNTIME_BYTES if dev.kind == "gpu" else 0
        used = runtime + self.weight_bytes
        reading = MemoryReading(dev.name, dev.memory_bytes, dev.memory_bytes - used, used,
                                peak=self.weight_bytes + activation_peak, current=self.weight_bytes)
        num_kv_heads = shape.num_kv_heads // tp
        dtype_bytes = self.cost_model.dtype_bytes
        block_bytes = kv_block_bytes(shape.num_layers, self.block_size, num_kv_heads, shape.head_dim, dtype_bytes)
        if explicit_blocks is not None:
            check_kv_blocks(shape, dev, tp, self.block_size, explicit_blocks)
        cap = int(cpu_kvcache_gib * 2**30) if dev.kind == "cpu" else None
        sizing = size_kv_cache(reading, utilization, block_bytes, cap, explicit_blocks)
        if sizing.num_blocks < 1:
            raise ValueError(say(NO_BUDGET_FOR_KV_CACHE, model=shape.name, device=dev.name, budget=sizing.budget,
                                 block_bytes=block_bytes))
        if self.rec.enabled:
            self.rec.record("init", sizing.reason, KvBudgetEstimate(
                **sizing.stats(sizing.num_blocks), block_size=self.block_size, num_layers=shape.num_layers,
                num_kv_heads=num_kv_heads, head_dim=shape.head_dim, dtype_bytes=dtype_bytes,
                vocab_size=shape.vocab_size))
        return sizing.num_blocks

    # ---- one step -------------------------------------------------------------------------------

    def _next_token(self, seq: ScheduledSeq) -> int:
        if seq.is_prompt_chunk:
            return self.placeholder_token_id  # the scheduler drops its token
        target = self.answers.get(seq.seq_id)
        if target is not None and seq.num_tokens + 1 >= target:
            return self.eos_token_id
        return self.placeholder_token_id

    def run(self, batch: ScheduledBatch) -> RunOutput:
        """Predict the step, let the simulated time pass, and sample placeholder tokens."""
        seqs, is_prefill = batch.seqs, batch.is_prefill
        work = StepWork([(len(seq.token_ids), seq.num_cached_tokens) for seq in seqs],
                        native=self.native_decode and not is_prefill, after_idle=self.clock.idle)
        graph_bs = choose_graph_batch_size(is_prefill, len(seqs), self.graph_sizes)
        cost = self.cost_model.step(work.batch, graph_bs, native=work.native, after_idle=work.after_idle)
        self.clock.advance(cost.total_s)
        self.last_cost, self.last_work = cost, work
        token_ids = [self._next_token(seq) for seq in seqs]
        report = None
        if self.rec.enabled:
            forward = (ForwardPass("graph", len(seqs), graph_batch_size=graph_bs, predicted=cost.as_stats())
                       if graph_bs is not None else
                       ForwardPass("compiled" if work.native else "eager", len(seqs),
                                   eager_reason=self._eager_reason(is_prefill), predicted=cost.as_stats()))
            report = RunReport({}, forward, None)
        return RunOutput(token_ids, None, report, self.step_stats())

    def step_stats(self) -> dict[str, Any]:
        """The last step's prediction, for STEP_DONE."""
        cost = self.last_cost
        return {} if cost is None else {"predicted_ms": round(cost.total_s * 1e3, 3), "bound": cost.bound}

    def close(self) -> None:
        """Nothing to release: a simulated device holds nothing."""

    def _eager_reason(self, is_prefill: bool) -> str:
        if is_prefill:
            return "prefill"
        if self.enforce_eager:
            return "enforce_eager"
        if self.hardware.kind != "gpu":
            return "no_cuda"
        return "batch_above_largest_graph"
