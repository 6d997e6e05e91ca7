"""The grading child (``exercises/remote.py``, ``run_in_child``) and the deadline of a call into the worker.

A call's time limit is the worker's answer's deadline, for the call going out and its answer coming back
(``Worker.call``): the child records that failure itself, where the call was. The parent stops the child only
when the whole run outlasts ``RUN_LIMIT_S``.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Callable


from nanovllm_teach.exercises import remote
from nanovllm_teach.exercises.worker import write_frame


def test_a_child_that_ends_by_itself_is_reported_with_its_exit_code():
    assert remote.run_in_child(time.sleep, 0.2) == remote.ChildEnd(0)


def test_a_child_past_the_run_limit_is_stopped(monkeypatch):
    monkeypatch.setattr(remote, "RUN_LIMIT_S", 0.5)
    started = time.monotonic()
    end = remote.run_in_child(time.sleep, 60.0)
    assert end == remote.ChildEnd(None, 0.5) and end.failure().timeout == 0.5
    assert time.monotonic() - started < 10


def gives_up_at_its_deadline(write: Callable[[int, float], None]) -> None:
    """``write(fd, deadline)`` of a frame larger than a pipe holds, to a pipe nobody reads (a worker whose process
    stopped), raises TimeoutError at its deadline, 0.5 s from now: written whole, it would block for ever."""
    read_end, write_end = os.pipe()
    raised: list[BaseException] = []

    def call() -> None:
        try:
            write(write_end, time.monotonic() + 0.5)
        except BaseException as error:
            raised.append(error)

    writer = threading.Thread(target=call, daemon=True)
    writer.start()
    writer.join(10)
    try:
        assert not writer.is_alive() and len(raised) == 1 and isinstance(raised[0], TimeoutError), raised
    finally:
        os.close(read_end)  # a writer still blocked (the test failing) gets EPIPE and ends
        writer.join(10)
        os.close(write_end)


def test_a_call_to_a_worker_that_stopped_reading_gives_up_at_its_deadline():
    gives_up_at_its_deadline(lambda fd, deadline: write_frame(fd, list(range(100_000)), deadline))  # ~600 KB


def test_a_frame_is_whole_on_the_other_side_when_written_under_a_deadline():
    from nanovllm_teach.exercises.worker import read_frame

    read_end, write_end = os.pipe()
    message = {"args": list(range(50_000))}
    reader = threading.Thread(target=lambda: got.append(read_frame(read_end, time.monotonic() + 10)))
    got: list = []
    reader.start()
    write_frame(write_end, message, time.monotonic() + 10)
    reader.join(10)
    os.close(read_end)
    os.close(write_end)
    assert got == [message]
