"""Orchestration layer: ``LLMEngine`` turns prompts into sequences, runs the step loop and hands back
outputs. It knows nothing of tensors or heads, nor which runner it drives.

It is built from parts chosen for it (``nanovllm_teach/llm.py``): the resolved ``Config``, the tokenizer
(None: token ids only), a function that builds the runner once the trace is open (anything that fits
``engine/runner.py``'s ``Runner``) and the ``Clock`` steps are timed on. The runner sizes the KV cache
before the scheduler exists, because the block manager is built with that many blocks.

``step()`` is one iteration: ``schedule()`` gives the step's ``ScheduledBatch``, the runner's ``run(batch)``
one token per sequence, ``postprocess(batch, token_ids)`` takes them in, and a request's own stop strings and
stop token ids finish it (``engine/stopping.py``); ``engine/teaching.py`` says what the scheduler decided
on the way as TEACHING events. The step is a transaction (``engine/transaction.py``):
if anything in it raises, the scheduler is rolled back, so calling ``step()`` again resumes. ``generate()``
is ``add_request`` for every prompt, then ``step()`` until they are done; if it raises, it aborts its
requests first; it returns vLLM-shaped outputs (``nanovllm_teach/outputs.py``). A request with ``n > 1``
is ``n`` sequences (``make_request``, queued by ``enqueue_request``): the first is prefilled alone, the others
are held back and join once its prompt is cached, so they share its full prompt blocks through the prefix
cache; ``generate`` and a server's engine thread both go through this. Requests that arrive in time are served on this public
API (``workload/arrivals.py``).

Threads: one lock (``lock``, reentrant) serializes the public entry points, so calls from several threads run
one after the other and never interleave inside the engine; a thread that makes several calls one unit
(``is_finished()`` then ``step()``, as a server's engine thread does) holds ``lock`` around them. ``abort``
never waits: while another thread holds the engine, the ids are queued, and aborted when that thread next
asks ``is_finished()``, as every loop over steps does before each step.

Emits: ENGINE_INIT, ENGINE_READY, GENERATE_START, GENERATE_FINISH, REQUEST_ENQUEUE, STEP_DONE (and,
through ``teaching`` and the runner, everything else).
"""

from __future__ import annotations

import dataclasses
import itertools
import threading
from contextlib import contextmanager
from collections import deque
from collections.abc import Iterable, Iterator
from typing import Any, Callable, NamedTuple, Sequence as SequenceOf

from tqdm.auto import tqdm

from nanovllm_teach.config import Config
from nanovllm_teach.engine import transaction
from nanovllm_teach.engine.decisions import Aborted
from nanovllm_teach.engine.runner import Clock, Runner
from nanovllm_teach.engine.scheduler import Scheduler
from nanovllm_teach.engine.sequence import Sequence, SequenceStatus
from nanovllm_teach.engine.serialized import serialized
from nanovllm_teach.engine.stopping import should_stop
from nanovllm_teach.engine.teaching import Teaching
from nanovllm_teach.outputs import RequestOutput, request_output
from nanovllm_teach.sampling_params import SamplingParams
from nanovllm_teach.trace.events import EngineInit, EngineReady, GenerateFinish, GenerateStart, RequestEnqueue, StepDone
from nanovllm_teach.trace.recorder import Recorder

Prompt = str | list[int]
SIBLING_SEED_STRIDE = 0x9E3779B97F4A7C15  # sample i > 0 of a seeded request draws with seed + i * this


def sibling_params(params: SamplingParams, index: int) -> SamplingParams:
    """The parameters of sample ``index`` of a request: its own seed, so that the samples differ."""
    if index == 0 or params.seed is None:
        return params
    return dataclasses.replace(params, seed=(params.seed + index * SIBLING_SEED_STRIDE) % 2**64)


def _check_unicode(prompt: str) -> None:
    """A prompt must be text the tokenizer can encode: a lone surrogate (what a bad decode with
    ``errors="surrogateescape"`` leaves behind) is not, and the tokenizer's own error does not say so."""
    try:
        prompt.encode("utf-8")
    except UnicodeEncodeError as error:
        raise ValueError(f"prompt is not valid Unicode: character {error.start} is {prompt[error.start]!r}, a lone "
                         f"surrogate (was the text decoded with the wrong codec?)") from None


class StepResult(NamedTuple):
    """One step's outcome (``num_tokens``: nano-vllm's statistic, see ``LLMEngine.step``)."""

    finished: list[tuple[int, list[int]]]
    num_tokens: int
    num_batched_tokens: int  # the tokens the model computed: throughput is measured in these
    seqs: list[Sequence]  # the batch, in order
    runner_stats: dict[str, Any]  # what the runner added to STEP_DONE


class LLMEngine:
    def __init__(self, config: Config, *, recorder: Recorder, trace_header: dict[str, Any],
                 make_runner: Callable[[Config, Recorder], Runner], clock: Clock, tokenizer: Any | None,
                 eos_token_id: int) -> None:
        """``recorder`` is opened with ``trace_header`` here; ``make_runner(config, recorder)`` builds the
        runner after ENGINE_INIT; ``tokenizer`` None: prompts are token ids and outputs have no text."""
        self.config = config
        self.tokenizer = tokenizer
        self.clock = clock
        self.rec = recorder
        self.rec.set_clock(clock.now_ns)
        self.rec.open(trace_header)
        if self.rec.enabled:
            self.rec.record("bootstrap", "engine_starting", EngineInit(
                max_num_batched_tokens=config.max_num_batched_tokens, max_num_seqs=config.max_num_seqs,
                max_model_len=config.max_model_len, block_size=config.kvcache_block_size,
                tp_size=config.tensor_parallel_size, model=config.model_name,
                enable_prefix_caching=config.enable_prefix_caching, policy=config.scheduling_policy,
                attention_backend=config.attention_backend))
        self.model_runner = make_runner(config, self.rec)
        self.config = config = config.with_kv_cache(self.model_runner.num_kvcache_blocks)
        self.eos_token_id = eos_token_id
        self.scheduler = Scheduler(
            max_num_seqs=config.max_num_seqs, max_num_batched_tokens=config.max_num_batched_tokens,
            max_model_len=config.max_model_len, eos=eos_token_id,
            num_kvcache_blocks=config.num_kvcache_blocks, block_size=config.kvcache_block_size,
            enable_prefix_caching=config.enable_prefix_caching, policy=config.scheduling_policy)
        self.teaching = Teaching(self.rec)
        self.lock = threading.RLock()  # held by whichever thread is inside the engine (see the module's docstring)
        self._abort_lock = threading.Lock()  # guards the aborts queued by other threads
        self._queued_aborts: list[int] = []
        self._held: list[list[Sequence]] = []  # [first sample, the others waiting for its prompt's blocks]
        self._seq_ids = itertools.count()
        self.num_steps = self.num_prefill_steps = self.num_decode_steps = 0
        self.last_step: StepResult | None = None  # the last step that completed
        if self.rec.enabled:
            self.rec.record("init", "engine_ready", EngineReady(
                num_kvcache_blocks=config.num_kvcache_blocks, eos_token_id=eos_token_id,
                attention_backend=config.attention_backend, device=config.device))

    # ---- requests -------------------------------------------------------------------------------

    @serialized
    def make_sequence(self, prompt: Prompt, sampling_params: SamplingParams) -> Sequence:
        """One request, validated completely and given its ``seq_id``, not queued yet (``enqueue``)."""
        return self._make_sequence(prompt, sampling_params)

    def _make_sequence(self, prompt: Prompt, sampling_params: SamplingParams) -> Sequence:
        if not isinstance(sampling_params, SamplingParams):
            raise TypeError(f"sampling_params must be a SamplingParams, got {type(sampling_params).__name__}")
        if isinstance(prompt, str) and self.tokenizer is None:
            raise TypeError("this engine has no tokenizer (a simulated model has no vocabulary): give token id "
                            "lists or a workload")
        if self.tokenizer is None and (sampling_params.stop or sampling_params.logprobs is not None):
            raise ValueError("stop strings and logprobs need a model with a vocabulary; this engine has none "
                             "(a simulated model)")
        if isinstance(prompt, str):
            _check_unicode(prompt)
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
        bad = next((t for t in sampling_params.stop_token_ids if t >= vocab_size), None)
        if bad is not None:
            raise ValueError(f"stop token id {bad} is outside the vocabulary [0, {vocab_size})")
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

    @serialized
    def make_request(self, prompt: Prompt, sampling_params: SamplingParams) -> list[Sequence]:
        """The ``sampling_params.n`` samples of one request, validated and given their ``seq_id``s (each
        sample after the first draws with its own seed, ``sibling_params``), not queued yet."""
        return [self._make_sequence(prompt, sibling_params(sampling_params, i)) for i in range(sampling_params.n)]

    @serialized
    def enqueue(self, seq: Sequence) -> None:
        """Queue a sequence from ``make_sequence``: it joins the waiting queue."""
        self._enqueue(seq)

    @serialized
    def enqueue_request(self, samples: list[Sequence]) -> None:
        """Queue the samples of one request (``make_request``): the first joins the waiting queue; with the
        prefix cache on, the others are held back until its prompt is cached (``is_finished`` lets them
        join), so that they share its prompt's blocks instead of prefilling it again."""
        first, *others = samples
        self._enqueue(first)
        if others and self.config.enable_prefix_caching:
            self._held.append(samples)
        else:
            for seq in others:
                self._enqueue(seq)

    def _release_held(self) -> None:
        """Held samples join once their first sample has a token (its prompt is cached) or has finished."""
        for samples in [h for h in self._held if h[0].num_completion_tokens or h[0].is_finished]:
            self._held.remove(samples)
            for seq in samples[1:]:
                if seq.finish_reason is None:  # not aborted while held
                    self._enqueue(seq)

    def _enqueue(self, seq: Sequence) -> None:
        seq.arrival_time = self.clock.now_s()
        self.scheduler.add(seq)
        if self.rec.enabled:
            self.rec.record("ingress", "new_request_waiting", RequestEnqueue(
                seq_id=seq.seq_id, prompt_len=seq.num_prompt_tokens, max_tokens=seq.max_tokens,
                temperature=seq.temperature, ignore_eos=seq.ignore_eos, seed=seq.seed,
                waiting_len=len(self.scheduler.waiting)))

    @serialized
    def add_request(self, prompt: Prompt, sampling_params: SamplingParams | None = None) -> int:
        """Queue one request; returns its ``seq_id``. Raises before queueing anything if it is invalid, and
        queues nothing if it raises at all: a caller who got no ``seq_id`` has nothing to abort. One sample
        per request (``n`` 1): ``generate`` fans out ``n``."""
        params = sampling_params or SamplingParams()
        if isinstance(params, SamplingParams) and params.n != 1:
            raise ValueError(f"add_request takes n=1 (one sequence per request), got n={params.n}: generate() "
                             f"runs n samples per prompt")
        seq = self._make_sequence(prompt, params)
        try:
            self._enqueue(seq)
            return seq.seq_id
        except BaseException:
            self.abort([seq.seq_id])
            raise

    @serialized
    def request_output(self, seqs: list[Sequence], prompt: str | None = None) -> RequestOutput:
        """The vLLM-shaped output of the request whose samples are ``seqs`` (from ``make_sequence``), as it
        stands now: ``finished`` False while any is unfinished. ``prompt``: its text, if it was given as text."""
        return request_output(seqs, prompt, self.tokenizer)

    def abort_request(self, seq_id: int) -> bool:
        """Take request ``seq_id`` out of the engine, wherever it is, freeing its KV blocks. Returns whether
        it was still waiting or running (False for an unknown, finished or already aborted id). Safe from any
        thread (see ``abort``)."""
        return bool(self.abort([seq_id]))

    def abort(self, seq_ids: Iterable[int]) -> list[int]:
        """Take these requests out, wherever they are, freeing exactly their blocks (unknown, finished or
        already aborted ids are skipped); returns the ids aborted. The state is settled before any event.

        Never waits for another thread: if one is inside the engine (a ``generate`` under way, a server's
        engine thread), the ids are queued and aborted when it next asks ``is_finished()`` (every loop over
        steps does, before each step), and the ids returned are those still waiting or running at the call
        (one may yet finish in the step under way)."""
        ids = list(seq_ids)
        if self.lock.acquire(blocking=False):
            try:
                return self._abort(ids)
            finally:
                self.lock.release()
        with self._abort_lock:
            self._queued_aborts.extend(ids)
        accepted = self.scheduler.accepted
        return [i for i in dict.fromkeys(ids) if i in accepted]

    def _abort(self, seq_ids: list[int]) -> list[int]:
        self._drop_held(set(seq_ids))
        seqs = {i: self.scheduler.accepted[i] for i in seq_ids if i in self.scheduler.accepted}
        decisions = transaction.abort(self.scheduler, seq_ids)
        aborted = [d.seq_id for d in decisions if isinstance(d, Aborted)]
        now = self.clock.now_s()
        for seq_id in aborted:
            seqs[seq_id].finished_time = now
        self.teaching.aborted(decisions)
        return aborted

    def _drop_held(self, seq_ids: set[int]) -> None:
        """Held samples among ``seq_ids`` never join: marked aborted (they hold no block)."""
        for samples in self._held:
            for seq in samples[1:]:
                if seq.seq_id in seq_ids and seq.finish_reason is None:
                    seq.status, seq.finish_reason, seq.finished_time = SequenceStatus.FINISHED, "aborted", self.clock.now_s()

    def _run_queued_aborts(self) -> None:
        """The aborts other threads queued while this one held the engine."""
        with self._abort_lock:
            ids, self._queued_aborts = self._queued_aborts, []
        if ids:
            self._abort(ids)

    def is_finished(self) -> bool:
        """Whether no request is waiting, running or held back, once the aborts other threads queued have run
        and held samples whose prompt is cached have joined (when no other thread is inside the engine;
        else it only reads)."""
        if (self._queued_aborts or self._held) and self.lock.acquire(blocking=False):
            try:
                self._run_queued_aborts()
                self._release_held()
            finally:
                self.lock.release()
        return self.scheduler.is_finished() and not self._held

    # ---- the loop -------------------------------------------------------------------------------

    @serialized
    def step(self) -> tuple[list[tuple[int, list[int]]], int]:
        """One iteration. Returns the ``(seq_id, completion_token_ids)`` of sequences that finished in it, and
        nano-vllm's ``num_tokens``: positive for a prefill (the total length of its sequences after their new
        token), negative for a decode (minus its batch size); the tokens it computed are
        ``last_step.num_batched_tokens``. If it raises, the step is undone, and calling it again resumes.
        A thread that makes ``is_finished()`` and ``step()`` one unit holds ``lock`` around them: no other
        thread's abort can then empty the engine in between."""
        if self.scheduler.is_finished():
            raise RuntimeError("step() called with no request waiting or running")
        return self._step()[:2]  # (finished, num_tokens), with no line left to interrupt after the step

    def _step(self) -> StepResult:
        """The step as a transaction: it completes, or it raises and is rolled back."""
        checkpoint = transaction.checkpoint(self.scheduler)
        self.num_steps += 1
        try:
            with self.rec.at_step(self.num_steps):
                self.last_step = self._run_step()
            return self.last_step  # from inside the try: an interrupt on any line up to here undoes the step
        except BaseException:
            # Outside the step's scope: the undo belongs to no step.
            self.teaching.rolled_back(transaction.rollback(self.scheduler, checkpoint))
            raise

    def _run_step(self) -> StepResult:
        start = self.clock.now_s()
        decisions = self.scheduler.decisions
        batch = self.scheduler.schedule()
        num_scheduling_decisions = len(decisions)
        self.teaching.scheduled(batch, decisions, self.scheduler)
        token_ids = self.model_runner.run(batch)
        logprobs = self.model_runner.logprobs()
        seqs = self.scheduler.postprocess(batch, token_ids)
        sampled = [seq for entry, seq in zip(batch.seqs, seqs) if not entry.is_prompt_chunk]  # got a token
        if self.tokenizer is not None:
            for seq in sampled:
                if not seq.is_finished and should_stop(seq, self.tokenizer):
                    self.scheduler.finish(seq, "stop")
        self.teaching.postprocessed(decisions[num_scheduling_decisions:])
        is_prefill, num_batched_tokens = batch.is_prefill, batch.num_batched_tokens
        now = self.clock.now_s()
        latency_ms = (now - start) * 1e3
        finished = [seq for seq in seqs if seq.is_finished]
        num_tokens = sum(len(seq) for seq in seqs) if is_prefill else -len(seqs)
        runner_stats = self.model_runner.step_stats()
        if self.rec.enabled:
            bm = self.scheduler.block_manager
            phase = "prefill" if is_prefill else "decode"
            self.rec.record(phase, "step_complete", StepDone(
                phase=phase, latency_ms=round(latency_ms, 3), num_tokens_stat=num_tokens,
                num_batched_tokens=num_batched_tokens, batch_size=len(seqs), seq_ids=[s.seq_id for s in seqs],
                finished=[s.seq_id for s in finished], used_blocks=bm.num_blocks - bm.num_free_blocks,
                free_blocks=bm.num_free_blocks, waiting_len=len(self.scheduler.waiting),
                running_len=len(self.scheduler.running), **runner_stats))
        # What the outputs read, once nothing in the step can raise any more.
        if logprobs is not None:
            for entry, seq, lp in zip(batch.seqs, seqs, logprobs):
                if lp is not None and not entry.is_prompt_chunk:
                    seq.logprobs[entry.num_tokens] = lp  # the position of the token it sampled
        for seq in seqs:
            if seq.first_scheduled_time is None:
                seq.first_scheduled_time = start
        for seq in sampled:
            seq.last_token_time = now
            if seq.first_token_time is None:
                seq.first_token_time = now
        for seq in finished:
            seq.finished_time = now
        if is_prefill:
            self.num_prefill_steps += 1
        else:
            self.num_decode_steps += 1
        return StepResult([(seq.seq_id, seq.completion_token_ids) for seq in finished], num_tokens,
                          num_batched_tokens, seqs, runner_stats)

    @serialized
    def generate(self, prompts: Prompt | SequenceOf[Prompt],
                 sampling_params: SamplingParams | list[SamplingParams] | None = None,
                 use_tqdm: bool = True, arrival_steps: SequenceOf[int] | None = None) -> list[RequestOutput]:
        """Generate for one prompt or a list of them (a prompt: a str, or a list of token ids); one
        ``RequestOutput`` per prompt comes back, in prompt order (``nanovllm_teach/outputs.py``: vLLM's
        shape, which also answers ``out["seq_id"]``, ``out["text"]``, ``out["token_ids"]`` and
        ``out["finish_reason"]`` as a dict).

        ``arrival_steps``: request ``i`` arrives once ``arrival_steps[i]`` engine steps of this call have run
        (0 = at once; an idle engine takes no steps, so the next request then arrives at once). It refuses
        to start while requests queued with ``add_request`` are unfinished; if it raises (Ctrl-C included),
        its requests are aborted first: the engine is left empty, every KV block free. A call from another
        thread waits for this one to finish.
        """
        if isinstance(prompts, str) or (isinstance(prompts, list) and prompts
                                        and all(isinstance(t, int) and not isinstance(t, bool) for t in prompts)):
            prompts = [prompts]  # one prompt: text, or token ids
        if not isinstance(prompts, (list, tuple)):
            raise TypeError(f"prompts must be a prompt (a str or a list of token ids) or a list of prompts, got "
                            f"{type(prompts).__name__}")
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
        requests = [self.make_request(p, sp) if isinstance(sp, SamplingParams) else [self._make_sequence(p, sp)]
                    for p, sp in zip(prompts, params)]
        seqs = [seq for samples in requests for seq in samples]
        # Arrival order: by arrival step, then prompt order (a stable sort keeps ties in prompt order).
        pending = deque(sorted(zip(arrivals, requests), key=lambda pair: pair[0]))
        with self.serving(seqs, "generate()"), self.rec.flushing_deferred():
            self._run_until_done(pending, len(seqs), use_tqdm)
        return [request_output(samples, p if isinstance(p, str) else None, self.tokenizer)
                for p, samples in zip(prompts, requests)]

    @contextmanager
    def serving(self, seqs: list[Sequence], caller: str) -> Iterator[None]:
        """The frame of a call (``caller``) that feeds ``seqs`` to the engine and steps until they are done
        (``generate``, a workload's arrivals): GENERATE_START, then GENERATE_FINISH once the block completes;
        if it raises, every one of ``seqs`` is aborted first, so no request is left queued and no block held.
        It returns its own requests' outputs, so it refuses (``ValueError``) to start while requests queued
        with ``add_request`` are unfinished."""
        if not self.is_finished():
            raise ValueError(
                f"{caller} cannot start while requests added with add_request are unfinished (seq_ids "
                f"{sorted(self.scheduler.accepted)}): finish them with step() or abort_request() them first")
        if self.rec.enabled:
            self.rec.record("ingress", "batch_enters_engine", GenerateStart(n_prompts=len(seqs)))
        before = self.num_steps, self.num_prefill_steps, self.num_decode_steps
        try:
            yield
        except BaseException:
            self.abort(seq.seq_id for seq in seqs)
            raise
        if self.rec.enabled:
            self.rec.record("egress", "queues_empty", GenerateFinish(
                total_steps=self.num_steps - before[0], prefill_steps=self.num_prefill_steps - before[1],
                decode_steps=self.num_decode_steps - before[2], n_outputs=len(seqs)))

    def _run_until_done(self, pending: deque[tuple[int, list[Sequence]]], total: int, use_tqdm: bool) -> None:
        """Step until every request of ``pending`` has arrived and finished (``enqueue_request``: a request's
        other samples wait for its prompt's blocks)."""
        prefill_tps = decode_tps = 0.0
        steps_run = 0
        with tqdm(total=total, desc="Generating", dynamic_ncols=True, disable=not use_tqdm) as bar:
            while True:
                while pending and (pending[0][0] <= steps_run or self.is_finished()):
                    self.enqueue_request(pending.popleft()[1])
                if self.is_finished():  # after the aborts other threads queued, and the held samples joined
                    if not pending:
                        break
                    continue  # the next arrival joins at once
                start = self.clock.now_s()
                step = self._step()
                elapsed = self.clock.now_s() - start
                steps_run += 1
                if not use_tqdm:
                    continue  # formatting the bar's figures costs a few µs a step, against ~0.5 ms of step
                # The tokens computed, not nano-vllm's num_tokens (which counts cached prefixes and earlier chunks).
                if step.num_tokens > 0:
                    prefill_tps = step.num_batched_tokens / elapsed
                else:
                    decode_tps = step.num_batched_tokens / elapsed
                bar.set_postfix(prefill=f"{prefill_tps:.0f}tok/s", decode=f"{decode_tps:.0f}tok/s")
                bar.update(len(step.finished))

    @serialized
    def close(self) -> None:
        """Close the runner (a tensor-parallel group stops its workers) and finish the trace file, if any."""
        self.model_runner.close()
        self.rec.close()

    def __enter__(self) -> "LLMEngine":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
