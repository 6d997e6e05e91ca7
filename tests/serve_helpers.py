"""A server on 127.0.0.1 for the serving tests: ``build_server`` under uvicorn on a free port, in a thread,
stopped (its engine closed) when the block ends."""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from typing import Any, Iterator

MODEL = "qwen3-tiny"


@contextmanager
def running_server(**kwargs: Any) -> Iterator[tuple[str, Any]]:
    """Yields the server's base URL (``http://127.0.0.1:PORT``) and its app."""
    import uvicorn

    from nanovllm_teach.serve.build import build_server

    kwargs.setdefault("max_model_len", 512)
    app = build_server(**kwargs)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the server did not start within 60 s")
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", app
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def metric(text: str, name: str) -> float:
    """The value of a label-free-but-model_name series ``name`` in Prometheus text."""
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
