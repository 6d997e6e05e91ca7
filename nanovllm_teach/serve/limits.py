"""Serving: the bounds on what a client may send, and for how long, with their defaults (pure Python: the
CLI reads them without loading the server).

Emits no events.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from nanovllm_teach.i18n import Text, say

MAX_BODY_BYTES = 1 << 20  # 1 MiB: some hundred thousand tokens of text, far beyond any max_model_len here
MAX_WAITING = 256  # sequences (n a prompt) beyond the running batch before the server answers 503
# A request's headers must all arrive within this long of its first byte: a slowloris client, sending a
# byte now and then, is closed instead of holding a connection for ever.
HEADER_TIMEOUT_S = 10.0
BODY_TIMEOUT_S = 30.0  # a body must all arrive within this long of its headers (408 after): 1 MiB at ~35 kB/s
KEEP_ALIVE_S = 5  # an idle kept-alive connection is closed after this long (uvicorn's and vLLM's default)
# On SIGTERM (or Ctrl-C) the server takes no new connection and lets the requests under way finish for this
# long; those still running then are aborted, and the engine closes (its trace complete).
DRAIN_S = 30.0

NOT_POSITIVE = Text(en="{name} must be an int >= 1, got {value!r}", zh="{name} 必须是 >= 1 的 int，收到的是 {value!r}")
NOT_SECONDS = Text(en="{name} must be a finite number of seconds > 0, got {value!r}",
                   zh="{name} 必须是 > 0 的有限秒数，收到的是 {value!r}")


@dataclass
class ServeLimits:
    max_body_bytes: int = MAX_BODY_BYTES
    max_waiting: int = MAX_WAITING
    header_timeout_s: float = HEADER_TIMEOUT_S
    body_timeout_s: float = BODY_TIMEOUT_S
    keep_alive_s: int = KEEP_ALIVE_S
    drain_s: float = DRAIN_S

    def __post_init__(self) -> None:
        for name in ("max_body_bytes", "max_waiting", "keep_alive_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(say(NOT_POSITIVE, name=name, value=value))
        for name in ("header_timeout_s", "body_timeout_s", "drain_s"):
            value = getattr(self, name)
            is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
            if not (is_number and 0 < value and math.isfinite(value)):
                raise ValueError(say(NOT_SECONDS, name=name, value=value))
