"""The server's engine thread and Python's GIL switch interval (``serve/engine_thread.py``), in a module of its
own: no other module's server may be running while it checks what the interval is before and after."""

from __future__ import annotations

import sys

import pytest

pytest.importorskip("fastapi")

from serve_helpers import running_server  # noqa: E402


def test_the_gil_switch_interval_is_short_while_any_engine_thread_runs():
    """The engine thread needs the GIL back the moment a native step returns (serve/engine_thread.py): the
    interval is short while a server runs, stays short while a second one does, and is the process's own
    again when the last has stopped."""
    from nanovllm_teach.serve.engine_thread import SWITCH_INTERVAL_S

    own = sys.getswitchinterval()
    assert own != pytest.approx(SWITCH_INTERVAL_S)
    with running_server():
        assert sys.getswitchinterval() == pytest.approx(SWITCH_INTERVAL_S)
        with running_server():
            assert sys.getswitchinterval() == pytest.approx(SWITCH_INTERVAL_S)
        assert sys.getswitchinterval() == pytest.approx(SWITCH_INTERVAL_S)
    assert sys.getswitchinterval() == own
