"""Execution layer: tensor-parallel workers — ranks 1…N−1 in processes of their own, driven by rank 0.

With ``tensor_parallel_size = N > 1`` every rank holds one N-th of every layer (its attention heads, its
slice of the MLP and of the vocabulary, see ``layers/linear.py`` and ``layers/embed_head.py``) and one
N-th of the KV cache (its KV heads, in every block). A forward pass therefore runs on all ranks at once,
in lockstep: the all-reduces in ``RowParallelLinear`` / ``VocabParallelEmbedding`` and the gather in
``ParallelLMHead`` pair up call by call across processes. Rank 0 lives in the engine process; ranks
1…N−1 are fresh Python processes (never forks: a forked child cannot use CUDA) and talk
``torch.distributed`` — gloo on CPU, NCCL on GPU — meeting at ``tcp://127.0.0.1:<free port>`` chosen by
rank 0.

How rank 0 drives the workers, as nano-vllm's ``LLMEngine`` does, except that each call goes down a pipe::

    rank 0 (engine process)                        rank r (worker process)
    write the call into each worker's stdin        read the call from stdin
    ModelRunner.run(batch)   ◀── collectives ──▶   ModelRunner.run(the same batch)
    sample, return token ids                       (no logits here: the LM head gathers them on rank 0)

The call: 4 bytes, the little-endian length ``n``, then ``n`` bytes of JSON — the scheduler's own
``ScheduledBatch`` (``engine/batch.py``), encoded by msgspec; plain data only, no pickle::

    {"type": "run", "batch": {"is_prefill": true, "seqs": [
        {"seq_id": 3, "token_ids": [...], "num_cached_tokens": 32, "num_tokens": 40,
         "block_table": [5, 9, 2], "temperature": 0.0, "seed": null}]}}
    {"type": "exit"}

nano-vllm shares memory and rings an ``Event``; a pipe is simpler and fails loudly both ways: a worker
reading it learns that the engine process is gone (end of file) without polling, and rank 0 writing to a
dead worker gets ``BrokenPipeError`` instead of waiting for it.

Lifecycle: workers are started as ``python -m nanovllm_teach.engine.tp_workers '<json>'``, never through
``multiprocessing``, so they do not import the caller's main file (there may be none: a notebook, a
``python - <<EOF`` heredoc) and nothing is pickled. The JSON names the checkpoint, the settings, the
rank and the ``tcp://127.0.0.1:<free port>`` where the ranks meet. Each worker says "ready" on its stdout
just before it joins the group; rank 0 waits for every "ready" before joining itself, so a worker that
dies at start-up is reported in seconds, with the end of its own error output (kept in a temporary file),
instead of after the rendezvous times out. Then ``TensorParallelRunner`` builds rank 0's ``ModelRunner``,
whose start-up (process group, weights, warm-up, KV cache) runs in step with theirs. ``close()`` — or
garbage collection, or interpreter exit, through ``weakref.finalize`` — sends ``exit``, waits for each
worker with a timeout and terminates / kills what is left. A worker that dies surfaces as a
``RuntimeError`` naming its rank: its liveness is checked before each call, and gloo reports a dead peer as
a reset connection (the collectives also time out, ``TP_TIMEOUT``). Any failure during a call leaves the
ranks out of step (some collective was left half-way), so the group is shut down and the engine refuses
further calls.

Emits nothing itself: rank 0's ``ModelRunner`` gathers every rank's start-up facts and emits them
(TP_RUNTIME_INIT once per rank; MODEL_WEIGHTS_LOADED and KV_BUDGET_ESTIMATE with per-rank lists).
Workers have no recorder.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
import weakref
from pathlib import Path
from typing import IO, Any

import msgspec
import torch
import torch.distributed as dist

from nanovllm_teach.config import Config
from nanovllm_teach.engine.batch import ScheduledBatch
from nanovllm_teach.engine.model_runner import TP_ALREADY_RUNNING, ModelRunner
from nanovllm_teach.engine.tp_group import TP_TIMEOUT
from nanovllm_teach.engine.runner import RunOutput
from nanovllm_teach.i18n import Text, say
from nanovllm_teach.trace.recorder import NullRecorder, Recorder

# What went wrong, as the group's recorded failure (said when it happens) and as the error a caller reads.
WORKERS_DIED = Text(en="worker {workers} died", zh="worker {workers} 已退出")
A_WORKER_DIED = Text(en="a worker died", zh="有一个 worker 退出了")
START_UP_FAILED = Text(en="start-up failed: {error}", zh="启动失败：{error}")
CALL_FAILED = Text(en="a call failed: {error}", zh="一次调用失败：{error}")
CLOSE_CALLED = Text(en="close() was called", zh="已调用 close()")
NOT_STARTED_IN_TIME = Text(en="tensor-parallel workers did not start within {seconds:.0f} s",
                           zh="张量并行 worker 没有在 {seconds:.0f} 秒内启动")
NOT_STARTED = Text(en="tensor-parallel worker {workers} failed to start", zh="张量并行 worker {workers} 没能启动")
FAILED_AT_START = Text(en="tensor-parallel {failure} during start-up", zh="张量并行：启动期间，{failure}")
SHUT_DOWN = Text(en="the tensor-parallel workers are shut down ({failure}); create a new LLM",
                 zh="张量并行 worker 已经关闭（{failure}）；请新建一个 LLM")
FAILED_BETWEEN_STEPS = Text(en="tensor-parallel {failure} between steps; create a new LLM",
                            zh="张量并行：两步之间，{failure}；请新建一个 LLM")
FAILED_IN_STEP = Text(en="tensor-parallel {failure} during a {phase} step; create a new LLM",
                      zh="张量并行：一个{phase}步中，{failure}；请新建一个 LLM")
PHASES = {True: Text(en="prefill", zh="预填充"), False: Text(en="decode", zh="解码")}

HEADER_BYTES = 4  # the little-endian length of the JSON call that follows it
READY = b"ready\n"  # what a worker writes on its stdout just before it joins the process group
JOIN_TIMEOUT_S = 10.0  # how long a worker gets to leave on its own before it is terminated, then killed
DEATH_WAIT_S = 2.0  # after a failed call, how long to wait for a dying worker's exit code
ERROR_TAIL_LINES = 15  # how much of a dead worker's error output goes into the exception


# ---- the message format ---------------------------------------------------------------------------

class RunCall(msgspec.Struct, tag="run"):
    """Compute this step's batch (rank 0 computes the same one at the same time)."""

    batch: ScheduledBatch


class ExitCall(msgspec.Struct, tag="exit"):
    """Leave the group and exit."""


Call = RunCall | ExitCall
_decode_call = msgspec.json.Decoder(Call).decode


def write_message(stream: IO[bytes], call: Call) -> None:
    data = msgspec.json.encode(call)
    stream.write(len(data).to_bytes(HEADER_BYTES, "little") + data)
    stream.flush()


def read_message(stream: IO[bytes]) -> Call | None:
    """The next call, or None at end of file (the engine process has gone)."""
    header = stream.read(HEADER_BYTES)
    if len(header) < HEADER_BYTES:
        return None
    return _decode_call(stream.read(int.from_bytes(header, "little")))


# ---- a worker process -----------------------------------------------------------------------------

def worker_main(spec: dict[str, Any]) -> None:
    """Body of worker process ``spec["rank"]``: build this rank's shard of the model, then serve rank 0's
    calls from stdin until ``exit`` or end of file."""
    # Ctrl-C reaches every process of the terminal's group; only rank 0 decides what an interrupt means.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # stdout is the "ready" channel to rank 0; anything else printed goes to the error output instead.
    ready = os.fdopen(os.dup(sys.stdout.fileno()), "wb", buffering=0)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    config = Config.from_kwargs(spec["model"], spec["settings"])
    ready.write(READY)  # kept open: rank 0 reads its end of file as "this worker has exited"
    runner = ModelRunner(config, spec["rank"], NullRecorder(), dist_init=spec["dist_init"])
    calls = sys.stdin.buffer
    try:
        while isinstance(call := read_message(calls), RunCall):
            runner.run(call.batch)
    finally:
        dist.destroy_process_group()


# ---- rank 0's side ----------------------------------------------------------------------------------

def free_port() -> int:
    """A TCP port nobody listens on right now (the OS picks it), for the ranks to meet at."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _stop_process(process: subprocess.Popen, grace_s: float) -> None:
    """Give ``process`` ``grace_s`` seconds to leave on its own, then terminate it, then kill it."""
    for stop in (None, process.terminate, process.kill):
        if stop is not None:
            stop()
        try:
            process.wait(timeout=grace_s if stop is None else JOIN_TIMEOUT_S)
            return
        except subprocess.TimeoutExpired:
            continue


class WorkerPool:
    """Ranks 1…N−1 as rank 0 sees them: their processes, each with a pipe for calls (its stdin), a pipe
    that says "ready" and then, by closing, "exited" (its stdout), and a file with its error output.

    Holds no reference to the runner that owns it, so that it can be that runner's finalizer.
    """

    def __init__(self, config: Config) -> None:
        self.dist_init = f"tcp://127.0.0.1:{free_port()}"
        self.processes: list[subprocess.Popen] = []
        self.error_logs: list[IO[bytes]] = []
        self.broken = False  # set when the ranks may be out of step: then nobody can read an "exit" call
        self.closed = False
        # This process is rank 0: on a CPU its ModelRunner takes its share of the cores (utils/threads.py, the
        # ranks dividing them) until shutdown.
        self.rank0_threads = torch.get_num_threads()
        # The workers import this very copy of the package, wherever it was imported from.
        package_root = str(Path(__file__).resolve().parents[2])  # .../nanovllm_teach/engine/tp_workers.py
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))}
        try:
            for rank in range(1, config.tensor_parallel_size):
                spec = {"model": config.model, "settings": config.settings(), "rank": rank,
                        "dist_init": self.dist_init}
                log = tempfile.TemporaryFile()
                self.error_logs.append(log)
                process = subprocess.Popen(
                    [sys.executable, "-m", "nanovllm_teach.engine.tp_workers", json.dumps(spec)],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, env=env)
                process.name = f"nanovllm-tp-rank{rank}"  # a name to show (notebook 09 prints it)
                self.processes.append(process)
            self._wait_until_ready()
        except BaseException:
            self.broken = True
            self.shutdown()
            raise

    def _wait_until_ready(self) -> None:
        """Until every worker is about to join the group; a worker that exits first is an error naming it."""
        pending = {process.stdout.fileno(): process for process in self.processes}
        deadline = time.monotonic() + TP_TIMEOUT.total_seconds()
        while pending:
            readable, _, _ = select.select(list(pending), [], [], max(0.0, deadline - time.monotonic()))
            if not readable:
                raise RuntimeError(say(NOT_STARTED_IN_TIME, seconds=TP_TIMEOUT.total_seconds()))
            for fd in readable:
                if os.read(fd, len(READY)) != READY:
                    raise RuntimeError(say(NOT_STARTED, workers=self.describe_dead(wait_s=JOIN_TIMEOUT_S)))
                del pending[fd]

    def send(self, call: Call) -> None:
        for process in self.processes:
            write_message(process.stdin, call)

    def dead_ranks(self, wait_s: float = 0.0) -> list[str]:
        """``"rank R (pid P, how it ended)"`` for every worker that has exited, after waiting up to ``wait_s``
        for the first one to (a dead peer can reach gloo as a reset connection before its exit code is in)."""
        by_fd = {process.stdout.fileno(): process for process in self.processes}
        exiting, _, _ = select.select(list(by_fd), [], [], wait_s)  # a closed stdout: the worker is exiting
        for fd in exiting:
            try:
                by_fd[fd].wait(timeout=JOIN_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                pass
        dead = []
        for rank, process in enumerate(self.processes, start=1):
            code = process.poll()
            if code is not None:
                how = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
                dead.append(f"rank {rank} (pid {process.pid}, {how})")
        return dead

    def describe_dead(self, wait_s: float = 0.0) -> str:
        """The dead workers and the end of each one's own error output."""
        dead = self.dead_ranks(wait_s)
        parts = []
        for rank, process in enumerate(self.processes, start=1):
            if process.poll() is None:
                continue
            log = self.error_logs[rank - 1]
            log.seek(0)
            tail = log.read().decode(errors="replace").strip().splitlines()[-ERROR_TAIL_LINES:]
            parts.append(f"{dead.pop(0)}" + ("".join(f"\n    {line}" for line in tail) if tail else ""))
        return "; ".join(parts) or "(none has exited)"

    def shutdown(self) -> None:
        """Stop every worker and release the group; safe to call more than once."""
        if self.closed:
            return
        self.closed = True
        healthy = not self.broken and not self.dead_ranks()
        if healthy:
            try:
                self.send(ExitCall())
            except BrokenPipeError:  # it died after all
                healthy = False
        for process in self.processes:
            # A healthy worker leaves on "exit"; one stuck in a collective with a dead peer never will.
            _stop_process(process, grace_s=JOIN_TIMEOUT_S if healthy else 0)
            process.stdout.close()
            try:
                process.stdin.close()
            except BrokenPipeError:
                pass  # closing flushes what is left to a worker that has gone
        for log in self.error_logs:
            log.close()
        if dist.is_initialized():
            dist.destroy_process_group()  # rank 0's end of the group, so a later engine can build its own
        torch.set_num_threads(self.rank0_threads)


class TensorParallelRunner:
    """The engine's model runner when ``tensor_parallel_size > 1``: rank 0's ``ModelRunner`` plus the
    workers. It answers the same narrow call, ``run(batch)``, so the other layers do not notice."""

    def __init__(self, config: Config, recorder: Recorder) -> None:
        if dist.is_initialized():
            # The layers take their shard from the process-wide default group: one group per process.
            raise RuntimeError(say(TP_ALREADY_RUNNING))
        self.pool = WorkerPool(config)
        # Garbage collection or interpreter exit stops the workers even without close(). The finalizer holds
        # the pool, never self, so it does not keep this runner alive.
        self._finalizer = weakref.finalize(self, self.pool.shutdown)
        self.failure: str | None = None
        try:
            self.runner = ModelRunner(config, 0, recorder, dist_init=self.pool.dist_init)
        except BaseException as exc:
            # A collective that lost its peer raises RuntimeError (a pipe to a dead worker, OSError); rank 0's
            # own errors (a bad checkpoint, Ctrl-C) are raised as they are, even when the workers died of the
            # same cause.
            if self._stop(say(START_UP_FAILED, error=repr(exc))) and isinstance(exc, (RuntimeError, OSError)):
                raise RuntimeError(say(FAILED_AT_START, failure=self.failure)) from exc
            raise
        self.num_kvcache_blocks = self.runner.num_kvcache_blocks

    def run(self, batch: ScheduledBatch) -> RunOutput:
        """Send the batch to every worker, run it here as rank 0, return rank 0's sampled token ids (rank 0
        samples, and reports what it did)."""
        if self.failure is not None:
            raise RuntimeError(say(SHUT_DOWN, failure=self.failure))
        if self.pool.dead_ranks():
            self._stop(say(A_WORKER_DIED))
            raise RuntimeError(say(FAILED_BETWEEN_STEPS, failure=self.failure))
        try:
            self.pool.send(RunCall(batch))
            return self.runner.run(batch)
        except BaseException as exc:
            if self._stop(say(CALL_FAILED, error=repr(exc))) and isinstance(exc, (RuntimeError, OSError)):
                raise RuntimeError(say(FAILED_IN_STEP, failure=self.failure, phase=say(PHASES[batch.is_prefill]))) from exc
            raise

    def _stop(self, failure: str) -> list[str]:
        """Shut the group down after a failure; returns the workers that died, if any did (they, with the
        end of their error output, become the recorded ``failure``)."""
        self.pool.broken = True
        dead = self.pool.dead_ranks(wait_s=DEATH_WAIT_S)
        self.failure = say(WORKERS_DIED, workers=self.pool.describe_dead()) if dead else failure
        self._finalizer()
        return dead

    def close(self) -> None:
        """Stop the workers and leave the process group (the engine is done with them)."""
        if self.failure is None:
            self.failure = say(CLOSE_CALLED)
        self._finalizer()


if __name__ == "__main__":  # a worker: python -m nanovllm_teach.engine.tp_workers '<json spec>'
    worker_main(json.loads(sys.argv[1]))
