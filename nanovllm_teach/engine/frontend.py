"""The shell around the engine: what a product needs that the step loop does not — ``Frontend``, what ``LLM`` is
(``nanovllm_teach/llm.py`` adds how it is built and vLLM's outputs).

The core (``engine/llm_engine.py``) is single-threaded and trusts its caller. The shell keeps it that way
from the outside:

- **validation**: every request is checked before it becomes a sequence (``engine/request_checks.py``);
  one that raises is never half-queued;
- **``n > 1``**: a request is ``n`` sequences (``make_request``, each sample after the first with its own
  seed); the first is prefilled alone, the others are held back and join once its prompt is cached
  (``enqueue_request``), so they share its full prompt blocks through the prefix cache;
- **threads**: one reentrant ``lock`` lets one thread at a time into the engine (``@serialized``); a thread
  that makes several calls one unit (``is_finished()`` then ``step()``, as a loop over steps does)
  holds ``lock`` around them. ``abort`` never waits: while another thread holds the engine, the ids are
  queued, and aborted when that thread next asks ``is_finished()``, as every loop over steps does;
- **the serving frame**: ``serving`` brackets a run of requests (``generate``, a workload's arrivals) with
  GENERATE_START and GENERATE_FINISH, refuses to start while requests added one by one are unfinished, and
  aborts every one of its requests if anything raises (Ctrl-C included): no request is left queued and no
  block held.

Emits nothing of its own (the core does).
"""

from __future__ import annotations

import dataclasses
import threading
from collections import deque
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any, Sequence as SequenceOf

from tqdm.auto import tqdm

from nanovllm_teach.engine.llm_engine import GENERATING, LLMEngine
from nanovllm_teach.engine.request_checks import checked_token_ids
from nanovllm_teach.engine.sequence import Sequence, SequenceStatus
from nanovllm_teach.engine.serialized import serialized
from nanovllm_teach.i18n import Text, say
from nanovllm_teach.sampling_params import SamplingParams

Prompt = str | list[int]
SIBLING_SEED_STRIDE = 0x9E3779B97F4A7C15  # sample i > 0 of a seeded request draws with seed + i * this

ONE_SAMPLE_PER_REQUEST = Text(en="add_request takes n=1 (one sequence per request), got n={n}: generate() runs n "
                                 "samples per prompt",
                              zh="add_request 只接受 n=1（每个请求一个序列），收到的是 n={n}：每个 prompt 采样 n 次请用 "
                                 "generate()")
REQUESTS_UNFINISHED = Text(en="{caller} cannot start while requests added with add_request are unfinished (seq_ids "
                              "{seq_ids}): finish them with step() or abort_request() them first",
                           zh="用 add_request 加入的请求尚未完成（seq_ids {seq_ids}），{caller} 不能开始：请先用 step() "
                              "跑完它们，或用 abort_request() 中止它们")


def sibling_params(params: SamplingParams, index: int) -> SamplingParams:
    """The parameters of sample ``index`` of a request: its own seed, so that the samples differ."""
    if index == 0 or params.seed is None:
        return params
    return dataclasses.replace(params, seed=(params.seed + index * SIBLING_SEED_STRIDE) % 2**64)


class Frontend(LLMEngine):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """The core's arguments (``LLMEngine``)."""
        self.lock = threading.RLock()  # held by whichever thread is inside the engine
        self._abort_lock = threading.Lock()  # guards the aborts queued by other threads
        self._queued_aborts: list[int] = []
        self._held: list[list[Sequence]] = []  # [first sample, the others waiting for its prompt's blocks]
        super().__init__(*args, **kwargs)

    # ---- requests -------------------------------------------------------------------------------

    @serialized
    def make_sequence(self, prompt: Prompt, sampling_params: SamplingParams) -> Sequence:
        """One request, checked completely and given its ``seq_id``, not queued yet (``add_sequence``)."""
        return self.new_sequence(checked_token_ids(prompt, sampling_params, self.config, self.tokenizer),
                                 sampling_params)

    @serialized
    def make_request(self, prompt: Prompt, sampling_params: SamplingParams) -> list[Sequence]:
        """The ``sampling_params.n`` samples of one request, checked and given their ``seq_id``s (each sample
        after the first draws with its own seed, ``sibling_params``), not queued yet."""
        token_ids = checked_token_ids(prompt, sampling_params, self.config, self.tokenizer)
        return [self.new_sequence(token_ids, sibling_params(sampling_params, i)) for i in range(sampling_params.n)]

    add_sequence = serialized(LLMEngine.add_sequence)

    @serialized
    def enqueue_request(self, samples: list[Sequence]) -> None:
        """Queue the samples of one request (``make_request``): the first joins the waiting queue; with the
        prefix cache on, the others are held back until its prompt is cached (``is_finished`` lets them
        join), so that they share its prompt's blocks instead of prefilling it again."""
        first, *others = samples
        self.add_sequence(first)
        if others and self.config.enable_prefix_caching:
            self._held.append(samples)
        else:
            for seq in others:
                self.add_sequence(seq)

    def _release_held(self) -> None:
        """Held samples join once their first sample has a token (its prompt is cached) or has finished."""
        for samples in [h for h in self._held if h[0].num_completion_tokens or h[0].is_finished]:
            self._held.remove(samples)
            for seq in samples[1:]:
                if seq.finish_reason is None:  # not aborted while held
                    self.add_sequence(seq)

    @serialized
    def add_request(self, prompt: Prompt, sampling_params: SamplingParams | None = None) -> int:
        """Queue one request; returns its ``seq_id``. Raises before queueing anything if it is invalid, and
        queues nothing if it raises at all: a caller who got no ``seq_id`` has nothing to abort. One sample
        per request (``n`` 1): ``generate`` fans out ``n``."""
        params = sampling_params or SamplingParams()
        if isinstance(params, SamplingParams) and params.n != 1:
            raise ValueError(say(ONE_SAMPLE_PER_REQUEST, n=params.n))
        seq = self.make_sequence(prompt, params)
        try:
            self.add_sequence(seq)
            return seq.seq_id
        except BaseException:
            self.abort([seq.seq_id])
            raise

    def abort_request(self, seq_id: int) -> bool:
        """Take request ``seq_id`` out of the engine, wherever it is, freeing its KV blocks. Returns whether
        it was still waiting or running (False for an unknown, finished or already aborted id)."""
        return bool(self.abort([seq_id]))

    def abort(self, seq_ids: Iterable[int]) -> list[int]:
        """The core's ``abort``, from any thread, never waiting: if another thread is inside the engine, the
        ids are queued and aborted when it next asks ``is_finished()``, and the ids returned are those still
        waiting or running at the call (one may yet finish in the step under way)."""
        ids = list(seq_ids)
        if self.lock.acquire(blocking=False):
            try:
                self._drop_held(set(ids))
                return super().abort(ids)
            finally:
                self.lock.release()
        with self._abort_lock:
            self._queued_aborts.extend(ids)
        accepted = self.scheduler.accepted
        return [i for i in dict.fromkeys(ids) if i in accepted]

    def _drop_held(self, seq_ids: set[int]) -> None:
        """Held samples among ``seq_ids`` never join: marked aborted (they hold no block)."""
        for samples in self._held:
            for seq in samples[1:]:
                if seq.seq_id in seq_ids and seq.finish_reason is None:
                    seq.status, seq.finish_reason, seq.finished_time = SequenceStatus.FINISHED, "aborted", self.clock.now_s()

    def is_finished(self) -> bool:
        """Whether no request is waiting, running or held back, once the aborts other threads queued have run
        and held samples whose prompt is cached have joined (when no other thread is inside the engine;
        else it only reads)."""
        if (self._queued_aborts or self._held) and self.lock.acquire(blocking=False):
            try:
                with self._abort_lock:
                    ids, self._queued_aborts = self._queued_aborts, []
                if ids:
                    self.abort(ids)
                self._release_held()
            finally:
                self.lock.release()
        return self.scheduler.is_finished() and not self._held

    # ---- the loop -------------------------------------------------------------------------------

    step = serialized(LLMEngine.step)
    close = serialized(LLMEngine.close)

    @serialized
    def run_requests(self, requests: list[list[Sequence]], arrival_steps: SequenceOf[int], use_tqdm: bool,
                     caller: str) -> None:
        """Serve ``requests`` (each the samples of ``make_request``) until all are done: request ``i`` arrives
        once ``arrival_steps[i]`` steps of this call have run (an idle engine takes no steps, so the next
        request then arrives at once)."""
        seqs = [seq for samples in requests for seq in samples]
        # Arrival order: by arrival step, then request order (a stable sort keeps ties in order).
        pending = deque(sorted(zip(arrival_steps, requests), key=lambda pair: pair[0]))
        steps_run = 0
        with self.serving(seqs, caller), tqdm(total=len(seqs), desc=say(GENERATING), dynamic_ncols=True,
                                              disable=not use_tqdm) as bar:
            while True:
                while pending and (pending[0][0] <= steps_run or self.is_finished()):
                    self.enqueue_request(pending.popleft()[1])
                if self.is_finished():  # after the aborts other threads queued, and the held samples joined
                    if not pending:
                        break
                    continue  # the next arrival joins at once
                start = self.clock.now_s()
                self.step()
                steps_run += 1
                if use_tqdm:  # formatting the bar's figures costs a few µs a step, against ~0.5 ms of step
                    self._show_rates(bar, self.last_step, self.clock.now_s() - start)

    @staticmethod
    def _show_rates(bar: tqdm, step: Any, elapsed_s: float) -> None:
        """The bar after a step: requests done, and the tokens a second it computed (not nano-vllm's
        ``num_tokens``, which counts cached prefixes and earlier chunks)."""
        kind = "prefill" if step.num_tokens > 0 else "decode"
        bar.set_postfix({kind: f"{step.num_batched_tokens / max(elapsed_s, 1e-9):.0f}tok/s"}, refresh=False)
        bar.update(len(step.finished))

    @contextmanager
    def serving(self, seqs: list[Sequence], caller: str) -> Iterator[None]:
        """The frame of a call (``caller``) that feeds ``seqs`` to the engine and steps until they are done:
        GENERATE_START, then GENERATE_FINISH once the block completes; if it raises, every one of ``seqs`` is
        aborted first. It refuses (``ValueError``) to start while requests queued with ``add_request`` are
        unfinished, since it returns its own requests' outputs."""
        if not self.is_finished():
            raise ValueError(say(REQUESTS_UNFINISHED, caller=caller, seq_ids=sorted(self.scheduler.accepted)))
        try:
            with self.generating(len(seqs)):
                yield
        except BaseException:
            self.abort(seq.seq_id for seq in seqs)
            raise
