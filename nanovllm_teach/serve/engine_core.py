"""Serving (orchestration): the engine-core process, which owns the engine and steps it, as vLLM v1's
``EngineCoreProc`` does; the API process (``serve/app.py``) starts it through ``serve/core_client.py``.

Started as ``python -m nanovllm_teach.serve.engine_core SPEC`` (``SPEC``: the JSON of ``CoreSpec``), it
builds the engine (an ``LLM``, recording to the trace file and, with the live page on, handing each
teaching event on), connects its two ZMQ sockets, says ``Ready`` and loops: it takes what the API process
sent (``Submit``, ``Abort``, ``Shutdown``: ``serve/messages.py``) between steps, so a request joins, and an
abort takes effect, at a step boundary (the step stays a transaction and no block is freed mid-step), then
steps the engine once and sends one ``StepOutput``: the new tokens of every request the step advanced,
each request's times for the metrics, the teaching events. Detokenizing and SSE framing are the API
process's: this process spends its Python on the engine alone.

Before it says ``Ready`` it writes its whole KV cache once (``commit_kv_cache``). On a CPU the engine maps
the cache so that a page costs memory only once written, which keeps a notebook's ``LLM`` small; but the block
manager hands out free blocks oldest-freed first (the order its prefix cache evicts in), so a server that
keeps taking requests writes into every block in turn, and its RSS crept up by the cache's size over
thousands of requests (``benchmarks/bench_serve_soak.py``: +127 MB of the core's 768 MB cache from request
1,000 to 10,000, everything else flat). A server runs for long, so it holds what it will come to hold from
the start: its memory is known when it starts, and a machine without it fails then, not hours later.

Each request is validated by ``Frontend.make_request`` (the one validator) and queued by
``enqueue_request`` with its arrival time (the trace's REQUEST_ENQUEUE says how long before it the request
arrived); a refusal is an ``Update`` with ``refused`` set and nothing queued. A step that raises aborts its
requests and the core goes on; anything else that raises ends the process after a ``Failed`` naming it.
The process ignores SIGINT and SIGTERM (a Ctrl-C or a service manager reaches the whole process group):
the API process drains first, then sends ``Shutdown``; if the API process goes away without one, the core
sees its parent change and exits, so no engine is left running without a server.

Emits nothing itself (the engine emits its events into its recorder, with real arrival times).
"""

from __future__ import annotations

import gc
import os
import signal
import sys
from dataclasses import dataclass, field
from typing import Any

import msgspec

# The engine first: its config.py asks libgomp for passive waiting before torch loads.
from nanovllm_teach.llm import LLM  # isort: skip

import zmq

from nanovllm_teach.engine.decisions import Allocated, Preempted
from nanovllm_teach.engine.model_runner import ModelRunner
from nanovllm_teach.engine.sequence import Sequence
from nanovllm_teach.engine.stopping import completion_text
from nanovllm_teach.i18n import Text, say
from nanovllm_teach.outputs import api_finish
from nanovllm_teach.sampling_params import SamplingParams
from nanovllm_teach.serve.messages import (Abort, CoreSpec, Failed, Finished, FromCore, Ready, Shutdown, StepOutput,
                                           StepStats, Submit, ToCore, Update)
from nanovllm_teach.trace.recorder import TraceRecorder
from nanovllm_teach.trace.schema import TraceEvent

# What the clients of requests under way are told, in the server's language (the API process sets it).
ENGINE_FAILED = Text(en="the engine failed: {kind}: {error}", zh="引擎出错：{kind}: {error}")
ENGINE_STOPPED = Text(en="the engine stopped: {kind}: {error}", zh="引擎已停止：{kind}: {error}")
SHUTTING_DOWN = Text(en="the server is shutting down", zh="服务器正在关闭")

IDLE_POLL_MS = 200  # an idle core looks up this often to see whether its parent is still there


@dataclass
class _Live:
    submit: Submit
    samples: list[Sequence]
    sent: list[int]  # per sample: completion tokens delivered so far
    counted: list[int]  # per sample: completion tokens counted in the metrics so far
    last_token_s: list[float | None]  # per sample: when its last token came (inter-token latency)
    num_finished: int = 0
    scheduled_s: float | None = None  # the start of the step that first scheduled it
    first_token_s: float | None = None
    num_cached_prompt_tokens: int | None = None  # its first prefill's prefix-cache hits (sample 0's)


@dataclass
class EngineCore:
    engine: LLM
    outputs: Any  # the PUSH socket to the API process
    events: list[TraceEvent] = field(default_factory=list)  # recorded since the last output (live page on)
    _live: dict[int, _Live] = field(default_factory=dict)  # by request id
    _by_seq: dict[int, tuple[int, int]] = field(default_factory=dict)  # seq_id -> (request id, sample index)
    _out: StepOutput = field(default_factory=StepOutput)
    stopping: bool = False

    def take(self, command: ToCore) -> None:
        if isinstance(command, Shutdown):
            self.stopping = True
        elif isinstance(command, Abort):
            for request_id in command.request_ids:
                live = self._live.pop(request_id, None)
                if live is not None:
                    self.engine.abort(seq.seq_id for seq in live.samples)
                    self._forget(live)
                    self._out.aborted += 1
            self._out.stats = self._stats(None)
        else:
            self._admit(command)

    def _admit(self, submit: Submit) -> None:
        try:
            samples = self.engine.make_request(submit.prompt_token_ids, SamplingParams(**submit.params))
        except (ValueError, TypeError) as error:
            self._out.updates.append(Update(submit.request_id, error=str(error), refused=True))
            return
        for seq in samples:  # the trace's REQUEST_ENQUEUE says how long before it the request arrived
            seq.arrival_time = submit.arrival_s
        self.engine.enqueue_request(samples)
        n = len(samples)
        self._live[submit.request_id] = _Live(submit, samples, [0] * n, [0] * n, [None] * n)
        for index, seq in enumerate(samples):
            self._by_seq[seq.seq_id] = (submit.request_id, index)
        self._out.updates.append(Update(submit.request_id, accepted=True,
                                        num_prompt_tokens=samples[0].num_prompt_tokens))

    def step(self) -> None:
        start = self.engine.clock.now_s()
        try:
            self.engine.step()
        except Exception as error:  # the step was rolled back: its requests cannot go on
            print(f"engine core: a step failed, aborting every request: {type(error).__name__}: {error}",
                  file=sys.stderr, flush=True)
            self.abort_all(say(ENGINE_FAILED, kind=type(error).__name__, error=error))
            return
        step = self.engine.last_step
        now = self.engine.clock.now_s()
        out = self._out
        hits = {d.seq_id: d.num_cached_tokens for d in step.decisions if isinstance(d, Allocated)}
        for seq in step.seqs:
            request_id, index = self._by_seq.get(seq.seq_id, (None, 0))
            live = self._live.get(request_id) if request_id is not None else None
            if live is None:
                continue
            if live.scheduled_s is None:
                live.scheduled_s = start
            if live.num_cached_prompt_tokens is None and seq.seq_id in hits:
                live.num_cached_prompt_tokens = hits[seq.seq_id]
            if live.first_token_s is None and seq.num_completion_tokens:
                live.first_token_s = now
                out.first_tokens.append((now - live.submit.arrival_s, seq.num_prompt_tokens,
                                         live.num_cached_prompt_tokens or 0))
            new = seq.num_completion_tokens - live.counted[index]
            if new:
                last = live.last_token_s[index]
                out.tokens.append((new, None if last is None else now - last))
                live.counted[index], live.last_token_s[index] = seq.num_completion_tokens, now
            sent = live.sent[index]
            if not seq.is_finished and (not live.submit.stream or seq.num_completion_tokens == sent):
                continue  # not streamed, or a prefill chunk that produced no token yet
            out.updates.append(self._update(request_id, seq, index, sent))
            live.sent[index] = seq.num_completion_tokens
            if seq.is_finished:
                live.num_finished += 1
                if live.num_finished == len(live.samples):
                    out.finished.append(Finished(
                        live.submit.arrival_s, seq.num_prompt_tokens, live.first_token_s, now,
                        seq.num_completion_tokens, seq.finish_reason, live.scheduled_s, sum(live.counted),
                        len(live.samples), live.submit.params["max_tokens"], live.num_cached_prompt_tokens or 0,
                        sum(sample.num_preemptions for sample in live.samples)))
                    del self._live[request_id]
                    self._forget(live)
        out.stats = self._stats(step)

    def _update(self, request_id: int, seq: Sequence, index: int, sent: int) -> Update:
        """Sample ``index``'s tokens after the first ``sent``, and, once it has finished, its ending."""
        start = seq.num_prompt_tokens + sent
        logprobs = () if seq.num_logprobs is None else tuple(seq.logprobs[p] for p in range(start, seq.num_tokens))
        new = tuple(seq.token_ids[start:])  # only the new tokens copied, not the whole answer each step
        if not seq.is_finished:
            return Update(request_id, index, new, logprobs, num_prompt_tokens=seq.num_prompt_tokens)
        finish_reason, stop_reason, text = api_finish(seq, completion_text(seq, self.engine.tokenizer))
        return Update(request_id, index, new, logprobs, finish_reason, stop_reason, text,
                      num_prompt_tokens=seq.num_prompt_tokens)

    def _stats(self, step: Any | None) -> StepStats:
        scheduler = self.engine.scheduler
        bm = scheduler.block_manager
        stats = StepStats(len(scheduler.running), len(scheduler.waiting),
                          (bm.num_blocks - bm.num_free_blocks) / bm.num_blocks)
        if step is None:
            return stats
        stats.num_batched_tokens = step.num_batched_tokens
        lengths = {seq.seq_id: seq.num_tokens for seq in step.seqs}
        for decision in step.decisions:
            if isinstance(decision, Allocated):  # a prefill looked its tokens up in the prefix cache
                stats.prefix_queries += lengths.get(decision.seq_id, 0)
                stats.prefix_hits += decision.num_cached_tokens
            elif isinstance(decision, Preempted):
                stats.preemptions += 1
        return stats

    def _forget(self, live: _Live) -> None:
        for seq in live.samples:
            self._by_seq.pop(seq.seq_id, None)

    def abort_all(self, why: str) -> None:
        lives = list(self._live.items())
        self._live.clear()
        self.engine.abort(seq.seq_id for _, live in lives for seq in live.samples)
        for request_id, live in lives:
            self._forget(live)
            self._out.updates.append(Update(request_id, error=why))
        self._out.stats = self._stats(None)

    def flush(self) -> None:
        """Send what the last unit of work produced, if anything."""
        out, self._out = self._out, StepOutput()
        out.events, self.events[:] = list(self.events), []
        if out.updates or out.stats is not None or out.events:
            send(self.outputs, out)


def commit_kv_cache(engine: LLM) -> None:
    """Write every page of the engine's KV cache once, so that all of it is resident from now on (see the
    module's docstring). Only a one-rank model runner is written: a simulated runner holds no cache, and a
    tensor-parallel group's workers hold theirs in their own processes."""
    runner = engine.model_runner
    if isinstance(runner, ModelRunner) and runner.kv_cache is not None and runner.kv_cache.device.type == "cpu":
        runner.kv_cache.zero_()  # zeros over zeros: the values stay, the pages are committed


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(ToCore)


def send(socket: Any, message: FromCore) -> None:
    socket.send(_encoder.encode(message), copy=False)


def serve(core: EngineCore, inputs: Any, parent_pid: int) -> None:
    """Take commands and step until ``Shutdown`` (or the parent is gone), then abort what is left."""
    poller = zmq.Poller()
    poller.register(inputs, zmq.POLLIN)
    engine = core.engine
    while not core.stopping:
        if os.getppid() != parent_pid:  # the API process is gone (killed): nobody is left to serve
            break
        busy = not engine.is_finished()
        if poller.poll(0 if busy else IDLE_POLL_MS):
            while True:  # every command that has come, before the next step
                try:
                    frame = inputs.recv(zmq.NOBLOCK, copy=False)
                except zmq.Again:
                    break
                core.take(_decoder.decode(frame.buffer))
        if not core.stopping and not engine.is_finished():
            core.step()
        core.flush()
    core.abort_all(say(SHUTTING_DOWN))
    core.flush()


def main(spec_json: str) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the API process drains, then says Shutdown
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    spec = msgspec.json.decode(spec_json, type=CoreSpec)
    parent_pid = os.getppid()
    context = zmq.Context()
    outputs = context.socket(zmq.PUSH)
    outputs.setsockopt(zmq.LINGER, 5_000)  # the last outputs (Failed, the shutdown's) still reach the API
    outputs.connect(spec.outputs)
    inputs = context.socket(zmq.PULL)
    inputs.connect(spec.inputs)
    try:
        events: list[TraceEvent] = []
        recorder = None
        if spec.trace is not None or spec.live:
            recorder = TraceRecorder(spec.trace, keep_in_memory=False, sinks=[events.append] if spec.live else [])
        try:
            engine = LLM(spec.model, trace=recorder, trace_metadata={"scenario": "serve"}, **spec.settings)
        except (ValueError, TypeError, OSError) as error:  # a setting or a model folder that will not do
            send(outputs, Failed(str(error), usage=True))
            return 2
        commit_kv_cache(engine)
        # What exists now (the model, torch's and transformers' modules) lives as long as the process: out of the
        # cyclic collector's sight, so that its collections walk only what the steps make, as vLLM's engine core
        # does after start-up (not in a notebook's LLM, where it would keep whatever the notebook held for good).
        gc.collect()
        gc.freeze()
        config = engine.config
        send(outputs, Ready(str(config.model), config.max_model_len, config.max_num_seqs, config.num_kvcache_blocks,
                            config.kvcache_block_size, config.enable_prefix_caching, config.hf_config.vocab_size, None if recorder is None else dict(recorder.header),
                            os.getpid()))
        core = EngineCore(engine, outputs, events)
        try:
            serve(core, inputs, parent_pid)
        finally:
            # Back in the collector's sight: the interpreter's exit then frees them as usual (frozen, the cycles
            # among them outlive it, and nanobind warns of leaked objects on stderr).
            gc.unfreeze()
            engine.close()  # the trace file complete
        return 0
    except BaseException as error:  # the engine is in an unknown state: no request may wait on it any more
        send(outputs, Failed(say(ENGINE_STOPPED, kind=type(error).__name__, error=error)))
        raise
    finally:
        inputs.close(linger=0)
        outputs.close()
        context.term()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
