"""The shell around the engine: one thread inside the engine at a time.

``@serialized`` makes a method of the shell (``engine/frontend.py``, and ``LLM``) run under the engine's
reentrant ``lock``: a call from a second thread waits until the first is done, and a method may call
another. It lives apart from the engine's own lines: taking and releasing the lock changes no engine state,
and nothing runs between the end of a step and its return to the caller. The core (``LLMEngine``) is
single-threaded and has no lock.

Emits no events.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, TypeVar

Method = TypeVar("Method", bound=Callable[..., Any])


def serialized(method: Method) -> Method:
    @functools.wraps(method)
    def call(engine: Any, *args: Any, **kwargs: Any) -> Any:
        with engine.lock:
            return method(engine, *args, **kwargs)
    return call  # type: ignore[return-value]
