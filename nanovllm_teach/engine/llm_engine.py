"""Orchestration layer: ``LLMEngine`` turns prompts into sequences, runs the step loop and hands back
outputs. It knows nothing of tensors or heads.

Start-up order matters: everything cheap is checked first (the settings, the tokenizer, the checkpoint's
headers against ``config.json``), so a bad model folder fails in seconds and before the trace file is
opened; then the model runner sizes the KV cache before the scheduler exists, because the block manager
is built with that many blocks. With ``tensor_parallel_size > 1`` the model runner is rank 0 of a group
whose other ranks are worker processes (``engine/tp_workers.py``); ``close()`` stops them.

``step()`` is one engine iteration: the scheduler's ``schedule()`` gives the step's ``ScheduledBatch``
(``engine/batch.py``), the model runner's ``run(batch)`` one token per sequence, and the scheduler's
``postprocess(batch, token_ids)`` takes them in. The configuration is read from one frozen, resolved
``Config`` (``config.py``); once the model runner has sized the KV cache, ``self.config`` holds that size
too. The step is a transaction: if anything in it
raises (Ctrl-C, a failing trace sink, a full disk), the scheduler rolls back to its checkpoint from before
the step and the exception goes on, so calling ``step()`` again resumes as if nothing had happened.
``generate()`` is ``add_request`` for every prompt, then ``step()`` until they are done; if it raises,
it aborts its requests first, so the engine is left empty with every KV block free. ``abort_request``
takes one request out. Requests queued with ``add_request`` belong to the caller's own ``step()`` loop:
``generate()`` refuses to start while there are any, rather than run them and drop their outputs.

``run_workload()`` serves requests that arrive in time (``sim/workload.py``) and measures TTFT, TPOT and
throughput (``sim/metrics.py``). With ``runner="simulated"`` the model runner is a ``SimulatedRunner``: no
tokenizer, no weights, and one clock for everything, the simulated one (``SimClock``): each step lasts
as long as the cost model predicts, an idle engine jumps to the next arrival, and the trace's ``t_ns``
are simulated time. The real engine runs the same workload by the wall clock.

Emits: ENGINE_INIT, ENGINE_READY, GENERATE_START, GENERATE_FINISH, REQUEST_ENQUEUE, STEP_DONE (and,
through the scheduler and the model runner, everything else).
"""

from __future__ import annotations

import itertools
from collections import deque
from pathlib import Path
from time import perf_counter, sleep
from typing import Any, NamedTuple, Sequence as SequenceOf

from tqdm.auto import tqdm
from transformers import AutoTokenizer

from nanovllm_teach.assets import default_model_path
from nanovllm_teach.config import Config
from nanovllm_teach.engine.model_runner import ModelRunner
from nanovllm_teach.engine.scheduler import Scheduler
from nanovllm_teach.engine.sequence import Sequence
from nanovllm_teach.engine.tp_workers import TensorParallelRunner
from nanovllm_teach.sampling_params import SamplingParams
from nanovllm_teach.sim.hardware import get_device
from nanovllm_teach.sim.metrics import RequestTimes, WorkloadResult
from nanovllm_teach.sim.runner import SimClock, SimulatedRunner
from nanovllm_teach.sim.workload import Request
from nanovllm_teach.trace.events import EngineInit, EngineReady, GenerateFinish, GenerateStart, RequestEnqueue, StepDone
from nanovllm_teach.trace.recorder import Recorder, make_recorder
from nanovllm_teach.utils.loader import check_checkpoint

Prompt = str | list[int]


class StepResult(NamedTuple):
    """One step's outcome. ``num_tokens`` is nano-vllm's statistic (see ``LLMEngine.step``);
    ``num_batched_tokens`` the tokens the model actually computed, which throughput is measured in."""

    finished: list[tuple[int, list[int]]]
    num_tokens: int
    num_batched_tokens: int
    seqs: list[Sequence]  # the batch, in order


class LLMEngine:
    def __init__(self, model: str | Path | None = None, *, trace: str | Path | Recorder | None = None,
                 trace_metadata: dict[str, Any] | None = None, **settings: Any) -> None:
        config = Config.from_kwargs(str(model if model is not None else default_model_path()), settings)
        self.config = config
        self.sim_clock = SimClock() if config.simulated else None
        if config.simulated:
            self.tokenizer = None  # token ids only: the simulated model has no vocabulary to read
            self.hardware = get_device(config.hardware)
        else:
            self.tokenizer = AutoTokenizer.from_pretrained(config.model)
            if self.tokenizer.eos_token_id is None:
                raise ValueError(f"the tokenizer in {config.model} defines no EOS token: generation could never stop")
            check_checkpoint(config.model, config.hf_config)
        self.rec = make_recorder(trace)
        if self.sim_clock is not None:
            self.rec.set_clock(lambda: round(self.sim_clock.now_s * 1e9))
        self.rec.open(config.trace_header(trace_metadata or {}, self.hardware if config.simulated else None))
        if self.rec.enabled:
            self.rec.record("bootstrap", "engine_starting", EngineInit(
                max_num_batched_tokens=config.max_num_batched_tokens, max_num_seqs=config.max_num_seqs,
                max_model_len=config.max_model_len, block_size=config.kvcache_block_size,
                tp_size=config.tensor_parallel_size, model=config.model_name,
                enable_prefix_caching=config.enable_prefix_caching, policy=config.scheduling_policy,
                attention_backend=config.attention_backend))
        self.model_runner: ModelRunner | TensorParallelRunner | SimulatedRunner
        if config.simulated:
            self.model_runner = SimulatedRunner.from_config(config, self.hardware, self.rec, clock=self.sim_clock,
                                                            efficiency=config.efficiency())
        elif config.tensor_parallel_size > 1:
            self.model_runner = TensorParallelRunner(config, self.rec)
        else:
            self.model_runner = ModelRunner(config, 0, self.rec)
        self.config = config = config.with_kv_cache(self.model_runner.num_kvcache_blocks)
        self.eos_token_id = self.model_runner.eos_token_id if config.simulated else self.tokenizer.eos_token_id
        self.scheduler = Scheduler(
            max_num_seqs=config.max_num_seqs, max_num_batched_tokens=config.max_num_batched_tokens,
            max_model_len=config.max_model_len, eos=self.eos_token_id,
            num_kvcache_blocks=config.num_kvcache_blocks, block_size=config.kvcache_block_size,
            enable_prefix_caching=config.enable_prefix_caching, policy=config.scheduling_policy,
            recorder=self.rec)
        self._seq_ids = itertools.count()
        self.num_steps = self.num_prefill_steps = self.num_decode_steps = 0
        self.last_step: StepResult | None = None  # the last step that completed
        if self.rec.enabled:
            self.rec.record("init", "engine_ready", EngineReady(
                num_kvcache_blocks=config.num_kvcache_blocks, eos_token_id=self.eos_token_id,
                attention_backend=config.attention_backend, device=config.device))

    def now_s(self) -> float:
        """The engine's clock in seconds: simulated time, or the host's ``perf_counter``."""
        return self.sim_clock.now_s if self.sim_clock is not None else perf_counter()

    # ---- requests -------------------------------------------------------------------------------

    def _make_sequence(self, prompt: Prompt, sampling_params: SamplingParams) -> Sequence:
        """Validate one request completely before anything is enqueued."""
        if not isinstance(sampling_params, SamplingParams):
            raise TypeError(f"sampling_params must be a SamplingParams, got {type(sampling_params).__name__}")
        if isinstance(prompt, str) and self.tokenizer is None:
            raise TypeError("the simulated engine has no tokenizer: give token id lists or a workload")
        if isinstance(prompt, str):
            token_ids = self.tokenizer.encode(prompt, add_special_tokens=False)
        elif isinstance(prompt, (list, tuple)) and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
            token_ids = list(prompt)
        else:
            raise TypeError(f"a prompt must be a str or a list of int token ids, got {type(prompt).__name__}")
        if not token_ids:
            raise ValueError("prompt is empty: at least one token is needed")
        vocab_size = self.config.hf_config.vocab_size
        bad = next((t for t in token_ids if not 0 <= t < vocab_size), None)
        if bad is not None:
            raise ValueError(f"token id {bad} is outside the vocabulary [0, {vocab_size})")
        if len(token_ids) > self.config.max_model_len:
            raise ValueError(f"prompt has {len(token_ids)} tokens, more than max_model_len={self.config.max_model_len}")
        worst_case = min(len(token_ids) + sampling_params.max_tokens, self.config.max_model_len)
        blocks_needed = -(-worst_case // self.config.kvcache_block_size)
        if blocks_needed > self.config.num_kvcache_blocks:
            raise ValueError(
                f"request could never fit: {worst_case} tokens need {blocks_needed} KV blocks of "
                f"{self.config.kvcache_block_size}, the whole cache has {self.config.num_kvcache_blocks}; "
                f"lower max_tokens or give the cache more blocks")
        return Sequence(next(self._seq_ids), token_ids, sampling_params, self.config.kvcache_block_size)

    def _enqueue(self, seq: Sequence) -> None:
        self.scheduler.add(seq)
        if self.rec.enabled:
            self.rec.record("ingress", "new_request_waiting", RequestEnqueue(
                seq_id=seq.seq_id, prompt_len=seq.num_prompt_tokens, max_tokens=seq.max_tokens,
                temperature=seq.temperature, ignore_eos=seq.ignore_eos, seed=seq.seed,
                waiting_len=len(self.scheduler.waiting)))

    def add_request(self, prompt: Prompt, sampling_params: SamplingParams | None = None) -> int:
        """Queue one request; returns its ``seq_id``. Raises before queueing anything if it is invalid, and
        queues nothing if it raises at all: a caller who got no ``seq_id`` has nothing to abort."""
        seq = self._make_sequence(prompt, sampling_params or SamplingParams())
        try:
            self._enqueue(seq)
            return seq.seq_id
        except BaseException:
            self.scheduler.abort([seq.seq_id])
            raise

    def abort_request(self, seq_id: int) -> bool:
        """Take request ``seq_id`` out of the engine, wherever it is, freeing its KV blocks. Returns whether
        it was still waiting or running (False for an unknown, finished or already aborted id)."""
        return bool(self.scheduler.abort([seq_id]))

    def is_finished(self) -> bool:
        return self.scheduler.is_finished()

    # ---- the loop -------------------------------------------------------------------------------

    def step(self) -> tuple[list[tuple[int, list[int]]], int]:
        """One iteration. Returns the ``(seq_id, completion_token_ids)`` of sequences that finished in it,
        and ``num_tokens`` as in nano-vllm: positive for a prefill (the total length of its sequences after
        their new token, cached prefix and earlier chunks included), negative for a decode (minus the number
        of sequences that each got one token). It is nano-vllm's statistic, kept for comparison; the tokens
        the step actually computed are STEP_DONE's ``num_batched_tokens``, and throughput uses those.

        If it raises, nothing happened: the step is rolled back, and calling ``step()`` again resumes.
        ``last_step`` then holds the whole ``StepResult``, ``num_batched_tokens`` included."""
        if self.is_finished():
            raise RuntimeError("step() called with no request waiting or running")
        return self._step()[:2]  # (finished, num_tokens), with no line left to interrupt after the step

    def _step(self) -> StepResult:
        """The step as a transaction: it completes, or it raises and is rolled back."""
        checkpoint = self.scheduler.checkpoint()
        self.num_steps += 1
        try:
            with self.rec.at_step(self.num_steps):
                self.last_step = self._run_step()
            return self.last_step  # from inside the try: an interrupt on any line up to here undoes the step
        except BaseException:
            self.scheduler.rollback(checkpoint)  # outside the step's scope: the undo belongs to no step
            raise

    def _run_step(self) -> StepResult:
        start = self.now_s()
        batch = self.scheduler.schedule()
        token_ids = self.model_runner.run(batch)
        seqs = self.scheduler.postprocess(batch, token_ids)
        is_prefill, num_batched_tokens = batch.is_prefill, batch.num_batched_tokens
        latency_ms = (self.now_s() - start) * 1e3
        finished = [seq for seq in seqs if seq.is_finished]
        num_tokens = sum(len(seq) for seq in seqs) if is_prefill else -len(seqs)
        if self.rec.enabled:
            bm = self.scheduler.block_manager
            phase = "prefill" if is_prefill else "decode"
            cost = self.model_runner.last_cost if self.sim_clock is not None else None
            predicted = {"predicted_ms": round(cost.total_s * 1e3, 3), "bound": cost.bound} if cost else {}
            self.rec.record(phase, "step_complete", StepDone(
                phase=phase, latency_ms=round(latency_ms, 3), num_tokens_stat=num_tokens,
                num_batched_tokens=num_batched_tokens, batch_size=len(seqs), seq_ids=[s.seq_id for s in seqs],
                finished=[s.seq_id for s in finished], used_blocks=bm.num_blocks - bm.num_free_blocks,
                free_blocks=bm.num_free_blocks, waiting_len=len(self.scheduler.waiting),
                running_len=len(self.scheduler.running), **predicted))
        if is_prefill:
            self.num_prefill_steps += 1
        else:
            self.num_decode_steps += 1
        return StepResult([(seq.seq_id, seq.completion_token_ids) for seq in finished], num_tokens,
                          num_batched_tokens, seqs)

    def generate(self, prompts: SequenceOf[Prompt],
                 sampling_params: SamplingParams | list[SamplingParams] | None = None,
                 use_tqdm: bool = True, arrival_steps: SequenceOf[int] | None = None) -> list[dict[str, Any]]:
        """Generate for every prompt; outputs come back in prompt order as
        ``{"seq_id", "text", "token_ids", "finish_reason"}``.

        ``arrival_steps``: request ``i`` arrives once ``arrival_steps[i]`` engine steps of this call have run
        (0 = at once). If the engine runs dry before the next arrival, it arrives at once: time is counted in
        steps, and an idle engine takes none.

        It returns exactly its own prompts' outputs, so it refuses (``ValueError`` naming their seq_ids) to
        start while requests queued with ``add_request`` are unfinished: run those with ``step()`` or
        ``abort_request`` them first. If it raises (Ctrl-C included), its requests are aborted first: the
        engine is left empty, every KV block free.
        """
        if not self.is_finished():
            raise ValueError(
                f"generate() cannot start while requests added with add_request are unfinished (seq_ids "
                f"{sorted(self.scheduler.accepted)}): finish them with step() or abort_request() them first")
        if isinstance(prompts, str) or not isinstance(prompts, (list, tuple)):
            raise TypeError("prompts must be a list of prompts (str or list of token ids)")
        if isinstance(sampling_params, list):
            if len(sampling_params) != len(prompts):
                raise ValueError(f"got {len(sampling_params)} SamplingParams for {len(prompts)} prompts")
            params = sampling_params
        else:
            params = [sampling_params or SamplingParams()] * len(prompts)
        arrivals = list(arrival_steps) if arrival_steps is not None else [0] * len(prompts)
        if len(arrivals) != len(prompts):
            raise ValueError(f"got {len(arrivals)} arrival_steps for {len(prompts)} prompts")
        if any(isinstance(a, bool) or not isinstance(a, int) or a < 0 for a in arrivals):
            raise ValueError(f"arrival_steps must be ints >= 0, got {arrivals}")
        seqs = [self._make_sequence(p, sp) for p, sp in zip(prompts, params)]
        steps_before = self._generate_start(len(seqs))
        # Arrival order: by arrival step, then prompt order (a stable sort keeps ties in prompt order).
        pending = deque(sorted(zip(arrivals, seqs), key=lambda pair: pair[0]))
        try:
            with self.rec.flushing_deferred():
                self._run_until_done(pending, len(seqs), use_tqdm)
        except BaseException:
            self.scheduler.abort(seq.seq_id for seq in seqs)  # leave no queued request, no held block
            raise
        self._generate_finish(steps_before, len(seqs))
        return [{"seq_id": seq.seq_id, "text": self._text(seq), "token_ids": seq.completion_token_ids,
                 "finish_reason": seq.finish_reason} for seq in seqs]

    def _text(self, seq: Sequence) -> str | None:
        if self.tokenizer is None:
            return None  # placeholder ids spell nothing
        return self.tokenizer.decode(seq.completion_token_ids, skip_special_tokens=seq.skip_special_tokens)

    def _generate_start(self, n_prompts: int) -> tuple[int, int, int]:
        if self.rec.enabled:
            self.rec.record("ingress", "batch_enters_engine", GenerateStart(n_prompts=n_prompts))
        return self.num_steps, self.num_prefill_steps, self.num_decode_steps

    def _generate_finish(self, steps_before: tuple[int, int, int], n_outputs: int) -> None:
        if self.rec.enabled:
            self.rec.record("egress", "queues_empty", GenerateFinish(
                total_steps=self.num_steps - steps_before[0], prefill_steps=self.num_prefill_steps - steps_before[1],
                decode_steps=self.num_decode_steps - steps_before[2], n_outputs=n_outputs))

    def _run_until_done(self, pending: deque[tuple[int, Sequence]], total: int, use_tqdm: bool) -> None:
        prefill_tps = decode_tps = 0.0
        steps_run = 0
        with tqdm(total=total, desc="Generating", dynamic_ncols=True, disable=not use_tqdm) as bar:
            while pending or not self.is_finished():
                while pending and (pending[0][0] <= steps_run or self.is_finished()):
                    self._enqueue(pending.popleft()[1])
                start = self.now_s()
                finished, num_tokens = self.step()
                elapsed = self.now_s() - start
                steps_run += 1
                # The tokens computed, not nano-vllm's num_tokens (which counts cached prefixes and earlier chunks).
                if num_tokens > 0:
                    prefill_tps = self.last_step.num_batched_tokens / elapsed
                else:
                    decode_tps = self.last_step.num_batched_tokens / elapsed
                bar.set_postfix(prefill=f"{prefill_tps:.0f}tok/s", decode=f"{decode_tps:.0f}tok/s")
                bar.update(len(finished))

    def run_workload(self, workload: SequenceOf[Request], *, ignore_eos: bool = False) -> WorkloadResult:
        """Serve ``workload``: each request joins ``arrival_s`` seconds after the call (simulated, or by the
        wall clock for the real engine, which sleeps while idle). An answer is ``output_len`` tokens: the
        simulated model ends it with EOS, the real one runs with ``max_tokens=output_len, ignore_eos=True``;
        a request's own ``max_tokens`` may cut it. ``ignore_eos`` (simulated): every request runs to its
        ``max_tokens`` (nano-vllm's benchmark). Refuses and aborts as ``generate`` does."""
        if not self.is_finished():
            raise ValueError(f"run_workload() cannot start while requests added with add_request are unfinished "
                             f"(seq_ids {sorted(self.scheduler.accepted)})")
        simulated = self.sim_clock is not None
        seqs = [self._make_sequence(r.prompt_token_ids, SamplingParams(
            temperature=0.0, ignore_eos=ignore_eos or not simulated,
            max_tokens=(r.max_tokens or r.output_len) if simulated else min(r.max_tokens or r.output_len,
                                                                          r.output_len))) for r in workload]
        if simulated and not ignore_eos:  # only once every request is valid: a refusal changes nothing
            for seq, request in zip(seqs, workload):
                self.model_runner.expect_length(seq.seq_id, seq.num_prompt_tokens + request.output_len)
        steps_before = self._generate_start(len(seqs))
        try:
            result = self._serve(sorted(zip(workload, seqs), key=lambda pair: pair[0].arrival_s))
        except BaseException:
            self.scheduler.abort(seq.seq_id for seq in seqs)
            raise
        finally:
            if simulated:
                self.model_runner.forget(seq.seq_id for seq in seqs)
        self._generate_finish(steps_before, len(seqs))
        result.num_preemptions = sum(seq.num_preemptions for seq in seqs)
        return result

    def _serve(self, arrivals: list[tuple[Request, Sequence]]) -> WorkloadResult:
        pending = deque(arrivals)
        result = WorkloadResult()
        t0 = self.now_s()
        while pending or not self.is_finished():
            if self.is_finished():  # idle until the next arrival
                if self.sim_clock is not None:
                    self.sim_clock.wait_until(t0 + pending[0][0].arrival_s)
                else:
                    sleep(max(0.0, t0 + pending[0][0].arrival_s - self.now_s()))
            now = self.now_s()
            while pending and t0 + pending[0][0].arrival_s <= now:
                request, seq = pending.popleft()
                self._enqueue(seq)
                result.requests[seq.seq_id] = RequestTimes(t0 + request.arrival_s, seq.num_prompt_tokens)
            step = self._step()
            cost = self.model_runner.last_cost if self.sim_clock is not None else None
            result.add_step(step.seqs, step.num_tokens > 0, self.now_s(), cost.bound if cost else None)
        first = min((r.arrival_s for r in result.requests.values()), default=t0)
        result.duration_s = self.now_s() - first
        return result

    def close(self) -> None:
        """Stop the tensor-parallel workers, if any, and finish the trace file, if one is being written."""
        if isinstance(self.model_runner, TensorParallelRunner):
            self.model_runner.close()
        self.rec.close()

    def __enter__(self) -> "LLMEngine":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
