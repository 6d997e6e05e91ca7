"""Goodput against an SLO (``workload/metrics.py``): a request counts only if it finished and met both limits."""

from __future__ import annotations

import math
import re

import pytest

from nanovllm_teach.workload.metrics import RequestTimes, Slo, WorkloadResult

SLO = Slo(ttft_ms=100, tpot_ms=20)


def times(ttft_ms: float, tpot_ms: float, num_output_tokens: int = 11, finished: bool = True) -> RequestTimes:
    """A request that arrived at 1 s, with the given TTFT and TPOT (finished, unless told otherwise)."""
    first = 1.0 + ttft_ms / 1e3
    finish = first + tpot_ms / 1e3 * (num_output_tokens - 1)
    return RequestTimes(arrival_s=1.0, num_prompt_tokens=8, first_token_s=first,
                        finish_s=finish if finished else None, num_output_tokens=num_output_tokens,
                        finish_reason="length" if finished else None)


def test_a_request_counts_only_if_it_meets_both_limits():
    assert times(ttft_ms=50, tpot_ms=10).meets(SLO)
    assert SLO.meets(ttft_ms=100, tpot_ms=20, finished=True)  # the limits themselves are met
    assert not times(ttft_ms=150, tpot_ms=10).meets(SLO)  # TPOT met, TTFT not
    assert not times(ttft_ms=50, tpot_ms=30).meets(SLO)  # TTFT met, TPOT not


def test_an_unfinished_request_does_not_count():
    assert not times(ttft_ms=50, tpot_ms=10, finished=False).meets(SLO)
    waiting = RequestTimes(arrival_s=1.0, num_prompt_tokens=8)  # not even a first token
    assert not waiting.meets(SLO)
    assert not SLO.meets(ttft_ms=None, tpot_ms=None, finished=True)


def test_a_one_token_answer_is_held_to_its_ttft_only():
    assert times(ttft_ms=50, tpot_ms=0, num_output_tokens=1).tpot_s is None
    assert times(ttft_ms=50, tpot_ms=0, num_output_tokens=1).meets(SLO)
    assert not times(ttft_ms=150, tpot_ms=0, num_output_tokens=1).meets(SLO)


def test_goodput_is_the_requests_per_second_that_met_the_slo():
    result = WorkloadResult(duration_s=2.0)
    rows = [times(50, 10), times(60, 15), times(150, 10), times(50, 30), times(50, 10, finished=False)]
    result.requests = dict(enumerate(rows))
    assert result.goodput(SLO) == pytest.approx(2 / 2.0)
    assert result.goodput(Slo(ttft_ms=1000, tpot_ms=1000)) == pytest.approx(4 / 2.0)  # all the finished ones
    assert WorkloadResult().goodput(SLO) == 0.0  # no duration, no rate
    with pytest.raises(TypeError, match="Slo"):
        result.goodput((100, 20))


@pytest.mark.parametrize("bad", [0, -5, math.inf, math.nan, True, "100", None])
@pytest.mark.parametrize("field", ["ttft_ms", "tpot_ms"])
def test_a_bad_slo_is_refused_naming_the_value(field, bad):
    values = {"ttft_ms": 100, "tpot_ms": 20, field: bad}
    with pytest.raises(ValueError, match=rf"Slo\.{field} .*got {re.escape(repr(bad))}"):
        Slo(**values)
