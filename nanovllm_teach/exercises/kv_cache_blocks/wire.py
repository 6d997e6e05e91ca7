"""What ``kv_cache_blocks`` sees of the machine's memory reading, as it crosses into the sandbox (``Piece.wire``
names it).

Role: grading, the records both sides of the sandbox's edge share; the worker imports this module on the
grading copy of the package to rebuild the function's argument. Emits no events.
"""

from __future__ import annotations

import msgspec


class MemoryNumbers(msgspec.Struct, frozen=True):
    """The fields of ``utils.memory``'s ``MemoryReading`` (bytes), without that module, which imports torch."""

    device: str
    total: int
    free: int
    used: int
    peak: int
    current: int
