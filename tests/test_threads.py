"""The thread rule (utils/threads.py): passive waiting set before torch loads whenever an engine is built, the
count from the free cores and the model's size, the user's choices winning, and the engine reporting what it
chose."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from nanovllm_teach.utils.threads import BYTES_PER_THREAD, busy_cores, choose_threads, usable_cores

BIG = 64 * BYTES_PER_THREAD  # a model worth many threads


# An engine built in a fresh interpreter, as a user's script builds it: the policy libgomp was given, as the
# engine reports it (TP_RUNTIME_INIT), and as the environment says.
BUILD = """
import os, sys
from nanovllm_teach import LLM, default_model_path
from nanovllm_teach.trace import TraceRecorder
rec = TraceRecorder()
with LLM(default_model_path(), trace=rec, num_kvcache_blocks=4, max_num_seqs=4, max_num_batched_tokens=256,
         max_model_len=256):
    pass
runtime = next(e for e in rec.events if e.event == "TP_RUNTIME_INIT").stats
print(runtime["omp_wait_policy"], os.environ.get("OMP_WAIT_POLICY"))
"""


# The policy in the environment at the moment ``module``'s imports reach torch (the interpreter ends there).
AT_TORCH_IMPORT = """
import os, sys
class AtTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch":
            print(os.environ.get("OMP_WAIT_POLICY"), flush=True)
            os._exit(0)
sys.meta_path.insert(0, AtTorch())
import {module}
print("torch never imported")
"""


def _run(code: str, **env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**clean, **env},
                         timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_building_an_engine_asks_libgomp_for_passive_waiting_before_torch_loads():
    assert _run(BUILD) == "PASSIVE PASSIVE"
    # Every module that builds an engine imports config.py (which asks) before torch, transformers included (the
    # server builds its engine in the engine core's process): read when torch's import begins, which then ends
    # the interpreter, so no check waits seconds for torch to load.
    for module in ("nanovllm_teach.llm", "nanovllm_teach.serve.engine_core", "nanovllm_teach.config"):
        assert _run(AT_TORCH_IMPORT.format(module=module)) == "PASSIVE", module
    # torch loaded first: too late for libgomp, so the engine leaves the environment alone and says so.
    assert _run("import torch\n" + BUILD) == "unset None"
    # A policy the user set is kept.
    assert _run(BUILD, OMP_WAIT_POLICY="ACTIVE") == "ACTIVE ACTIVE"


@pytest.mark.parametrize("cores, busy, weight_bytes, ranks, threads", [
    (8, 0, BIG, 1, 8),                      # idle machine, big model: every core
    (8, 3, BIG, 1, 5),                      # three cores busy elsewhere: the other five
    (2, 1, BIG, 1, 1),                      # one of two busy: one thread, never zero
    (2, 5, BIG, 1, 1),                      # more busy than there are cores: still one
    (8, 0, 3 * BYTES_PER_THREAD, 1, 3),     # the model is worth three
    (8, 0, BYTES_PER_THREAD // 2, 1, 1),    # a tiny model: one
    (8, 0, BIG, 2, 4),                      # two ranks share the cores
])
def test_the_count_is_the_free_cores_capped_by_what_the_model_is_worth(cores, busy, weight_bytes, ranks, threads):
    choice = choose_threads(weight_bytes, ranks, cores=cores, busy=busy, env={})
    assert choice.num_threads == threads and choice.reason
    assert choice.wait_policy == "unset"


def test_omp_num_threads_is_the_users_choice():
    choice = choose_threads(BIG, cores=8, busy=0, env={"OMP_NUM_THREADS": "3", "OMP_WAIT_POLICY": "PASSIVE"})
    assert (choice.num_threads, choice.reason, choice.wait_policy) == (3, "OMP_NUM_THREADS", "PASSIVE")
    assert choose_threads(BIG, cores=8, busy=0, env={"OMP_NUM_THREADS": "0"}).num_threads == 8  # not a count


def test_a_busy_loop_on_one_core_is_seen_as_one_busy_core():
    if not os.path.exists("/proc/stat") or usable_cores() < 2:
        pytest.skip("needs /proc/stat and two cores")
    idle = busy_cores()
    loop = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        busy = busy_cores(seconds=0.3)
    finally:
        loop.kill()
        loop.wait()
    assert busy >= 1 and busy >= idle  # the others on this machine may add to it, never subtract


def test_the_engine_applies_the_rule_and_the_setting_wins(tmp_path):
    import torch

    from nanovllm_teach import LLM, default_model_path
    from nanovllm_teach.trace import TraceRecorder

    before = torch.get_num_threads()
    try:
        rec = TraceRecorder()
        with LLM(default_model_path(), trace=rec, num_kvcache_blocks=4, max_num_seqs=4,
                 max_num_batched_tokens=256, max_model_len=256):
            pass
        runtime = next(e for e in rec.events if e.event == "TP_RUNTIME_INIT").stats
        # The shipped model is a few MB: one thread, whatever the machine (unless OMP_NUM_THREADS says).
        expected = int(os.environ["OMP_NUM_THREADS"]) if os.environ.get("OMP_NUM_THREADS", "").isdigit() else 1
        assert runtime["num_threads"] == expected == torch.get_num_threads()
        with LLM(default_model_path(), num_kvcache_blocks=4, max_num_seqs=4, max_num_batched_tokens=256,
                 max_model_len=256, cpu_threads=2):
            assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
