"""The planner's probes as Ray tasks on a cluster of two nodes in this machine (``ray.cluster_utils.Cluster``,
one CPU each): both nodes run probes, and the answer equals the serial run's, byte for byte."""

from __future__ import annotations

import time

import pytest

from nanovllm_teach.plan.probes import Candidate, Objective, PlanWorkload, memory_fit
from nanovllm_teach.plan.results import plan_rows, results_json
from nanovllm_teach.plan.search import run_searches
from nanovllm_teach.sim.prices import gpu_prices

ray = pytest.importorskip("ray")
from ray.cluster_utils import Cluster  # noqa: E402

# The smallest search that still has something to agree on: probes of the least size (1,000 measured requests) of
# short requests, two candidates (one sustains a rate, one does not), two bisections each: six probes.
WORKLOAD = PlanWorkload("qwen3-0.6b", "uniform:16:64", "uniform:4:16", max_model_len=2048, warmup_requests=100)
SLO = Objective(ttft_ms=200.0, tpot_ms=20.0)
CANDIDATES = [Candidate("l4", 1, 64, 2048), Candidate("rtx-4090", 1, 32, 2048)]
# Ray's raylet gives its helper processes 15 s to start (a fixed wait in its C++): on a machine loaded far beyond
# its cores they can miss it, and Ray then raises this. Only that skips the test; any other failure fails it.
RAY_START_TIMEOUT = "timed out during startup"
EVENTS_WAIT_S = 30.0  # a worker reports its tasks' events to Ray's control store every second


def _answer(tmp_path, name, **where) -> str:
    searches = run_searches(CANDIDATES, WORKLOAD, SLO, 2, log_path=tmp_path / f"{name}.jsonl", progress=False, **where)
    fits = {c: memory_fit(c, WORKLOAD) for c in CANDIDATES}
    return results_json(plan_rows(searches, fits, WORKLOAD, [1, 2], gpu_prices({"l4": 0.7})), WORKLOAD, SLO, 50.0, 2)


def _nodes_that_ran_probes(cluster: Cluster) -> set[str]:
    """The ids of the nodes a ``probe`` task ran on, from the task events Ray keeps (its state API would need the
    dashboard's HTTP server, which this cluster does not start)."""
    deadline = time.monotonic() + EVENTS_WAIT_S
    while True:
        nodes = {event.state_updates.node_id.hex() for event in cluster.global_state._get_all_task_events()
                 if event.task_info.name == "probe" and event.state_updates.node_id}
        if len(nodes) >= 2 or time.monotonic() > deadline:
            return nodes
        time.sleep(0.5)


def test_two_nodes_run_probes_and_give_the_serial_answer_byte_for_byte(tmp_path):
    serial = _answer(tmp_path, "serial", use_ray=False)
    try:
        # Neither the autoscaler's monitor nor the log monitor: a fixed cluster, whose workers' output is not read.
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False,
                                                                "no_monitor": True, "include_log_monitor": False})
        cluster.add_node(num_cpus=1)
    except Exception as error:  # Ray's own start-up failure is a bare Exception
        if RAY_START_TIMEOUT in str(error):
            pytest.skip(f"Ray could not start its processes on this machine: {error}")
        raise
    try:
        on_ray = _answer(tmp_path, "ray", use_ray=True, address=cluster.address)
        nodes = _nodes_that_ran_probes(cluster)
        both = {cluster.head_node.node_id, *(node.node_id for node in cluster.worker_nodes)}
    finally:
        cluster.shutdown()
    assert on_ray == serial
    assert '"rows": [' in serial and serial.count('"hardware"') > 2
    assert nodes == both
