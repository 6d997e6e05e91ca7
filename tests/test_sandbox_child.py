"""The grading child (``exercises/remote.py``, ``run_in_child``): a student call past its time limit is the child's to report
(its proxy gives up, the child records where it was and ends); the parent stops the child only when it is
still in the call ``REPORT_GRACE_S`` after the limit, and always once the whole run outlasts its limit."""

from __future__ import annotations

import time

from nanovllm_teach.exercises import remote


def _slow_to_report(watch, seconds: float) -> None:
    """A call that lasts ``seconds`` (a proxy waiting for its answer, then writing what it saw), then the end."""
    previous = watch.enter("decode_slot")
    time.sleep(seconds)
    watch.leave(previous)


def test_a_child_reporting_just_after_the_limit_ends_by_itself():
    # On a loaded machine the proxy's give-up and the child's record come a little after the limit: the
    # parent looking at the same moment killed the child, and the verdict lost where the call was.
    end = remote.run_in_child(_slow_to_report, 1.3, time_limit=1.0)
    assert end.exitcode == 0 and end.running == ""


def test_a_child_still_in_the_call_after_the_grace_is_stopped():
    started = time.monotonic()
    end = remote.run_in_child(_slow_to_report, 60.0, time_limit=0.5)
    assert end.exitcode is None and end.running == "decode_slot" and end.limit == 0.5
    assert time.monotonic() - started < 0.5 + remote.REPORT_GRACE_S + 5
