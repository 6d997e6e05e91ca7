"""Orchestration (simulated): what an hour of a GPU costs, for the deployment planner (``plan/probes.py``).

``prices.json`` ships public on-demand prices per GPU-hour, each with the provider's page and the date it listed
them; a price is data that ages, so ``gpu_prices`` lets a caller replace any of them (``--price GPU=USD``,
``--prices FILE``). A GPU without a price (a laptop part is not rented by the hour) cannot be planned with until
it is given one.

Emits no events.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Mapping

from nanovllm_teach.i18n import say
from nanovllm_teach.sim.messages import BAD_PRICE, BAD_PRICE_SPEC, PRICES_NOT_AN_OBJECT, PRICES_NOT_JSON

PRICES_FILE = Path(__file__).resolve().parent / "prices.json"


def _checked(name: str, value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(say(BAD_PRICE, where=where, name=name, value=value))
    return float(value)


def shipped_prices() -> dict[str, dict]:
    """The shipped table: GPU name -> ``usd_per_gpu_hour``, ``product``, ``source``, ``date``."""
    return json.loads(PRICES_FILE.read_text(encoding="utf-8"))["prices"]


def read_prices_file(path: str | Path) -> dict[str, float]:
    """A JSON object of GPU name -> dollars per GPU-hour (a user's own prices)."""
    try:
        values = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise ValueError(say(PRICES_NOT_JSON, path=path, why=error)) from None
    if not isinstance(values, dict):
        raise ValueError(say(PRICES_NOT_AN_OBJECT, path=path))
    return {str(name): _checked(str(name), value, f"--prices {path}") for name, value in values.items()}


def parse_price(spec: str) -> tuple[str, float]:
    """``GPU=USD`` (``--price h100-sxm=2.5``)."""
    name, sep, value = spec.partition("=")
    try:
        usd = float(value)
    except ValueError:
        usd = math.nan
    if not sep or not name:
        raise ValueError(say(BAD_PRICE_SPEC, spec=spec))
    return name, _checked(name, usd, "--price")


def gpu_prices(overrides: Mapping[str, float] | None = None) -> dict[str, float]:
    """Dollars per GPU-hour by GPU name: the shipped table, with ``overrides`` in its place where given."""
    prices = {name: _checked(name, entry["usd_per_gpu_hour"], str(PRICES_FILE))
              for name, entry in shipped_prices().items()}
    return prices | dict(overrides or {})
