"""The simulator against published serving measurements of real engines (``nanovllm_teach/sim/published.json``).

Every case runs through the public path (``simulate_case``: ``LLM(model, runner="simulated", hardware=...)``
and ``serve_workload`` with the case's clients, lengths and ``ignore_eos``) on its GPU's own efficiency
factors (``Efficiency.for_device``); ``tests/test_sim_published.py`` runs the quicker judged cases the same way. Printed per case: fitted or judged, each measured figure beside the simulated
one and the error; figures the source does not let us reproduce are printed and marked "not judged".

``--fit``: every fitted factor (``fit`` says which cases choose which), printed for ``DEVICE_EFFICIENCY``,
``ENGINE_EFFICIENCY`` and ``GPU_API_SERVER`` in ``nanovllm_teach/sim/efficiency.py``: each GPU's own, each serving
engine's own (its API server, its collectives' fixed cost) and the fit over every engine's runs that a simulation
naming no engine takes. ``--record``: write
each judged case's errors into ``published.json`` as ``recorded_error`` (what ``tests/test_sim_published.py``
holds it to).

Last, a line per kind of weights (16-bit, FP8) sums up the judged cases: their largest errors and how many
figures miss the goal.

Usage: ``python benchmarks/bench_sim_published.py [--fit] [--record]``.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable

from nanovllm_teach import LLM
from nanovllm_teach.sim.cost_model import load_shape
from nanovllm_teach.sim.efficiency import Efficiency
from nanovllm_teach.sim.published import CASES_FILE, Case, case_errors, dump_cases, load_cases
from nanovllm_teach.workload.arrivals import serve_workload
from nanovllm_teach.workload.metrics import percentile
from nanovllm_teach.workload.requests import (AtOnce, Fixed, Poisson, Request, make_workload, sharegpt_output_lengths,
                                              sharegpt_prompt_lengths)


# What a fit may move, and where it searches: one GPU's memory efficiency (a decode reads every weight, so
# one-GPU cases depend on it most) and, from cases on several GPUs of that model, a collective's fixed cost.
FIT_RANGES = {"memory": (0.3, 1.0), "allreduce_latency_s": (0.0, 200e-6), "frontend_request_s": (0.0, 20e-3),
              "fp8_layer_s": (0.0, 100e-6), "fp8_matmul": (0.1, 1.0)}


def simulate_case(case: Case, factors: dict[str, float] | None = None, own_engine: bool = True,
                  seed: int = 0) -> dict[str, float]:
    """The case's figures from the simulated engine on its GPU, with the factors of its GPU and of its serving
    engine (``Efficiency.for_device``; ``own_engine`` False: the fit over all engines), some of them replaced by
    ``factors`` where given (a fit's trial values: they reach the engine as a factors file, as ``simulate
    --factors`` takes)."""
    shape = load_shape(case.model)
    w = case.workload
    rng = random.Random(seed)
    if isinstance(w.prompt, tuple) and isinstance(w.output, tuple):  # the source's own lengths, in its order
        workload = [Request(0.0, [rng.randrange(shape.vocab_size) for _ in range(p)], o)
                    for p, o in zip(w.prompt, w.output)]
    else:
        prompts = sharegpt_prompt_lengths() if w.prompt == "sharegpt" else Fixed(w.prompt)
        outputs = sharegpt_output_lengths() if w.output == "sharegpt" else Fixed(w.output)
        arrivals = AtOnce() if w.rate is None else Poisson(w.rate)
        workload = make_workload(w.num_requests, arrivals, prompts, outputs, vocab_size=shape.vocab_size, seed=seed)
    with tempfile.TemporaryDirectory() as folder:
        serving_engine = case.serving_engine if own_engine else None
        if factors is None:
            engine = {"serving_engine": serving_engine}
        else:
            path = Path(folder) / "factors.json"
            path.write_text(json.dumps(Efficiency.for_device(case.hardware, serving_engine).to_dict() | factors))
            engine = {"sim_factors": path}
        llm = LLM(case.model, runner="simulated", hardware=case.hardware, quantization=case.quantization, **engine,
                  **case.engine_settings)
        result = serve_workload(llm, workload, ignore_eos=w.ignore_eos, answers=llm.answers,
                                concurrency=w.concurrency, admit_every=w.admit_every, server=llm.server)
        llm.close()
    tpot = [r.tpot_s for r in result.requests.values() if r.tpot_s is not None]
    ttft = [r.ttft_s for r in result.requests.values() if r.ttft_s is not None]
    tpot_ms = statistics.median(tpot) * 1e3
    return {"tpot_p50_ms": tpot_ms, "ttft_p50_ms": percentile(ttft, 0.5) * 1e3,
            "output_tok_s": result.output_tokens_per_s, "decode_tok_s": 1e3 / tpot_ms}


def _slowness(case, simulated: dict[str, float]) -> float:
    """How much slower than measured the simulated engine ran on the case's first judged figure (> 0: slower)."""
    name = case.judged[0]
    error = case_errors(case, simulated)[name]
    return -error if name.endswith("_tok_s") else error


Factors = Callable[[Case], dict[str, float]]  # a case's factors so far in a fit


def _bisect(name: str, group: list[Case], factors: Factors, iterations: int, own_engine: bool = True) -> float:
    """The value of the factor ``name`` (each case's others as ``factors`` gives them) at which ``group``'s mean
    slowness is 0, by bisection in ``FIT_RANGES[name]``, rounded to 3 digits."""
    lo, hi = FIT_RANGES[name]
    # slower than measured: a larger share (of bandwidth or peak), or a cheaper fixed cost
    share = name not in ("allreduce_latency_s", "fp8_layer_s")
    for _ in range(iterations):
        trial = (lo + hi) / 2
        slow = statistics.mean(_slowness(c, simulate_case(c, factors(c) | {name: trial}, own_engine=own_engine))
                               for c in group)
        lo, hi = ((trial, hi) if share else (lo, trial)) if slow > 0 else ((lo, trial) if share else (trial, hi))
    return float(f"{(lo + hi) / 2:.3g}")


def _tp(case: Case) -> int:
    return int(case.engine_settings.get("tensor_parallel_size", 1))


def fit(cases: list[Case], iterations: int = 10) -> None:
    """Every fitted factor, each on the fitted cases that depend on it most, in an order where each depends little
    on those after it (run it twice to let them settle):
    1. per GPU, ``memory`` on its one-GPU 16-bit cases (their decode reads every weight);
    2. ``allreduce_latency_s`` on the tensor-parallel 16-bit cases: per serving engine on that engine's
       (``ENGINE_EFFICIENCY``), then per GPU on all of them, as a simulation naming no engine runs them
       (``DEVICE_EFFICIENCY``); the value each case asks for alone is printed first, beside its number of GPUs
       and its engine: whether the fixed cost grows with the GPUs, or differs between engines, is for those to say;
    3. the API server's work per request (``fit_server``, ``GPU_API_SERVER``), one for every engine;
    4. per GPU, on its FP8 cases, ``fp8_layer_s`` on those whose first judged figure is a TPOT (a decode, where
       the quantizing kernels weigh) and ``fp8_matmul`` on those whose first is a TTFT (a prefill, where the FP8
       GEMMs do).
    Each is a bisection on the group's mean slowness, its value printed for ``sim/efficiency.py``."""
    per_gpu: dict[str, dict[str, float]] = {}
    per_engine: dict[str, dict[str, float]] = {}
    server: dict[str, float] = {}

    def own(case: Case) -> dict[str, float]:  # as the case runs: its GPU's factors, then its engine's
        return per_gpu.get(case.hardware, {}) | server | per_engine.get(case.serving_engine or "", {})

    def over_all(case: Case) -> dict[str, float]:  # as a simulation that names no engine runs it
        return per_gpu.get(case.hardware, {}) | server

    fitted = [c for c in cases if c.role == "fitted"]
    sixteen_bit = [c for c in fitted if c.quantization is None]
    for hardware in sorted({c.hardware for c in sixteen_bit if _tp(c) == 1}):
        group = [c for c in sixteen_bit if c.hardware == hardware and _tp(c) == 1]
        per_gpu.setdefault(hardware, {})["memory"] = _bisect("memory", group, own, iterations)
        print(f"fitted {hardware}: memory {per_gpu[hardware]['memory']} on {', '.join(c.id for c in group)}")

    parallel = [c for c in sixteen_bit if _tp(c) > 1]
    for case in sorted(parallel, key=_tp):
        alone = _bisect("allreduce_latency_s", [case], own, iterations)
        print(f"  {case.id} alone ({_tp(case)} GPUs, {case.serving_engine}): allreduce_latency_s {alone}")
    for engine in sorted({c.serving_engine for c in parallel if c.serving_engine}):
        group = [c for c in parallel if c.serving_engine == engine]
        per_engine[engine] = {"allreduce_latency_s": _bisect("allreduce_latency_s", group, own, iterations)}
        print(f"fitted {engine}: allreduce_latency_s {per_engine[engine]['allreduce_latency_s']} on "
                  f"{', '.join(c.id for c in group)}")
    for hardware in sorted({c.hardware for c in parallel}):
        group = [c for c in parallel if c.hardware == hardware]
        per_gpu[hardware]["allreduce_latency_s"] = _bisect("allreduce_latency_s", group, over_all, iterations,
                                                           own_engine=False)
        print(f"fitted {hardware} (every engine): allreduce_latency_s {per_gpu[hardware]['allreduce_latency_s']} "
              f"on {', '.join(c.id for c in group)}")

    server |= fit_server(sixteen_bit, own)

    for hardware in sorted({c.hardware for c in fitted if c.quantization == "fp8"}):
        fp8 = [c for c in fitted if c.hardware == hardware and c.quantization == "fp8"]
        for name, group in (("fp8_layer_s", [c for c in fp8 if c.judged[0] == "tpot_p50_ms"]),
                            ("fp8_matmul", [c for c in fp8 if c.judged[0] == "ttft_p50_ms"])):
            if group:
                per_gpu.setdefault(hardware, {})[name] = _bisect(name, group, own, iterations)
                print(f"fitted {hardware}: {name} {per_gpu[hardware][name]} on {', '.join(c.id for c in group)}")
    print("DEVICE_EFFICIENCY:", per_gpu)
    print("ENGINE_EFFICIENCY:", per_engine)
    print("GPU_API_SERVER:", server)


def fit_server(cases: list[Case], factors: Factors, iterations: int = 8) -> dict[str, float]:
    """The API server's work per request (``frontend_request_s``) on the fitted cases that give a TTFT, each with
    its other factors as ``factors`` gives them: the value whose mean signed TTFT error is 0, by bisection. One
    for every engine: per engine, it would rest on one case for vLLM 0.5 and, for vLLM 0.6.0, on two that pull
    apart (3 ms for one A100, several times more for four H100s). Its work per prompt token stays 0: every
    such case sends ShareGPT-like prompts, so the two costs rise together and no case tells them apart (a grid
    over both gave mean errors within two points of each other, the best changing from one fit to the next),
    and tokenizing, the part that grows with the prompt, costs about a microsecond a token. FP8 cases are left
    out: their TTFT fits ``fp8_matmul``."""
    group = [c for c in cases if c.role == "fitted" and "ttft_p50_ms" in c.judged and c.quantization is None]
    if not group:
        return {}

    def ttft_errors(request_s: float) -> list[float]:
        server = {"frontend_request_s": request_s, "frontend_token_s": 0.0}
        return [case_errors(c, simulate_case(c, factors(c) | server))["ttft_p50_ms"] for c in group]

    lo, hi = FIT_RANGES["frontend_request_s"]
    for _ in range(iterations):  # first tokens come later as the server's work grows
        lo, hi = (lo, (lo + hi) / 2) if statistics.mean(ttft_errors((lo + hi) / 2)) > 0 else ((lo + hi) / 2, hi)
    request_s = float(f"{(lo + hi) / 2:.3g}")
    error = statistics.mean(abs(e) for e in ttft_errors(request_s))
    print(f"fitted the API server: frontend_request_s {request_s} (mean |TTFT error| {error:.1%}) on "
          f"{', '.join(c.id for c in group)}")
    return {"frontend_request_s": request_s}


# The goal for a judged figure: TTFT within 25%, every other within 10%.
GOAL = {"ttft_p50_ms": 0.25}


def summary(cases: list, recorded: dict[str, dict[str, float]], quantization: str | None) -> str:
    """One line for the judged cases with these weights: how many, the largest |error| of each figure and how
    many figures miss the goal (fitted cases are left out: they chose the factors)."""
    judged = [c for c in cases if c.role == "judged" and c.quantization == quantization and c.id in recorded]
    worst: dict[str, float] = {}
    misses = 0
    for case in judged:
        for name, error in recorded[case.id].items():
            worst[name] = max(worst.get(name, 0.0), abs(error))
            misses += abs(error) > GOAL.get(name, 0.10)
    figures = ", ".join(f"{name} {value:.1%}" for name, value in worst.items())
    return (f"judged, {quantization or '16-bit'} weights: {len(judged)} cases, largest |error| {figures}; "
            f"{misses} figure(s) outside the goal (TTFT 25%, others 10%)")


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    parser.add_argument("--fit", action="store_true", help="fit each GPU's factors on its fitted cases")
    parser.add_argument("--record", action="store_true", help="write judged errors into published.json")
    args = parser.parse_args()
    print("machine load:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    cases = load_cases()
    if args.fit:
        fit(cases)
    recorded: dict[str, dict[str, float]] = {}
    start = time.process_time()
    for case in cases:
        simulated = simulate_case(case)
        errors = case_errors(case, simulated)
        weights = f", {case.quantization} weights" if case.quantization else ""
        print(f"{case.id} ({case.role}; {case.engine}, {case.gpu}, {case.model} on {case.hardware}{weights}, "
              f"{case.workload.concurrency} clients)")
        for name, value in case.measured.items():
            mark = "judged" if name in case.judged and case.role == "judged" else (
                "fitted" if name in case.judged else "not judged")
            print(f"  {name:13s} measured {value:9.2f}  simulated {simulated[name]:9.2f}  error {errors[name]:+6.1%}"
                  f"  ({mark})")
        if case.role == "judged":
            recorded[case.id] = {name: round(errors[name], 4) for name in case.judged}
    print(f"{len(cases)} cases simulated in {time.process_time() - start:.1f} s CPU")
    for weights in (None, "fp8"):
        print(summary(cases, recorded, weights))
    if args.record:
        data = json.loads(CASES_FILE.read_text(encoding="utf-8"))
        for raw in data["cases"]:
            if raw["id"] in recorded:
                raw["recorded_error"] = recorded[raw["id"]]
        CASES_FILE.write_text(dump_cases(data), encoding="utf-8")
        print(f"recorded the judged errors in {CASES_FILE}")


if __name__ == "__main__":
    main()
