"""Execution layer: tensor-parallel workers — ranks 1…N−1 in processes of their own, driven by rank 0.

With ``tensor_parallel_size = N > 1`` every rank holds one N-th of every layer (its attention heads, its
slice of the MLP and of the vocabulary, see ``layers/linear.py`` and ``layers/embed_head.py``) and one
N-th of the KV cache (its KV heads, in every block). A forward pass therefore runs on all ranks at once,
in lockstep: the all-reduces in ``RowParallelLinear`` / ``VocabParallelEmbedding`` and the gather in
``ParallelLMHead`` pair up call by call across processes. Rank 0 lives in the engine process; ranks
1…N−1 are spawned (never forked: a forked child cannot use CUDA) and talk ``torch.distributed`` — gloo on
CPU, NCCL on GPU — meeting at ``tcp://127.0.0.1:<free port>`` chosen by rank 0.

How rank 0 drives the workers, as nano-vllm does (seed 003, ``LLMEngine``)::

    rank 0 (engine process)                        rank r (worker process)
    write the call into shared memory              doorbell.acquire()
    doorbell.release() for every worker  ───▶      read the call
    ModelRunner.run(seqs)    ◀── collectives ──▶   ModelRunner.run(views of the same seqs)
    sample, return token ids                       (no logits here: the LM head gathers them on rank 0)

The call, in the shared-memory mailbox: 4 bytes, the little-endian length ``n``, then ``n`` bytes of UTF-8
JSON — plain data only, no pickle::

    {"method": "run", "is_prefill": true, "seqs": [
        {"seq_id": 3, "num_tokens": 40, "num_cached_tokens": 32, "num_scheduled_tokens": 8,
         "token_ids": [...],          # prefill: the scheduled chunk token_ids[cached:cached+scheduled]
                                      # decode: [last_token]
         "block_table": [5, 9, 2], "temperature": 0.0, "seed": null}]}
    {"method": "exit"}

One doorbell per worker says "a new call is in the mailbox". nano-vllm rings an ``Event``; we ring a
semaphore because ``Event.set()`` waits until every sleeping waiter has acknowledged the wake-up, so a
worker killed inside ``Event.wait()`` would hang rank 0 forever, while ``Semaphore.release()`` never blocks.
Rank 0 writes the next call only after the previous ``run`` returned, and that needed every worker inside
its collectives — so every worker had already read the previous call: one mailbox is enough.

Lifecycle: ``TensorParallelRunner`` spawns the workers, then builds rank 0's ``ModelRunner``, whose
start-up (process group, weights, warm-up, KV cache) runs in step with theirs. ``close()`` — or garbage
collection, or interpreter exit, through ``weakref.finalize`` — sends ``exit``, joins each worker with a
timeout and terminates / kills what is left. A worker that dies surfaces as a ``RuntimeError`` naming its
rank: its liveness is checked before each call, and gloo reports a dead peer as a reset connection (the
collectives also time out, ``TP_TIMEOUT``). Any failure during a call leaves the ranks out of step (some
collective was left half-way), so the group is shut down and the engine refuses further calls.

Emits nothing itself: rank 0's ``ModelRunner`` gathers every rank's start-up facts and emits them
(TP_RUNTIME_INIT once per rank; MODEL_WEIGHTS_LOADED and KV_BUDGET_ESTIMATE with per-rank lists).
Workers have no recorder.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import signal
import socket
import weakref
from dataclasses import dataclass
from multiprocessing.connection import wait as wait_for_sentinels
from multiprocessing.shared_memory import SharedMemory
from multiprocessing.synchronize import Semaphore
from typing import Any

import torch
import torch.distributed as dist

from nanovllm_teach.config import Config
from nanovllm_teach.engine.model_runner import ModelRunner
from nanovllm_teach.engine.sequence import Sequence
from nanovllm_teach.trace.recorder import NullRecorder, Recorder

HEADER_BYTES = 4  # the little-endian length of the JSON call that follows it in the mailbox
JOIN_TIMEOUT_S = 10.0  # how long a worker gets to leave on its own before it is terminated, then killed
PARENT_POLL_S = 1.0  # how often an idle worker checks that the engine process still exists
DEATH_WAIT_S = 2.0  # after a failed call, how long to wait for a dying worker's exit code


# ---- the message format ---------------------------------------------------------------------------

def message_capacity(config: Config) -> int:
    """Bytes of mailbox that the largest call this configuration can produce needs.

    A step carries at most ``max_num_batched_tokens`` new tokens and ``max_num_seqs`` sequences, each with
    a block table of at most ``ceil(max_model_len / block_size)`` entries. 24 bytes bound one JSON number
    with its separator; 256 bytes bound one sequence's keys and scalars (a seed has up to 19 digits).
    """
    blocks_per_seq = -(-config.max_model_len // config.kvcache_block_size)
    return (HEADER_BYTES + 1024 + 24 * config.max_num_batched_tokens
            + config.max_num_seqs * (256 + 24 * blocks_per_seq))


def run_message(seqs: list[Sequence], is_prefill: bool) -> dict[str, Any]:
    """The ``run`` call as plain data: what ``ModelRunner.run`` reads from each sequence, nothing more."""
    def new_tokens(seq: Sequence) -> list[int]:
        if not is_prefill:
            return [seq.last_token]
        return seq.token_ids[seq.num_cached_tokens:seq.num_cached_tokens + seq.num_scheduled_tokens]

    return {"method": "run", "is_prefill": is_prefill, "seqs": [
        {"seq_id": seq.seq_id, "num_tokens": seq.num_tokens, "num_cached_tokens": seq.num_cached_tokens,
         "num_scheduled_tokens": seq.num_scheduled_tokens, "token_ids": new_tokens(seq),
         "block_table": seq.block_table, "temperature": seq.temperature, "seed": seq.seed}
        for seq in seqs]}


def write_message(buf: memoryview, message: dict[str, Any]) -> None:
    data = json.dumps(message, separators=(",", ":")).encode()
    if HEADER_BYTES + len(data) > len(buf):
        raise RuntimeError(f"tensor-parallel call of {len(data)} bytes does not fit the {len(buf)}-byte mailbox")
    buf[:HEADER_BYTES] = len(data).to_bytes(HEADER_BYTES, "little")
    buf[HEADER_BYTES:HEADER_BYTES + len(data)] = data


def read_message(buf: memoryview) -> dict[str, Any]:
    size = int.from_bytes(buf[:HEADER_BYTES], "little")
    return json.loads(bytes(buf[HEADER_BYTES:HEADER_BYTES + size]))


@dataclass(slots=True)
class SequenceView:
    """What ``ModelRunner.run`` reads from a ``Sequence``, rebuilt on a worker from one message entry."""

    seq_id: int
    num_tokens: int
    num_cached_tokens: int
    num_scheduled_tokens: int
    new_token_ids: list[int]
    block_table: list[int]
    temperature: float
    seed: int | None
    block_size: int

    @classmethod
    def from_message(cls, entry: dict[str, Any], block_size: int) -> "SequenceView":
        return cls(entry["seq_id"], entry["num_tokens"], entry["num_cached_tokens"],
                   entry["num_scheduled_tokens"], entry["token_ids"], entry["block_table"],
                   entry["temperature"], entry["seed"], block_size)

    @property
    def token_ids(self) -> list[int]:
        # prepare_prefill reads token_ids[num_cached_tokens:num_cached_tokens + num_scheduled_tokens] only:
        # the cached prefix is already in this rank's KV cache, so it is never sent and reads as zeros here.
        return [0] * self.num_cached_tokens + self.new_token_ids

    @property
    def last_token(self) -> int:
        return self.new_token_ids[-1]

    @property
    def last_block_num_tokens(self) -> int:
        num_blocks = -(-self.num_tokens // self.block_size)
        return self.num_tokens - (num_blocks - 1) * self.block_size


def cpu_threads_per_rank(config: Config) -> int:
    """On CPU the ranks share the machine's cores: each gets its share, instead of every rank starting a
    thread per core and all of them fighting over every core (several times slower on a 2-core laptop)."""
    return max(1, (os.cpu_count() or 1) // config.tensor_parallel_size)


# ---- a worker process -----------------------------------------------------------------------------

def worker_main(config: Config, rank: int, dist_init: str, shm_name: str, doorbell: Semaphore) -> None:
    """Body of worker process ``rank``: build this rank's shard of the model, then serve rank 0's calls."""
    # Ctrl-C reaches every process of the terminal's group; only rank 0 decides what an interrupt means.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if torch.device(config.device).type == "cpu":
        torch.set_num_threads(cpu_threads_per_rank(config))
    runner = ModelRunner(config, rank, NullRecorder(), dist_init=dist_init)
    shm = SharedMemory(name=shm_name)
    parent = mp.parent_process()
    try:
        while True:
            while not doorbell.acquire(timeout=PARENT_POLL_S):
                if parent is not None and not parent.is_alive():
                    return  # the engine process is gone without saying "exit": nobody will call again
            message = read_message(shm.buf)
            if message["method"] == "exit":
                return
            views = [SequenceView.from_message(entry, config.kvcache_block_size) for entry in message["seqs"]]
            runner.run(views, message["is_prefill"])
    finally:
        shm.close()
        dist.destroy_process_group()


# ---- rank 0's side ----------------------------------------------------------------------------------

def free_port() -> int:
    """A TCP port nobody listens on right now (the OS picks it), for the ranks to meet at."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class WorkerPool:
    """Ranks 1…N−1 as rank 0 sees them: their processes, the shared-memory mailbox and a doorbell each.

    Holds no reference to the runner that owns it, so that it can be that runner's finalizer.
    """

    def __init__(self, config: Config) -> None:
        ctx = mp.get_context("spawn")
        self.dist_init = f"tcp://127.0.0.1:{free_port()}"
        self.shm = SharedMemory(create=True, size=message_capacity(config))
        self.doorbells: list[Semaphore] = []
        self.processes: list[mp.process.BaseProcess] = []
        self.broken = False  # set when the ranks may be out of step: then nobody can read an "exit" call
        self.closed = False
        self.rank0_threads = torch.get_num_threads()  # this process is rank 0: its share of cores until shutdown
        if torch.device(config.device).type == "cpu":
            torch.set_num_threads(cpu_threads_per_rank(config))
        try:
            for rank in range(1, config.tensor_parallel_size):
                doorbell = ctx.Semaphore(0)
                process = ctx.Process(target=worker_main, name=f"nanovllm-tp-rank{rank}", daemon=True,
                                      args=(config, rank, self.dist_init, self.shm.name, doorbell))
                process.start()
                self.doorbells.append(doorbell)
                self.processes.append(process)
        except BaseException:
            self.broken = True
            self.shutdown()
            raise

    def send(self, message: dict[str, Any]) -> None:
        write_message(self.shm.buf, message)
        for doorbell in self.doorbells:
            doorbell.release()

    def dead_ranks(self, wait_s: float = 0.0) -> list[str]:
        """``"rank R (pid P, how it ended)"`` for every worker that has exited, after waiting up to ``wait_s``
        for the first one to (a dead peer can reach gloo as a reset connection before its exit code is in)."""
        by_sentinel = {process.sentinel: process for process in self.processes}
        for sentinel in wait_for_sentinels(list(by_sentinel), timeout=wait_s):
            # A ready sentinel means the process is exiting: the kernel closes its files a moment before
            # its exit code can be collected.
            by_sentinel[sentinel].join(timeout=JOIN_TIMEOUT_S)
        dead = []
        for rank, process in enumerate(self.processes, start=1):
            if not process.is_alive():
                code = process.exitcode
                how = f"killed by {signal.Signals(-code).name}" if code and code < 0 else f"exit code {code}"
                dead.append(f"rank {rank} (pid {process.pid}, {how})")
        return dead

    def shutdown(self) -> None:
        """Stop every worker and release the group; safe to call more than once."""
        if self.closed:
            return
        self.closed = True
        healthy = not self.broken and not self.dead_ranks()
        if healthy:
            self.send({"method": "exit"})
        for process in self.processes:
            # A healthy worker leaves on "exit"; one stuck in a collective with a dead peer never will.
            process.join(timeout=JOIN_TIMEOUT_S if healthy else 0)
            if process.is_alive():
                process.terminate()
                process.join(timeout=JOIN_TIMEOUT_S)
            if process.is_alive():
                process.kill()
                process.join()
        if dist.is_initialized():
            dist.destroy_process_group()  # rank 0's end of the group, so a later engine can build its own
        torch.set_num_threads(self.rank0_threads)
        self.shm.close()
        self.shm.unlink()


class TensorParallelRunner:
    """The engine's model runner when ``tensor_parallel_size > 1``: rank 0's ``ModelRunner`` plus the
    workers. It answers the same narrow call, ``run(seqs, is_prefill)``, so the other layers do not notice."""

    def __init__(self, config: Config, recorder: Recorder) -> None:
        if dist.is_initialized():
            raise RuntimeError("a tensor-parallel engine is already running in this process: close() it first "
                               "(the layers take their shard from the process-wide default group)")
        self.pool = WorkerPool(config)
        # Garbage collection or interpreter exit stops the workers even without close(). The finalizer holds
        # the pool, never self, so it does not keep this runner alive.
        self._finalizer = weakref.finalize(self, self.pool.shutdown)
        self.failure: str | None = None
        try:
            self.runner = ModelRunner(config, 0, recorder, dist_init=self.pool.dist_init)
        except BaseException as exc:
            # A collective that lost its peer raises RuntimeError; rank 0's own errors (a bad checkpoint,
            # Ctrl-C) are raised as they are, even when the workers died of the same cause.
            if self._stop(f"start-up failed: {exc!r}") and isinstance(exc, RuntimeError):
                raise RuntimeError(f"tensor-parallel {self.failure} during start-up") from exc
            raise
        self.num_kvcache_blocks = self.runner.num_kvcache_blocks
        self.attention_backend = self.runner.attention_backend
        self.device = self.runner.device
        self.dtype = self.runner.dtype

    def run(self, seqs: list[Sequence], is_prefill: bool) -> list[int]:
        """Send the call to every worker, run it here as rank 0, return rank 0's sampled token ids."""
        if self.failure is not None:
            raise RuntimeError(f"the tensor-parallel workers are shut down ({self.failure}); create a new LLM")
        if self.pool.dead_ranks():
            self._stop("a worker died")
            raise RuntimeError(f"tensor-parallel {self.failure} between steps; create a new LLM")
        try:
            self.pool.send(run_message(seqs, is_prefill))
            return self.runner.run(seqs, is_prefill)
        except BaseException as exc:
            if self._stop(f"a call failed: {exc!r}") and isinstance(exc, RuntimeError):
                raise RuntimeError(f"tensor-parallel {self.failure} during a "
                                   f"{'prefill' if is_prefill else 'decode'} step; create a new LLM") from exc
            raise

    def _stop(self, failure: str) -> list[str]:
        """Shut the group down after a failure; returns the workers that died, if any did (they become
        the recorded ``failure``)."""
        self.pool.broken = True
        dead = self.pool.dead_ranks(wait_s=DEATH_WAIT_S)
        self.failure = f"worker {', '.join(dead)} died" if dead else failure
        self._finalizer()
        return dead

    def close(self) -> None:
        """Stop the workers and leave the process group (the engine is done with them)."""
        if self.failure is None:
            self.failure = "close() was called"
        self._finalizer()
