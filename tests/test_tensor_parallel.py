"""Tensor parallelism on CPU: ``tensor_parallel_size=2`` (rank 0 in this process, rank 1 a worker process
talking gloo) gives exactly the greedy tokens of one rank, reports every rank in the trace, rejects sizes
that cannot shard the model before starting anything, works from a script with no main file, reports a
worker that dies at start-up in seconds with its own error, and never leaves a worker behind — after
close(), garbage collection, interpreter exit, or a worker killed mid-run (which must raise naming its
rank)."""

from __future__ import annotations

import io
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from checkpoints import make_random_checkpoint
from nanovllm_teach import LLM, SamplingParams, default_model_path
from nanovllm_teach.engine.sequence import Sequence
from nanovllm_teach.engine.batch import ScheduledBatch, ScheduledSeq
from nanovllm_teach.engine.tp_workers import ExitCall, RunCall, read_message, write_message
from nanovllm_teach.trace import TraceRecorder

# Small limits keep start-up (warm-up) short; a 64-token step budget makes long prompts prefill in chunks.
SETTINGS = dict(max_model_len=256, max_num_batched_tokens=64, kvcache_block_size=16)
GREEDY = SamplingParams(temperature=0.0, max_tokens=12)
CORES = os.cpu_count() or 1


def _running(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie (an exited child nobody has reaped yet)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def _worker_pids(llm: LLM) -> list[int]:
    return [process.pid for process in llm.model_runner.pool.processes]


def _worker_children() -> list[int]:
    """Pids of this process's live children that are tensor-parallel workers."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if int(fields[1]) == os.getpid() and fields[0] != "Z" and b"nanovllm_teach.engine.tp_workers" in cmdline:
            found.append(int(stat.parent.name))
    return found


def _assert_no_workers_left(pids: list[int]) -> None:
    assert not _worker_children()
    assert not [pid for pid in pids if _running(pid)], "a tensor-parallel worker outlived its engine"


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    # 4 query heads, 2 KV heads and a vocabulary of 384: every sharded dimension divides by 2. A wide
    # initialiser and an untied head give decisive logits, so a different float summation order (the
    # all-reduce adds two partial sums) cannot flip a greedy choice.
    return make_random_checkpoint(tmp_path_factory.mktemp("tp_ckpt"), num_attention_heads=4, num_key_value_heads=2,
                                  initializer_range=0.3, tie_word_embeddings=False, seed=1)


# ---- without an engine, or with engines of their own: before the module's shared TP=2 engine exists ----

def test_a_worker_receives_the_very_batch_rank_0_runs():
    seq = Sequence(7, list(range(100, 140)), SamplingParams(temperature=0.5, seed=9), block_size=16)
    seq.block_table, seq.num_cached_tokens, seq.num_scheduled_tokens = [4, 8, 2], 32, 8  # a chunk after a cached prefix
    prefill = ScheduledBatch.of([seq], is_prefill=True)
    seq.append_token(5)
    seq.num_cached_tokens, seq.num_scheduled_tokens = 40, 1
    decode = ScheduledBatch.of([seq], is_prefill=False)
    pipe = io.BytesIO()
    for call in (RunCall(prefill), RunCall(decode), ExitCall()):
        write_message(pipe, call)
    pipe.seek(0)
    got = read_message(pipe).batch
    assert got == prefill and got.seqs[0].token_ids == seq.token_ids[32:40] and not got.seqs[0].is_prompt_chunk
    assert read_message(pipe).batch.seqs[0] == ScheduledSeq(7, [5], 40, 41, [4, 8, 2], 0.5, 9)
    assert read_message(pipe) == ExitCall()
    assert read_message(pipe) is None  # end of file: the engine process has gone
    assert b"pickle" not in pipe.getvalue() and pipe.getvalue()[4:5] == b"{", "the wire form is JSON"


@pytest.mark.parametrize("change, size, match", [
    ({}, 0, "tensor_parallel_size must be a positive int"),
    ({"num_attention_heads": CORES + 1, "num_key_value_heads": CORES + 1, "vocab_size": 384 * (CORES + 1),
      "intermediate_size": 128 * (CORES + 1)}, CORES + 1, "needs one CPU core per rank"),
    ({"num_attention_heads": 3, "num_key_value_heads": 1}, 2, "num_attention_heads=3"),
    ({"num_key_value_heads": 1}, 2, "num_key_value_heads=1"),
    ({"vocab_size": 385}, 2, "vocab_size=385"),
])
def test_invalid_size_is_refused_before_spawning(checkpoint, tmp_path, change, size, match):
    # Config reads only config.json (and sees that a tokenizer is there): with an edited copy of it, that
    # is a whole "checkpoint" here.
    config = json.loads((checkpoint / "config.json").read_text())
    (tmp_path / "tokenizer.json").write_bytes((checkpoint / "tokenizer.json").read_bytes())
    (tmp_path / "config.json").write_text(json.dumps({**config, **change}))
    with pytest.raises(ValueError, match=match):
        LLM(tmp_path, tensor_parallel_size=size, **SETTINGS)
    assert not _worker_children(), "a worker was started for a size that cannot work"


@pytest.mark.skipif(not (default_model_path() / "config.json").is_file(), reason="the shipped model is not built yet")
def test_shipped_model_tp2_matches_one_rank():
    prompts = ["list the primes up to 30", "introduce yourself", "count to 12"]
    outputs = {}
    for size in (1, 2):
        llm = LLM(tensor_parallel_size=size, max_model_len=256, max_num_batched_tokens=256)
        outputs[size] = [o["token_ids"] for o in llm.generate(prompts, SamplingParams(temperature=0.0, max_tokens=32),
                                                               use_tqdm=False)]
        llm.close()
    assert outputs[2] == outputs[1]


STDIN_SCRIPT = """
import json, sys
from nanovllm_teach import LLM, SamplingParams
llm = LLM(sys.argv[1], tensor_parallel_size=2, **json.loads(sys.argv[2]))
print(llm.generate([[5, 6, 7]], SamplingParams(temperature=0.0, max_tokens=3), use_tqdm=False)[0]["token_ids"])
"""


def test_tp_runs_from_a_script_with_no_main_file(checkpoint):
    """``python - <<EOF``: workers do not import the caller's main module, so there need not be one."""
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-", str(checkpoint), json.dumps(SETTINGS)], input=STDIN_SCRIPT,
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    assert len(json.loads(done.stdout.strip().splitlines()[-1])) == 3
    assert time.monotonic() - start < 60


def test_worker_dying_at_start_up_is_reported_at_once_with_its_error(checkpoint, tmp_path, monkeypatch):
    # Python imports sitecustomize at start-up: this one breaks the worker process only (this one has started).
    (tmp_path / "sitecustomize.py").write_text("raise SystemExit('the worker cannot start: no module named foo')\n")
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    start = time.monotonic()
    with pytest.raises(RuntimeError, match=r"(?s)rank 1 \(pid \d+, exit code 1\).*no module named foo"):
        LLM(checkpoint, tensor_parallel_size=2, **SETTINGS)
    assert time.monotonic() - start < 30, "the failure waited for the rendezvous timeout"


SCRIPT = """
import gc, json, sys
from pathlib import Path
from nanovllm_teach import LLM, SamplingParams

def running(pid):
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False

if __name__ == "__main__":  # spawned workers import this module again: they must not run it
    settings = json.loads(sys.argv[2])
    llm = LLM(sys.argv[1], tensor_parallel_size=2, **settings)
    first = [p.pid for p in llm.model_runner.pool.processes]
    del llm
    gc.collect()
    survivors = [pid for pid in first if running(pid)]
    llm = LLM(sys.argv[1], tensor_parallel_size=2, **settings)  # a new group once the old one is gone
    tokens = llm.generate([[5, 6, 7]], SamplingParams(temperature=0.0, max_tokens=3), use_tqdm=False)[0]["token_ids"]
    print(json.dumps({"survivors_of_gc": survivors, "second": [p.pid for p in llm.model_runner.pool.processes],
                      "tokens": tokens}))
    # no close(): interpreter exit must stop the workers
"""


def test_workers_stop_on_garbage_collection_and_interpreter_exit(checkpoint, tmp_path):
    script = tmp_path / "tp_lifecycle.py"
    script.write_text(SCRIPT)
    done = subprocess.run([sys.executable, str(script), str(checkpoint), json.dumps(SETTINGS)],
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["survivors_of_gc"] == [], "del llm + gc left a worker running"
    assert len(report["tokens"]) == 3
    assert not [pid for pid in report["second"] if _running(pid)], "a worker outlived the interpreter"
    assert "leaked" not in done.stderr, done.stderr  # e.g. the resource tracker finding a shared-memory block


# ---- the module's shared TP=2 engine (one TP engine per process at a time) ------------------------

def _prompts() -> list[list[int]]:
    rng = random.Random(5)
    shared = rng.choices(range(3, 384), k=40)  # half the prompts share it: the second wave hits the prefix cache
    lengths = [1, 7, 16, 17, 33, 70, 90, 5]
    return [(shared if i % 2 else []) + rng.choices(range(3, 384), k=n) for i, n in enumerate(lengths)]


def _generate(llm: LLM, prompts: list[list[int]]) -> list[list[int]]:
    # Two waves: the second finds the first wave's blocks in the prefix cache.
    outs = llm.generate(prompts[:2], GREEDY, use_tqdm=False) + llm.generate(prompts[2:], GREEDY, use_tqdm=False)
    return [out["token_ids"] for out in outs]


@pytest.fixture(scope="module")
def reference(checkpoint) -> list[list[int]]:
    llm = LLM(checkpoint, **SETTINGS)
    try:
        return _generate(llm, _prompts())
    finally:
        llm.close()


@pytest.fixture(scope="module")
def tp2(checkpoint, reference):
    """One TP=2 engine for the whole module (spawning a worker costs seconds); the last test kills its worker."""
    rec = TraceRecorder()
    llm = LLM(checkpoint, trace=rec, tensor_parallel_size=2, **SETTINGS)
    outputs = _generate(llm, _prompts())
    yield llm, rec, outputs
    llm.close()


def test_tp2_greedy_tokens_match_one_rank(tp2, reference):
    llm, rec, outputs = tp2
    for i, (got, want) in enumerate(zip(outputs, reference)):
        assert got == want, f"prompt {i}: TP=2 diverged from TP=1"
    events = [e.event for e in rec.events]
    # The comparison covered the paths where a worker rebuilds only part of a sequence from the message.
    assert "PREFIX_CACHE_HIT" in events
    assert any(e.event == "SCHEDULE_PREFILL" and e.stats.get("num_batched_tokens") == 64 for e in rec.events)
    bm = llm.scheduler.block_manager
    assert bm.num_free_blocks == bm.num_blocks, "blocks leaked"


def test_trace_reports_every_rank(tp2):
    llm, rec, _ = tp2
    assert rec.header["config"]["tensor_parallel_size"] == 2
    assert rec.events[0].event == "ENGINE_INIT" and rec.events[0].stats["tp_size"] == 2
    runtimes = [e.stats for e in rec.events if e.event == "TP_RUNTIME_INIT"]
    assert [r["rank"] for r in runtimes] == [0, 1]
    assert all(r["backend"] == "gloo" and r["world_size"] == 2 and r["device"] == "cpu" for r in runtimes)
    loaded = next(e.stats for e in rec.events if e.event == "MODEL_WEIGHTS_LOADED")
    assert len(loaded["num_params_by_rank"]) == 2 and loaded["num_params_by_rank"][0] == loaded["num_params"]
    kv = next(e.stats for e in rec.events if e.event == "KV_BUDGET_ESTIMATE")
    assert kv["num_kv_heads"] == 1, "each rank caches its own half of the 2 KV heads"
    assert kv["num_blocks"] == min(kv["num_blocks_by_rank"]) == llm.scheduler.block_manager.num_blocks


def test_killed_worker_raises_naming_its_rank(tp2):
    """Runs last in this module: it breaks the shared engine on purpose."""
    llm, _, _ = tp2
    pids = _worker_pids(llm)
    os.kill(pids[0], signal.SIGKILL)
    start = time.monotonic()
    with pytest.raises(RuntimeError, match=r"rank 1 \(pid \d+, killed by SIGKILL\)"):
        llm.generate(_prompts()[:3], GREEDY, use_tqdm=False)
    assert time.monotonic() - start < 60
    _assert_no_workers_left(pids)
    with pytest.raises(RuntimeError, match="create a new LLM"):
        llm.generate([[5, 6]], GREEDY, use_tqdm=False)
    bm = llm.scheduler.block_manager
    assert bm.num_free_blocks == bm.num_blocks and llm.is_finished(), "the failed call left requests behind"
