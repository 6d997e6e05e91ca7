"""Execution layer (simulated), checking: published serving measurements of real engines, for the simulator to
reproduce.

``published.json`` holds each case as its source printed it (address, quoted text, engine, GPU, model,
workload, figures) and which role it plays: a *fitted* case chose its GPU's efficiency factors
(``Efficiency.for_device``), a *judged* case did not, and only judged cases say how good the simulator is.
``load_cases`` validates the file; ``case_errors`` compares a case's figures with the same figures simulated
(``benchmarks/bench_sim_published.py`` runs each case through the public path a user takes,
``LLM(model, runner="simulated", hardware=...)`` and ``serve_workload``: the engine sits above this layer).

Figures: ``tpot_p50_ms`` (median time per output token after the first, as vLLM's benchmark prints it),
``ttft_p50_ms``, ``output_tok_s`` (output tokens over the run's duration), ``decode_tok_s`` (1000 / the
median TPOT: one client's decode rate). A case's ``quantization`` (``"fp8"``, or absent: 16-bit weights) is the
engine's, run by the simulator the same way; its ``serving_engine`` names the engine whose own software costs
(its API server, its collectives) the simulator gives it, where several of that engine's runs are here.

Plain data and checks: no engine, no torch. Emits no events.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nanovllm_teach.settings import QUANTIZATIONS, SERVING_ENGINES
from nanovllm_teach.sim.cost_model import load_shape
from nanovllm_teach.sim.hardware import DEVICES

CASES_FILE = Path(__file__).resolve().parent / "published.json"
FIGURES = ("tpot_p50_ms", "ttft_p50_ms", "output_tok_s", "decode_tok_s")
ROLES = ("fitted", "judged")


# The engine settings a case may state (``LLM``'s names), bounded so a damaged file cannot ask for absurd runs.
SETTINGS = {"max_model_len": (1, 131072), "max_num_batched_tokens": (1, 131072), "max_num_seqs": (1, 1024),
            "gpu_memory_utilization": (0.05, 1.0), "tensor_parallel_size": (1, 8)}


@dataclass(frozen=True)
class Workload:
    """Lengths: a fixed length, ``"sharegpt"`` (ShareGPT-like, ``workload/requests.py``) or one per request,
    as the source listed them. ``concurrency``: that many clients (a benchmark's ``--max-concurrency``); else
    ``rate``: Poisson arrivals; neither: every request at once (``--request-rate inf``). ``admit_every``:
    ``serve_workload``'s admission every K steps, for an engine that ran ``--num-scheduler-steps K``."""

    prompt: int | str | tuple[int, ...]
    output: int | str | tuple[int, ...]
    concurrency: int | None
    num_requests: int
    ignore_eos: bool
    rate: float | None = None  # Poisson arrivals at this many requests/s (a benchmark's --request-rate)
    admit_every: int = 1  # the engine's multi-step scheduling, where the source's engine had it


@dataclass(frozen=True)
class Case:
    id: str
    role: str
    source: str
    quote: str
    engine: str
    gpu: str
    hardware: str
    model: str
    workload: Workload
    engine_settings: dict[str, float]
    measured: dict[str, float]
    judged: tuple[str, ...]
    not_judged_why: str
    recorded_error: dict[str, float]
    quantization: str | None = None  # the engine's (vLLM's --quantization), None: 16-bit weights
    serving_engine: str | None = None  # whose software costs it takes (settings.SERVING_ENGINES), None: a fit over all


def _length(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 131072


def _lengths(value: Any, num_requests: int, where: str) -> int | str | tuple[int, ...]:
    if value == "sharegpt" or _length(value):
        return value
    if isinstance(value, list) and len(value) == num_requests and all(_length(v) for v in value):
        return tuple(value)
    raise ValueError(f"{where} must be 'sharegpt', a length in 1..131072 or one such length per request "
                     f"({num_requests}), got {value!r:.80}")


def _case(raw: Any, index: int) -> Case:
    where = f"published case {index}"
    if not isinstance(raw, dict):
        raise ValueError(f"{where} is not a JSON object")
    for key in ("id", "role", "source", "quote", "engine", "gpu", "hardware", "model", "not_judged_why"):
        if not isinstance(raw.get(key), str) or not raw[key]:
            raise ValueError(f"{where} has no text {key!r}")
    where = f"published case {raw['id']!r}"
    if raw["role"] not in ROLES:
        raise ValueError(f"{where}: role must be one of {ROLES}, got {raw['role']!r}")
    if not raw["source"].startswith("https://"):
        raise ValueError(f"{where}: source must be an https address, got {raw['source']!r}")
    if raw["hardware"] not in DEVICES:
        raise ValueError(f"{where}: unknown hardware {raw['hardware']!r}")
    load_shape(raw["model"])  # a shipped shape, or ValueError saying which exist
    w = raw.get("workload")
    if not isinstance(w, dict):
        raise ValueError(f"{where}: workload must be an object")
    for key in ("concurrency", "num_requests"):
        value = w.get(key)
        if (key == "num_requests" or value is not None) and (
                isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 10000):
            raise ValueError(f"{where}: workload {key} must be an int in 1..10000, got {value!r}")
    if not isinstance(w.get("ignore_eos"), bool):
        raise ValueError(f"{where}: workload ignore_eos must be true or false")
    n = w["num_requests"]
    rate, admit_every = w.get("rate"), w.get("admit_every", 1)
    if rate is not None and (isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0 < rate <= 1000
                             or w.get("concurrency") is not None):
        raise ValueError(f"{where}: workload rate must be requests/s in (0, 1000], without a concurrency, "
                         f"got {rate!r}")
    if isinstance(admit_every, bool) or not isinstance(admit_every, int) or not 1 <= admit_every <= 1024:
        raise ValueError(f"{where}: workload admit_every must be an int in 1..1024, got {admit_every!r}")
    workload = Workload(_lengths(w.get("prompt"), n, f"{where}: workload prompt"),
                        _lengths(w.get("output"), n, f"{where}: workload output"), w.get("concurrency"), n,
                        w["ignore_eos"], None if rate is None else float(rate), admit_every)
    if isinstance(workload.prompt, tuple) != isinstance(workload.output, tuple):
        raise ValueError(f"{where}: workload prompt and output lengths are listed per request both, or neither")
    settings = raw.get("engine_settings", {})
    if not isinstance(settings, dict) or any(
            key not in SETTINGS or isinstance(value, bool) or not isinstance(value, (int, float))
            or not SETTINGS[key][0] <= value <= SETTINGS[key][1] for key, value in settings.items()):
        raise ValueError(f"{where}: engine_settings must map some of {sorted(SETTINGS)} to numbers in their "
                         f"ranges {SETTINGS}, got {settings!r}")
    measured = raw.get("measured")
    if (not isinstance(measured, dict) or not measured or set(measured) - set(FIGURES)
            or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in measured.values())):
        raise ValueError(f"{where}: measured must map some of {FIGURES} to positive numbers, got {measured!r}")
    judged = raw.get("judged")
    if not isinstance(judged, list) or not judged or not set(judged) <= set(measured):
        raise ValueError(f"{where}: judged must name measured figures, got {judged!r}")
    recorded = raw.get("recorded_error", {})
    if not isinstance(recorded, dict) or not set(recorded) <= set(judged) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in recorded.values()):
        raise ValueError(f"{where}: recorded_error must map judged figures to numbers, got {recorded!r}")
    quantization = raw.get("quantization")
    if quantization is not None and quantization not in QUANTIZATIONS:
        raise ValueError(f"{where}: quantization must be absent or one of {', '.join(QUANTIZATIONS)}, "
                         f"got {repr(quantization)[:80]}")  # a damaged file may hold anything there
    DEVICES[raw["hardware"]].matmul_flops(quantization)  # FP8 on a GPU without it is refused, naming it
    serving_engine = raw.get("serving_engine")
    if serving_engine is not None and serving_engine not in SERVING_ENGINES:
        raise ValueError(f"{where}: serving_engine must be absent or one of {', '.join(SERVING_ENGINES)}, "
                         f"got {repr(serving_engine)[:80]}")
    return Case(raw["id"], raw["role"], raw["source"], raw["quote"], raw["engine"], raw["gpu"], raw["hardware"],
                raw["model"], workload, dict(settings), {k: float(v) for k, v in measured.items()}, tuple(judged),
                raw["not_judged_why"], {k: float(v) for k, v in recorded.items()}, quantization, serving_engine)


def load_cases(path: str | Path = CASES_FILE) -> list[Case]:
    """Every case in ``path``, validated; a damaged file raises ValueError naming what is wrong. At most half
    of them are fitted: the rest must judge."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise ValueError(f"{path} cannot be read as JSON: {error}") from None
    if not isinstance(data, dict) or not isinstance(data.get("cases"), list) or not data["cases"]:
        raise ValueError(f"{path} has no list of cases")
    cases = [_case(raw, i) for i, raw in enumerate(data["cases"])]
    if len({c.id for c in cases}) != len(cases):
        raise ValueError(f"{path} names a case twice")
    if 2 * sum(c.role == "fitted" for c in cases) > len(cases):
        raise ValueError(f"{path}: more than half of the cases are fitted")
    return cases


def case_errors(case: Case, simulated: dict[str, float]) -> dict[str, float]:
    """Signed relative error of every measured figure (simulated / measured - 1)."""
    return {name: simulated[name] / value - 1 for name, value in case.measured.items()}


def dump_cases(data: dict) -> str:
    """``published.json``'s text: indented, with each list of numbers on one line."""
    text = json.dumps(data, indent=1, ensure_ascii=False)
    return re.sub(r"\[\s*([-0-9.,\s]+?)\s*\]", lambda m: "[" + ", ".join(m.group(1).split()).replace(",,", ",") + "]",
                  text) + "\n"


# A GPU's factors count as fitted once two published cases chose them: one case fits them to itself alone.
MIN_FITTED_CASES = 2


def fitted_cases(device: str, cases: list[Case] | None = None) -> int:
    """How many published cases ``device``'s efficiency factors were fitted on (0: it runs on the defaults)."""
    return sum(c.role == "fitted" and c.hardware == device for c in (load_cases() if cases is None else cases))


def is_fitted(device: str, cases: list[Case] | None = None) -> bool:
    """Whether ``device``'s efficiency factors were fitted on at least ``MIN_FITTED_CASES`` published cases."""
    return fitted_cases(device, cases) >= MIN_FITTED_CASES
