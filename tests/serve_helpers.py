"""A server on 127.0.0.1 for the serving tests: ``build_server`` under uvicorn on a free port, in a thread,
stopped (its engine closed) when the block ends."""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Any, Iterator

MODEL = "qwen3-tiny"


@contextmanager
def running_server(**kwargs: Any) -> Iterator[tuple[str, Any]]:
    """Yields the server's base URL (``http://127.0.0.1:PORT``) and its app."""
    from nanovllm_teach.serve.build import BackgroundServer, build_server

    kwargs.setdefault("max_model_len", 512)
    # The engine core writes its whole KV cache at start (serve/engine_core.py): 128 MiB is plenty for these
    # tests and takes a fraction of the time the default's 768 MiB (512 sequences of 512 tokens) would.
    kwargs.setdefault("cpu_kvcache_gib", 0.125)
    with BackgroundServer(build_server(**kwargs)) as server:
        yield server.url, server.app


def metric(text: str, name: str) -> float:
    """The value of the one series ``name`` (its labels: ``model_name`` and ``engine``) in Prometheus text."""
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    raise KeyError(name)


def wait_until(condition, timeout_s: float = 20.0, every_s: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(every_s)
    return condition()
