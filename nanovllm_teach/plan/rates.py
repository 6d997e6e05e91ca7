"""The search over request rates for one configuration, as a pure function of its probes so far (orchestration,
above ``LLM``, beside ``plan/probes.py``, whose ``Probe`` records it reads).

- ``next_rate``: first the saturation probe (``None``: every request at once), then ``steps`` bisections of
  ``[0, HEADROOM x saturated rate]``; ``sustained_rate`` is the highest rate that passed.
- ``search_steps``: how many bisections narrow the bracket to a resolution.

Each probe depends on the ones before it only through ``next_rate``, so the search gives the same answer however
its probes are scheduled (``plan/search.py``: in this process or on Ray).

Emits no events.
"""

from __future__ import annotations

import math

from nanovllm_teach.i18n import say
from nanovllm_teach.plan.messages import BAD_RESOLUTION
from nanovllm_teach.plan.probes import Probe

# The first bracket's top, as a multiple of the rate the engine completes with every request there at once:
# a drained burst ends with a shrinking batch, so a steady stream can be sustained a little above it.
HEADROOM = 1.25


def next_rate(probes: list[Probe], steps: int) -> float | None | bool:
    """The rate of the search's next probe: None for the saturation probe (first), a rate, or False when the
    search is done."""
    if not probes:
        return None
    if len(probes) > steps:
        return False
    lo, hi = _bracket(probes)
    return float(f"{(lo + hi) / 2:.4g}")  # four digits: a rate a command line can repeat


def _bracket(probes: list[Probe]) -> tuple[float, float]:
    lo, hi = 0.0, HEADROOM * probes[0].requests_per_s
    for p in probes[1:]:
        if p.passed:
            lo = max(lo, p.rate)
        else:
            hi = min(hi, p.rate)
    return lo, hi


def sustained_rate(probes: list[Probe]) -> float:
    """The highest rate that passed (0.0: none did)."""
    return max((p.rate for p in probes[1:] if p.passed), default=0.0)


def search_steps(resolution: float) -> int:
    """Bisections that narrow ``[0, HEADROOM x saturated rate]`` to ``resolution`` of the saturated rate."""
    if not 0 < resolution < 1:
        raise ValueError(say(BAD_RESOLUTION, value=resolution))
    return max(1, math.ceil(math.log2(HEADROOM / resolution)))
