"""Orchestration layer: ``LLMEngine``, the step loop — nano-vllm's ``LLMEngine``, with every decision reported.

A request becomes a ``Sequence`` in the scheduler's waiting queue (``add_request``); ``step()`` runs one
iteration, ``generate()`` adds its prompts and steps until they are done. A step reads::

    checkpoint → schedule → report → run → postprocess → report

The scheduler returns the batch and the decisions taken to form it; the runner (anything that fits
``engine/runner.py``'s ``Runner``: the model runner or the simulator, the engine cannot tell) returns a
token per sequence and what it did; ``postprocess`` returns the finishes, and a request's own stop strings
and stop token ids finish it too (``engine/stopping.py``). ``engine/teaching.py`` says each of these as
TEACHING events. The step is a transaction (``engine/transaction.py``): if anything in it raises, the
scheduler is rolled back, and calling ``step()`` again resumes.

Single-threaded, and it trusts its caller: prompts already checked, one call at a time. ``LLM`` is this
engine inside its shell (``engine/frontend.py``), which validates, fans out ``n > 1``, lets threads in one
at a time and shapes vLLM's outputs; ``nanovllm_teach/llm.py`` chooses its parts (config, tokenizer, runner,
clock).

Emits: GENERATE_START, GENERATE_FINISH (and, through ``teaching``, the engine's start and its requests'
arrivals, and everything the scheduler and the runner report).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Callable, NamedTuple

from tqdm.auto import tqdm

from nanovllm_teach.config import Config
from nanovllm_teach.engine import transaction
from nanovllm_teach.engine.decisions import Decision
from nanovllm_teach.engine.runner import Clock, Runner
from nanovllm_teach.engine.scheduler import Scheduler
from nanovllm_teach.engine.sequence import Sequence
from nanovllm_teach.engine.stopping import should_stop
from nanovllm_teach.engine.teaching import Teaching
from nanovllm_teach.i18n import Text, say
from nanovllm_teach.sampling_params import SamplingParams
from nanovllm_teach.trace.events import GenerateFinish, GenerateStart
from nanovllm_teach.trace.recorder import Recorder

NOTHING_TO_STEP = Text(en="step() called with no request waiting or running",
                       zh="调用了 step()，但没有等待中或运行中的请求")
GENERATING = Text(en="Generating", zh="生成中")  # the progress bar's label

class StepResult(NamedTuple):
    """One step's outcome (``num_tokens``: nano-vllm's statistic, see ``LLMEngine.step``)."""

    finished: list[tuple[int, list[int]]]
    num_tokens: int
    num_batched_tokens: int  # the tokens the model computed: throughput is measured in these
    seqs: list[Sequence]  # the batch, in order
    runner_stats: Mapping[str, Any]  # what the runner added to STEP_DONE
    decisions: list[Decision]  # what the scheduler decided in the step, in order (engine/decisions.py)


class LLMEngine:
    def __init__(self, config: Config, *, recorder: Recorder, trace_header: dict[str, Any],
                 make_runner: Callable[[Config, Recorder], Runner], clock: Clock, tokenizer: Any | None,
                 eos_token_id: int) -> None:
        """``recorder`` is opened with ``trace_header`` here; ``make_runner(config, recorder)`` builds the
        runner after ENGINE_INIT (it sizes the KV cache the block manager is built with); ``tokenizer`` None:
        prompts are token ids and outputs have no text."""
        self.tokenizer = tokenizer
        self.clock = clock
        self.rec = recorder
        self.rec.set_clock(clock.now_ns)
        self.rec.open(trace_header)
        self.teaching = Teaching(self.rec)
        self.teaching.engine_starting(config)
        self.model_runner = make_runner(config, self.rec)
        self.config = config = config.with_kv_cache(self.model_runner.num_kvcache_blocks)
        self.eos_token_id = eos_token_id
        self.scheduler = Scheduler(
            max_num_seqs=config.max_num_seqs, max_num_batched_tokens=config.max_num_batched_tokens,
            max_model_len=config.max_model_len, eos=eos_token_id,
            num_kvcache_blocks=config.num_kvcache_blocks, block_size=config.kvcache_block_size,
            enable_prefix_caching=config.enable_prefix_caching, policy=config.scheduling_policy)
        self.seq_ids = itertools.count()
        self.num_steps = self.num_prefill_steps = self.num_decode_steps = 0
        self.last_step: StepResult | None = None  # the last step that completed
        self.teaching.engine_ready(config, eos_token_id)

    # ---- requests -------------------------------------------------------------------------------

    def add_request(self, prompt: str | list[int], sampling_params: SamplingParams) -> int:
        """Queue one request (text, or its token ids); returns its ``seq_id``."""
        token_ids = self.tokenizer.encode(prompt, add_special_tokens=False) if isinstance(prompt, str) else prompt
        seq = self.new_sequence(token_ids, sampling_params)
        self.add_sequence(seq)
        return seq.seq_id

    def new_sequence(self, token_ids: list[int], sampling_params: SamplingParams) -> Sequence:
        """A request as a ``Sequence`` with the next ``seq_id``, not queued yet."""
        return Sequence(next(self.seq_ids), token_ids, sampling_params, self.config.kvcache_block_size)

    def add_sequence(self, seq: Sequence) -> None:
        """``seq`` joins the waiting queue now; it arrived now too, unless the caller that served it set
        ``seq.arrival_time`` earlier on the engine's clock (a request that waited outside the engine)."""
        now = self.clock.now_s()
        if seq.arrival_time is None:
            seq.arrival_time = now
        self.scheduler.add(seq)
        self.teaching.enqueued(seq, self.scheduler, now)

    def abort(self, seq_ids: Iterable[int]) -> list[int]:
        """Take these requests out, wherever they are, freeing exactly their blocks (unknown, finished or
        already aborted ids are skipped); returns the ids aborted. The state is settled before any event."""
        seqs = {i: self.scheduler.accepted[i] for i in seq_ids if i in self.scheduler.accepted}
        decisions = transaction.abort(self.scheduler, list(seqs))
        now = self.clock.now_s()
        for seq in seqs.values():
            seq.finished_time = now
        self.teaching.aborted(decisions, seqs)
        return list(seqs)

    def is_finished(self) -> bool:
        return self.scheduler.is_finished()

    # ---- the loop -------------------------------------------------------------------------------

    def step(self) -> tuple[list[tuple[int, list[int]]], int]:
        """One iteration. Returns the ``(seq_id, completion_token_ids)`` of sequences that finished in it, and
        nano-vllm's ``num_tokens``: positive for a prefill (the total length of its sequences after their new
        token), negative for a decode (minus its batch size); the rest is in ``last_step``. If it raises, the
        step is undone, and calling it again resumes."""
        if self.scheduler.is_finished():
            raise RuntimeError(say(NOTHING_TO_STEP))
        checkpoint = transaction.checkpoint(self.scheduler)
        self.num_steps += 1
        try:
            with self.rec.at_step(self.num_steps):
                self.last_step = self._run_step()
            # From inside the try: an interrupt on any line up to here undoes the step.
            return self.last_step.finished, self.last_step.num_tokens
        except BaseException:
            # Outside the step's scope: the undo belongs to no step.
            self.teaching.rolled_back(transaction.rollback(self.scheduler, checkpoint))
            raise

    def _run_step(self) -> StepResult:
        start = self.clock.now_s()
        batch, scheduled = self.scheduler.schedule()
        self.teaching.scheduled(batch, scheduled, self.scheduler, self.num_decode_steps)
        seqs = [self.scheduler.accepted[entry.seq_id] for entry in batch.seqs]
        ran = self.model_runner.run(batch)
        self.teaching.ran(batch, ran)
        finishes = self.scheduler.postprocess(batch, ran.token_ids)
        sampled = [seq for entry, seq in zip(batch.seqs, seqs) if not entry.is_prompt_chunk]  # got a token
        if self.tokenizer is not None:
            for seq in sampled:
                if not seq.is_finished and should_stop(seq, self.tokenizer):
                    finishes += self.scheduler.finish(seq, "stop")
        self.teaching.postprocessed(finishes, seqs)
        now = self.clock.now_s()
        finished = [seq for seq in seqs if seq.is_finished]
        num_tokens = sum(len(seq) for seq in seqs) if batch.is_prefill else -len(seqs)
        self.teaching.step_done(batch, seqs, self.scheduler, num_tokens, (now - start) * 1e3, ran.step_stats)
        # What the outputs read, once nothing in the step can raise any more.
        for entry, seq, lp in zip(batch.seqs, seqs, ran.logprobs or ()):
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
        if batch.is_prefill:
            self.num_prefill_steps += 1
        else:
            self.num_decode_steps += 1
        return StepResult([(seq.seq_id, seq.completion_token_ids) for seq in finished], num_tokens,
                          batch.num_batched_tokens, seqs, ran.step_stats, scheduled + finishes)

    def generate(self, prompts: list[str | list[int]], sampling_params: SamplingParams | list[SamplingParams],
                 use_tqdm: bool = True) -> list[Sequence]:
        """nano-vllm's ``generate``: queue every prompt, step until all are done; returns their sequences,
        in prompt order (``completion_token_ids``, ``finish_reason`` and the times filled in)."""
        if not isinstance(sampling_params, list):
            sampling_params = [sampling_params] * len(prompts)
        seq_ids = [self.add_request(prompt, params) for prompt, params in zip(prompts, sampling_params)]
        seqs = [self.scheduler.accepted[seq_id] for seq_id in seq_ids]
        with self.generating(len(seqs)), tqdm(total=len(seqs), desc=say(GENERATING), disable=not use_tqdm) as bar:
            while not self.is_finished():
                self.step()
                bar.update(len(self.last_step.finished))
        return seqs

    @contextmanager
    def generating(self, num_requests: int) -> Iterator[None]:
        """GENERATE_START, then GENERATE_FINISH with the steps run inside, around a run of requests (whose
        trace lines may reach a file a little after their step: all are there when the run ends)."""
        if self.rec.enabled:
            self.rec.record("ingress", "batch_enters_engine", GenerateStart(n_prompts=num_requests))
        before = self.num_steps, self.num_prefill_steps, self.num_decode_steps
        with self.rec.flushing_deferred():
            yield
        if self.rec.enabled:
            self.rec.record("egress", "queues_empty", GenerateFinish(
                total_steps=self.num_steps - before[0], prefill_steps=self.num_prefill_steps - before[1],
                decode_steps=self.num_decode_steps - before[2], n_outputs=num_requests))

    def close(self) -> None:
        """Close the runner (a tensor-parallel group stops its workers) and finish the trace file, if any."""
        self.model_runner.close()
        self.rec.close()

    def __enter__(self) -> LLMEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
