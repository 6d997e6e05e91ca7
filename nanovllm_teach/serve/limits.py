"""Serving: the bounds on what a client may send, with their defaults (pure Python: the CLI reads them
without loading the server).

Emits no events.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_BODY_BYTES = 1 << 20  # 1 MiB: some hundred thousand tokens of text, far beyond any max_model_len here
MAX_WAITING = 256  # requests beyond the running batch before the server answers 503


@dataclass
class ServeLimits:
    max_body_bytes: int = MAX_BODY_BYTES
    max_waiting: int = MAX_WAITING

    def __post_init__(self) -> None:
        for name in ("max_body_bytes", "max_waiting"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
