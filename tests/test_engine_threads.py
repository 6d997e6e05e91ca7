"""One engine, several threads: calls are serialized, an abort from another thread frees its blocks, and
nothing is ever left held."""

from __future__ import annotations

import threading
import time

import pytest

from checkpoints import make_random_checkpoint
from nanovllm_teach import LLM, SamplingParams

PARAMS = SamplingParams(temperature=0, max_tokens=6)
PROMPTS_A = [[3, 4, 5, 6], [9] * 20]
PROMPTS_B = [[7, 8] * 9, [11, 12, 13], [1] * 33]
TIMEOUT_S = 60


@pytest.fixture(scope="module")
def llm(tmp_path_factory):
    path = make_random_checkpoint(tmp_path_factory.mktemp("ckpt"))
    return LLM(path, kvcache_block_size=16, max_model_len=256, max_num_batched_tokens=512, num_kvcache_blocks=40)


def _assert_clean(llm):
    bm = llm.scheduler.block_manager
    assert llm.is_finished() and bm.num_free_blocks == bm.num_blocks
    assert all(b.ref_count == 0 for b in bm.blocks)


def _in_threads(*calls):
    """Run each call in its own thread, all released at once; their results (or exceptions), in order."""
    results: list = [None] * len(calls)
    barrier = threading.Barrier(len(calls))

    def run(i, call):
        barrier.wait()
        try:
            results[i] = call()
        except Exception as error:  # the test reads it
            results[i] = error

    threads = [threading.Thread(target=run, args=(i, call)) for i, call in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(TIMEOUT_S)
    assert not any(thread.is_alive() for thread in threads), "a call never returned"
    return results


def _tokens(outputs):
    return [out.outputs[0].token_ids for out in outputs]


def test_two_threads_generating_at_once_both_get_their_own_results(llm):
    expected_a = _tokens(llm.generate(PROMPTS_A, PARAMS, use_tqdm=False))
    expected_b = _tokens(llm.generate(PROMPTS_B, PARAMS, use_tqdm=False))
    for _ in range(12):
        a, b = _in_threads(lambda: llm.generate(PROMPTS_A, PARAMS, use_tqdm=False),
                           lambda: llm.generate(PROMPTS_B, PARAMS, use_tqdm=False))
        assert _tokens(a) == expected_a and _tokens(b) == expected_b
        _assert_clean(llm)


def test_generate_against_a_stepping_thread_is_refused_clearly_or_waits(llm):
    """A thread that steps its own requests and one that calls generate: generate either runs once the
    engine is idle or refuses with a clear error; the stepped requests always finish."""
    for _ in range(6):
        def step_own():
            ids = [llm.add_request(p, PARAMS) for p in PROMPTS_B]
            finished = {}
            while len(finished) < len(ids):
                finished.update(llm.step()[0])
            return [finished[i] for i in ids]

        stepped, generated = _in_threads(step_own, lambda: llm.generate(PROMPTS_A, PARAMS, use_tqdm=False))
        assert not isinstance(stepped, Exception), stepped
        assert isinstance(generated, list) or "cannot start while requests added with add_request" in str(generated)
        _assert_clean(llm)


def test_abort_from_another_thread_while_generate_runs_frees_the_request(llm):
    long = SamplingParams(temperature=0, max_tokens=200, ignore_eos=True)
    results: list = []
    worker = threading.Thread(target=lambda: results.append(
        llm.generate([[1, 2, 3], [4, 5, 6]], [long, PARAMS], use_tqdm=False)))
    worker.start()
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        running = [seq for seq in dict(llm.scheduler.accepted).values() if seq.num_completion_tokens >= 2]
        if running:
            break
        time.sleep(0.001)
    victim = min(seq.seq_id for seq in running)
    assert llm.abort_request(victim)  # queued: the generating thread holds the engine
    worker.join(TIMEOUT_S)
    [aborted, other] = results[0]
    assert aborted.outputs[0].seq_id == victim and aborted.outputs[0].finish_reason == "abort"
    assert aborted["finish_reason"] == "aborted" and len(aborted.outputs[0].token_ids) < 200
    assert other.outputs[0].finish_reason == "length" and len(other.outputs[0].token_ids) == 6
    assert aborted.metrics.finished_time is not None
    _assert_clean(llm)
    assert not llm.abort_request(victim)  # already gone; with the engine idle, the abort runs at once


def test_a_serving_loop_and_clients_that_add_and_abort_never_collide(llm):
    """The server's shape: one thread steps while it has work (holding ``lock`` from the check to the step),
    clients add requests and abort them from their own threads."""
    done = threading.Event()
    failures: list[BaseException] = []

    def engine_loop():
        try:
            while not done.is_set() or not llm.is_finished():
                with llm.lock:
                    busy = not llm.is_finished()
                    if busy:
                        llm.step()
                if not busy:
                    time.sleep(0.0005)
        except BaseException as error:  # the test reads it
            failures.append(error)

    def client(offset):
        for i in range(15):
            seq_id = llm.add_request([offset, i + 1, 2], SamplingParams(temperature=0, max_tokens=40))
            time.sleep(0.001 * (i % 4))
            llm.abort_request(seq_id)

    engine = threading.Thread(target=engine_loop)
    engine.start()
    results = _in_threads(lambda: client(3), lambda: client(4))
    done.set()
    engine.join(TIMEOUT_S)
    assert not engine.is_alive() and failures == [] and results == [None, None]
    _assert_clean(llm)
