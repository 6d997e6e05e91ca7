"""The open-ended scheduling-policy exercise: graded by latency against FCFS on timed workloads.

The reference policy (shortest prompt first, with aging) passes; FCFS fails every workload on the mean;
last come, first served fails a workload where arrival order is no guide and starves the steady stream;
plain shortest-first starves the long prompts of the steady stream. The verdict's numbers are those of the
two traces it hands back.
"""

from __future__ import annotations

import pytest

from nanovllm_teach.exercises import EXERCISES, check, grade
from nanovllm_teach.exercises.scheduling_policy.grading import MAX_TTFT_RATIO, MEAN_TTFT_RATIO, measure
from nanovllm_teach.exercises.scheduling_policy.workloads import POLICY_WORKLOADS
from nanovllm_teach.exercises.references import reference_trace


def fcfs(waiting):
    return 0


def lifo(waiting):
    return len(waiting) - 1


def shortest_first(waiting):
    return min(range(len(waiting)), key=lambda i: waiting[i].num_prompt_tokens)


def _failing(result) -> dict[str, list[str]]:
    return {s.workload.name: s.problems() for s in result.scores if not s.passed}


def test_the_reference_policy_passes_every_workload_with_a_margin():
    result = grade("scheduling_policy", EXERCISES["scheduling_policy"].solution_path)
    assert result.passed, result.message
    assert [s.workload.name for s in result.scores] == list(POLICY_WORKLOADS)
    for score in result.scores:
        assert score.mean_ratio < MEAN_TTFT_RATIO - 0.1 and score.max_ratio < MAX_TTFT_RATIO - 0.3, score
    assert "long_prompts_first" in result.table and "yours" in result.table


def test_fcfs_fails_every_workload_on_the_mean():
    result = check("scheduling_policy", fcfs)
    assert not result.passed
    failing = _failing(result)
    assert list(failing) == list(POLICY_WORKLOADS)
    for problems in failing.values():
        assert len(problems) == 1 and "is the same as FCFS's" in problems[0] and "at least 20% lower" in problems[0]


def test_lifo_loses_where_arrival_order_is_no_guide_and_starves_the_stream():
    failing = _failing(check("scheduling_policy", lifo))
    assert set(failing) == {"mixed_bursts", "steady_stream"}
    assert "above FCFS's" in failing["mixed_bursts"][0]
    assert "starvation" in failing["steady_stream"][0]


def test_shortest_first_starves_the_long_prompts_of_the_steady_stream():
    result = check("scheduling_policy", shortest_first)
    failing = _failing(result)
    assert list(failing) == ["steady_stream"] and len(failing["steady_stream"]) == 1
    score = next(s for s in result.scores if s.workload.name == "steady_stream")
    assert score.faster and not score.fair and score.yours.slowest_prompt_len >= 1500
    assert (f"seq {score.yours.slowest_seq} (a {score.yours.slowest_prompt_len}-token prompt) waited "
            f"{score.yours.max_ttft_ms:.1f} ms") in result.message


def test_the_verdicts_numbers_are_the_traces_it_hands_back():
    result = check("scheduling_policy", shortest_first)
    for score in result.scores:
        fcfs_trace, yours = result.traces[score.workload.name]
        assert fcfs_trace is reference_trace(score.workload)
        assert measure(fcfs_trace) == score.fcfs and measure(yours) == score.yours
        ttft = [r.enqueue_ttft_ms for r in yours.requests]  # the scheduler's part (measure)
        assert score.yours.max_ttft_ms == max(ttft) and score.yours.num_finished == len(score.workload.requests)
    # The simulated engine is deterministic: the same policy, graded again, measures the same.
    assert check("scheduling_policy", shortest_first).scores == result.scores


def test_an_index_that_is_not_one_is_refused_with_a_sentence():
    result = check("scheduling_policy", lambda waiting: len(waiting))
    assert not result.passed
    assert "your choose_next returned 12: it must return the index (an int from 0 to 11)" in result.message


@pytest.mark.parametrize("level", [1, 2])
def test_hints_do_not_print_the_reference_constant(level):
    assert "24" not in EXERCISES["scheduling_policy"].hint(level)
