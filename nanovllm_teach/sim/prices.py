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

PRICES_FILE = Path(__file__).resolve().parent / "prices.json"


def _checked(name: str, value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{where}: the price of {name!r} must be a positive number of dollars per GPU-hour, "
                         f"got {value!r}")
    return float(value)


def shipped_prices() -> dict[str, dict]:
    """The shipped table: GPU name -> ``usd_per_gpu_hour``, ``product``, ``source``, ``date``."""
    return json.loads(PRICES_FILE.read_text(encoding="utf-8"))["prices"]


def read_prices_file(path: str | Path) -> dict[str, float]:
    """A JSON object of GPU name -> dollars per GPU-hour (a user's own prices)."""
    try:
        values = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise ValueError(f"--prices {path}: not a readable JSON file: {error}") from None
    if not isinstance(values, dict):
        raise ValueError(f"--prices {path}: give a JSON object of GPU name -> dollars per GPU-hour")
    return {str(name): _checked(str(name), value, f"--prices {path}") for name, value in values.items()}


def parse_price(spec: str) -> tuple[str, float]:
    """``GPU=USD`` (``--price h100-sxm=2.5``)."""
    name, sep, value = spec.partition("=")
    try:
        usd = float(value)
    except ValueError:
        usd = math.nan
    if not sep or not name:
        raise ValueError(f"--price must be GPU=USD (dollars per GPU-hour), got {spec!r}")
    return name, _checked(name, usd, "--price")


def gpu_prices(overrides: Mapping[str, float] | None = None) -> dict[str, float]:
    """Dollars per GPU-hour by GPU name: the shipped table, with ``overrides`` in its place where given."""
    prices = {name: _checked(name, entry["usd_per_gpu_hour"], str(PRICES_FILE))
              for name, entry in shipped_prices().items()}
    return prices | dict(overrides or {})
